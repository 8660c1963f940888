"""The real hub of the auth tests (real etcd, HTTPS), its HTTPS session and its admin; its
Available APIServices are checked again every half second (kube's 10 s), so that a server that
stops is noticed without waiting out kube's period."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from controlplane.controllers.context import ControllerSettings
from controlplane.hub import Hub
from controlplane.hubconfig import HubConfig

from ..auth.conftest import admin, own_session, session

__all__ = ["admin", "hub", "own_session", "session"]


@pytest.fixture
async def hub(tmp_path: Path) -> AsyncIterator[Hub]:
    settings = ControllerSettings(apiservice_recheck_seconds=0.5)
    async with Hub(HubConfig(state_dir=tmp_path / "hub", port=0, controllers=settings)) as running:
        yield running
