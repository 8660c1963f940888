"""What one workload costs the hub in etcd writes, pinned (issue 19): a real hub (embedded etcd,
HTTPS, its controllers) takes a Deployment created over HTTPS with the admin token from apply to
Running while the test reports its Works' status as an agent does (applied with no replica
ready, then ready half a second later, each offered to the agent's status hold on a fake clock,
which writes only the ready one), and the hub's write ledger (``GET /debug/writes``) must show at most the
budgeted writes per resource, subresource and writer. The budgets are the ledger's counts
(``python -m bench.bench_ledger``, docs/benchmarks.md) plus one write of slack where a slow
machine can add one (two at most in all): a change that adds writes fails here."""

from __future__ import annotations

from collections import Counter
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import aiohttp
import orjson
import pytest

from bench.bench_ledger import is_workload_key
from controlplane.apis.constants import LABEL_BINDING
from controlplane.apiserver.identity import Role
from controlplane.apiserver.kubeconfig import load_kubeconfig
from controlplane.apiserver.objects import ObjectStore
from controlplane.apiserver.tls import client_ssl_context
from controlplane.hub import Hub
from controlplane.hubconfig import HubConfig
from controlplane.storage.ledger import acting_as
from member_agent.holding import DEFAULT_HOLD_SECONDS, StatusHold
from tests.controllers.fleet import (
    deployment,
    eventually,
    node_shape,
    propagation_policy,
    put_cluster,
    settled,
)

BINDINGS = "resourcebindings.work.gpufed.io"
#: (resource, subresource, writer) -> the ledger's count, for one replica on one cluster.
ONE_CLUSTER = {
    ("deployments.apps", "", "admin"): 1,
    ("deployments.apps", "", "controller:detector"): 1,  # the propagation finalizer with Propagated
    ("deployments.apps", "status", "controller:status"): 1,  # ready (replicas starting is held)
    ("events", "", "controller:scheduler"): 1,  # Scheduled
    (BINDINGS, "", "controller:detector"): 1,
    (BINDINGS, "", "controller:scheduler"): 1,  # spec.clusters with Scheduled and the explanation
    (BINDINGS, "status", "controller:status"): 1,  # applied and ready (applied, starting is held)
    ("works.work.gpufed.io", "", "controller:binding"): 1,
    ("works.work.gpufed.io", "status", "agent"): 1,  # ready (applied, starting is held)
    # No rollout history: it starts at the first template change (controllers/rollouthistory.py).
}
#: Two replicas, Divided by equal static weights over two clusters (one each).
TWO_CLUSTERS = {
    **ONE_CLUSTER,
    ("works.work.gpufed.io", "", "controller:binding"): 2,
    ("works.work.gpufed.io", "status", "agent"): 2,
}
#: Detector reconciles per workload, from apply to Running.
DETECTOR_RECONCILES = 1
#: Where a slow machine may add one write: a Propagated write of its own (seen once on a loaded
#: 2-core CI run; its cause is not traced yet), a status hold that ran out before the ready report.
SLACK = {
    ("deployments.apps", "status", "controller:detector"),
    ("deployments.apps", "status", "controller:status"),
    (BINDINGS, "status", "controller:status"),
}
#: And at most this many such extra writes in all.
TOTAL_SLACK = 2
WORKLOAD_RESOURCES = ("deployments.apps", BINDINGS, "works.work.gpufed.io", "events", "replicasets.apps")
WEIGHTED = {
    "replicaScheduling": {
        "replicaSchedulingType": "Divided",
        "replicaDivisionPreference": "Weighted",
        "weightPreference": {
            "staticWeightList": [
                {"targetCluster": {"clusterNames": [name]}, "weight": 1} for name in ("gpu-a", "gpu-b")
            ]
        },
    }
}


@pytest.fixture
async def hub(tmp_path: Path) -> AsyncIterator[Hub]:
    async with Hub(HubConfig(state_dir=tmp_path / "hub", port=0, write_journal=10_000)) as running:
        yield running


async def call(hub: Hub, method: str, path: str, body: Any = None, *, token: str | None = None) -> tuple[int, Any]:
    credentials = load_kubeconfig(hub.kubeconfig_path)
    connector = aiohttp.TCPConnector(ssl=client_ssl_context(credentials.ca_pem))
    headers = {"Authorization": f"Bearer {token or credentials.token}", "Content-Type": "application/json"}
    async with (
        aiohttp.ClientSession(connector=connector, timeout=aiohttp.ClientTimeout(total=30)) as session,
        session.request(method, f"{hub.url}{path}", data=orjson.dumps(body) if body else None, headers=headers) as r,
    ):
        return r.status, orjson.loads(await r.read())


async def admin_call(hub: Hub, method: str, path: str, body: Any = None) -> Any:
    status, answer = await call(hub, method, path, body)
    assert status in (200, 201), answer
    return answer


async def test_only_admins_read_the_write_ledger(hub: Hub) -> None:
    assert hub.tokens is not None
    viewer = (await hub.tokens.create(role=Role.VIEWER, name="viewer")).token
    status, answer = await call(hub, "GET", "/debug/writes", token=viewer)
    assert status == 403 and answer["kind"] == "Status", answer
    assert "/debug/writes" in answer["message"]
    ledger = await admin_call(hub, "GET", "/debug/writes")
    assert {"writes", "watchEvents", "journal", "journalRevision"} <= set(ledger)
    assert ledger["journal"], "the hub's bootstrap writes are in the journal"
    since = ledger["journalRevision"]
    later = await admin_call(hub, "GET", f"/debug/writes?since={since}")
    assert all(e["revision"] > since for e in later["journal"]) and later["journalRevision"] >= since
    status, answer = await call(hub, "GET", "/debug/writes?since=yesterday")
    assert status == 400 and answer["kind"] == "Status" and "since" in answer["message"], answer


async def report_as_agent(
    objects: ObjectStore, work: dict[str, Any], *, ready: bool, hold: StatusHold, now: float
) -> None:
    """The agent's Work status: Applied at the current generation and the member Deployment's
    status, written unless the agent's ``hold`` holds it back at ``now``."""
    manifest = work["spec"]["workload"]["manifests"][0]
    replicas = manifest["spec"]["replicas"]
    status = {
        "conditions": [
            {"type": "Applied", "status": "True", "reason": "AppliedSuccessful", "message": "all 1 manifest(s) applied",
             "lastTransitionTime": "2026-01-01T00:00:00Z", "observedGeneration": work["metadata"]["generation"]},
        ],
        "manifestStatuses": [{
            "identifier": {"group": "apps", "version": "v1", "kind": "Deployment", "namespace": "default",
                           "name": manifest["metadata"]["name"], "ordinal": 0},
            "status": {"observedGeneration": 1, "replicas": replicas, "updatedReplicas": replicas,
                       "readyReplicas": replicas if ready else 0, "availableReplicas": replicas if ready else 0},
            "health": "Healthy" if ready else "Unhealthy",
        }],
    }
    if hold.delay(f"{work['metadata']['namespace']}/{work['metadata']['name']}", status, now=now) is not None:
        return
    work_rt = objects.registry.require("work.gpufed.io/v1alpha1", "Work")
    current = await objects.get(work_rt, namespace=work["metadata"]["namespace"], name=work["metadata"]["name"])
    with acting_as("agent"):
        await objects.update_status(work_rt, {**current, "status": status})


@pytest.mark.parametrize(
    ("replicas", "placement", "budget"),
    [pytest.param(1, None, ONE_CLUSTER, id="one-replica"), pytest.param(2, WEIGHTED, TWO_CLUSTERS, id="divided")],
)
async def test_a_workload_from_apply_to_running_writes_at_most_its_budget(
    hub: Hub, replicas: int, placement: dict[str, Any] | None, budget: dict[tuple[str, str, str], int]
) -> None:
    objects = hub.objects
    assert objects is not None
    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    with acting_as("agent"):
        for cluster in ("gpu-a", "gpu-b"):
            await put_cluster(objects, cluster, node_shape(2, gpus=8), report_time=now)
    policies = objects.registry.require("policy.gpufed.io/v1alpha1", "PropagationPolicy")
    await objects.create(policies, propagation_policy("spread", placement=placement))
    manager = await eventually(lambda: _started(hub), what="the controllers")
    await settled(manager)
    before = await admin_call(hub, "GET", "/debug/writes")
    start = max((e["revision"] for e in before["journal"]), default=0)
    reconciled = manager.reconciles()

    await admin_call(hub, "POST", "/apis/apps/v1/namespaces/default/deployments", deployment("web", replicas=replicas))
    works_rt = objects.registry.require("work.gpufed.io/v1alpha1", "Work")

    async def works() -> list[dict[str, Any]] | None:
        listed = await objects.list(works_rt, label_selector=f"{LABEL_BINDING}=web-deployment")
        return listed.items if len(listed.items) == replicas else None  # one replica per cluster

    placed = await eventually(works, what=f"{replicas} Work(s)")
    hold = StatusHold(window=DEFAULT_HOLD_SECONDS)
    for ready, now in ((False, 0.0), (True, 0.5)):  # ready within the agent's default hold
        for work in placed:
            await report_as_agent(objects, work, ready=ready, hold=hold, now=now)
    deployments = objects.registry.require("apps/v1", "Deployment")

    async def running() -> bool:
        current = await objects.get(deployments, namespace="default", name="web")
        return (current.get("status") or {}).get("readyReplicas") == replicas

    await eventually(running, what="the hub Deployment Running")
    await settled(manager)

    after = await admin_call(hub, "GET", "/debug/writes")
    journal = after["journal"]
    written = Counter(
        (e["resource"], e["subresource"], e["writer"])
        for e in journal
        if e["revision"] > start and is_workload_key(e["key"], namespace="default", name="web")
    )
    print(f"writes of one workload ({replicas} replica(s)): {sum(written.values())}: {dict(written)}")
    allowed = {key: count + (1 if key in SLACK else 0) for key, count in budget.items()}
    over = {key: (count, allowed.get(key, 0)) for key, count in written.items() if count > allowed.get(key, 0)}
    assert not over, f"writes over budget (written, budget): {over}"
    # The detector reconciles the workload once: the events of the binding and the claim it
    # wrote, and of the scheduler's placement, bring it nothing to do (three before they were
    # skipped). Two of slack: on a loaded machine the events of the detector's two writes can
    # come before their answers and are then not recognised (four reconciles without the skip).
    detector = manager.reconciles()["detector"] - reconciled["detector"]
    assert detector <= DETECTOR_RECONCILES + 2, f"{detector} detector reconciles"
    assert sum(written.values()) <= sum(budget.values()) + TOTAL_SLACK
    # Updates made from the revision their writer saw do not read etcd first (the agent's and
    # the status controller's never do), nor does a new Work's create, nor the scheduler, which
    # decides on the binding as the hub last saw it (its own and the other controllers' writes
    # included): one read of slack per Work (a create that finds one).
    reads = Counter({(e["resource"], e["reader"]): e["count"] for e in after["reads"]})
    reads.subtract(Counter({(e["resource"], e["reader"]): e["count"] for e in before["reads"]}))
    workload_reads = {  # "hub": this test's own reads
        k: n for k, n in reads.items() if n > 0 and k[0] in WORKLOAD_RESOURCES and k[1] != "hub"
    }
    print(f"etcd reads: {workload_reads}")
    assert not {k for k in workload_reads if k[1] in ("agent", "controller:status", "controller:scheduler")}, (
        workload_reads
    )
    assert sum(workload_reads.values()) <= replicas, workload_reads


async def _started(hub: Hub) -> Any:
    manager = hub.controllers
    return manager if manager is not None and manager.started.is_set() else None
