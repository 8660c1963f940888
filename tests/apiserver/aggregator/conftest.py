"""The real hub of the auth tests (real etcd, HTTPS), its HTTPS session and its admin; its
Available APIServices are checked again every half second (kube's 10 s), so that a server that
stops is noticed without waiting out kube's period. As there, a test has a hub of its own unless
it shares its module's (:data:`..auth.realhub.SHARED_HUB`)."""

from __future__ import annotations

from typing import Any

import pytest

from controlplane.controllers.context import ControllerSettings

from ..auth.conftest import admin, hub, module_hub, module_session, own_hub, own_session, session

__all__ = ["admin", "hub", "hub_options", "module_hub", "module_session", "own_hub", "own_session", "session"]


@pytest.fixture(scope="module")
def hub_options() -> dict[str, Any]:
    return {"controllers": ControllerSettings(apiservice_recheck_seconds=0.5)}
