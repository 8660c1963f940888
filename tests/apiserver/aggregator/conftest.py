"""The real hub of the auth tests (real etcd, HTTPS), its HTTPS session and its admin."""

from ..auth.conftest import admin, hub, session

__all__ = ["admin", "hub", "session"]
