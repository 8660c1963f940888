"""Run a set of child processes the way `gpufed up` needs them: start, probe until ready,
restart on a crash with capped, jittered backoff, and stop cleanly in a chosen order.

In: :class:`ProcessSpec` values (argv, extra environment, log file, an async readiness
probe, an optional hook that supplies fresh environment before every start, e.g. a new
join token). Out: :class:`SupervisedProcess` handles whose ``state``, ``pid`` and
``uptime`` a status display reads, and a callback on every state change.

Each child runs in its own session (process group), so a Ctrl-C in the terminal reaches
only the supervisor, which then stops the children in the order it is told (SIGTERM to
the group, a grace period, then SIGKILL). The supervisor also remembers every process a
child started (the hub's embedded etcd runs in a session of its own) and ends those
left behind when the child dies, so a crashed hub cannot leave an etcd holding its data
directory. Finding descendants reads ``/proc`` (Linux); elsewhere only the children
themselves are tracked.

A supervisor that is itself killed (SIGKILL, the OOM killer) can stop nothing, and a child
in its own session gets no terminal signal either. So on Linux every child is started with
a parent-death signal (``prctl(PR_SET_PDEATHSIG, SIGTERM)``, :func:`~controlplane.processes.dying_with_parent`):
the kernel sends it SIGTERM the moment the supervisor's forking thread ends, and the child
shuts down as on Ctrl-C (the hub stops its etcd on the way out). The kernel ties that signal
to the *thread* that forked, so children are forked from the event loop's thread, which
lives as long as the supervisor. Other systems have no such signal: there a SIGKILLed
supervisor leaves its children running, and the next ``gpufed up`` on the same state dir
finds their ports taken (stop them by the pids the status display showed).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Final

from tenacity import AsyncRetrying, RetryCallState, retry_if_exception_type, wait_exponential_jitter

from controlplane.lifecycle import ShutdownOnce
from controlplane.processes import Backoff, dying_with_parent

log = logging.getLogger(__name__)

PROC: Final = Path("/proc")
#: Seconds between scans of the process table for the children's descendants.
TRACK_INTERVAL: Final = 3.0
PROBE_INTERVAL: Final = 0.5
PROBE_TIMEOUT: Final = 5.0


class ProcessState(StrEnum):
    STARTING = "starting"
    READY = "ready"
    RESTARTING = "restarting"
    STOPPING = "stopping"
    EXITED = "exited"


#: ``probe(started_at)``: True once the process started at wall-clock ``started_at`` is ready.
Probe = Callable[[float], Awaitable[bool]]
#: Called before every start; the environment it returns is added to the child's.
Prepare = Callable[[], Awaitable[Mapping[str, str]]]


@dataclass(frozen=True)
class ProcessSpec:
    name: str
    argv: tuple[str, ...]
    log_path: Path
    env: Mapping[str, str] = field(default_factory=dict)
    ready: Probe | None = None
    prepare: Prepare | None = None
    #: Seconds between SIGTERM and SIGKILL.
    stop_timeout: float = 15.0


@dataclass(frozen=True)
class ProcInfo:
    """A process as the kernel names it: a pid and its start time (pids are reused)."""

    pid: int
    start_ticks: int


def read_process_table(proc: Path = PROC) -> dict[int, tuple[int, int]]:
    """pid -> (parent pid, start time in clock ticks) of every live process, from ``/proc/<pid>/stat``
    (zombies, which only wait to be reaped, are left out)."""
    table: dict[int, tuple[int, int]] = {}
    try:
        entries = list(proc.iterdir())
    except OSError:
        return table
    for entry in entries:
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:  # exited meanwhile
            continue
        # The command name (field 2) may hold spaces and parentheses; the rest follows the last ')'.
        fields = stat[stat.rfind(")") + 2 :].split()
        if not fields or fields[0] in ("Z", "X"):  # exited, only waiting to be reaped
            continue
        try:
            table[int(entry.name)] = (int(fields[1]), int(fields[19]))
        except (IndexError, ValueError):
            continue
    return table


def descendants(pid: int, table: Mapping[int, tuple[int, int]]) -> list[ProcInfo]:
    """Every process below ``pid`` in ``table`` (children first)."""
    children: dict[int, list[int]] = {}
    for child, (parent, _) in table.items():
        children.setdefault(parent, []).append(child)
    found: list[ProcInfo] = []
    queue = list(children.get(pid, ()))
    while queue:
        current = queue.pop(0)
        found.append(ProcInfo(current, table[current][1]))
        queue.extend(children.get(current, ()))
    return found


def kill_if_alive(processes: Iterable[ProcInfo], *, table: Mapping[int, tuple[int, int]] | None = None) -> int:
    """SIGKILL each process that is still the one recorded (same pid and start time)."""
    current = read_process_table() if table is None else table
    killed = 0
    for info in processes:
        entry = current.get(info.pid)
        if entry is None or entry[1] != info.start_ticks:
            continue
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(info.pid, signal.SIGKILL)
            killed += 1
    return killed


class _Crashed(Exception):
    def __init__(self, name: str, code: int | None) -> None:
        super().__init__(f"{name} exited with code {code}")
        self.code = code


class SupervisedProcess:
    """One child process, restarted when it dies until :meth:`stop`."""

    def __init__(
        self,
        spec: ProcessSpec,
        *,
        backoff: Backoff,
        on_change: Callable[[SupervisedProcess], None] | None = None,
    ) -> None:
        self.spec = spec
        self.backoff = backoff
        self.state = ProcessState.STARTING
        self.pid: int | None = None
        self.restarts = 0
        self.last_exit_code: int | None = None
        self._started_monotonic: float | None = None
        self._process: asyncio.subprocess.Process | None = None
        self._on_change = on_change
        self._stopping = asyncio.Event()
        self._ready = asyncio.Event()
        self._tracked: list[ProcInfo] = []

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def uptime(self) -> float | None:
        """Seconds since the current run started; None while no process runs."""
        if self._started_monotonic is None or self.pid is None:
            return None
        return time.monotonic() - self._started_monotonic

    @property
    def ready(self) -> bool:
        return self.state is ProcessState.READY

    async def wait_ready(self) -> None:
        await self._ready.wait()

    def track(self, table: Mapping[int, tuple[int, int]]) -> None:
        """Remember the current run's descendants (called from the supervisor's scan)."""
        if self.pid is not None and self.pid in table:
            seen = {info.pid for info in self._tracked}
            for info in descendants(self.pid, table):
                if info.pid not in seen:
                    self._tracked.append(info)

    async def run(self) -> None:
        """Start the process and keep it running until :meth:`stop`."""
        try:
            while not self._stopping.is_set():
                retrying = AsyncRetrying(
                    retry=retry_if_exception_type(_Crashed),
                    wait=wait_exponential_jitter(
                        multiplier=self.backoff.initial, max=self.backoff.cap, jitter=self.backoff.jitter
                    ),
                    stop=self._stop_requested,
                    sleep=self._sleep,
                    before_sleep=self._before_restart,
                    reraise=True,
                )
                try:
                    async for attempt in retrying:
                        with attempt:
                            await self._run_once()
                except _Crashed:
                    break  # asked to stop while waiting to restart
        finally:
            self._set_state(ProcessState.EXITED)

    async def stop(self) -> None:
        """SIGTERM the process group, wait ``stop_timeout``, then SIGKILL it and its descendants."""
        self._stopping.set()
        process = self._process
        if process is None or process.returncode is not None:
            return
        self._set_state(ProcessState.STOPPING)
        self.track(read_process_table())
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(process.pid, signal.SIGTERM)
        try:
            async with asyncio.timeout(self.spec.stop_timeout):
                await process.wait()
        except TimeoutError:
            log.warning("%s did not stop within %gs; killing it", self.name, self.spec.stop_timeout)
            self.track(read_process_table())
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(process.pid, signal.SIGKILL)
            await process.wait()
        self._reap_descendants()

    def kill(self) -> None:
        """SIGKILL at once (a second Ctrl-C): the process group and every tracked descendant."""
        self._stopping.set()
        process = self._process
        self.track(read_process_table())
        if process is not None and process.returncode is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(process.pid, signal.SIGKILL)
        self._reap_descendants()

    # -- internals -------------------------------------------------------------------

    async def _run_once(self) -> None:
        extra = await self.spec.prepare() if self.spec.prepare is not None else {}
        if self._stopping.is_set():
            return
        self.spec.log_path.parent.mkdir(parents=True, exist_ok=True)
        started_at = time.time()
        with self.spec.log_path.open("ab") as log_file:
            log_file.write(f"----- starting {self.name} at {time.ctime(started_at)}\n".encode())
            log_file.flush()
            try:
                # Started from this (the event loop's) thread, so the parent-death signal fires
                # only when the supervisor itself goes.
                process = await asyncio.create_subprocess_exec(
                    *dying_with_parent(self.spec.argv),
                    stdin=asyncio.subprocess.DEVNULL,
                    stdout=log_file,
                    stderr=asyncio.subprocess.STDOUT,
                    env={**os.environ, "PYTHONUNBUFFERED": "1", **self.spec.env, **extra},
                    start_new_session=True,
                )
            except OSError as exc:
                log_file.write(f"----- cannot start {self.name}: {exc}\n".encode())
                log.error("cannot start %s: %s", self.name, exc)
                self.restarts += 1
                self._set_state(ProcessState.RESTARTING)
                raise _Crashed(self.name, None) from exc
        self._process = process
        self.pid = process.pid
        self._started_monotonic = time.monotonic()
        self._tracked = []
        self._ready.clear()
        self._set_state(ProcessState.STARTING)
        log.info("started %s (pid %d)", self.name, process.pid)
        probe = asyncio.create_task(self._probe(started_at), name=f"probe-{self.name}")
        try:
            code = await process.wait()
        finally:
            probe.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await probe
        uptime = time.monotonic() - self._started_monotonic
        self.last_exit_code = code
        self.pid = None
        self._reap_descendants()
        if self._stopping.is_set():
            return
        log.warning("%s (pid %d) exited with code %s after %.0fs", self.name, process.pid, code, uptime)
        self.restarts += 1
        self._set_state(ProcessState.RESTARTING)
        if uptime >= self.backoff.stable_after:
            return  # it had been running fine: restart at once, backoff starts over
        raise _Crashed(self.name, code)

    async def _probe(self, started_at: float) -> None:
        if self.spec.ready is None:
            self._mark_ready()
            return
        while True:
            try:
                async with asyncio.timeout(PROBE_TIMEOUT):
                    ok = await self.spec.ready(started_at)
            except Exception as exc:  # not up yet: refused connections, missing files, timeouts
                log.debug("%s not ready yet: %r", self.name, exc)
                ok = False
            if ok:
                self._mark_ready()
                return
            await asyncio.sleep(PROBE_INTERVAL)

    def _mark_ready(self) -> None:
        self._set_state(ProcessState.READY)
        self._ready.set()

    def _reap_descendants(self) -> None:
        if self._tracked:
            killed = kill_if_alive(self._tracked)
            if killed:
                log.warning("%s left %d process(es) behind; killed them", self.name, killed)
        self._tracked = []

    def _stop_requested(self, _state: RetryCallState) -> bool:
        return self._stopping.is_set()

    async def _sleep(self, seconds: float) -> None:
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(seconds):
                await self._stopping.wait()

    def _before_restart(self, state: RetryCallState) -> None:
        delay = state.next_action.sleep if state.next_action is not None else 0.0
        log.info("restarting %s in %.1fs", self.name, delay)

    def _set_state(self, state: ProcessState) -> None:
        if state is self.state:
            return
        self.state = state
        if self._on_change is not None:
            self._on_change(self)


class Supervisor(ShutdownOnce):
    """Owns the children of one ``gpufed up``: ``async with`` it, then :meth:`launch` each child;
    ``shutdown()`` (the way out of ``async with``) stops whatever still runs, newest first."""

    def __init__(
        self,
        *,
        backoff: Backoff | None = None,
        on_change: Callable[[SupervisedProcess], None] | None = None,
    ) -> None:
        self.backoff = backoff or Backoff()
        self.processes: list[SupervisedProcess] = []
        self._on_change = on_change
        self._group = asyncio.TaskGroup()
        self._tracker: asyncio.Task[None] | None = None

    async def start(self) -> None:
        await self._group.__aenter__()
        self._tracker = self._group.create_task(self._track_loop(), name="track-descendants")

    async def _release(self) -> None:
        if self._tracker is None:
            return
        try:
            await self.stop_all()
        finally:
            self._tracker.cancel()
            await self._group.__aexit__(None, None, None)

    def launch(self, spec: ProcessSpec) -> SupervisedProcess:
        """Start supervising ``spec``'s process: run it, probe it, restart it when it crashes."""
        process = SupervisedProcess(spec, backoff=self.backoff, on_change=self._on_change)
        self.processes.append(process)
        self._group.create_task(process.run(), name=f"supervise-{spec.name}")
        return process

    async def stop_in_order(self, *stages: Iterable[SupervisedProcess]) -> None:
        """Stop each stage's processes together, one stage after the other."""
        for stage in stages:
            await asyncio.gather(*(process.stop() for process in stage))

    async def stop_all(self) -> None:
        """Stop whatever still runs, newest first."""
        for process in reversed(self.processes):
            await process.stop()

    def kill_all(self) -> None:
        for process in self.processes:
            process.kill()

    async def _track_loop(self) -> None:
        while True:
            table = await asyncio.to_thread(read_process_table)
            for process in self.processes:
                process.track(table)
            await asyncio.sleep(TRACK_INTERVAL)
