"""The one lifecycle: ``async with`` over start/shutdown, shutdown once, and run() as a service."""

from __future__ import annotations

import asyncio

import pytest

from controlplane.lifecycle import Lifecycle, Service, ShutdownOnce


class Recording(ShutdownOnce):
    def __init__(self, *, fail_start: bool = False) -> None:
        self.calls: list[str] = []
        self.fail_start = fail_start

    async def start(self) -> None:
        self.calls.append("start")
        if self.fail_start:
            raise RuntimeError("cannot start")

    async def _release(self) -> None:
        self.calls.append("release")


async def test_async_with_starts_and_shuts_down() -> None:
    component = Recording()
    async with component as entered:
        assert entered is component
        assert component.calls == ["start"]
    assert component.calls == ["start", "release"]


async def test_a_failed_start_shuts_down_and_raises() -> None:
    component = Recording(fail_start=True)
    with pytest.raises(RuntimeError, match="cannot start"):
        async with component:
            pytest.fail("the body runs only after a successful start")
    assert component.calls == ["start", "release"]


async def test_shutdown_releases_once() -> None:
    component = Recording()
    await component.shutdown()
    await component.shutdown()
    async with component:
        pass
    assert component.calls == ["release", "start"]


async def test_the_base_lifecycle_starts_nothing() -> None:
    async with Lifecycle() as plain:
        assert isinstance(plain, Lifecycle)


class Looping(Service):
    """Sets ``ready`` after ``ready_after`` passes, fails at pass ``fail_at``, stops on request."""

    def __init__(self, *, fail_at: int | None = None, waits: bool = True) -> None:
        super().__init__("looping")
        self.passes = 0
        self.runs = 0
        self.fail_at = fail_at
        self.waits = waits
        self.serving = asyncio.Event()

    def ready(self) -> asyncio.Event | None:
        return self.serving if self.waits else None

    async def run(self) -> None:
        self.runs += 1
        self._stop.clear()
        self.serving.clear()
        while True:
            self.passes += 1
            if self.passes == self.fail_at:
                raise ValueError(f"pass {self.passes} failed")
            self.serving.set()
            if self._stop.is_set():
                return
            await asyncio.sleep(0)


async def test_service_start_waits_until_ready_and_shutdown_waits_for_run() -> None:
    service = Looping()
    async with service:
        assert service.serving.is_set()
        task = service._task
        assert task is not None and task.get_name() == "looping"
    assert task.done() and task.exception() is None
    assert service._task is None


async def test_service_start_raises_what_ended_run_before_ready() -> None:
    service = Looping(fail_at=1)
    with pytest.raises(ValueError, match="pass 1 failed"):
        async with service:
            pytest.fail("never ready")


async def test_service_runs_again_after_shutdown() -> None:
    service = Looping()
    for _ in range(2):
        await service.start()
        await service.shutdown()
        await service.shutdown()  # idempotent
    assert service.runs == 2


async def test_shutdown_raises_or_drops_what_ended_run() -> None:
    raising = Looping(fail_at=3, waits=False)
    raising.spawn()
    with pytest.raises(ValueError, match="pass 3 failed"):
        await raising.shutdown()

    class Quiet(Looping):
        shutdown_raises = False

    quiet = Quiet(fail_at=3, waits=False)
    quiet.spawn()
    await quiet.shutdown()
    assert quiet.passes == 3


async def test_request_stop_lets_run_return() -> None:
    service = Looping(waits=False)
    task = service.spawn()
    assert service.spawn() is task  # one task while it runs
    await service.serving.wait()
    service.request_stop()
    await asyncio.wait_for(task, timeout=5)
    assert task.exception() is None
