"""The hub's workload pod list (``resourcebindings/<name>/pods``), its log links, the proxy's
metrics on the hub's /metrics and a member's ``metrics.k8s.io`` API: in one process with a real
hub, a simulated member and its agent's tunnel (the fleet of test_proxy_tunnel)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from controlplane.apiserver.identity import Role
from tests.proxy.test_proxy_tunnel import CLUSTER, PROXY, Fleet, eventually, fleet

pytestmark = [pytest.mark.timeout(120), pytest.mark.waiting]
__all__ = ["fleet"]

BINDING = "/apis/work.gpufed.io/v1alpha1/namespaces/default/resourcebindings/infer-deployment"
DEPLOYMENT = {
    "apiVersion": "apps/v1",
    "kind": "Deployment",
    "metadata": {"name": "infer", "namespace": "default"},
    "spec": {
        "replicas": 2,
        "selector": {"matchLabels": {"app": "infer"}},
        "template": {
            "metadata": {"labels": {"app": "infer"}},
            "spec": {"containers": [{"name": "server", "image": "infer:1",
                                     "resources": {"requests": {"cpu": "2", "memory": "1Gi"}}}]},
        },
    },
}
POLICIES = "/apis/policy.gpufed.io/v1alpha1/namespaces/default/propagationpolicies"
DEPLOYMENTS = "/apis/apps/v1/namespaces/default/deployments"
POLICY = {
    "apiVersion": "policy.gpufed.io/v1alpha1", "kind": "PropagationPolicy",
    "metadata": {"name": "infer", "namespace": "default"},
    "spec": {"resourceSelectors": [{"apiVersion": "apps/v1", "kind": "Deployment", "name": "infer"}],
             "placement": {"clusterAffinity": {"clusterNames": [CLUSTER]}}},
}
LONER = {
    "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "other-0", "namespace": "default"},
    "spec": {"containers": [{"name": "main", "image": "x:1"}]},
}


async def _placed_workload(fleet: Fleet) -> None:
    """A Deployment applied to the hub with a policy placing it on the member, where it runs
    (2 pods, beside an unrelated pod)."""
    sim = fleet.sim.objects
    await sim.create(sim.registry.require("v1", "Pod"), LONER)
    for path, obj in ((POLICIES, POLICY), (DEPLOYMENTS, DEPLOYMENT)):
        code, body = await fleet.request("POST", path, body=obj)
        assert code == 201, body


async def _pods(fleet: Fleet, who: str = "admin") -> dict[str, Any] | None:
    code, body = await fleet.request("GET", BINDING + "/pods", who=who)
    if code == 404:
        return None  # the hub has not made the binding yet
    assert code == 200, body
    if not body["clusters"]:
        return None
    running = [p for p in body["clusters"][0]["pods"] if p["status"] == "Running"]
    return body if len(running) == 2 else None


async def test_the_hub_lists_a_workloads_pods_per_cluster_with_their_log_links(fleet: Fleet) -> None:
    await _placed_workload(fleet)
    body = await eventually(lambda: _pods(fleet), what="the Deployment's 2 pods to run")
    assert body["workload"] == {"apiVersion": "apps/v1", "kind": "Deployment", "namespace": "default", "name": "infer"}
    [cluster] = body["clusters"]
    assert cluster["name"] == CLUSTER and "forbidden" not in cluster and "error" not in cluster
    names = sorted(p["name"] for p in cluster["pods"])
    assert len(names) == 2 and all(n.startswith("infer-") for n in names), names  # not other-0
    pod = cluster["pods"][0]
    assert pod["node"] != "<none>" and pod["gpuRequest"] == "-"
    # READY, STATUS and RESTARTS are kubectl's cells for the pod.
    assert (pod["ready"], pod["status"], pod["restartsShown"], pod["restarts"]) == ("1/1", "Running", "0", 0), pod
    code, log = await fleet.request("GET", pod["logPath"] + "?tailLines=1")
    assert code == 200 and "[server] step" in log, log

    # A team bound to `view` but without clusters/proxy sees that it may not, and no pod.
    assert fleet.hub.tokens is not None
    fleet.tokens["team"] = (await fleet.hub.tokens.create(role=Role.USER, name="tess", groups=("team",))).token
    code, body = await fleet.request("POST", "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings", body={
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
        "metadata": {"name": "team-view"}, "roleRef": {"apiGroup": "rbac.authorization.k8s.io",
                                                       "kind": "ClusterRole", "name": "view"},
        "subjects": [{"kind": "Group", "name": "team", "apiGroup": "rbac.authorization.k8s.io"}],
    })
    assert code == 201, body

    async def team_denied() -> dict[str, Any] | None:
        code, body = await fleet.request("GET", BINDING + "/pods", who="team")
        return body if code == 200 else None

    body = await eventually(team_denied, what="the team's binding to take effect")
    [cluster] = body["clusters"]
    assert cluster["pods"] == [] and "clusters/proxy" in cluster["forbidden"], cluster
    code, denied = await fleet.request("GET", pod["logPath"], who="team")
    assert code == 403 and "clusters/proxy" in denied["message"], denied


def _asks(count: int) -> dict[str, Any]:
    return {"devices": {"requests": [{"name": "r", "exactly": {"deviceClassName": "gpu.nvidia.com", "count": count}}]}}


async def _claiming_pod(fleet: Fleet, name: str, claims: list[dict[str, str]]) -> None:
    """A pod of the workload (its ReplicaSet's) on the member, naming ``claims``."""
    sim = fleet.sim.objects
    await sim.create(sim.registry.require("v1", "Pod"), {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": "default",
                     "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "infer-5d8f",
                                          "uid": "u", "controller": True}]},
        "spec": {"containers": [{"name": "server", "image": "infer:1"}], "resourceClaims": claims},
    })


async def _listed(fleet: Fleet, name: str, who: str = "admin") -> dict[str, Any] | None:
    """The pod ``name`` as the hub's pod list shows it to ``who`` (None: not listed yet)."""
    code, body = await fleet.request("GET", BINDING + "/pods", who=who)
    pods = [p for c in body.get("clusters") or [] for p in c.get("pods") or []] if code == 200 else []
    return next((p for p in pods if p["name"] == name), None)


#: What lets a user list a workload's pods: the binding's ``pods`` and proxying to its clusters.
POD_LISTING = [
    {"apiGroups": ["work.gpufed.io"], "resources": ["resourcebindings", "resourcebindings/pods"], "verbs": ["get", "list"]},
    {"apiGroups": ["cluster.gpufed.io"], "resources": ["clusters/proxy"], "verbs": ["get"]},
]


async def _pod_lister(fleet: Fleet, who: str, more: Sequence[dict[str, Any]] = ()) -> None:
    """A user ``who`` (token and group of that name) bound to :data:`POD_LISTING` and ``more`` rules."""
    assert fleet.hub.tokens is not None
    fleet.tokens[who] = (await fleet.hub.tokens.create(role=Role.USER, name=f"{who}-user", groups=(who,))).token
    rbac = "/apis/rbac.authorization.k8s.io/v1"
    for path, obj in (
        (f"{rbac}/clusterroles", {
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": who},
            "rules": [*POD_LISTING, *more]}),
        (f"{rbac}/clusterrolebindings", {
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding", "metadata": {"name": who},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": who},
            "subjects": [{"kind": "Group", "name": who, "apiGroup": "rbac.authorization.k8s.io"}]}),
    ):
        code, body = await fleet.request("POST", path, body=obj)
        assert code == 201, body


async def test_a_pods_gpu_request_counts_the_dra_claims_the_hub_holds(fleet: Fleet) -> None:
    """A pod of the workload naming a claim template and a shared claim the hub holds shows the GPUs
    they ask, as placement counts them (the member has neither, so the pod waits there)."""
    await _placed_workload(fleet)
    resources = "/apis/resource.k8s.io/v1/namespaces/default"
    for path, obj in (
        (f"{resources}/resourceclaimtemplates", {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
                                                 "metadata": {"name": "two"}, "spec": {"spec": _asks(2)}}),
        (f"{resources}/resourceclaims", {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
                                         "metadata": {"name": "pool"}, "spec": _asks(1)}),
    ):
        code, body = await fleet.request("POST", path, body=obj)
        assert code == 201, body
    await _claiming_pod(fleet, "infer-5d8f-claim", [{"name": "gpus", "resourceClaimTemplateName": "two"},
                                                    {"name": "pooled", "resourceClaimName": "pool"}])
    pod = await eventually(lambda: _listed(fleet, "infer-5d8f-claim"), what="the pod in the hub's list")
    assert pod["gpuRequest"] == "nvidia.com/gpu=2 (DRA claim gpus),nvidia.com/gpu=1 (DRA claim pooled, shared)"


async def test_a_viewer_without_the_right_to_read_claims_sees_no_claim_detail(fleet: Fleet) -> None:
    """A user who may list the workload's pods (``resourcebindings/pods``, ``clusters/proxy``) but
    may not read ResourceClaims or their templates in the namespace is shown that a pod names a
    claim, never what the claim asks: the hub reads claims for a caller only where the caller may."""
    await _placed_workload(fleet)
    resources = "/apis/resource.k8s.io/v1/namespaces/default"
    code, body = await fleet.request("POST", f"{resources}/resourceclaims", body={
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": "secret-pool"},
        "spec": _asks(4)})
    assert code == 201, body
    await _claiming_pod(fleet, "infer-5d8f-pooled", [{"name": "pooled", "resourceClaimName": "secret-pool"}])
    await _pod_lister(fleet, "pods-only")
    code, body = await fleet.request("GET", f"{resources}/resourceclaims/secret-pool", who="pods-only")
    assert code == 403, body  # the user may not read the claim directly...

    pod = await eventually(lambda: _listed(fleet, "infer-5d8f-pooled", "pods-only"), what="the pod in the user's list")
    assert pod["gpuRequest"] == "(DRA claim pooled: not readable)"  # ...nor through the pod list
    pod = await eventually(lambda: _listed(fleet, "infer-5d8f-pooled"), what="the pod in the admin's list")
    assert pod["gpuRequest"] == "nvidia.com/gpu=4 (DRA claim pooled, shared)"


async def test_a_claims_device_class_is_the_hubs_for_a_viewer_who_may_read_it(fleet: Fleet) -> None:
    """A claim of a DeviceClass of the hub's own counts by the class's selectors for a caller who may
    read DeviceClasses; for one who may read the claim but not the class, the class is read as
    NVIDIA's published classes only (not one of them: no GPUs shown)."""
    await _placed_workload(fleet)
    code, body = await fleet.request("POST", "/apis/resource.k8s.io/v1/deviceclasses", body={
        "apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": "h100.example.com"},
        "spec": {"selectors": [{"cel": {"expression": "device.driver == 'gpu.nvidia.com' && "
                                                      "device.attributes['gpu.nvidia.com'].type == 'gpu'"}}]}})
    assert code == 201, body
    requests = [{"name": "r", "exactly": {"deviceClassName": "h100.example.com", "count": 3}}]
    code, body = await fleet.request("POST", "/apis/resource.k8s.io/v1/namespaces/default/resourceclaimtemplates", body={
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate", "metadata": {"name": "h100s"},
        "spec": {"spec": {"devices": {"requests": requests}}}})
    assert code == 201, body
    await _claiming_pod(fleet, "infer-5d8f-h100", [{"name": "gpus", "resourceClaimTemplateName": "h100s"}])
    templates = {"apiGroups": ["resource.k8s.io"], "resources": ["resourceclaimtemplates"], "verbs": ["get"]}
    await _pod_lister(fleet, "claims-only", [templates])
    await _pod_lister(fleet, "class-readers", [
        templates, {"apiGroups": ["resource.k8s.io"], "resources": ["deviceclasses"], "verbs": ["list"]}])

    pod = await eventually(lambda: _listed(fleet, "infer-5d8f-h100"), what="the pod in the admin's list")
    assert pod["gpuRequest"] == "nvidia.com/gpu=3 (DRA claim gpus)"
    pod = await eventually(lambda: _listed(fleet, "infer-5d8f-h100", "class-readers"), what="the pod in the list")
    assert pod["gpuRequest"] == "nvidia.com/gpu=3 (DRA claim gpus)"
    pod = await eventually(lambda: _listed(fleet, "infer-5d8f-h100", "claims-only"), what="the pod in the list")
    assert pod["gpuRequest"] == "-"


async def test_the_hubs_metrics_count_proxied_requests_bytes_streams_and_tunnels(fleet: Fleet) -> None:
    def sample(text: str, name: str, **labels: str) -> float:
        for line in text.splitlines():
            if line.startswith(name + "{") and all(f'{k}="{v}"' in line for k, v in labels.items()):
                return float(line.rsplit(" ", 1)[1])
        return 0.0

    _, before = await fleet.request("GET", "/metrics")
    assert sample(before, "gpufed_proxy_tunnel_connected", cluster=CLUSTER) == 1.0
    code, _ = await fleet.request("GET", PROXY + "/api/v1/namespaces/default/pods")
    assert code == 200
    code, _ = await fleet.request("GET", PROXY + "/api/v1/namespaces/default/pods/missing")
    assert code == 404
    _, after = await fleet.request("GET", "/metrics")
    for code_label in ("200", "404"):
        counted = sample(after, "gpufed_proxy_requests_total", cluster=CLUSTER, verb="get", code=code_label)
        assert counted == sample(before, "gpufed_proxy_requests_total", cluster=CLUSTER, verb="get",
                                 code=code_label) + 1, after
    relayed = sample(after, "gpufed_proxy_relayed_bytes_total", cluster=CLUSTER, direction="from_member")
    assert relayed > sample(before, "gpufed_proxy_relayed_bytes_total", cluster=CLUSTER, direction="from_member")
    assert sample(after, "gpufed_proxy_open_streams", cluster=CLUSTER) == 0.0
    # A name that is no cluster does not become a label value.
    code, _ = await fleet.request("GET", "/apis/cluster.gpufed.io/v1alpha1/clusters/made-up/proxy/api/v1/pods")
    assert code == 404
    _, last = await fleet.request("GET", "/metrics")
    assert 'cluster="made-up"' not in last
    assert sample(last, "gpufed_proxy_requests_total", cluster="", code="404") >= 1


async def test_a_member_serves_resource_metrics_as_metrics_server_does(fleet: Fleet) -> None:
    await _placed_workload(fleet)
    await eventually(lambda: _pods(fleet), what="the Deployment's 2 pods to run")
    code, groups = await fleet.request("GET", PROXY + "/apis")
    assert code == 200 and "metrics.k8s.io" in {g["name"] for g in groups["groups"]}
    code, listing = await fleet.request("GET", PROXY + "/apis/metrics.k8s.io/v1beta1/namespaces/default/pods"
                                        "?labelSelector=app%3Dinfer")
    assert code == 200 and listing["kind"] == "PodMetricsList", listing
    assert len(listing["items"]) == 2
    usage = listing["items"][0]["containers"][0]["usage"]
    assert usage["cpu"].endswith("n") and usage["memory"].endswith("Ki")
    assert 0 < int(usage["cpu"][:-1]) <= 2 * 10**9  # at most the 2 cores it requests
    code, nodes = await fleet.request("GET", PROXY + "/apis/metrics.k8s.io/v1beta1/nodes")
    assert code == 200 and len(nodes["items"]) == 1
    node_cpu = int(nodes["items"][0]["usage"]["cpu"][:-1])
    pods_cpu = sum(int(i["containers"][0]["usage"]["cpu"][:-1]) for i in listing["items"])
    assert node_cpu > pods_cpu  # the pods plus the node's own share
    code, missing = await fleet.request("GET", PROXY + "/apis/metrics.k8s.io/v1beta1/namespaces/default/pods/nope")
    assert code == 404 and missing["reason"] == "NotFound"
    code, refused = await fleet.request("DELETE", PROXY + "/apis/metrics.k8s.io/v1beta1/nodes")
    assert code == 405, refused
