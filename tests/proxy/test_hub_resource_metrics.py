"""The hub's ``metrics.k8s.io`` merged from its members: a real hub, two simulated members and
their agents' tunnels in one process; requests over real HTTP."""

from __future__ import annotations

import contextlib
import json
import logging
import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from controlplane.apiserver import errors
from controlplane.apiserver.proxy.resourcemetrics import CLUSTER_ANNOTATION
from tests.proxy.members import TwoMembers, two_members
from tests.proxy.test_proxy_tunnel import eventually

pytestmark = [pytest.mark.timeout(180), pytest.mark.waiting]

MEMBERS = ("sim-a", "sim-b")
BASE = "/apis/metrics.k8s.io/v1beta1"
FLEET = {"clusters": [
    {"name": name, "nodeGroups": [{"name": "cpu", "count": 1, "cpu": 64, "memoryGiB": 256}]} for name in MEMBERS
]}


def _pod(name: str, namespace: str, app: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": namespace, "labels": {"app": app}},
        "spec": {"containers": [{"name": "main", "image": "x:1",
                                 "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}]},
    }


@pytest.fixture
async def members(tmp_path: Path) -> AsyncIterator[TwoMembers]:
    async with two_members(tmp_path, FLEET) as running:
        yield running


async def _run(members: TwoMembers, cluster: str, pod: dict[str, Any]) -> None:
    sim = members.sims[cluster].objects
    namespace = pod["metadata"]["namespace"]
    with contextlib.suppress(errors.AlreadyExists):
        await sim.create(sim.registry.require("v1", "Namespace"),
                         {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
    await sim.create(sim.registry.require("v1", "Pod"), pod)


async def _listed(members: TwoMembers, path: str, count: int, who: str = "admin") -> list[dict[str, Any]] | None:
    code, body = await members.get(path, who=who)
    assert code == 200, body
    items: list[dict[str, Any]] = body["items"]
    return items if len(items) >= count else None


async def _ready(members: TwoMembers) -> None:
    metrics = members.fleet.hub.resource_metrics

    async def both() -> bool:
        return await metrics.members() == list(MEMBERS)

    await eventually(both, within=60, what="both members Ready with their tunnels")


async def test_pods_and_nodes_merge_every_members_answer(members: TwoMembers) -> None:
    await _ready(members)
    await _run(members, "sim-a", _pod("web-a", "ml", "web"))
    await _run(members, "sim-b", _pod("web-b", "ml", "web"))
    await _run(members, "sim-b", _pod("batch-b", "other", "batch"))

    items = await eventually(lambda: _listed(members, f"{BASE}/pods", 3), what="three pods' metrics")
    assert [(i["metadata"]["namespace"], i["metadata"]["name"], i["metadata"]["annotations"][CLUSTER_ANNOTATION])
            for i in items] == [("ml", "web-a", "sim-a"), ("ml", "web-b", "sim-b"), ("other", "batch-b", "sim-b")]
    first = items[0]
    assert first["kind"] == "PodMetrics" and first["window"] and first["timestamp"]
    assert first["containers"][0]["name"] == "main" and first["containers"][0]["usage"]["cpu"].endswith("n")

    code, body = await members.get(f"{BASE}/namespaces/ml/pods")
    assert code == 200 and body["kind"] == "PodMetricsList"
    assert sorted(i["metadata"]["name"] for i in body["items"]) == ["web-a", "web-b"]
    code, body = await members.get(f"{BASE}/pods?labelSelector=app%3Dbatch")
    assert [i["metadata"]["name"] for i in body["items"]] == ["batch-b"]
    code, body = await members.get(f"{BASE}/pods?fieldSelector=metadata.namespace%3Dml,metadata.name%21%3Dweb-a")
    assert code == 200 and [i["metadata"]["name"] for i in body["items"]] == ["web-b"]

    code, body = await members.get(f"{BASE}/namespaces/ml/pods/web-b")
    assert code == 200 and body["kind"] == "PodMetrics"
    assert body["metadata"]["annotations"][CLUSTER_ANNOTATION] == "sim-b"
    code, body = await members.get(f"{BASE}/namespaces/ml/pods/absent")
    assert code == 404 and body["reason"] == "NotFound", body
    assert body["message"] == 'pods.metrics.k8s.io "absent" not found'

    code, body = await members.get(f"{BASE}/nodes")
    assert code == 200 and body["kind"] == "NodeMetricsList"
    assert sorted({i["metadata"]["annotations"][CLUSTER_ANNOTATION] for i in body["items"]}) == list(MEMBERS)
    node = body["items"][0]
    code, one = await members.get(f"{BASE}/nodes/{node['metadata']['name']}")
    assert code == 200 and one["kind"] == "NodeMetrics" and one["usage"]["memory"].endswith("Ki")

    # What the FederatedHPA controller reads: each member's selected pods with their PodMetrics.
    fleet = await members.fleet.hub.resource_metrics.pod_metrics("ml", {"matchLabels": {"app": "web"}})
    assert [(m.cluster, [p["metadata"]["name"] for p in m.pods], sorted(m.metrics or {}), m.answered)
            for m in fleet] == [("sim-a", ["web-a"], ["web-a"], True), ("sim-b", ["web-b"], ["web-b"], True)]
    assert fleet[0].pods[0]["spec"]["containers"][0]["resources"]["requests"]["cpu"] == "1"
    assert fleet[0].metrics is not None and fleet[0].metrics["web-a"].containers["main"]["cpu"] > 0


async def test_discovery_and_openapi_list_the_metrics_api(members: TwoMembers) -> None:
    code, body = await members.get(BASE)
    assert code == 200, body
    assert {(r["name"], r["kind"], r["namespaced"], tuple(r["verbs"])) for r in body["resources"]} == {
        ("pods", "PodMetrics", True, ("get", "list")), ("nodes", "NodeMetrics", False, ("get", "list"))}
    code, v2 = await members.get("/openapi/v2")
    assert code == 200
    prefix = "io.k8s.metrics.pkg.apis.metrics.v1beta1."
    listed = v2["paths"][f"{BASE}/namespaces/{{namespace}}/pods"]["get"]
    assert listed["responses"]["200"]["schema"]["$ref"] == f"#/definitions/{prefix}PodMetricsList"
    assert f"{BASE}/pods" in v2["paths"] and f"{BASE}/nodes/{{name}}" in v2["paths"]
    assert {f"{prefix}PodMetrics", f"{prefix}NodeMetricsList", f"{prefix}ContainerMetrics"} <= set(v2["definitions"])
    refs = set(re.findall(r'"#/definitions/([^"]+)"', json.dumps(v2)))
    assert refs - set(v2["definitions"]) == set()
    code, v3 = await members.get(f"/openapi/v3/apis/metrics.k8s.io/{BASE.rsplit('/', 1)[1]}")
    assert code == 200 and f"{BASE}/nodes" in v3["paths"], v3


async def test_the_viewer_reads_metrics_and_writes_are_refused(members: TwoMembers) -> None:
    await _ready(members)
    code, body = await members.get(f"{BASE}/nodes", who="viewer")
    assert code == 200, body
    code, body = await members.fleet.request("POST", f"{BASE}/namespaces/ml/pods", body={})
    assert code == 405, body
    for watch in ("watch=1", "watch=yes", "watch"):  # any watch kube reads as true
        code, body = await members.get(f"{BASE}/pods?{watch}")
        assert code == 405, body


async def test_a_member_that_is_gone_is_left_out_with_one_warning(
    members: TwoMembers, caplog: pytest.LogCaptureFixture
) -> None:
    await _ready(members)
    await _run(members, "sim-a", _pod("web-a", "ml", "web"))
    await _run(members, "sim-b", _pod("web-b", "ml", "web"))
    await eventually(lambda: _listed(members, f"{BASE}/namespaces/ml/pods", 2), what="both pods' metrics")
    # The member's API stops answering while its agent keeps the tunnel open (and its Cluster Ready).
    await members.sims.pop("sim-b").__aexit__(None, None, None)
    caplog.set_level(logging.WARNING, logger="controlplane.apiserver.proxy.resourcemetrics")
    for _ in range(2):
        code, body = await members.get(f"{BASE}/namespaces/ml/pods")
        assert code == 200, body
        assert [i["metadata"]["name"] for i in body["items"]] == ["web-a"]
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING and "sim-b" in r.getMessage()]
    assert len(warnings) == 1, warnings
    # A member whose pod list does not answer is given to the FederatedHPA controller as such.
    fleet = await members.fleet.hub.resource_metrics.pod_metrics("ml", "app=web")
    assert [(m.cluster, len(m.pods), m.metrics is None, m.answered) for m in fleet] == [
        ("sim-a", 1, False, True), ("sim-b", 0, True, False)]


async def test_get_of_a_placed_pod_asks_only_the_cluster_its_workload_runs_on(members: TwoMembers) -> None:
    await _ready(members)
    policy = {
        "apiVersion": "policy.gpufed.io/v1alpha1", "kind": "PropagationPolicy",
        "metadata": {"name": "infer", "namespace": "default"},
        "spec": {"resourceSelectors": [{"apiVersion": "apps/v1", "kind": "Deployment", "name": "infer"}],
                 "placement": {"clusterAffinity": {"clusterNames": ["sim-b"]}}},
    }
    deployment = {
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "infer", "namespace": "default"},
        "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "infer"}},
                 "template": {"metadata": {"labels": {"app": "infer"}},
                              "spec": {"containers": [{"name": "server", "image": "infer:1"}]}}},
    }
    for path, obj in (("/apis/policy.gpufed.io/v1alpha1/namespaces/default/propagationpolicies", policy),
                      ("/apis/apps/v1/namespaces/default/deployments", deployment)):
        code, body = await members.fleet.request("POST", path, body=obj)
        assert code == 201, body
    [pod] = await eventually(lambda: _listed(members, f"{BASE}/namespaces/default/pods", 1), what="the infer pod")
    name = pod["metadata"]["name"]
    assert name.startswith("infer-") and pod["metadata"]["annotations"][CLUSTER_ANNOTATION] == "sim-b"
    path = f"{BASE}/namespaces/default/pods/{name}"
    code, body = await members.get(path)
    assert code == 200 and body["metadata"]["annotations"][CLUSTER_ANNOTATION] == "sim-b", body
    asked = {c: [e for e in sim.callers.entries if e["path"] == path] for c, sim in members.sims.items()}
    assert asked["sim-a"] == [] and len(asked["sim-b"]) == 1, asked
