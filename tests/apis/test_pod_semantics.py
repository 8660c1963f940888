"""The hub, the agent and the simulated member agree with kube, and so with each other, on a pod.

Each case is one pod (and, for the placement cases, one node); the expected answer is
what kube computes: ``PodRequests`` (sidecar init containers, the init peak, overhead) and
``ToleratesTaint`` / node affinity. Every path runs as in production:

* hub: the interpreter's :func:`requirements` of the pod template, and the estimator's
  :func:`node_eligible` over the node shape that the agent's report carries;
* agent: :func:`member_agent.capacity.pod_requests` over the pod as the agent caches it
  (:func:`trim_pod`), and the report's ``nodeShapes`` from :func:`summarize`;
* simulator: :func:`simulator.scheduling.reading.pod_request` and the member scheduler's
  :func:`static_reason` over :func:`node_state`.

The agent's Work status and its capacity report count the same pods unschedulable.

A pod's GPUs held through DRA claims (``gpu.nvidia.com``, ``mig.nvidia.com``) count the same on
every path: the hub reads the claim templates it holds into the pod template
(:func:`with_claimed_gpus`), the agent its member's claims (allocated: what they hold) and templates,
the simulated member its own (:class:`simulator.draclaims.DraClaims`), and the waste report gives
the pod as many devices as the agent's report says it holds.
"""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime
from typing import Any

import pytest

from controlplane.apis.dra import shared_claim_resources, with_claimed_gpus
from controlplane.apis.gpus import is_gpu_resource
from controlplane.apis.pods import unschedulable_condition
from controlplane.interpreter.requirements import requirements
from controlplane.reports.snapshot import sample_from_cluster_statuses
from controlplane.scheduler.core.estimator import node_eligible
from controlplane.scheduler.core.snapshot import NodeShape
from member_agent import capacity, draclaims
from member_agent.podstates import unschedulable_summary
from simulator.draclaims import DraClaims
from simulator.scheduling.filtering import static_reason
from simulator.scheduling.reading import node_state, pod_request
from simulator.scheduling.sharedclaims import SharedClaims
from tests.interpreter.test_requirements import container

GI = 2**30
MI = 2**20


def sidecar(requests: dict[str, str]) -> dict[str, Any]:
    return container(requests, restartPolicy="Always")


def make_pod(spec: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "namespace": "default"},
        "spec": {"containers": [container()], **spec},
        "status": {"phase": "Pending"},
    }


REQUEST_CASES: dict[str, tuple[dict[str, Any], dict[str, int]]] = {
    "containers summed, a limit stands in for a missing request": (
        {
            "containers": [
                container({"cpu": "500m", "memory": "1Gi"}, {"nvidia.com/gpu": "1"}),
                container({"cpu": "1"}),
            ]
        },
        {"cpu": 1500, "memory": GI, "nvidia.com/gpu": 1},
    ),
    "an init container larger than the app containers sets the request": (
        {
            "containers": [container({"cpu": "1"})],
            "initContainers": [container({"cpu": "4", "memory": "2Gi"})],
        },
        {"cpu": 4000, "memory": 2 * GI},
    ),
    "a sidecar init container adds to the app containers": (
        {
            "containers": [container({"cpu": "1"})],
            "initContainers": [sidecar({"cpu": "500m", "memory": "256Mi"})],
        },
        {"cpu": 1500, "memory": 256 * MI},
    ),
    "a one-shot init container after a sidecar runs beside it": (
        {
            "containers": [container({"cpu": "1"})],
            "initContainers": [sidecar({"cpu": "500m"}), container({"cpu": "2"})],
        },
        {"cpu": 2500},
    ),
    "a one-shot init container before a sidecar runs alone": (
        {
            "containers": [container({"cpu": "1"})],
            "initContainers": [container({"cpu": "2"}), sidecar({"cpu": "500m"})],
        },
        {"cpu": 2000},
    ),
    "a GPU sidecar holds its GPU for the pod's life": (
        {
            "containers": [container(limits={"nvidia.com/gpu": "1"})],
            "initContainers": [sidecar({"nvidia.com/gpu": "1"})],
        },
        {"nvidia.com/gpu": 2},
    ),
    "overhead is added on top": (
        {
            "containers": [container({"cpu": "1", "memory": "1Gi"}, {"nvidia.com/mig-1g.10gb": "1"})],
            "initContainers": [container({"cpu": "3"})],
            "overhead": {"cpu": "250m", "memory": "128Mi"},
        },
        {"cpu": 3250, "memory": GI + 128 * MI, "nvidia.com/mig-1g.10gb": 1},
    ),
    "a zero request takes nothing": (
        {"containers": [container({"cpu": "1", "nvidia.com/gpu": "0"})]},
        {"cpu": 1000},
    ),
}


@pytest.mark.parametrize(("spec", "expected"), REQUEST_CASES.values(), ids=REQUEST_CASES.keys())
def test_hub_agent_and_simulator_compute_kube_pod_requests(
    spec: dict[str, Any], expected: dict[str, int]
) -> None:
    pod = make_pod(spec)
    hub = requirements({"spec": pod["spec"]}).resource_map
    agent = capacity.pod_requests(capacity.trim_pod(pod))
    member = dict(pod_request(pod).requests)
    assert {"hub": hub, "agent": agent, "simulator": member} == {
        "hub": expected,
        "agent": expected,
        "simulator": expected,
    }


def make_node(
    *, labels: dict[str, str] | None = None, taints: list[dict[str, str]] | None = None
) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": "node-1", "labels": {"kubernetes.io/hostname": "node-1", **(labels or {})}},
        "spec": {"taints": taints or []},
        "status": {
            "capacity": {"cpu": "8", "memory": "32Gi", "nvidia.com/gpu": "1", "pods": "110"},
            "allocatable": {"cpu": "8", "memory": "32Gi", "nvidia.com/gpu": "1", "pods": "110"},
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    }


GPU_TAINT = {"key": "gpu", "value": "true", "effect": "NoSchedule"}
BARE_TAINT = {"key": "dedicated", "effect": "NoSchedule"}

TOLERATION_CASES: dict[str, tuple[dict[str, str] | None, list[dict[str, Any]], bool]] = {
    "Equal with the same key and value": (
        GPU_TAINT,
        [{"key": "gpu", "operator": "Equal", "value": "true"}],
        True,
    ),
    "Equal with another value": (GPU_TAINT, [{"key": "gpu", "operator": "Equal", "value": "false"}], False),
    "an empty operator means Equal": (GPU_TAINT, [{"key": "gpu", "value": "true"}], True),
    "Exists with the key": (GPU_TAINT, [{"key": "gpu", "operator": "Exists"}], True),
    "Exists with another key": (GPU_TAINT, [{"key": "spot", "operator": "Exists"}], False),
    "Exists with an empty key tolerates every taint": (GPU_TAINT, [{"operator": "Exists"}], True),
    "Equal with an empty key compares the value of any key": (
        GPU_TAINT,
        [{"operator": "Equal", "value": "true"}],
        True,
    ),
    "Equal with an empty key and another value": (GPU_TAINT, [{"operator": "Equal", "value": "no"}], False),
    "Equal with an empty key and no value tolerates a taint without value": (
        BARE_TAINT,
        [{"operator": "Equal"}],
        True,
    ),
    "an operator kube does not know tolerates nothing": (
        GPU_TAINT,
        [{"key": "gpu", "operator": "Matches", "value": "true"}],
        False,
    ),
    "another effect": (GPU_TAINT, [{"key": "gpu", "operator": "Exists", "effect": "NoExecute"}], False),
    "no toleration": (GPU_TAINT, [], False),
    "a NoExecute taint filters too": ({"key": "gpu", "value": "true", "effect": "NoExecute"}, [], False),
    "a PreferNoSchedule taint does not filter": ({"key": "gpu", "effect": "PreferNoSchedule"}, [], True),
}

SELECTOR_CASES: dict[str, tuple[dict[str, Any], bool]] = {
    "nodeSelector matches": ({"nodeSelector": {"tier": "onprem"}}, True),
    "nodeSelector with another value": ({"nodeSelector": {"tier": "cloud"}}, False),
    "nodeSelector on a missing label": ({"nodeSelector": {"zone": "a"}}, False),
    "In": ({"expr": [{"key": "tier", "operator": "In", "values": ["cloud", "onprem"]}]}, True),
    "NotIn on a missing label": ({"expr": [{"key": "zone", "operator": "NotIn", "values": ["a"]}]}, True),
    "Exists": ({"expr": [{"key": "tier", "operator": "Exists"}]}, True),
    "DoesNotExist": ({"expr": [{"key": "tier", "operator": "DoesNotExist"}]}, False),
    "Gt": ({"expr": [{"key": "gpu-memory", "operator": "Gt", "values": ["40000"]}]}, True),
    "Lt": ({"expr": [{"key": "gpu-memory", "operator": "Lt", "values": ["40000"]}]}, False),
    "Gt on a value that is not a number": (
        {"expr": [{"key": "tier", "operator": "Gt", "values": ["1"]}]},
        False,
    ),
    "expressions of one term are ANDed": (
        {"expr": [{"key": "tier", "operator": "Exists"}, {"key": "zone", "operator": "Exists"}]},
        False,
    ),
    "terms are ORed": (
        {
            "terms": [
                {"matchExpressions": [{"key": "zone", "operator": "Exists"}]},
                {"matchExpressions": [{"key": "tier", "operator": "In", "values": ["onprem"]}]},
            ]
        },
        True,
    ),
    "an empty term matches no node": ({"terms": [{}]}, False),
}


def placement_cases() -> list[Any]:
    cases = []
    for name, (taint, tolerations, fits) in TOLERATION_CASES.items():
        cases.append(pytest.param({"tolerations": tolerations}, [taint] if taint else [], fits, id=name))
    for name, (selector, fits) in SELECTOR_CASES.items():
        spec: dict[str, Any] = {}
        if "nodeSelector" in selector:
            spec["nodeSelector"] = selector["nodeSelector"]
        terms = selector.get("terms") or (
            [{"matchExpressions": selector["expr"]}] if "expr" in selector else None
        )
        if terms is not None:
            spec["affinity"] = {
                "nodeAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms}
                }
            }
        cases.append(pytest.param(spec, [], fits, id=name))
    return cases


@pytest.mark.parametrize(("spec", "taints", "fits"), placement_cases())
def test_hub_and_simulator_filter_a_node_as_kube_does(
    spec: dict[str, Any], taints: list[dict[str, str]], fits: bool
) -> None:
    node = make_node(labels={"tier": "onprem", "gpu-memory": "81920"}, taints=taints)
    pod = make_pod(spec)
    report = capacity.summarize([capacity.trim_node(node)], [], now="2026-01-01T00:00:00Z")
    (shape,) = report["nodeShapes"]
    hub = node_eligible(NodeShape.from_dict(shape), requirements({"spec": pod["spec"]}))
    reason = static_reason(pod_request(pod), node_state(node))
    assert {"hub": hub, "simulator": reason is None} == {"hub": fits, "simulator": fits}, reason


UNSCHEDULABLE = {"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                 "message": "0/2 nodes are available: 2 Insufficient nvidia.com/gpu."}
PLACED = {"type": "PodScheduled", "status": "True"}

UNSCHEDULABLE_CASES = [
    # (id, spec.nodeName, phase, conditions, unschedulable)
    ("the scheduler could not place it", None, "Pending", [UNSCHEDULABLE], True),
    ("not tried yet", None, "Pending", [], False),
    ("bound", "n1", "Running", [PLACED], False),
    ("failed before it was placed", None, "Failed", [UNSCHEDULABLE], False),
    ("succeeded", None, "Succeeded", [UNSCHEDULABLE], False),
]


@pytest.mark.parametrize(
    ("node", "phase", "conditions", "expected"), [c[1:] for c in UNSCHEDULABLE_CASES],
    ids=[c[0] for c in UNSCHEDULABLE_CASES],
)
def test_the_agents_work_status_and_its_report_count_the_same_unschedulable_pods(
    node: str | None, phase: str, conditions: list[dict[str, str]], expected: bool
) -> None:
    """The hub compares the two (a report listing a workload's unschedulable pods confirms the
    Work status naming them), so both read :func:`unschedulable_condition`."""
    pod: dict[str, Any] = {
        "metadata": {"name": "train-5d8f-a", "namespace": "ml", "labels": {"pod-template-hash": "5d8f"},
                     "ownerReferences": [{"kind": "ReplicaSet", "name": "train-5d8f", "controller": True}]},
        "spec": {"containers": [container({"nvidia.com/gpu": "1"})], **({"nodeName": node} if node else {})},
        "status": {"phase": phase, "conditions": conditions},
    }
    deployment = {"kind": "Deployment", "metadata": {"name": "train", "namespace": "ml"}}
    assert (unschedulable_condition(pod) is not None) is expected
    cached = capacity.trim_pod(pod)
    summary = unschedulable_summary(deployment, [cached])
    listed = capacity.summarize([], [cached], now="2026-01-01T00:00:00Z").get("unschedulableWorkloads")
    if expected:
        assert summary == {"pods": 1, "message": UNSCHEDULABLE["message"]}
        assert listed == [{"namespace": "ml", "kind": "Deployment", "name": "train", "pods": 1}]
    else:
        assert summary is None and listed is None


# ---------------------------------------------------------------------------------------------
# GPUs held through Dynamic Resource Allocation claims
# ---------------------------------------------------------------------------------------------

PROFILE_1G = "device.attributes['gpu.nvidia.com'].profile == '1g.10gb'"


def claim_spec(device_class: str = "gpu.nvidia.com", count: int = 1, selector: str | None = None) -> dict[str, Any]:
    exactly: dict[str, Any] = {"deviceClassName": device_class, "count": count}
    if selector:
        exactly["selectors"] = [{"cel": {"expression": selector}}]
    return {"devices": {"requests": [{"name": "gpus", "exactly": exactly}]}}


def claim_template(name: str, spec: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
            "metadata": {"name": name, "namespace": "default"}, "spec": {"spec": spec}}


def resource_claim(name: str, spec: dict[str, Any], allocated: tuple[str, ...] = ()) -> dict[str, Any]:
    claim: dict[str, Any] = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
                             "metadata": {"name": name, "namespace": "default"}, "spec": spec}
    if allocated:
        claim["status"] = {"allocation": {"devices": {"results": [
            {"request": "gpus", "driver": "gpu.nvidia.com", "pool": "node-1", "device": device} for device in allocated
        ]}}}
    return claim


def from_template(template: str) -> dict[str, Any]:
    return {"name": "gpus", "resourceClaimTemplateName": template}


#: Per case: the pod's spec, its status's ``resourceClaimStatuses``, the member's claims and claim
#: templates, and what every path counts.
DRA_CASES: dict[str, tuple[dict[str, Any], list[dict[str, Any]], list[dict[str, Any]], dict[str, int]]] = {
    "a template's claim not made yet counts what the template asks": (
        {"containers": [container({"cpu": "1"})], "resourceClaims": [from_template("two")]},
        [],
        [claim_template("two", claim_spec(count=2))],
        {"cpu": 1000, "nvidia.com/gpu": 2},
    ),
    "an allocated claim counts the GPUs it holds": (
        {"containers": [container({"cpu": "1"})], "resourceClaims": [from_template("two")]},
        [{"name": "gpus", "resourceClaimName": "p-gpus-x7k2q"}],
        [claim_template("two", claim_spec(count=2)),
         resource_claim("p-gpus-x7k2q", claim_spec(count=2), allocated=("gpu-0", "gpu-1"))],
        {"cpu": 1000, "nvidia.com/gpu": 2},
    ),
    "a shared claim not allocated yet counts its request": (
        {"containers": [container({"cpu": "1"})], "resourceClaims": [{"name": "gpus", "resourceClaimName": "shared"}]},
        [],
        [resource_claim("shared", claim_spec())],
        {"cpu": 1000, "nvidia.com/gpu": 1},
    ),
    "an allocated shared claim counts the GPUs it holds": (
        {"containers": [container({"cpu": "1"})], "resourceClaims": [{"name": "gpus", "resourceClaimName": "shared"}]},
        [],
        [resource_claim("shared", claim_spec(count=2), allocated=("gpu-2", "gpu-3"))],
        {"cpu": 1000, "nvidia.com/gpu": 2},
    ),
    "a MIG claim counts as its profile's slice": (
        {"containers": [container({"cpu": "1"})], "resourceClaims": [from_template("slice")]},
        [{"name": "gpus", "resourceClaimName": "p-gpus-m4p9z"}],
        [claim_template("slice", claim_spec("mig.nvidia.com", 1, PROFILE_1G)),
         resource_claim("p-gpus-m4p9z", claim_spec("mig.nvidia.com", 1, PROFILE_1G), allocated=("gpu-1-mig-1g10gb-19-0",))],
        {"cpu": 1000, "nvidia.com/mig-1g.10gb": 1},
    ),
    "a claimed GPU adds to a device-plugin one": (
        {"containers": [container({"cpu": "1"}, {"nvidia.com/gpu": "1"})], "resourceClaims": [from_template("one")]},
        [],
        [claim_template("one", claim_spec())],
        {"cpu": 1000, "nvidia.com/gpu": 2},
    ),
}


class _Cache:
    """A member's cache of one kind, as the simulated member's informers answer."""

    def __init__(self, objects: list[dict[str, Any]]) -> None:
        self.objects = {(o["metadata"]["namespace"], o["metadata"]["name"]): o for o in objects}

    def get(self, namespace: str, name: str) -> dict[str, Any] | None:
        return self.objects.get((namespace, name))


def _waste_report_holdings(pod: dict[str, Any], objects: list[dict[str, Any]]) -> dict[str, int]:
    """The GPU devices the waste report finds the pod holding (by resource), from the agent's report
    of a node whose DCGM series name no pod (the report then gives the pods devices by their requests)."""
    return _waste_report_by_pod([pod], objects)[0].get("p", {})


def _agent_report(pods: list[dict[str, Any]], objects: list[dict[str, Any]]) -> dict[str, Any]:
    """The agent's Cluster status for node-1 (4 GPUs, 7 ``1g.10gb`` slices) running ``pods``."""
    node = make_node()
    node["metadata"]["labels"]["nvidia.com/gpu.product"] = "NVIDIA-H100-80GB-HBM3"
    node["status"]["allocatable"].update({"nvidia.com/gpu": "4", "nvidia.com/mig-1g.10gb": "7"})
    util = {"node-1": [{"gpu": gpu, "uuid": f"GPU-{gpu}", "utilization": 0.5} for gpu in range(4)] + [
        {"gpu": 4, "uuid": "GPU-4", "profile": "1g.10gb", "instance": i, "utilization": 0.5} for i in range(7)
    ]}
    bound = [{**pod, "spec": {**pod["spec"], "nodeName": "node-1"}, "status": {**pod["status"], "phase": "Running"}}
             for pod in pods]
    return capacity.summarize(
        [node], [capacity.trim_pod(pod) for pod in bound], now="2024-05-01T00:00:00Z", utilization=util,
        utilization_time="2024-05-01T00:00:00Z", dra_claims=_agent_lookup(objects),
    )


def _waste_report_by_pod(
    pods: list[dict[str, Any]], objects: list[dict[str, Any]]
) -> tuple[dict[str, dict[str, int]], dict[str, Any]]:
    """The GPU devices (by resource) the waste report finds each pod holding, and the agent's report it read."""
    status = _agent_report(pods, objects)
    cluster = {"apiVersion": "cluster.gpufed.io/v1alpha1", "kind": "Cluster", "metadata": {"name": "dc1"},
               "spec": {"provider": "onprem", "pricing": {}}, "status": status}
    fleet = sample_from_cluster_statuses([cluster], [], [], now=datetime(2024, 5, 1, tzinfo=UTC))
    held: dict[str, dict[str, int]] = {}
    for device in fleet.clusters[0].nodes[0].devices:
        if device.allocated_to is not None and device.resource:
            by_resource = held.setdefault(device.allocated_to.pod, {})
            by_resource[device.resource] = by_resource.get(device.resource, 0) + 1
    return held, status


def _agent_lookup(objects: list[dict[str, Any]]) -> Any:
    """The agent's lookup over its caches of the member's claims and templates, trimmed as it keeps them."""
    trimmed = {
        (o["kind"], o["metadata"]["namespace"], o["metadata"]["name"]):
            (draclaims.trim_claim if o["kind"] == "ResourceClaim" else draclaims.trim_template)(o)
        for o in objects
    }
    return lambda kind, namespace, name: trimmed.get((kind, namespace, name))


@pytest.mark.parametrize(("spec", "claim_statuses", "objects", "expected"), DRA_CASES.values(), ids=DRA_CASES.keys())
def test_hub_agent_simulator_and_waste_report_count_dra_gpus_alike(
    spec: dict[str, Any], claim_statuses: list[dict[str, Any]], objects: list[dict[str, Any]], expected: dict[str, int]
) -> None:
    pod = make_pod(spec)
    if claim_statuses:
        pod["status"]["resourceClaimStatuses"] = claim_statuses
    by_kind = {kind: [o for o in objects if o["kind"] == kind] for kind in ("ResourceClaim", "ResourceClaimTemplate")}
    # The hub reads the claim templates and claims it holds (their specs) into the pod template.
    specs = {(o["kind"], o["metadata"]["name"]): o["spec"]["spec"] if o["kind"] == "ResourceClaimTemplate" else o["spec"]
             for o in objects}
    def lookup(kind: str, name: str) -> Any:
        return specs.get((kind, name))

    # Its own claims per replica, the claims it names directly once for the cluster: the first replica brings both.
    hub = dataclasses.replace(requirements(with_claimed_gpus({"spec": pod["spec"]}, lookup, shared=False)),
                              shared=tuple(shared_claim_resources({"spec": pod["spec"]}, lookup).items())).first_replica
    agent = capacity.pod_requests(capacity.trim_pod(pod), _agent_lookup(objects))
    member_claims = DraClaims.__new__(DraClaims)
    member_claims.informers = {kind: _Cache(items) for kind, items in by_kind.items()}  # type: ignore[misc]
    request = member_claims.request(pod)
    assert request is not None
    simulated = dict(SharedClaims().pending(request).requests)  # what it asks of a node, its claims not held yet
    gpus = {name: amount for name, amount in expected.items() if is_gpu_resource(name)}
    assert {"hub": hub, "agent": agent, "simulator": simulated, "waste report": _waste_report_holdings(pod, objects)} == {
        "hub": expected, "agent": expected, "simulator": expected, "waste report": gpus,
    }


def test_an_allocated_claim_counts_what_it_holds_where_the_hub_can_only_estimate() -> None:
    """``allocationMode: All`` on a 4-GPU node: the hub places by its estimate of 8, the agent and the
    waste report count the 4 the member allocated (not the template's request)."""
    every_gpu = {"devices": {"requests": [{"name": "gpus", "exactly": {"deviceClassName": "gpu.nvidia.com",
                                                                       "allocationMode": "All"}}]}}
    pod = make_pod({"containers": [container({"cpu": "1"})], "resourceClaims": [from_template("all")]})
    pod["status"]["resourceClaimStatuses"] = [{"name": "gpus", "resourceClaimName": "p-gpus-q8w2e"}]
    objects = [claim_template("all", every_gpu),
               resource_claim("p-gpus-q8w2e", every_gpu, allocated=("gpu-0", "gpu-1", "gpu-2", "gpu-3"))]
    hub = requirements(with_claimed_gpus({"spec": pod["spec"]}, lambda kind, name: every_gpu)).resource_map
    agent = capacity.pod_requests(capacity.trim_pod(pod), _agent_lookup(objects))
    assert (hub["nvidia.com/gpu"], agent["nvidia.com/gpu"], _waste_report_holdings(pod, objects)) == (
        8, 4, {"nvidia.com/gpu": 4})


def test_a_claim_shared_by_pods_holds_its_devices_once() -> None:
    """Three pods name one allocated claim of 2 GPUs (``resourceClaimName``): the member's node has
    2 GPUs taken, not 6, and the waste report gives both to one pod (the first by name), so a
    workload's GPU-hours count them once; a pod's own template claim still counts on that pod."""
    shared = [{"name": "gpus", "resourceClaimName": "shared"}]
    pods = [make_pod({"containers": [container({"cpu": "1"})], "resourceClaims": shared}) for _ in range(3)]
    for pod, name in zip(pods, ("train-c", "train-a", "train-b"), strict=True):
        pod["metadata"]["name"] = name
    pods[2]["spec"]["resourceClaims"] = [*shared, {"name": "own", "resourceClaimTemplateName": "one"}]
    objects = [resource_claim("shared", claim_spec(count=2), allocated=("gpu-0", "gpu-1")),
               claim_template("one", claim_spec())]
    held, status = _waste_report_by_pod(pods, objects)
    assert held == {"train-a": {"nvidia.com/gpu": 2}, "train-b": {"nvidia.com/gpu": 1}}
    assert status["resourceSummary"]["allocated"]["nvidia.com/gpu"] == 3
