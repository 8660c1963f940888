"""The waste sampler against a real ObjectStore over both stores (memory and etcd): it reads the
Clusters and ResourceBindings as the agents and controllers wrote them, accounts them, persists
the rollups, restores them after a restart, and feeds the hub's metrics."""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import AsyncIterator, Callable
from datetime import datetime, timedelta

import pytest
from prometheus_client import CollectorRegistry

from controlplane.apiserver.objects import ObjectStore
from controlplane.hub import hub_registry
from controlplane.metrics import HubMetrics
from controlplane.reports.accounting import Accumulator
from controlplane.reports.api import ReportSource
from controlplane.reports.classify import WasteState
from controlplane.reports.sampling import LoopTime, WasteSampler, next_pass_at
from controlplane.storage import Store

from .fleetobjects import A100, T0, cluster_status, device, k8s_node, k8s_pod, put_binding, put_cluster

pytestmark = pytest.mark.waiting

PRICE = 2.0
MINUTE_HOURS = 1 / 60


class SteppingClock:
    """Each call is one minute later than the last, up to ``steps`` minutes after T0."""

    def __init__(self, steps: int, *, start: datetime = T0) -> None:
        self.calls = 0
        self.steps = steps
        self.start = start

    def __call__(self) -> datetime:
        value = self.start + timedelta(minutes=min(self.calls, self.steps))
        self.calls += 1
        return value


@pytest.fixture
async def objects(store: Store) -> AsyncIterator[ObjectStore]:
    objects = ObjectStore(store, hub_registry())
    await objects.bootstrap()
    namespace = objects.registry.require("v1", "Namespace")
    await objects.create(namespace, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ml"}})
    yield objects


async def _fleet(objects: ObjectStore) -> None:
    """Cluster "a": 4 A100s at $2/h: one idle pod (2 %), one busy pod (90 %), two free GPUs;
    one binding waits for a 1-GPU replica, so one free GPU is needed and one is spare."""
    nodes = [k8s_node("n1", 4)]
    pods = [k8s_pod("idle-0", "n1", 1, deployment="idle"), k8s_pod("busy-0", "n1", 1, deployment="busy")]
    devices = {"n1": [device(0, pod="idle-0", utilization=0.02), device(1, pod="busy-0", utilization=0.9),
                      device(2), device(3)]}
    await put_cluster(objects, "a", cluster_status(nodes, pods, devices), pricing={A100: PRICE})
    await put_binding(objects, "waiting", replicas=1, placed={}, scheduled="False", reason="NoClusterFit")


async def _eventually(predicate: Callable[[], bool]) -> None:
    for _ in range(2000):
        if predicate():
            return
        await asyncio.sleep(0.01)
    raise AssertionError("the sampler did not get there")


async def _run_until(sampler: WasteSampler, predicate: Callable[[], bool]) -> None:
    async with sampler:
        await _eventually(predicate)


async def test_samples_are_accounted_persisted_restored_and_exported(
    objects: ObjectStore, store: Store
) -> None:
    await _fleet(objects)
    metrics = HubMetrics(registry=CollectorRegistry(), process_collectors=False, clock=lambda: T0.timestamp() + 300)
    clock = SteppingClock(3)
    sampler = WasteSampler(objects, store, interval=0.01, metrics=metrics, clock=clock)
    await _run_until(sampler, lambda: sampler.samples_taken >= 4)
    assert sampler.accumulator is None  # stopped

    # Samples at T0, +1, +2, +3 minutes: three whole minutes are accounted.
    window = (T0, T0 + timedelta(minutes=3))
    restored = await ReportSource(store).accumulator()
    report = restored.query(*window)
    assert report.observed_seconds == pytest.approx(180)
    hours, dollars = report.totals.gpu_hours, report.totals.cost_usd
    expected = {
        WasteState.BUSY: 1, WasteState.IDLE_ALLOCATED: 1, WasteState.FREE_NEEDED: 1, WasteState.FREE_SPARE: 1,
        WasteState.FREE_FRAGMENTED: 0, WasteState.UNAVAILABLE: 0,
    }
    for state, gpus in expected.items():
        assert hours[state] == pytest.approx(gpus * 3 * MINUTE_HOURS), state
        assert dollars[state] == pytest.approx(gpus * 3 * MINUTE_HOURS * PRICE), state
    assert [(w.workload, w.mean_utilization) for w in report.workloads if w.idle_gpu_hours] == [
        ("Deployment/idle", pytest.approx(0.02))
    ]

    # Metrics: the counters integrate the same three minutes, the gauges show the last sample.
    def value(name: str, state: WasteState) -> float | None:
        return metrics.registry.get_sample_value(name, {"state": state.value, "cluster": "a", "model": A100})

    for state, gpus in expected.items():
        if gpus:
            assert value("gpufed_gpu_hours_total", state) == pytest.approx(gpus * 3 * MINUTE_HOURS)
            assert value("gpufed_gpu_cost_usd_total", state) == pytest.approx(gpus * 3 * MINUTE_HOURS * PRICE)
    assert metrics.registry.get_sample_value("gpufed_resourcebindings", {"condition": "Scheduled", "status": "False"}) == 1
    # The cluster reported at T0; the metrics clock says T0 + 300 s.
    assert metrics.registry.get_sample_value("gpufed_agent_report_lag_seconds", {"cluster": "a"}) == pytest.approx(300)
    assert metrics.registry.get_sample_value("gpufed_waste_samples_total", {"result": "ok"}) == 4

    # A restarted sampler continues from the saved rollups: a fourth minute adds to the first three.
    again = WasteSampler(objects, store, interval=0.01, clock=SteppingClock(4, start=T0 + timedelta(minutes=3)))
    await _run_until(again, lambda: again.samples_taken >= 2)
    continued = await ReportSource(store).accumulator()
    longer = continued.query(T0, T0 + timedelta(minutes=4))
    assert longer.observed_seconds == pytest.approx(240)
    assert longer.totals.gpu_hours[WasteState.BUSY] == pytest.approx(4 * MINUTE_HOURS)
    assert continued.query(*window).totals == report.totals


async def test_the_report_source_prefers_the_running_sampler(objects: ObjectStore, store: Store) -> None:
    await _fleet(objects)
    sampler = WasteSampler(objects, store, interval=0.01, clock=SteppingClock(2))
    source = ReportSource(store, sampler=sampler, cache_seconds=0)
    async with sampler:
        await _eventually(lambda: sampler.samples_taken >= 3)
        live = await source.accumulator()
        assert live is sampler.accumulator
    stored = await source.accumulator()
    assert stored is not live
    assert isinstance(stored, Accumulator)
    assert stored.query(T0, T0 + timedelta(minutes=2)).totals == live.query(T0, T0 + timedelta(minutes=2)).totals


async def test_a_cordoned_node_and_a_stale_cluster_are_unavailable(objects: ObjectStore, store: Store) -> None:
    nodes = [k8s_node("n1", 2, unschedulable=True)]
    await put_cluster(objects, "cordoned", cluster_status(nodes, [], {"n1": [device(0), device(1)]}), pricing={A100: 1.0})
    # "old" last reported 10 minutes before the samples: stale after the default 5 minutes.
    old_status = cluster_status([k8s_node("m1", 1)], [], {"m1": [device(0)]}, now=T0 - timedelta(minutes=10))
    await put_cluster(objects, "old", old_status, pricing={A100: 1.0})
    sampler = WasteSampler(objects, store, interval=0.01, clock=SteppingClock(1))
    await _run_until(sampler, lambda: sampler.samples_taken >= 2)
    report = (await ReportSource(store).accumulator()).query(T0, T0 + timedelta(minutes=1), by=["cluster"])
    groups = {g.key["cluster"]: g.totals for g in report.groups}
    assert groups["cordoned"].gpu_hours[WasteState.UNAVAILABLE] == pytest.approx(2 * MINUTE_HOURS)
    assert groups["old"].gpu_hours[WasteState.UNAVAILABLE] == pytest.approx(MINUTE_HOURS)
    assert report.totals.available_gpu_hours == pytest.approx(0)


@pytest.mark.parametrize("interval", [0.0, -1.0])
async def test_the_interval_must_be_positive(objects: ObjectStore, store: Store, interval: float) -> None:
    with pytest.raises(ValueError, match="positive"):
        WasteSampler(objects, store, interval=interval)


async def test_a_new_run_reuses_the_last_runs_classification(objects: ObjectStore, store: Store) -> None:
    """A sampler run again (a new leadership term restores the rollups into a new accumulator)
    keeps the per-cluster nodes and states of the last run: an unchanged fleet is not
    classified from scratch again, and the figures still add up."""
    await _fleet(objects)
    sampler = WasteSampler(objects, store, interval=0.01, clock=SteppingClock(10))
    await _run_until(sampler, lambda: sampler.samples_taken >= 2)
    first_memos = sampler._memos
    assert first_memos is not None and first_memos.classification.misses == 1
    await _run_until(sampler, lambda: sampler.samples_taken >= 4)
    assert sampler._memos is first_memos and first_memos.classification.misses == 1
    report = (await ReportSource(store).accumulator()).query(T0, T0 + timedelta(minutes=3))
    assert report.totals.gpu_hours[WasteState.BUSY] == pytest.approx(3 * MINUTE_HOURS)


async def test_a_pass_reads_the_fleet_a_page_at_a_time(objects: ObjectStore, store: Store) -> None:
    """Lists of thousands of Works and bindings are read in pages (a turn for the event loop
    between them): with one object per page, every cluster and binding is still in the sample."""
    for name in ("a", "b", "c"):
        await put_cluster(objects, name, cluster_status([k8s_node("n1", 1)], [], {"n1": [device(0)]}), pricing={A100: 1.0})
    for name in ("w1", "w2"):
        await put_binding(objects, name, replicas=1, placed={}, scheduled="False", reason="NoClusterFit")
    sampler = WasteSampler(objects, store, interval=0.01, clock=SteppingClock(1), page_size=1)
    await _run_until(sampler, lambda: sampler.samples_taken >= 1)
    assert sampler.last_sample is not None
    assert [c.name for c in sampler.last_sample.clusters] == ["a", "b", "c"]
    assert sorted(d.workload for d in sampler.last_sample.pending) == ["Deployment/w1", "Deployment/w2"]


def test_the_page_size_must_be_positive(objects: ObjectStore, store: Store) -> None:
    with pytest.raises(ValueError, match="page size"):
        WasteSampler(objects, store, page_size=0)


@pytest.mark.parametrize("share", [0.0, 1.5])
def test_the_share_of_the_loop_must_be_a_fraction(objects: ObjectStore, store: Store, share: float) -> None:
    with pytest.raises(ValueError, match="share of the event loop must"):
        WasteSampler(objects, store, loop_share=share)
    with pytest.raises(ValueError, match="share of the event loop while the controllers are behind must"):
        WasteSampler(objects, store, behind_loop_share=share)


@pytest.mark.parametrize(
    ("due", "now", "expected"),
    [
        (60.0, 10.0, 60.0),  # on the cadence
        (60.0, 70.0, 130.0),  # the pass ran past the next slot: one interval from its end
    ],
)
def test_the_next_pass_keeps_the_cadence_or_skips_missed_slots(due: float, now: float, expected: float) -> None:
    assert next_pass_at(due, now=now, interval=60.0) == pytest.approx(expected)


async def test_a_step_owes_the_loop_three_times_its_time_at_a_quarter_share() -> None:
    held = LoopTime(0.25)
    with held:
        time.sleep(0.02)  # noqa: ASYNC251 -- a step that holds the loop, on purpose
    assert held.seconds >= 0.02 and held.owed == pytest.approx(3 * held.seconds)
    loop = asyncio.get_running_loop()
    before = loop.time()
    await held.turn()
    assert loop.time() - before >= 3 * 0.02 and held.owed == 0


@pytest.mark.parametrize(("behind", "rest"), [(False, 3), (True, 9)])
def test_a_step_that_ends_while_the_controllers_are_behind_owes_the_smaller_share(behind: bool, rest: int) -> None:
    """A quarter of the loop while the controllers keep up; a tenth (nine times the step's time
    in rest) while they are behind."""
    held = LoopTime(0.25, behind=lambda: behind, behind_share=0.1)
    with held:
        time.sleep(0.01)  # a step that holds the loop, on purpose
    assert held.owed == pytest.approx(rest * held.seconds)
    assert (held.steps, held.steps_behind) == (1, int(behind))


@pytest.mark.parametrize(("waited", "yields"), [(0.5, False), (1.0, True), (30.0, True)])
async def test_a_pass_yields_while_a_controller_key_has_waited_a_second(
    objects: ObjectStore, store: Store, waited: float, yields: bool
) -> None:
    """The sampler asks the controllers' backlog (the longest a key of theirs has waited for a
    worker) after each step: from a second on, every step keeps to the smaller share."""
    await _fleet(objects)
    asked: list[float] = []

    def backlog() -> float:
        asked.append(waited)
        return waited

    sampler = WasteSampler(objects, store, interval=0.01, clock=SteppingClock(10), backlog=backlog)
    await _run_until(sampler, lambda: sampler.samples_taken >= 1)
    steps, behind = sampler.last_pass_steps
    assert steps > 0 and asked
    assert behind == (steps if yields else 0)


class _Slow(Accumulator):
    """An accumulator whose preparation holds the event loop for ``HOLD`` seconds per pass."""

    HOLD = 0.05

    def prepare_steps(self, sample):  # type: ignore[no-untyped-def]
        time.sleep(self.HOLD)  # the loop held on purpose, as a pass over a large fleet holds it
        return (yield from super().prepare_steps(sample))


async def test_a_pass_rests_after_each_step_for_its_share_of_the_loop(objects: ObjectStore, store: Store) -> None:
    """A sampler on a 10 ms cadence whose passes hold the loop for 50 ms in one step rests three
    times that before the pass ends (a quarter of the loop at most), so passes start at least
    that far apart."""
    await _fleet(objects)
    loop = asyncio.get_running_loop()
    starts: list[float] = []
    clock = SteppingClock(10)

    def timed() -> datetime:
        starts.append(loop.time())
        return clock()

    sampler = WasteSampler(objects, store, interval=0.01, clock=timed, accumulator_factory=_Slow)
    await _run_until(sampler, lambda: sampler.samples_taken >= 3)
    assert sampler.last_pass_held >= _Slow.HOLD
    assert all(later - earlier >= 3 * _Slow.HOLD for earlier, later in itertools.pairwise(starts))


async def test_a_trainjobs_unschedulable_pods_ask_what_its_runtime_says(objects: ObjectStore, store: Store) -> None:
    """The TrainJob in the member's Work sets no resourcesPerNode: its pods ask the runtime's 2 GPUs."""
    trainer_api = "trainer.kubeflow.org/v1alpha1"
    node = {"name": "node", "template": {
        "metadata": {"labels": {"trainer.kubeflow.org/trainjob-ancestor-step": "trainer"}},
        "spec": {"template": {"spec": {"containers": [
            {"name": "node", "image": "train:1", "resources": {"limits": {"nvidia.com/gpu": "2"}}}]}}}}}
    await objects.create(objects.registry.require(trainer_api, "ClusterTrainingRuntime"), {
        "apiVersion": trainer_api, "kind": "ClusterTrainingRuntime", "metadata": {"name": "torch"},
        "spec": {"mlPolicy": {"numNodes": 3}, "template": {"spec": {"replicatedJobs": [node]}}}})
    manifest = {"apiVersion": trainer_api, "kind": "TrainJob", "metadata": {"name": "llama", "namespace": "ml"},
                "spec": {"runtimeRef": {"name": "torch"}}}
    namespace = objects.registry.require("v1", "Namespace")
    await objects.create(namespace, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "gpufed-es-a"}})
    work_rt = objects.registry.require("work.gpufed.io/v1alpha1", "Work")
    work = await objects.create(work_rt, {
        "apiVersion": "work.gpufed.io/v1alpha1", "kind": "Work", "metadata": {"name": "ml-llama-trainjob", "namespace": "gpufed-es-a"},
        "spec": {"workload": {"manifests": [manifest]}}}, namespace="gpufed-es-a")
    identifier = {"group": "trainer.kubeflow.org", "version": "v1alpha1", "kind": "TrainJob", "namespace": "ml",
                  "name": "llama", "ordinal": 0}
    await objects.update_status(work_rt, {**work, "status": {"manifestStatuses": [
        {"identifier": identifier, "unschedulable": {"pods": 3, "message": "0/1 nodes are available"}}]}})
    sampler = WasteSampler(objects, store, interval=0.01, clock=SteppingClock(1))
    await _run_until(sampler, lambda: sampler.samples_taken >= 1)
    assert sampler.last_sample is not None
    [demand] = sampler.last_sample.pending
    assert (demand.workload, demand.replicas, dict(demand.gpu_requests)) == ("TrainJob/llama", 3, {"nvidia.com/gpu": 2})


async def test_unschedulable_pods_ask_the_gpus_of_their_dra_claims(objects: ObjectStore, store: Store) -> None:
    """The Deployment in the member's Work asks GPUs only through DRA: 2 per pod through a claim
    template, 4 its pods share through a ResourceClaim. The sampler lists the hub's claims: its 3
    unschedulable pods ask 2 GPUs each, and the first of them the shared 4 too (one copy of the claim
    in the cluster they land in)."""
    resource_api = "resource.k8s.io/v1"
    namespace = objects.registry.require("v1", "Namespace")
    await objects.create(namespace, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "gpufed-es-a"}})

    def devices(count: int) -> dict[str, object]:
        return {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com", "count": count}}]}}

    await objects.create(objects.registry.require(resource_api, "ResourceClaimTemplate"), {
        "apiVersion": resource_api, "kind": "ResourceClaimTemplate", "metadata": {"name": "two", "namespace": "ml"},
        "spec": {"spec": devices(2)}}, namespace="ml")
    await objects.create(objects.registry.require(resource_api, "ResourceClaim"), {
        "apiVersion": resource_api, "kind": "ResourceClaim", "metadata": {"name": "pool", "namespace": "ml"},
        "spec": devices(4)}, namespace="ml")
    pod = {"resourceClaims": [{"name": "own", "resourceClaimTemplateName": "two"}, {"name": "pool", "resourceClaimName": "pool"}],
           "containers": [{"name": "m", "image": "serve:1", "resources": {"claims": [{"name": "own"}, {"name": "pool"}]}}]}
    manifest = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "infer", "namespace": "ml"},
                "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "infer"}},
                         "template": {"metadata": {"labels": {"app": "infer"}}, "spec": pod}}}
    work_rt = objects.registry.require("work.gpufed.io/v1alpha1", "Work")
    work = await objects.create(work_rt, {
        "apiVersion": "work.gpufed.io/v1alpha1", "kind": "Work", "metadata": {"name": "ml-infer-deployment", "namespace": "gpufed-es-a"},
        "spec": {"workload": {"manifests": [manifest]}}}, namespace="gpufed-es-a")
    identifier = {"group": "apps", "version": "v1", "kind": "Deployment", "namespace": "ml", "name": "infer", "ordinal": 0}
    await objects.update_status(work_rt, {**work, "status": {"manifestStatuses": [
        {"identifier": identifier, "unschedulable": {"pods": 3, "message": "0/1 nodes are available"}}]}})
    sampler = WasteSampler(objects, store, interval=0.01, clock=SteppingClock(1))
    await _run_until(sampler, lambda: sampler.samples_taken >= 1)
    assert sampler.last_sample is not None
    assert [(d.workload, d.replicas, dict(d.gpu_requests)) for d in sampler.last_sample.pending] == [
        ("Deployment/infer", 1, {"nvidia.com/gpu": 6}), ("Deployment/infer", 2, {"nvidia.com/gpu": 2}),
    ]
