"""Kueue's admission fair sharing in the what-if with tenants: tenants sharing one usage-based
ClusterQueue take turns by their LocalQueue's consumed resources, kept as the hub keeps them
(sampled every interval of replay time, an admission's entry penalty at once); Kueue's default
half-life of 0 keeps no history, so the order is the plain one; the command takes the hub's flags."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from controlplane.admission.core.admissionfairsharing import AdmissionFairSharing
from gpufed.cli import main
from simulator.whatif.engine import Settings, fleet_nodes, run_replay
from simulator.whatif.quotas import QuotaGate, parse_quotas, resolve
from simulator.whatif.strategies import StrategyName, build_strategy
from simulator.whatif.trace import Job
from tests.whatif.fleets import make_fleet, run_files, t4_cluster

KUEUE = "kueue.x-k8s.io/v1beta1"


def shared_queue(*, usage_based: bool = True, strategy: str = "BestEffortFIFO", gpus: int = 2) -> list[dict[str, Any]]:
    """One ClusterQueue of ``gpus`` GPUs shared by tenants a and b, each through its LocalQueue."""
    spec: dict[str, Any] = {"namespaceSelector": {}, "queueingStrategy": strategy, "resourceGroups": [{
        "coveredResources": ["nvidia.com/gpu"],
        "flavors": [{"name": "default-flavor", "resources": [{"name": "nvidia.com/gpu", "nominalQuota": gpus}]}]}]}
    if usage_based:
        spec["admissionScope"] = {"admissionMode": "UsageBasedAdmissionFairSharing"}
    return [
        {"apiVersion": KUEUE, "kind": "ResourceFlavor", "metadata": {"name": "default-flavor"}},
        {"apiVersion": KUEUE, "kind": "ClusterQueue", "metadata": {"name": "shared"}, "spec": spec},
        *({"apiVersion": KUEUE, "kind": "LocalQueue", "metadata": {"name": "main", "namespace": t}, "spec": {"clusterQueue": "shared"}}
          for t in ("a", "b")),
    ]


# a1 holds the queue's 2 GPUs from 0 s to 1000 s; a2 (10 s) and b1 (20 s) each need both.
JOBS = [
    Job("a1", 0, 1000, 2, 1000, tenant="a"),
    Job("a2", 10, 50, 2, 1000, tenant="a"),
    Job("b1", 20, 50, 2, 1000, tenant="b"),
]
HALF_LIFE = AdmissionFairSharing(usage_half_life_seconds=600, usage_sampling_interval_seconds=300)


def waits(docs: list[dict[str, Any]], settings: AdmissionFairSharing | None) -> dict[str, float]:
    nodes = fleet_nodes(make_fleet(t4_cluster("onprem", nodes=1, gpus=4)))
    quotas = replace(parse_quotas(docs), admission_fair_sharing=settings)
    result = run_replay(build_strategy(StrategyName.GPUFED, nodes), JOBS, nodes, settings=Settings(quotas=quotas))
    return {t: max(f.waits_s) for t, f in result.tenants.tenants.items()}


@pytest.mark.parametrize(("docs", "settings", "want"), [
    # Without it the older a2 goes first when a1 ends (waits 990 s); b1 follows at 1050 s.
    (shared_queue(), None, {"a": 990.0, "b": 1030.0}),
    # With a half-life, a consumed what a1 held (its entry penalty 2 x (1 - 0.5^(300/600)) = 0.585
    # at 0 s, then samples every 300 s towards 2); b consumed nothing: b1 goes first at 1000 s,
    # a2 at 1050 s.
    (shared_queue(), HALF_LIFE, {"a": 1040.0, "b": 980.0}),
    # Kueue's default half-life 0: no history, no entry penalty: the plain order.
    (shared_queue(), AdmissionFairSharing(), {"a": 990.0, "b": 1030.0}),
    # A ClusterQueue without the usage-based admissionScope is not ordered by usage.
    (shared_queue(usage_based=False), HALF_LIFE, {"a": 990.0, "b": 1030.0}),
    # StrictFIFO: the usage order decides the head.
    (shared_queue(strategy="StrictFIFO"), HALF_LIFE, {"a": 1040.0, "b": 980.0}),
])
def test_the_lighter_local_queue_goes_first(
    docs: list[dict[str, Any]], settings: AdmissionFairSharing | None, want: dict[str, float],
) -> None:
    assert waits(docs, settings) == want


def test_the_gate_keeps_each_local_queues_consumed_resources_as_the_hub() -> None:
    quotas = replace(parse_quotas(shared_queue()), admission_fair_sharing=HALF_LIFE)
    gate = QuotaGate(quotas, resolve(quotas, JOBS))
    gate.advance(0.0)
    gate.submit(JOBS[0])
    assert [j.name for j in gate.admit(0.0).admitted] == ["a1"]
    fair = gate._fair
    assert fair is not None
    # The entry penalty, sampled in at once: 2 x (1 - 0.5^0.5), in milli-units.
    assert fair.consumed == {"a/main": {"nvidia.com/gpu": 0.585}, "b/main": {}}
    gate.advance(300.0)  # one sample: 0.585 x 0.5^0.5 + 2 x (1 - 0.5^0.5)
    assert fair.consumed["a/main"]["nvidia.com/gpu"] == pytest.approx(0.413 + 0.585, abs=0.002)
    assert fair.consumed["b/main"] == {}


@pytest.mark.parametrize("strategy", ["BestEffortFIFO", "StrictFIFO"])
def test_parking_changes_no_decision_with_admission_fair_sharing(strategy: str) -> None:
    import random

    quotas = replace(parse_quotas(shared_queue(strategy=strategy, gpus=3)), admission_fair_sharing=HALF_LIFE)
    rng = random.Random(7)
    jobs = [Job(f"j{i}", float(i * 60), 1.0, rng.choice([1, 1, 2, 3]), 1000, tenant=rng.choice("ab")) for i in range(200)]
    tenancy = resolve(quotas, jobs)
    parked, reference = QuotaGate(quotas, tenancy), QuotaGate(quotas, tenancy, park_inadmissible=False)
    running: list[Job] = []
    admitted = 0
    for job in jobs:
        for gate in (parked, reference):
            gate.advance(job.submit_s)
            gate.submit(job)
        if running and rng.random() < 0.5:
            done = running.pop(rng.randrange(len(running)))
            for gate in (parked, reference):
                gate.release(done)
        ours, theirs = parked.admit(job.submit_s).admitted, reference.admit(job.submit_s).admitted
        assert [j.name for j in ours] == [j.name for j in theirs]
        running += ours
        admitted += len(ours)
    assert 30 < admitted < 200


def test_the_command_takes_the_hubs_flags(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    fleet, trace, quotas = run_files(
        tmp_path, trace="name,submit_s,duration_s,gpus,tenant\na1,0,1000,2,a\na2,10,50,2,a\nb1,20,50,2,b\n",
        quotas=shared_queue(),
    )
    argv = ["whatif", "run", "--fleet", str(fleet), "--trace", str(trace), "--compare", "gpufed", "-o", "json"]
    fair = ["--kueue-admission-fair-sharing", "--kueue-usage-half-life-time", "10m", "--kueue-usage-sampling-interval", "5m"]
    for flags, b_waits in (([], 1030.0), (fair, 980.0)):
        assert main([*argv, "--quotas", str(quotas), *flags]) == 0
        tenants = json.loads(capsys.readouterr().out)["strategies"]["gpufed"]["tenants"]["without_fair_sharing"]["tenants"]
        assert tenants["b"]["wait_p99_s"] == b_waits
    for wrong, message in (
        ([*argv, *fair], "--kueue-admission-fair-sharing needs --quotas"),
        ([*argv, "--quotas", str(quotas), "--kueue-usage-half-life-time", "10m"],
         "add --kueue-admission-fair-sharing to turn it on"),
    ):
        with pytest.raises(SystemExit) as exited:  # a usage error
            main(wrong)
        assert exited.value.code == 2
        assert message in capsys.readouterr().err
