"""Tenants in the what-if: the trace's tenant column, synthetic tenants, Jain's index, and a
replay whose quotas make a tenant wait (waits computed by hand)."""

from __future__ import annotations

import json
import random
import re
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from controlplane.admission.core.fairsharing import PreemptionStrategy
from gpufed.cli import main
from simulator.whatif.engine import Settings, fleet_nodes, run_replay
from simulator.whatif.quotas import QuotaError, QuotaGate, parse_quotas, read_quotas, resolve
from simulator.whatif.strategies import StrategyName, build_strategy
from simulator.whatif.tenants import TenantTally, assign_synthetic_tenants, jain_index, synthetic_tenant
from simulator.whatif.trace import Job, TraceError, parse_trace
from tests.whatif.fleets import make_fleet, run_files, t4_cluster

# --------------------------------------------------------------------------- Jain's index


@pytest.mark.parametrize(
    ("values", "expected"),
    [
        ([1.0, 1.0, 1.0], 1.0),
        ([1.0, 0.0], 0.5),  # one of two takes everything: 1/n
        ([4.0, 0.0, 0.0, 0.0], 0.25),
        ([1.0, 2.0, 3.0], 36 / 42),  # (1+2+3)^2 / (3 * (1+4+9))
        ([2.0, 6.0], 64 / 80),  # (8)^2 / (2 * (4+36))
        ([5.0], 1.0),
        ([], None),
        ([0.0, 0.0], None),
    ],
)
def test_jain_index_by_hand(values: list[float], expected: float | None) -> None:
    result = jain_index(values)
    if expected is None:
        assert result is None
    else:
        assert result == pytest.approx(expected)


def test_fairness_values_are_gpus_held_while_waiting_per_share() -> None:
    tally = TenantTally.for_tenants({"a": "qa", "b": "qb", "c": "qc"}, {"a": 1.0, "b": 2.0, "c": 1.0}, fair_sharing=False)
    tally.hold("a", 4)
    tally.hold("b", 2)
    # 1 h: a (4 GPUs) and b (2 GPUs) both have a job waiting for quota; c waits for nothing.
    tally.advance(3600, {"a": 1, "b": 2, "c": 0})
    # 1 h more: only b waits.
    tally.hold("b", 2)
    tally.advance(3600, {"a": 0, "b": 1})
    values = tally.fairness_values()
    # a: 4 GPU-h over 1 h waiting, share 1 -> 4; b: (2 + 4) GPU-h over 2 h, share 2 -> 1.5
    assert values == pytest.approx({"a": 4.0, "b": 1.5})
    out = tally.to_json()
    assert out["jain_index"] == pytest.approx(round(5.5**2 / (2 * (16 + 2.25)), 4))
    assert out["tenants"]["a"]["gpu_hours"] == pytest.approx(8.0)
    assert out["tenants"]["b"]["quota_wait_hours"] == pytest.approx(2.0)
    assert out["tenants"]["c"]["gpus_per_share_while_waiting"] is None


# --------------------------------------------------------------------------- the tenant column


def test_tenant_column_is_parsed() -> None:
    _, jobs = parse_trace(["name,submit_s,duration_s,gpus,tenant", "x,0,10,1,team-a", "y,1,10,1,"])
    assert [(j.name, j.tenant) for j in jobs] == [("x", "team-a"), ("y", None)]


def test_tenant_column_in_an_openb_list() -> None:
    header = "name,cpu_milli,memory_mib,num_gpu,gpu_milli,creation_time,deletion_time,tenant"
    _, jobs = parse_trace([header, "p,1000,100,1,1000,0,10,research"])
    assert jobs[0].tenant == "research"


def test_a_tenant_must_be_a_namespace_name() -> None:
    with pytest.raises(TraceError, match=r"line 3: column tenant: 'Team_A' is not a namespace name"):
        parse_trace(["name,submit_s,duration_s,gpus,tenant", "x,0,10,1,ok", "y,1,10,1,Team_A"])


# --------------------------------------------------------------------------- synthetic tenants


def test_synthetic_tenants_are_reproducible_and_uneven() -> None:
    jobs = [Job(f"pod-{i}", float(i), 10.0, 1, 1000) for i in range(3000)]
    first = assign_synthetic_tenants(jobs, count=4, seed=7)
    again = assign_synthetic_tenants(list(reversed(jobs)), count=4, seed=7)
    by_name = {j.name: j.tenant for j in again}
    assert all(by_name[j.name] == j.tenant for j in first)  # a job's tenant depends on its name, not its place
    other_seed = assign_synthetic_tenants(jobs, count=4, seed=8)
    assert any(a.tenant != b.tenant for a, b in zip(first, other_seed, strict=True))
    counts = Counter(j.tenant for j in first)
    assert set(counts) == {"team-1", "team-2", "team-3", "team-4"}
    # Zipf weights 1/k: team-1 ~ 48 %, team-2 ~ 24 %, team-3 ~ 16 %, team-4 ~ 12 % of 3,000
    assert counts["team-1"] > counts["team-2"] > counts["team-3"] > counts["team-4"] > 0
    assert 1300 < counts["team-1"] < 1600


def test_synthetic_tenants_keep_the_trace_s_own() -> None:
    jobs = assign_synthetic_tenants([Job("a", 0, 1, 1, 1000, tenant="mine"), Job("b", 0, 1, 1, 1000)], count=1, seed=0)
    assert [j.tenant for j in jobs] == ["mine", "team-1"]
    assert synthetic_tenant("anything", count=1, seed=3) == "team-1"


# --------------------------------------------------------------------------- quotas in the replay


def _quotas(
    *, cohort: str | None = None, nominal: int = 2, teams: dict[str, int] | None = None, preemption: dict[str, Any] | None = None
) -> list[dict[str, Any]]:
    docs: list[dict[str, Any]] = [
        {"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "ResourceFlavor", "metadata": {"name": "default-flavor"}},
    ]
    for team, gpus in (teams or {"a": nominal, "b": nominal}).items():
        spec: dict[str, Any] = {
            "namespaceSelector": {},
            "resourceGroups": [
                {
                    "coveredResources": ["nvidia.com/gpu"],
                    "flavors": [{"name": "default-flavor", "resources": [{"name": "nvidia.com/gpu", "nominalQuota": gpus}]}],
                }
            ],
        }
        if cohort:
            spec["cohort"] = cohort
        if preemption:
            spec["preemption"] = preemption
        docs.append({"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "ClusterQueue", "metadata": {"name": f"cq-{team}"}, "spec": spec})
        docs.append(
            {
                "apiVersion": "kueue.x-k8s.io/v1beta1",
                "kind": "LocalQueue",
                "metadata": {"name": "main", "namespace": team},
                "spec": {"clusterQueue": f"cq-{team}"},
            }
        )
    return docs


JOBS = [
    Job("a1", 0, 100, 2, 1000, tenant="a"),
    Job("a2", 10, 100, 1, 1000, tenant="a"),
    Job("b1", 20, 50, 2, 1000, tenant="b"),
    Job("a3", 30, 10, 1, 1000, tenant="a"),
]


def _replay(docs: list[dict[str, Any]], jobs: list[Job], *, fair_sharing: bool = False) -> Any:
    # One node of 4 GPUs.
    nodes = fleet_nodes(make_fleet(t4_cluster("onprem", nodes=1, gpus=4)))
    settings = Settings(quotas=parse_quotas(docs))
    return run_replay(build_strategy(StrategyName.GPUFED, nodes), jobs, nodes, settings=settings, fair_sharing=fair_sharing)


def test_quota_makes_a_tenant_wait() -> None:
    result = _replay(_quotas(), JOBS)
    # a1 takes team a's 2 GPUs at 0 s; a2 (10 s) and a3 (30 s) wait until a1 ends at 100 s;
    # b1 uses team b's own quota at once.
    tenants = result.tenants.to_json()["tenants"]
    assert sorted(result.tenants.tenants["a"].waits_s) == [0.0, 70.0, 90.0]
    assert tenants["a"]["wait_mean_s"] == pytest.approx(160 / 3, abs=1e-3)
    assert tenants["a"]["wait_p99_s"] == 90.0
    assert tenants["b"]["wait_mean_s"] == 0.0
    assert (tenants["a"]["jobs"], tenants["a"]["jobs_admitted"], tenants["b"]["jobs_admitted"]) == (3, 3, 1)
    # GPU-seconds: a 2x100 + 1x100 + 1x10, b 2x50
    assert tenants["a"]["gpu_hours"] == pytest.approx(310 / 3600, abs=1e-3)
    assert tenants["b"]["gpu_hours"] == pytest.approx(100 / 3600, abs=1e-3)
    # a waited for quota from 10 s to 100 s holding 2 GPUs; b never waited: the index is over a alone.
    assert tenants["a"]["quota_wait_hours"] == pytest.approx(90 / 3600, abs=1e-3)
    assert tenants["a"]["gpus_per_share_while_waiting"] == pytest.approx(2.0)
    assert result.tenants.to_json()["jain_index"] == 1.0
    assert result.never_started == 0


def test_in_a_cohort_a_tenant_borrows_idle_quota() -> None:
    result = _replay(_quotas(cohort="research"), JOBS)
    # The cohort pools 4 GPUs (no lendingLimit: all of each nominal quota is lent).
    # 10 s: a2 borrows one of team b's idle GPUs (a holds 3). 20 s: b1 needs 2, the pool has 1:
    # it waits. 30 s: a3 fits by borrowing the last GPU and goes first (BestEffortFIFO; no
    # reclaim preemption configured). b1 starts when a1 ends at 100 s.
    waits = {t: sorted(f.waits_s) for t, f in result.tenants.tenants.items()}
    assert waits == {"a": [0.0, 0.0, 0.0], "b": [80.0]}
    tally = result.tenants.to_json()
    # b waited 80 s holding nothing: x_b = 0; a never waited -> the index is over b alone, all zero.
    assert tally["tenants"]["b"]["gpus_per_share_while_waiting"] == 0.0
    assert tally["jain_index"] is None


def test_reclaiming_quota_preempts_a_borrower() -> None:
    result = _replay(_quotas(cohort="research", preemption={"reclaimWithinCohort": "Any"}), JOBS)
    # 10 s: a2 borrows one of b's GPUs. 20 s: b1 (2 GPUs, within b's nominal quota) reclaims it:
    # a2 is evicted after 10 s of work, b1 starts at once. 30 s: a3 finds no quota (a holds its 2,
    # b its 2, nobody borrows: nothing to reclaim). 70 s: b1 ends; a2 (older) and a3 borrow its 2.
    # A wait runs to the start of the run that completes: a2 70 - 10, a3 70 - 30.
    figures = result.tenants.tenants
    assert sorted(figures["a"].waits_s) == [0.0, 40.0, 60.0] and figures["b"].waits_s == [0.0]
    assert (figures["a"].preempted, figures["b"].preempted) == (1, 0)
    assert (figures["a"].admitted, figures["b"].admitted) == (3, 1)
    # a held: a1 2 x 100 + a2 1 x (10 + 100) + a3 1 x 10 GPU-seconds (the evicted 10 s count: they were held)
    assert figures["a"].gpu_hours == pytest.approx(320 / 3600)


FAIR_JOBS = [
    Job("a1", 0, 100, 1, 1000, tenant="a"),
    Job("a2", 0, 100, 1, 1000, tenant="a"),
    Job("a3", 0, 30, 1, 1000, tenant="a"),
    Job("b1", 0, 100, 1, 1000, tenant="b"),
    Job("a4", 5, 10, 1, 1000, tenant="a"),
    Job("b2", 6, 10, 1, 1000, tenant="b"),
]


@pytest.mark.parametrize(("fair_sharing", "waits"), [(False, {"a4": 25.0, "b2": 34.0}), (True, {"a4": 35.0, "b2": 24.0})])
def test_fair_sharing_gives_freed_quota_to_the_lower_share(fair_sharing: bool, waits: dict[str, float]) -> None:
    # Quotas a 1, b 1, c 2 (c submits nothing) in one cohort of 4 GPUs. At 0 s a takes 3 (borrowing
    # 2), b 1. a4 (5 s) and b2 (6 s) wait. At 30 s a3 ends and frees one GPU: both would borrow.
    # Without fair sharing the older a4 goes first, b2 follows when a4 ends at 40 s; with fair
    # sharing b2 goes first (b would borrow 1, a 2: b's dominant resource share is lower).
    docs = _quotas(cohort="research", teams={"a": 1, "b": 1, "c": 2})
    result = _replay(docs, FAIR_JOBS, fair_sharing=fair_sharing)
    figures = result.tenants.tenants
    assert max(figures["a"].waits_s) == waits["a4"] and max(figures["b"].waits_s) == waits["b2"]
    assert result.tenants.fair_sharing is fair_sharing


FINAL, INITIAL = "LessThanOrEqualToFinalShare", "LessThanInitialShare"
GREEDY_JOBS = [Job("greedy", 0, 100, 3, 1000, tenant="a"), Job("b1", 10, 10, 2, 1000, tenant="b")]


@pytest.mark.parametrize(
    ("strategies", "preempted", "b1_wait"),
    [((FINAL,), 0, 90.0), ((INITIAL,), 1, 0.0), ((FINAL, INITIAL), 1, 0.0)],
    ids=lambda v: ",".join(v) if isinstance(v, tuple) else None,
)
def test_fair_sharing_preempts_by_the_preemption_strategies(
    strategies: tuple[str, ...], preempted: int, b1_wait: float
) -> None:
    # Quotas a 1, b 1, c 2 in one cohort of 4 GPUs (the admission core's "greedy workload" case,
    # halved). greedy holds 3 (a borrows 2); b1 (10 s) needs 2 (b would borrow 1). Without
    # greedy a borrows 0: LessThanOrEqualToFinalShare (1 <= 0) keeps it and b1 waits until it
    # ends at 100 s; LessThanInitialShare (1 < 2) evicts it and b1 starts at once.
    docs = _quotas(cohort="research", teams={"a": 1, "b": 1, "c": 2}, preemption={"reclaimWithinCohort": "Any"})
    nodes = fleet_nodes(make_fleet(t4_cluster("onprem", nodes=1, gpus=4)))
    settings = Settings(quotas=parse_quotas(docs), fair_sharing_preemption_strategies=tuple(map(PreemptionStrategy, strategies)))
    result = run_replay(build_strategy(StrategyName.GPUFED, nodes), GREEDY_JOBS, nodes, settings=settings, fair_sharing=True)
    figures = result.tenants.tenants
    assert (figures["a"].preempted, figures["b"].waits_s) == (preempted, [b1_wait])


def test_without_quotas_team_b_waits_instead() -> None:
    nodes = fleet_nodes(make_fleet(t4_cluster("onprem", nodes=1, gpus=4)))
    result = run_replay(build_strategy(StrategyName.GPUFED, nodes), JOBS, nodes, settings=Settings())
    # a1 and a2 hold 3 GPUs when b1 arrives: b1 waits for the node until a1 ends; a3 fits at once.
    assert result.tenants is None and sorted(result.waits_s) == [0.0, 0.0, 0.0, 80.0]


@pytest.mark.parametrize(
    ("docs", "jobs", "message"),
    [
        (_quotas(), [Job("x", 0, 1, 1, 1000)], r"1 job\(s\) have no tenant \(first: x"),
        (_quotas(), [Job("x", 0, 1, 1, 1000, tenant="c")], r"namespace\(s\) c of the trace's tenants have no LocalQueue"),
        (_quotas(), [Job("x", 0, 1, 1, 1000, tenant="a", cpu_milli=500)], r"ClusterQueue cq-a does not cover cpu"),
        (_quotas(), [Job("x", 0, 1, 1, 500, tenant="a")], r"does not cover nvidia.com/gpu-milli"),
    ],
)
def test_what_the_quotas_lack_is_named(docs: list[dict[str, Any]], jobs: list[Job], message: str) -> None:
    with pytest.raises(QuotaError, match=message):
        resolve(parse_quotas(docs), jobs)


def _two_flavor_quotas(preference: str) -> list[dict[str, Any]]:
    """v1beta2 quotas: a owns 2 GPUs of f1 (and may reclaim them), b 2 of f2, in one cohort."""
    v1beta2 = "kueue.x-k8s.io/v1beta2"

    def queue(team: str, f1: int, f2: int, **spec: Any) -> dict[str, Any]:
        flavors = [{"name": f, "resources": [{"name": "nvidia.com/gpu", "nominalQuota": n}]} for f, n in (("f1", f1), ("f2", f2))]
        return {"apiVersion": v1beta2, "kind": "ClusterQueue", "metadata": {"name": f"cq-{team}"}, "spec": {
            "namespaceSelector": {}, "cohortName": "research",
            "resourceGroups": [{"coveredResources": ["nvidia.com/gpu"], "flavors": flavors}], **spec}}

    fungibility = {"whenCanBorrow": "TryNextFlavor", "whenCanPreempt": "TryNextFlavor", "preference": preference}
    docs = [{"apiVersion": v1beta2, "kind": "ResourceFlavor", "metadata": {"name": f}} for f in ("f1", "f2")]
    docs += [queue("a", 2, 0, preemption={"reclaimWithinCohort": "Any"}, flavorFungibility=fungibility), queue("b", 0, 2)]
    docs += [{"apiVersion": v1beta2, "kind": "LocalQueue", "metadata": {"name": "main", "namespace": t},
              "spec": {"clusterQueue": f"cq-{t}"}} for t in ("a", "b")]
    return docs


@pytest.mark.parametrize(("preference", "b_preempted"), [("BorrowingOverPreemption", 0), ("PreemptionOverBorrowing", 1)])
def test_v1beta2_quotas_and_their_flavor_preference_are_replayed(preference: str, b_preempted: int) -> None:
    """At 0 s b1 takes f1, the first flavor, borrowing a's idle quota. At 10 s a1 either borrows
    b's idle f2 (borrowing over preemption) or reclaims its own f1 from b1 (preemption over
    borrowing): b1 is evicted and runs again."""
    jobs = [Job("b1", 0, 100, 2, 1000, tenant="b"), Job("a1", 10, 100, 2, 1000, tenant="a")]
    result = _replay(_two_flavor_quotas(preference), jobs)
    assert result.tenants.tenants["b"].preempted == b_preempted
    assert result.tenants.tenants["a"].waits_s == [0.0]


def test_a_bad_quotas_file_is_refused_as_the_hub_would() -> None:
    docs = _quotas()
    docs[1]["spec"]["queueingStrategy"] = "Random"
    with pytest.raises(QuotaError, match="ClusterQueue 'cq-a'"):
        parse_quotas(docs)
    with pytest.raises(QuotaError, match="kind 'Deployment' is not a quota kind"):
        parse_quotas([{"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "Deployment"}])
    with pytest.raises(QuotaError, match=re.escape("apiVersion must be kueue.x-k8s.io/v1beta2 or kueue.x-k8s.io/v1beta1, not 'v1'")):
        parse_quotas([{**docs[0], "apiVersion": "v1"}])
    v1beta2 = _two_flavor_quotas("PreemptionOverBorrowing")
    del v1beta2[2]["spec"]["flavorFungibility"]["whenCanPreempt"]  # cq-a: Kueue defaults it to TryNextFlavor
    assert parse_quotas(v1beta2).queues["cq-a"].fungibility.preference == "PreemptionOverBorrowing"
    v1beta2[2]["spec"]["flavorFungibility"]["whenCanBorrow"] = "MayStopSearch"  # a preference needs both TryNextFlavor
    with pytest.raises(QuotaError, match="preference can only be set when both whenCanBorrow and whenCanPreempt are TryNextFlavor"):
        parse_quotas(v1beta2)


# --------------------------------------------------------------------------- the command


def test_run_with_quotas_and_synthetic_tenants(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    fleet, trace, quotas = run_files(
        tmp_path, trace="name,submit_s,duration_s,gpus,tenant\na1,0,100,2,a\na2,10,100,1,a\nb1,20,50,2,b\na3,30,10,1,a\n",
        quotas=_quotas(),
    )
    argv = ["whatif", "run", "--fleet", str(fleet), "--trace", str(trace), "--quotas", str(quotas), "--compare", "gpufed"]
    assert main([*argv, "-o", "json"]) == 0
    tenants = json.loads(capsys.readouterr().out)["strategies"]["gpufed"]["tenants"]["without_fair_sharing"]
    assert tenants["tenants"]["a"]["wait_p99_s"] == 90.0 and tenants["jain_index"] == 1.0
    assert main([*argv, "--fair-sharing", "both"]) == 0
    table = capsys.readouterr().out
    assert "tenants (gpufed, without fair sharing):" in table and "tenants (gpufed, with fair sharing):" in table
    assert "Jain's fairness index over tenants that waited for quota (with fair sharing): 1.0000" in table
    # A trace without tenants needs --synthetic-tenants; a tenant without a LocalQueue is named.
    trace.write_text("name,submit_s,duration_s,gpus\nx,0,10,1\n")
    assert main(argv) == 1
    assert "have no tenant" in capsys.readouterr().err
    assert main([*argv, "--synthetic-tenants", "2"]) == 1
    assert "namespace(s) team-2 of the trace's tenants have no LocalQueue" in capsys.readouterr().err
    # Tenants and fair sharing mean something only under quotas: asked for without them, refused.
    without_quotas = argv[: argv.index("--quotas")] + argv[argv.index("--quotas") + 2 :]
    # A usage error: exit status 2, the command's usage.
    for extra, message in (
        (["--fair-sharing", "on"], "--fair-sharing"),
        (["--synthetic-tenants", "2"], "--synthetic-tenants"),
    ):
        with pytest.raises(SystemExit) as exited:
            main([*without_quotas, *extra])
        assert exited.value.code == 2
        err = capsys.readouterr().err
        assert err.startswith("usage: gpufed whatif ") and f"error: {message} needs --quotas" in err


def test_run_passes_the_preemption_strategies_as_the_hub_takes_them(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    fleet, trace, quotas = run_files(
        tmp_path, trace="name,submit_s,duration_s,gpus,tenant\ngreedy,0,100,3,a\nb1,10,10,2,b\n",
        quotas=_quotas(cohort="research", teams={"a": 1, "b": 1, "c": 2}, preemption={"reclaimWithinCohort": "Any"}),
    )
    argv = ["whatif", "run", "--fleet", str(fleet), "--trace", str(trace), "--quotas", str(quotas), "--compare", "gpufed"]
    flag = "--kueue-fair-sharing-preemption-strategies"

    def run(*extra: str) -> dict[str, Any]:
        assert main([*argv, "--fair-sharing", "on", "-o", "json", *extra]) == 0
        result: dict[str, Any] = json.loads(capsys.readouterr().out)
        return result

    # Kueue's default pair evicts greedy for b1 (see the replay test above); the final share alone does not.
    default, final = run(), run(flag, FINAL)
    assert default["settings"]["fair_sharing_preemption_strategies"] == [FINAL, INITIAL]
    assert final["settings"]["fair_sharing_preemption_strategies"] == [FINAL]
    figures = [r["strategies"]["gpufed"]["tenants"]["with_fair_sharing"]["tenants"] for r in (default, final)]
    assert [(f["a"]["preempted"], f["b"]["wait_p99_s"]) for f in figures] == [(1, 0.0), (0, 90.0)]
    # As the hub: a list Kueue does not accept is refused with Kueue's words, and the setting
    # without fair sharing on is refused, naming the flag that turns it on.
    with pytest.raises(SystemExit):
        main([*argv, flag, f"{INITIAL},{FINAL}"])
    assert f'Unsupported value: "{INITIAL},{FINAL}"' in capsys.readouterr().err
    with pytest.raises(SystemExit) as exited:
        main([*argv, flag, INITIAL])
    assert exited.value.code == 2
    assert (
        "--kueue-fair-sharing-preemption-strategies is a setting of fair sharing: add --fair-sharing on (or both) "
        "to turn it on" in capsys.readouterr().err
    )


@pytest.mark.parametrize("strategy", ["BestEffortFIFO", "StrictFIFO"])
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_parking_inadmissible_jobs_changes_no_decision(strategy: str, seed: int) -> None:
    # Random arrivals and finishes through two gates: one offers only new jobs after arrivals
    # alone (as Kueue parks inadmissible workloads), the other every waiting job every cycle.
    docs = _quotas(cohort="research", nominal=3)
    for doc in docs:
        if doc["kind"] == "ClusterQueue":
            doc["spec"]["queueingStrategy"] = strategy
    quotas = parse_quotas(docs)
    rng = random.Random(seed)
    jobs = [Job(f"j{i}", float(i), 1.0, rng.choice([1, 1, 2, 3, 4]), 1000, tenant=rng.choice("ab")) for i in range(300)]
    tenancy = resolve(quotas, jobs)
    parked, reference = QuotaGate(quotas, tenancy), QuotaGate(quotas, tenancy, park_inadmissible=False)
    running: list[Job] = []
    admitted_total = 0
    for step, job in enumerate(jobs):
        for gate in (parked, reference):
            gate.submit(job)
        if running and rng.random() < 0.5:
            done = running.pop(rng.randrange(len(running)))
            for gate in (parked, reference):
                gate.release(done)
        ours, theirs = parked.admit(float(step)).admitted, reference.admit(float(step)).admitted
        assert [j.name for j in ours] == [j.name for j in theirs]
        running += ours
        admitted_total += len(ours)
    assert 50 < admitted_total < 300  # quota made some wait, and some got in


def test_the_example_quotas_fit_four_synthetic_tenants() -> None:
    path = Path(__file__).resolve().parents[2] / "examples" / "whatif" / "quotas-4-teams.yaml"
    quotas = read_quotas(path)
    jobs = assign_synthetic_tenants(
        [Job(f"pod-{i}", float(i), 10.0, 1, 500 if i % 2 else 1000, cpu_milli=1000, memory_mib=1024) for i in range(40)],
        count=4,
        seed=42,
    )
    tenancy = resolve(quotas, jobs)
    assert tenancy.queue_of == {f"team-{k}": f"team-{k}" for k in range(1, 5)}
    assert {q.cohort for q in quotas.queues.values()} == {"openb"}


@pytest.mark.parametrize(("version", "parent"), [("v1alpha1", "parent"), ("v1beta1", "parentName"), ("v1beta2", "parentName")])
def test_a_cohort_names_its_parent_in_its_versions_field(version: str, parent: str) -> None:
    """Kueue's v1alpha1 Cohort names its parent ``spec.parent``; v1beta1 and v1beta2 ``spec.parentName``."""
    cohort = {"apiVersion": f"kueue.x-k8s.io/{version}", "kind": "Cohort", "metadata": {"name": "research"},
              "spec": {parent: "org"}}
    assert parse_quotas([*_quotas(cohort="research"), cohort]).cohorts["research"].parent == "org"
    other = "parentName" if parent == "parent" else "parent"
    with pytest.raises(QuotaError, match=other):
        parse_quotas([*_quotas(cohort="research"), {**cohort, "spec": {other: "org"}}])
