"""Watch fan-out over HTTPS for the scale benchmark (issue 17: 1,000 concurrent watchers of
Works receive an event within p99 <= 1 s).

What runs: N watch streams of Works, each its own HTTPS connection to the hub (one aiohttp
session whose connector holds them all), with the mix of selectors real watchers use
(:func:`watcher_mix`): 1 in 10 watches every namespace (controllers, dashboards,
``kubectl get works -A -w``), 6 in 10 one namespace (as each agent watches its execution
namespace), 2 in 10 a label across every namespace (a user following one group), 1 in 10 a
label within one namespace. The benchmark itself writes the events it times: it creates
probe Works (a Deployment manifest, about 2 KiB, as ``bench_watch`` uses) in namespaces of
its own, one per (namespace, group label), which no agent reads, and then patches them at a
steady rate. For each patch, the delay is from the moment the PATCH returned (the write is
committed and the benchmark knows its resourceVersion) to the moment each watcher whose
selector matches read the event's line; an event read before the PATCH's reply counts as 0
and is counted in ``before_reply``. Watch events of other Works (the controllers' and agents'
writes) reach the all-namespace watchers too: they are counted, not timed.

Also counted: deliveries a matching watcher never got (``missed``), events a watcher got that
its selector does not match (``unexpected``: a selector bug in the hub), watchers closed with
a 410 ``Expired`` ERROR event (the watch cache's slow-watcher rule) and connections the hub
closed (its unresponsive-client rule); a dropped watcher lists again (``resourceVersion=0``)
and watches on, as a client-go reflector does. The client's own event loop lag is sampled,
so a figure inflated by the measuring process itself shows as such.

In: the hub's kubeconfig and a :class:`FanoutPlan`. Out: a :class:`FanoutSummary`.
:class:`Ledger` is the pure bookkeeping (times are given to it), tested on synthetic
timestamps.
"""

from __future__ import annotations

import asyncio
import copy
import logging
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import orjson

from bench.bench_watch import work
from bench.common import CpuMeter, latency_summary, percentile
from bench.hubdriving import WATCH_TIMEOUT, WORKS, Hub

log = logging.getLogger(__name__)

GROUP_LABEL = "bench.gpufed.io/fanout-group"
ROUND_ANNOTATION = "bench.gpufed.io/round"
NAMESPACE_PREFIX = "bench-fanout-"
WORKS_API = "/apis/work.gpufed.io/v1alpha1"
#: Watches opened at once (TLS handshakes cost both sides CPU; the rest wait their turn).
OPENING = 50
#: Seconds between two samples of the client's event loop lag.
LAG_TICK = 0.05


@dataclass(frozen=True, slots=True)
class FanoutPlan:
    watchers: int
    namespaces: int
    groups: int
    #: Probe patches per second (an open loop) and for how long.
    rate: float
    seconds: float
    #: Seconds to wait after the last write for deliveries still on their way.
    drain_seconds: float = 15.0
    #: Seconds for every watcher to attach and get the warm-up round.
    attach_timeout: float = 180.0


# ----------------------------------------------------------------------------- watchers


@dataclass(frozen=True, slots=True)
class WatcherSpec:
    """One watch: in every namespace (``namespace`` None) or one, with or without a label."""

    index: int
    namespace: str | None
    group: str | None

    @property
    def kind(self) -> str:
        scope = "namespace" if self.namespace else "all"
        return f"{scope}+label" if self.group else scope

    def wants(self, namespace: str, labels: Mapping[str, str]) -> bool:
        return (self.namespace is None or self.namespace == namespace) and (
            self.group is None or labels.get(GROUP_LABEL) == self.group
        )

    def path(self) -> str:
        return f"{WORKS_API}/namespaces/{self.namespace}/works" if self.namespace else WORKS

    def params(self, resource_version: str) -> dict[str, str]:
        out = {"resourceVersion": resource_version}
        if self.group:
            out["labelSelector"] = f"{GROUP_LABEL}={self.group}"
        return out


def namespace_names(count: int) -> list[str]:
    return [f"{NAMESPACE_PREFIX}{index}" for index in range(count)]


def group_names(count: int) -> list[str]:
    return [f"g{index}" for index in range(count)]


def watcher_mix(count: int, namespaces: Sequence[str], groups: Sequence[str]) -> list[WatcherSpec]:
    """``count`` watchers; by index modulo 10: 0 all namespaces, 1-6 one namespace, 7-8 a label
    everywhere, 9 a label in one namespace (namespaces and labels taken in turn)."""
    out: list[WatcherSpec] = []
    for index in range(count):
        slot, turn = index % 10, index // 10
        namespace = namespaces[(turn * 6 + slot) % len(namespaces)]
        group = groups[(turn * 3 + slot) % len(groups)]
        if slot == 0:
            out.append(WatcherSpec(index, None, None))
        elif slot <= 6:
            out.append(WatcherSpec(index, namespace, None))
        elif slot <= 8:
            out.append(WatcherSpec(index, None, group))
        else:
            out.append(WatcherSpec(index, namespace, group))
    return out


def probe_work(namespace: str, group: str) -> dict[str, Any]:
    obj = copy.deepcopy(work(f"fanout-{group}"))
    obj["metadata"].update(namespace=namespace, labels={GROUP_LABEL: group})
    return obj


# ----------------------------------------------------------------------------- bookkeeping


@dataclass(frozen=True, slots=True)
class Write:
    namespace: str
    labels: Mapping[str, str]
    #: When the write's reply was read (the clock the arrivals use).
    returned: float
    #: When the write was sent: the delay from it is an upper bound (it includes the write's own).
    sent: float


@dataclass(frozen=True, slots=True)
class FanoutSummary:
    writes: int
    expected: int
    #: Delays of every timed delivery, seconds (write returned -> line read).
    delays: list[float]
    #: The same deliveries' delays from when the write was sent (an upper bound).
    from_sent: list[float]
    #: Per write whose every matching watcher got it: the last watcher's delay.
    last: list[float]
    missed: int
    unexpected: int
    duplicates: int
    before_reply: int
    other_events: int
    dropped: int
    closed: int
    refused: int
    #: Watchers that missed a delivery, and those with a delivery later than the target.
    watchers_missing: int
    watchers_late: int
    #: Watchers that fell behind: either of the two.
    watchers_behind: int
    by_kind: dict[str, dict[str, float]] = field(default_factory=dict)

    def quantile_ms(self, q: float) -> float | None:
        return round(percentile(self.delays, q) * 1000, 1) if self.delays else None


@dataclass
class Ledger:
    """Which watcher read which of the benchmark's writes, when (times come from the caller).

    Arrivals are keyed by resourceVersion, so an arrival read before its write's reply is
    matched once the write is recorded. Only arrivals in ``namespaces`` (the probe Works')
    above ``floor`` (the warm-up round) are kept; the others are counted.
    """

    watchers: Sequence[WatcherSpec]
    namespaces: frozenset[str]
    target: float = 1.0
    floor: int = 0
    writes: dict[int, Write] = field(default_factory=dict)
    arrivals: dict[int, dict[int, float]] = field(default_factory=dict)
    #: Watchers that have read any probe event (the warm-up's check that each one receives).
    receiving: set[int] = field(default_factory=set)
    other_events: int = 0
    duplicates: int = 0
    dropped: int = 0
    closed: int = 0
    refused: int = 0
    _recipients: dict[tuple[str, str | None], frozenset[int]] = field(default_factory=dict)
    _open: set[int] = field(default_factory=set)

    def recipients(self, namespace: str, labels: Mapping[str, str]) -> frozenset[int]:
        key = (namespace, labels.get(GROUP_LABEL))
        found = self._recipients.get(key)
        if found is None:
            found = self._recipients[key] = frozenset(w.index for w in self.watchers if w.wants(namespace, labels))
        return found

    def wrote(self, revision: int, namespace: str, labels: Mapping[str, str], *, sent: float, returned: float) -> None:
        self.writes[revision] = Write(namespace, dict(labels), returned, sent)
        self._open.add(revision)

    def arrived(self, watcher: int, revision: int, namespace: str, now: float) -> None:
        if namespace not in self.namespaces:
            self.other_events += 1
            return
        self.receiving.add(watcher)
        if revision <= self.floor:
            return
        got = self.arrivals.setdefault(revision, {})
        if watcher in got:
            self.duplicates += 1
            return
        got[watcher] = now

    def start_after(self, revision: int) -> None:
        """Time only what comes after ``revision`` (the warm-up round's last write)."""
        self.floor = revision
        self.arrivals = {rv: got for rv, got in self.arrivals.items() if rv > revision}

    def pending(self) -> int:
        """Deliveries of the recorded writes that have not arrived yet."""
        left = 0
        for revision in list(self._open):
            write = self.writes[revision]
            missing = len(self.recipients(write.namespace, write.labels) - self.arrivals.get(revision, {}).keys())
            if missing:
                left += missing
            else:
                self._open.discard(revision)
        return left

    def summary(self) -> FanoutSummary:
        delays: list[float] = []
        from_sent: list[float] = []
        last: list[float] = []
        by_kind: dict[str, list[float]] = {}
        kinds = {w.index: w.kind for w in self.watchers}
        expected = missed = unexpected = before_reply = 0
        missing: set[int] = set()
        late: set[int] = set()
        for revision, write in self.writes.items():
            wanted = self.recipients(write.namespace, write.labels)
            got = self.arrivals.get(revision, {})
            expected += len(wanted)
            slowest = 0.0
            for watcher, moment in got.items():
                if watcher not in wanted:
                    unexpected += 1
                    continue
                delay = moment - write.returned
                if delay < 0:
                    before_reply, delay = before_reply + 1, 0.0
                delays.append(delay)
                from_sent.append(moment - write.sent)
                by_kind.setdefault(kinds[watcher], []).append(delay)
                slowest = max(slowest, delay)
                if delay > self.target:
                    late.add(watcher)
            lost = wanted - got.keys()
            missed += len(lost)
            missing |= lost
            if wanted and not lost:
                last.append(slowest)
        # Arrivals in the probe namespaces whose revision the benchmark did not write.
        unexpected += sum(len(got) for revision, got in self.arrivals.items() if revision not in self.writes)
        return FanoutSummary(
            writes=len(self.writes), expected=expected, delays=delays, from_sent=from_sent, last=last, missed=missed,
            unexpected=unexpected, duplicates=self.duplicates, before_reply=before_reply,
            other_events=self.other_events, dropped=self.dropped, closed=self.closed, refused=self.refused,
            watchers_missing=len(missing), watchers_late=len(late), watchers_behind=len(missing | late),
            by_kind={kind: latency_summary(values) for kind, values in sorted(by_kind.items())},
        )


def by_quarter(values: Sequence[float]) -> list[float]:
    """The median of each quarter of ``values`` (in the order given), in ms: a delay that grows
    from quarter to quarter is a pipeline falling behind, a flat one a fixed cost."""
    size = len(values) / 4
    quarters = [values[round(i * size):round((i + 1) * size)] for i in range(4)]
    return [round(percentile(q, 50) * 1000, 1) for q in quarters if q]


# ----------------------------------------------------------------------------- the client


@dataclass
class LoopLag:
    """How late this process's event loop wakes a task that sleeps :data:`LAG_TICK` seconds."""

    samples: list[float] = field(default_factory=list)

    async def run(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            planned = loop.time() + LAG_TICK
            await asyncio.sleep(LAG_TICK)
            self.samples.append(max(0.0, loop.time() - planned))


async def _relist(hub: Hub, spec: WatcherSpec) -> str:
    """The resourceVersion to watch on from, as a reflector re-lists (from the watch cache)."""
    async with hub.session.get(hub.base + spec.path(), params=spec.params("0")) as response:
        body = await response.read()
        if response.status != 200:
            raise RuntimeError(f"LIST {spec.path()}: HTTP {response.status}: {body[:300]!r}")
    return str(orjson.loads(body)["metadata"]["resourceVersion"])


async def follow(hub: Hub, spec: WatcherSpec, version: str, ledger: Ledger, attached: set[int],
                 opening: asyncio.Semaphore) -> None:
    """One watcher: watch from ``version``, record each event's arrival; after a 410 or a
    closed connection list again and watch on."""
    fresh: str | None = version
    while True:
        if fresh is None:
            fresh = await _relist(hub, spec)
        url, params = hub.base + spec.path(), spec.params(fresh)
        params.update(watch="1", allowWatchBookmarks="true")
        try:
            async with opening:
                response = await hub.session.get(url, params=params, timeout=WATCH_TIMEOUT)
            async with response:
                if response.status == 410:
                    ledger.dropped += 1
                    fresh = None
                    continue
                if response.status != 200:
                    ledger.refused += 1
                    log.warning("watch %s: HTTP %s", spec.path(), response.status)
                    await asyncio.sleep(1.0)
                    continue
                attached.add(spec.index)
                async for line in response.content:
                    now = time.perf_counter()
                    if not line.strip():
                        continue
                    event = orjson.loads(line)
                    obj = event.get("object") or {}
                    if event.get("type") == "ERROR":
                        ledger.dropped += 1
                        fresh = None
                        break
                    meta = obj.get("metadata") or {}
                    fresh = str(meta.get("resourceVersion") or fresh)
                    if event.get("type") != "BOOKMARK":
                        ledger.arrived(spec.index, int(fresh), str(meta.get("namespace")), now)
                else:
                    ledger.closed += 1
        except (aiohttp.ClientPayloadError, aiohttp.ClientConnectionError, TimeoutError):
            ledger.closed += 1
        attached.discard(spec.index)


async def patch_work(hub: Hub, namespace: str, name: str, patch: dict[str, Any]) -> tuple[int, float, float]:
    """Merge-patch one Work; its new resourceVersion, when the patch was sent and when its reply was read."""
    url = f"{hub.base}{WORKS_API}/namespaces/{namespace}/works/{name}"
    sent = time.perf_counter()
    async with hub.session.patch(url, data=orjson.dumps(patch),
                                 headers={"Content-Type": "application/merge-patch+json"}) as response:
        body = await response.read()
        returned = time.perf_counter()
        if response.status != 200:
            raise RuntimeError(f"PATCH {url}: HTTP {response.status}: {body[:300]!r}")
    return int(orjson.loads(body)["metadata"]["resourceVersion"]), sent, returned


async def _until(check: Callable[[], bool], seconds: float, *, interval: float = 0.5) -> bool:
    """Poll ``check`` until it holds (True) or ``seconds`` pass (False)."""
    deadline = time.perf_counter() + seconds
    while not check():
        if time.perf_counter() >= deadline:
            return False
        await asyncio.sleep(interval)
    return True


async def _write_round(hub: Hub, probes: Iterable[dict[str, Any]], round_: str) -> list[int]:
    patch = {"metadata": {"annotations": {ROUND_ANNOTATION: round_}}}
    done = await asyncio.gather(*(patch_work(hub, p["metadata"]["namespace"], p["metadata"]["name"], patch)
                                  for p in probes))
    return [revision for revision, _, _ in done]


async def fan_out(
    admin: Hub, kubeconfig: Path, plan: FanoutPlan, *, meter: CpuMeter | None = None
) -> tuple[FanoutSummary, dict[str, Any]]:
    """Create the probe Works, open the watchers, warm up, write at ``plan.rate`` for
    ``plan.seconds``, wait for the deliveries; the summary and what the run saw besides
    (with ``meter``, ``steady_cpu``: the CPU seconds of its processes over the writes and
    their deliveries alone, without the watchers' attaching and warm-up)."""
    namespaces, groups = namespace_names(plan.namespaces), group_names(plan.groups)
    for namespace in namespaces:
        await admin.create("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
    probes = [probe_work(namespace, group) for namespace in namespaces for group in groups]
    for probe in probes:
        await admin.create(f"{WORKS_API}/namespaces/{probe['metadata']['namespace']}/works", probe)
    specs = watcher_mix(plan.watchers, namespaces, groups)
    ledger = Ledger(specs, frozenset(namespaces))
    status, listing = await admin.get(WORKS + "?resourceVersion=0")
    if status != 200:
        raise RuntimeError(f"LIST {WORKS}: HTTP {status}")
    start = str(listing["metadata"]["resourceVersion"])
    attached: set[int] = set()
    lag = LoopLag()
    details: dict[str, Any] = {"watchers": plan.watchers, "namespaces": plan.namespaces, "groups": plan.groups,
                               "probe_works": len(probes), "rate_per_s": plan.rate,
                               "kinds": {kind: sum(1 for s in specs if s.kind == kind) for kind in
                                         ("all", "namespace", "all+label", "namespace+label")}}
    opening = asyncio.Semaphore(OPENING)
    # Their own session: the watchers hold one connection each, and the admin's requests never wait for one.
    async with Hub.connect(kubeconfig, connections=plan.watchers + 1) as hub:
        tasks = [asyncio.create_task(follow(hub, spec, start, ledger, attached, opening)) for spec in specs]
        tasks.append(asyncio.create_task(lag.run()))
        try:
            opened = time.perf_counter()
            all_attached = await _until(lambda: len(attached) >= plan.watchers, plan.attach_timeout)
            details["attach_seconds"] = round(time.perf_counter() - opened, 1)
            # Warm-up: every watcher must read one probe event before the timing starts.
            warm = await _write_round(admin, probes, "warm-up")
            receiving = await _until(lambda: len(ledger.receiving) >= plan.watchers, plan.attach_timeout)
            ledger.start_after(max(warm))
            details.update(all_attached=all_attached, attached=len(attached), receiving=len(ledger.receiving),
                           all_receiving=receiving)
            lag.samples.clear()
            before = meter.sample() if meter is not None else None
            written = await _steady_writes(admin, probes, ledger, plan)
            details["write_seconds"] = round(written, 1)
            drained = time.perf_counter()
            await _until(lambda: ledger.pending() == 0, plan.drain_seconds, interval=0.25)
            details["drain_seconds"] = round(time.perf_counter() - drained, 1)
            if meter is not None and before is not None:
                details["steady_cpu"] = CpuMeter.delta(before, meter.sample())
            details["attached_at_end"] = len(attached)
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
    details["client_loop_lag"] = latency_summary(lag.samples)
    return ledger.summary(), details


async def _steady_writes(hub: Hub, probes: Sequence[dict[str, Any]], ledger: Ledger, plan: FanoutPlan) -> float:
    """Patch the probe Works in turn, ``plan.rate`` per second (an open loop); the seconds it took."""
    started = time.perf_counter()
    count = int(plan.rate * plan.seconds)

    async def write(index: int) -> None:
        delay = started + index / plan.rate - time.perf_counter()
        if delay > 0:
            await asyncio.sleep(delay)
        probe = probes[index % len(probes)]
        meta = probe["metadata"]
        revision, sent, returned = await patch_work(
            hub, meta["namespace"], meta["name"], {"metadata": {"annotations": {ROUND_ANNOTATION: str(index)}}})
        ledger.wrote(revision, meta["namespace"], meta["labels"], sent=sent, returned=returned)

    async with asyncio.TaskGroup() as group:
        for index in range(count):
            group.create_task(write(index))
    return time.perf_counter() - started
