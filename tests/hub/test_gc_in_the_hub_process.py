"""The hub process's runner applies the garbage-collector policy (``run_until_signalled(...,
collector=...)``): survivors are frozen while the hub serves, the older generations' passes are
in the hub's own ``/metrics`` as ``gpufed_gc_pause_seconds``, and the process's collector is as
it was once the hub has stopped, but for what it froze (the process is exiting). With
``stall_warning``, a stall of the loop is logged with the code that held it and counted as
``gpufed_event_loop_stall_seconds``. A real hub: embedded etcd, HTTPS, the admin token."""

from __future__ import annotations

import asyncio
import gc
import logging
import time
from pathlib import Path

import pytest

from controlplane.gcpolicy import NO_AUTOMATIC_FULL_PASS, CollectorPolicy
from controlplane.hub import Hub, run_until_signalled
from controlplane.hubconfig import HubConfig
from tests.controllers.fleet import eventually
from tests.hubmetrics import samples

PAUSES = "gpufed_gc_pause_seconds_count"
STALLS = "gpufed_event_loop_stall_seconds_count"


async def full_passes_counted(hub: Hub) -> float:
    return sum(value for labels, value in await samples(hub, PAUSES) if labels.get("generation") == "2")


async def test_the_hub_process_freezes_survivors_and_reports_its_collector_pauses(tmp_path: Path) -> None:
    ready: asyncio.Queue[Hub] = asyncio.Queue()
    hub = Hub(HubConfig(state_dir=tmp_path / "hub", port=0))

    async def on_ready(running: Hub) -> None:
        await ready.put(running)

    serving = asyncio.create_task(
        run_until_signalled(hub, on_ready=on_ready, collector=CollectorPolicy(freeze_interval=1, full_interval=0))
    )
    try:
        await asyncio.wait_for(ready.get(), timeout=60)
        assert gc.get_freeze_count() > 0, "the survivors of start-up are frozen"
        before = await full_passes_counted(hub)
        gc.collect()
        assert await full_passes_counted(hub) >= before + 1
    finally:
        hub.request_stop()
        await asyncio.wait_for(serving, timeout=60)
    assert gc.get_freeze_count() > 0, "an exiting process does not thaw what it froze"
    assert gc.get_threshold()[2] < NO_AUTOMATIC_FULL_PASS, "the thresholds are back"
    gc.unfreeze()


def hold_the_hub_loop(seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        sum(range(1000))


async def test_the_hub_process_logs_and_counts_a_stall_of_its_loop_with_where_it_was_held(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    ready: asyncio.Queue[Hub] = asyncio.Queue()
    hub = Hub(HubConfig(state_dir=tmp_path / "hub", port=0))

    async def on_ready(running: Hub) -> None:
        await ready.put(running)

    caplog.set_level(logging.WARNING, logger="controlplane.hub")
    serving = asyncio.create_task(run_until_signalled(hub, on_ready=on_ready, stall_warning=0.3))
    try:
        await asyncio.wait_for(ready.get(), timeout=60)
        hold_the_hub_loop(1.5)

        async def counted() -> float:
            return sum(value for _labels, value in await samples(hub, STALLS))

        await eventually(counted, what="the stall counted in /metrics")
    finally:
        hub.request_stop()
        await asyncio.wait_for(serving, timeout=60)
    assert "the event loop was held for" in caplog.text
    assert "hold_the_hub_loop (hub/test_gc_in_the_hub_process.py" in caplog.text
