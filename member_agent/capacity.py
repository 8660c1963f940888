"""What a member cluster can still run: the pure computation behind the Cluster status report.

In: the member's Node and Pod objects (plain dicts as the Kubernetes API returns them, or the
trimmed form :func:`trim_node` / :func:`trim_pod` keep in the agent's caches), optionally the
DCGM utilization already grouped per node (:func:`member_agent.dcgm.utilization_by_node`), and
the report time. Out: the ``Cluster.status`` dict of the Cluster API (controlplane/apis/cluster_v1alpha1.py) (conditions,
nodeSummary, gpuSummary, resourceSummary, nodeShapes, utilization). No I/O happens here. What one
Node says (readiness, quantities, GPU labels, taints) is read by :mod:`member_agent.nodes`; the
nodes' part of the report is summed by :mod:`member_agent.nodetotals`, which a reporter keeps
over node changes so that a report costs the nodes holding pods, not every node.

Accounting rules, exactly:

* Quantities are integers in gpufed's base units (cpu millicores, memory bytes, everything
  else a count); see :mod:`controlplane.apis.quantity`.
* Tracked resources are ``cpu``, ``memory`` and every ``nvidia.com/*`` resource a node
  advertises (whole GPUs, ``nvidia.com/mig-<profile>`` slices, ``nvidia.com/gpu.shared``).
* A node's allocatable comes from ``status.allocatable`` (``status.capacity`` when absent).
* A pod's request follows kube's ``PodRequests`` (:func:`controlplane.apis.pods.pod_requests`:
  containers and sidecar init containers summed, the init containers' peak, ``spec.overhead``;
  a missing request takes its limit), plus the NVIDIA GPUs and MIG devices its DRA claims hold,
  as ``nvidia.com/gpu`` and ``nvidia.com/mig-<profile>`` (:func:`controlplane.apis.pods.pod_held`,
  over the member's claims the agent caches: :mod:`member_agent.draclaims`); a claim several running
  pods name directly counts once, on the first of them by name
  (:func:`controlplane.apis.dra.shared_claim_holders`). Pods count against a node when bound
  there (``spec.nodeName``) and not terminal (phase Succeeded or Failed).
* free = allocatable - allocated, never below zero.
* Time-sliced / MPS shares: a node labelled ``nvidia.com/gpu.replicas`` = N > 1 (or any node
  advertising ``nvidia.com/gpu.shared``) advertises N shares per physical GPU. The
  ``gpuSummary`` entry of a shared resource counts *shares* (what pods request), carries
  ``sharedReplicas: N`` and ``gpuEquivalent`` = {capacity, allocatable, allocated} divided by N
  (so one share is accounted as 1/N GPU, rounded to 3 decimals). Shared and unshared capacity of
  one product are separate entries, so shares are never added to whole GPUs.
* A product label ending in ``-MIG-INVALID`` (a mixed MIG layout under the single strategy)
  makes the node's GPUs unusable: its GPU resources are reported with allocatable 0, its
  gpuSummary entry has ``unusable: true``, and the Ready condition's message names the nodes.
* Nodes that are not Ready or are cordoned (``spec.unschedulable``) are counted in
  ``nodeSummary`` (and in gpuSummary capacity) but are not in ``nodeShapes``, and contribute
  nothing to allocatable in ``gpuSummary``/``resourceSummary``.
* ``nodeShapes`` groups nodes with identical (selection-relevant labels, taints, free,
  allocatable, gpu). To keep a large cluster's report small, a shape's free cpu is rounded
  down to whole cores and free memory down to whole GiB (rounding down never promises
  capacity that is not there). Selection-relevant labels are all labels except per-node
  identities (:data:`member_agent.nodes.PER_NODE_LABELS`, and any label whose value is the
  node's own name). A shape whose nodes' GPU resources are partly held by pods (some allocated,
  some free) lists their names in ``hostnames`` (name order, at most
  :data:`~controlplane.apis.cluster_v1alpha1.MAX_SHAPE_HOSTNAMES`): the nodes the hub's packing
  hints prefer.
* Spot nodes (a label clouds put on them, :mod:`controlplane.apis.spot`) make their shape
  ``spot: true`` and are counted in ``nodeSummary.spot``.
* ``utilization`` carries, for every node with DCGM devices, each device's holder and
  utilization plus what the hub's waste accounting needs to judge the node on its own
  (``product``, ``ready``, ``schedulable``, ``sharedReplicas``, and ``labels``: node pool, zone,
  instance type... see :func:`member_agent.nodes.utilization_labels`), with the node's GPU pods
  (their GPU requests and owning workload), aggregated per workload, node class and waste
  state (:mod:`controlplane.reports.aggregated`, built by
  :func:`controlplane.reports.agentreport.utilization_report`), so its size follows the
  member's workloads, not its node or pod count.
* ``unschedulableWorkloads`` lists, per owning workload (:func:`owner_workload`), the pods the
  member's scheduler could not place for want of room (:func:`member_agent.podstates.unschedulable_for_room`:
  not those waiting for storage the member lacks, which the Work status reports), at most
  :data:`MAX_UNSCHEDULABLE_WORKLOADS` of them (most pods first): a report that lists a
  workload's pods was taken after they became unschedulable, so the hub may move them on what
  it says is free.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import orjson

from controlplane.apis import constants as c
from controlplane.apis import pods
from controlplane.apis.cluster_v1alpha1 import ClusterConditionType, ClusterReadyReason
from controlplane.apis.constants import (
    LABEL_POD_TEMPLATE_HASH,
    LABEL_TRAINING_JOB_NAME,
    LABEL_TRAINING_OPERATOR_NAME,
)
from controlplane.apis.dra import ObjectKey, ObjectLookup, shared_claim_holders
from controlplane.apis.gpus import MIG_INVALID_SUFFIX, is_nvidia_resource
from controlplane.apis.kubeflow import TRAINING_KINDS
from controlplane.apis.pods import TERMINAL_PHASES
from controlplane.apis.utilization import NodeUtilization, PodAllocation
from controlplane.reports.agentreport import utilization_report
from member_agent.nodes import (
    PER_NODE_LABELS,
    shared_replicas,
    tracked_quantities,
    utilization_labels,
)
from member_agent.nodetotals import NodeTotals, add_amounts, shape_key
from member_agent.podstates import ClaimTrouble, no_claim_trouble, unschedulable_for_room


def pod_requests(
    pod: Mapping[str, Any], dra_claims: ObjectLookup | None = None, holders: Mapping[ObjectKey, str] | None = None
) -> dict[str, int]:
    """What a pod takes from its node (kube's ``PodRequests``, and the GPUs its DRA claims in
    ``dra_claims`` hold; a claim shared by pods counts on the one ``holders`` names), tracked
    resources only."""
    return pods.pod_held(pod, dra_claims, read=tracked_quantities, holders=holders)


class PodRequests:
    """The requests of the pods one report read, kept for the next report by object identity.

    An informer replaces a pod's object when the pod changes and never edits it in place, so
    the same object asks for the same resources; each report then parses only the pods that
    changed since the last (at 5,000 busy nodes, tens of thousands of quantity parses fewer).
    Only the pods of the last report are kept (with a reference, so an identity is not reused).
    Owned by one reporter, which sums one report at a time."""

    def __init__(self) -> None:
        self._last: dict[int, tuple[Mapping[str, Any], dict[str, int]]] = {}
        self._this: dict[int, tuple[Mapping[str, Any], dict[str, int]]] = {}

    def of(
        self, pod: Mapping[str, Any], dra_claims: ObjectLookup | None = None,
        holders: Mapping[ObjectKey, str] | None = None,
    ) -> dict[str, int]:
        """``pod``'s requests (:func:`pod_requests`); do not change the dict returned. A pod with DRA
        claims is read afresh: its claims change (are allocated) while the pod does not."""
        if (pod.get("spec") or {}).get("resourceClaims"):
            return pod_requests(pod, dra_claims, holders)
        found = self._last.get(id(pod))
        requests = found[1] if found is not None and found[0] is pod else pod_requests(pod)
        self._this[id(pod)] = (pod, requests)
        return requests

    def report_done(self) -> None:
        """The pods read since the last call are the ones the next report looks up."""
        self._last, self._this = self._this, {}


def pod_is_active(pod: Mapping[str, Any]) -> bool:
    phase = (pod.get("status") or {}).get("phase")
    return bool((pod.get("spec") or {}).get("nodeName")) and phase not in TERMINAL_PHASES


#: ``training.kubeflow.org/operator-name`` (on a job's pods, whatever launcher Job or ReplicaSet
#: sits in between) -> the kind of the job (kubeflow training-operator v1
#: and mpi-operator v2 names).
TRAINING_OPERATOR_KINDS: Mapping[str, str] = {
    **{training.operator: kind for kind, training in TRAINING_KINDS.items()},
    "mpi-operator": "MPIJob",
}
#: KubeRay's labels on every pod of a RayCluster, naming the custom resource it came from
#: (a RayJob's or RayService's cluster has its own generated name).
LABEL_RAY_ORIGIN_KIND = "ray.io/originated-from-crd"
LABEL_RAY_ORIGIN_NAME = "ray.io/originated-from-cr-name"
#: Pod labels :func:`trim_pod` keeps: the ones :func:`owner_workload` reads.
OWNER_LABELS = frozenset(
    {
        LABEL_POD_TEMPLATE_HASH,
        LABEL_TRAINING_JOB_NAME,
        LABEL_TRAINING_OPERATOR_NAME,
        LABEL_RAY_ORIGIN_KIND,
        LABEL_RAY_ORIGIN_NAME,
    }
)


MAX_UNSCHEDULABLE_WORKLOADS = 500
"""The most workloads a report lists in ``unschedulableWorkloads`` (some 50 KiB)."""


def unschedulable_workloads(pods: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """``unschedulableWorkloads`` of the report: unschedulable pods counted per owning workload
    (a bare pod under its own name), most pods first, at most :data:`MAX_UNSCHEDULABLE_WORKLOADS`."""
    counts: Counter[tuple[str, str, str]] = Counter()
    for pod in pods:
        metadata = pod.get("metadata") or {}
        owner = owner_workload(pod) or {"kind": "Pod", "name": str(metadata.get("name") or "")}
        counts[(str(metadata.get("namespace") or ""), owner["kind"], owner["name"])] += 1
    ranked = sorted(counts.items(), key=lambda item: (-item[1], item[0]))[:MAX_UNSCHEDULABLE_WORKLOADS]
    return [{"namespace": ns, "kind": kind, "name": name, "pods": n} for (ns, kind, name), n in ranked]


def owner_workload(pod: Mapping[str, Any]) -> dict[str, str] | None:
    """The workload that owns a pod, as the hub knows it (``{kind, name}``), or None for a bare pod.

    * a training job's pods (``training.kubeflow.org/job-name`` with a known operator name): the
      PyTorchJob / MPIJob ..., whatever sits in between (an MPIJob's launcher Job);
    * KubeRay pods (``ray.io/originated-from-crd``/``-cr-name``): the RayJob, RayService or
      RayCluster they came from, not the generated RayCluster of a RayJob;
    * a ReplicaSet named ``<deploy>-<pod-template-hash>``: its Deployment;
    * otherwise the controller owner (a Job, StatefulSet, PyTorchJob ...).
    """
    metadata = pod.get("metadata") or {}
    labels = metadata.get("labels") or {}
    training_kind = TRAINING_OPERATOR_KINDS.get(str(labels.get(LABEL_TRAINING_OPERATOR_NAME) or ""))
    if training_kind and labels.get(LABEL_TRAINING_JOB_NAME):
        return {"kind": training_kind, "name": str(labels[LABEL_TRAINING_JOB_NAME])}
    if labels.get(LABEL_RAY_ORIGIN_KIND) and labels.get(LABEL_RAY_ORIGIN_NAME):
        return {"kind": str(labels[LABEL_RAY_ORIGIN_KIND]), "name": str(labels[LABEL_RAY_ORIGIN_NAME])}
    for ref in metadata.get("ownerReferences") or []:
        if not ref.get("controller", True):
            continue
        kind, name = str(ref.get("kind", "")), str(ref.get("name", ""))
        template_hash = labels.get(LABEL_POD_TEMPLATE_HASH)
        if kind == "ReplicaSet" and template_hash and name.endswith(f"-{template_hash}"):
            return {"kind": "Deployment", "name": name.removesuffix(f"-{template_hash}")}
        return {"kind": kind, "name": name}
    return None


def _condition(
    status: str, reason: str, message: str, *, now: str, previous: Sequence[Mapping[str, Any]]
) -> dict[str, Any]:
    transition = now
    for old in previous:
        if old.get("type") == ClusterConditionType.READY and old.get("status") == status:
            transition = str(old.get("lastTransitionTime") or now)
    return {
        "type": str(ClusterConditionType.READY),
        "status": status,
        "reason": str(reason),
        "message": message,
        "lastTransitionTime": transition,
    }


def _allocations(node_pods: Iterable[tuple[Mapping[str, Any], dict[str, int]]]) -> list[PodAllocation]:
    """The node's pods that request GPUs, with their GPU requests, owning workload and labels."""
    out = []
    for pod, requests in node_pods:
        gpu_requests = {
            name: amount for name, amount in sorted(requests.items()) if is_nvidia_resource(name) and amount
        }
        if not gpu_requests:
            continue
        metadata = pod.get("metadata") or {}
        owner = owner_workload(pod) or {}
        out.append(
            PodAllocation(
                namespace=str(metadata.get("namespace") or ""),
                name=str(metadata.get("name") or ""),
                resources=gpu_requests,
                owner_kind=owner.get("kind"),
                owner_name=owner.get("name"),
                labels=dict(metadata.get("labels") or {}),
            )
        )
    return out


def _with_finished_holders(
    allocations: list[PodAllocation],
    devices: Sequence[Mapping[str, Any]],
    finished: Mapping[tuple[str, str], Mapping[str, Any]],
) -> list[PodAllocation]:
    """``allocations`` plus the finished pods the node's DCGM series still name, with their
    owners (so their GPU time is the workload's, not a nameless pod's)."""
    listed = {(a.namespace, a.name) for a in allocations}
    out = list(allocations)
    for device in devices:
        key = (str(device.get("namespace") or ""), str(device.get("pod") or ""))
        pod = finished.get(key)
        if pod is None or key in listed:
            continue
        listed.add(key)
        owner = owner_workload(pod) or {}
        out.append(
            PodAllocation(namespace=key[0], name=key[1], owner_kind=owner.get("kind"), owner_name=owner.get("name"),
                          labels=dict((pod.get("metadata") or {}).get("labels") or {}))
        )
    return out


def summarize(
    nodes: NodeTotals | Iterable[Mapping[str, Any]],
    pods: Iterable[Mapping[str, Any]],
    *,
    now: str,
    utilization: Mapping[str, Sequence[Mapping[str, Any]]] | None = None,
    utilization_time: str | None = None,
    kubernetes_version: str | None = None,
    previous_conditions: Sequence[Mapping[str, Any]] = (),
    api_problem: tuple[ClusterReadyReason, str] | None = None,
    requests_of: PodRequests | None = None,
    claims: ClaimTrouble = no_claim_trouble,
    node_scoring: str | None = None,
    dra_claims: ObjectLookup | None = None,
) -> dict[str, Any]:
    """The Cluster.status report for ``nodes`` and ``pods`` at ``now`` (RFC 3339).

    ``utilization`` maps node name to that node's device samples (see
    :func:`member_agent.dcgm.utilization_by_node`); ``previous_conditions`` keeps the Ready
    condition's lastTransitionTime when its status has not changed. ``api_problem`` (reason,
    message), when the member's API is down (:mod:`member_agent.probing`), makes Ready False
    whatever the cached nodes say. ``requests_of``, a reporter's own :class:`PodRequests`,
    spares parsing again the requests of pods the last report read. ``claims``: why claims are
    unbound, as the Works' status passes last read them (their pods wait for storage, not room).
    ``node_scoring``: how the member's scheduler ranks nodes, as the agent was told
    (``status.nodeScoring``; None: not reported). ``dra_claims``: the member's ResourceClaims and
    ResourceClaimTemplates, for the GPUs pods hold through them (None: not known, they count nothing).

    ``nodes`` is a reporter's :class:`~member_agent.nodetotals.NodeTotals`, kept over node
    changes (the report then costs the nodes that hold pods, not every node), or the nodes
    themselves (unique names), counted for this report alone.
    """
    totals = nodes if isinstance(nodes, NodeTotals) else NodeTotals.of(nodes)
    allocated_by_node: dict[str, dict[str, int]] = {}
    pods_by_node: dict[str, list[tuple[Mapping[str, Any], dict[str, int]]]] = {}
    # Finished pods still named by DCGM series (the exporter lags): their owners are still known.
    finished: dict[tuple[str, str], Mapping[str, Any]] = {}
    unschedulable: list[Mapping[str, Any]] = []
    pods = list(pods)
    # A claim shared by running pods holds its devices once: one of them counts them.
    holders = None if dra_claims is None else shared_claim_holders(
        pod for pod in pods
        if (pod.get("spec") or {}).get("resourceClaims") and pod_is_active(pod) and pod["spec"]["nodeName"] in totals
    )
    for pod in pods:
        if not pod_is_active(pod):
            if unschedulable_for_room(pod, claims) is not None:
                unschedulable.append(pod)
            metadata = pod.get("metadata") or {}
            finished[(str(metadata.get("namespace") or ""), str(metadata.get("name") or ""))] = pod
            continue
        node_name = str(pod["spec"]["nodeName"])
        if node_name not in totals:
            continue
        requests = (
            requests_of.of(pod, dra_claims, holders) if requests_of is not None
            else pod_requests(pod, dra_claims, holders)
        )
        add_amounts(allocated_by_node.setdefault(node_name, {}), requests)
        pods_by_node.setdefault(node_name, []).append((pod, requests))
    if requests_of is not None:
        requests_of.report_done()
    counts = totals.summary(allocated_by_node)

    util_nodes = []
    for name, devices in sorted((utilization or {}).items()):
        kind = totals.get(name)
        if kind is None or not devices:
            continue
        util_nodes.append(
            NodeUtilization(
                name=name,
                product=kind.product,
                ready=kind.ready,
                schedulable=kind.schedulable,
                shared_replicas=shared_replicas(kind.labels or {}, c.RESOURCE_GPU),
                labels=utilization_labels(kind.view(name)),
                devices=devices,
                pods=_with_finished_holders(_allocations(pods_by_node.get(name, ())), devices, finished),
            )
        )

    invalid_nodes = counts.invalid
    messages = [f"{counts.ready}/{counts.total} nodes ready"]
    if invalid_nodes:
        shown = ", ".join(invalid_nodes[:5]) + (
            f" and {len(invalid_nodes) - 5} more" if len(invalid_nodes) > 5 else ""
        )
        messages.append(
            f"{len(invalid_nodes)} node(s) have an invalid MIG configuration (product label ends in"
            f" {MIG_INVALID_SUFFIX}); their GPUs are unusable: {shown}"
        )
    if api_problem is not None:
        reason, problem = api_problem
        ready_condition = _condition(
            "False", reason, f"{problem}: {'; '.join(messages)}", now=now, previous=previous_conditions
        )
    elif counts.ready == 0:
        ready_condition = _condition(
            "False", ClusterReadyReason.NO_READY_NODES, "; ".join(messages), now=now, previous=previous_conditions
        )
    elif invalid_nodes:
        ready_condition = _condition(
            "True", ClusterReadyReason.INVALID_GPU_CONFIG, "; ".join(messages), now=now, previous=previous_conditions
        )
    else:
        ready_condition = _condition(
            "True", ClusterReadyReason.MEMBER_HEALTHY, "; ".join(messages), now=now, previous=previous_conditions
        )

    status: dict[str, Any] = {
        "conditions": [ready_condition],
        "kubernetesVersion": kubernetes_version,
        "lastReportTime": now,
        "nodeSummary": {"total": counts.total, "ready": counts.ready, **({"spot": counts.spot} if counts.spot else {})},
        "gpuSummary": counts.gpu_summary,
        "resourceSummary": {"allocatable": counts.allocatable, "allocated": counts.allocated},
        "nodeShapes": counts.node_shapes,
        "utilization": utilization_report(util_nodes, sample_time=utilization_time),
    }
    if node_scoring is not None:
        status["nodeScoring"] = node_scoring
    if unschedulable:
        status["unschedulableWorkloads"] = unschedulable_workloads(unschedulable)
    return status


def node_shape_key(node: Mapping[str, Any], pods: Iterable[Mapping[str, Any]]) -> str | None:
    """The one ``nodeShapes`` entry of ``summarize([node], pods)``, but for its count, encoded
    as :func:`~member_agent.nodetotals.shape_key` encodes it (JSON, sorted keys, no spaces);
    None when the node has no shape (not Ready, or cordoned). For a caller that sums one node
    at a time (the what-if member): only the node's shape and its pods' requests are read, none
    of the report's other parts nor the totals kept for large members."""
    name = str((node.get("metadata") or {}).get("name"))
    allocated: dict[str, int] = {}
    for pod in pods:
        if pod_is_active(pod) and str(pod["spec"]["nodeName"]) == name:
            add_amounts(allocated, pod_requests(pod))
    return shape_key(name, node, allocated)


def trim_node(node: Mapping[str, Any]) -> dict[str, Any]:
    """The parts of a Node the report needs, so a large cluster's cache stays small."""
    metadata = node.get("metadata") or {}
    spec = node.get("spec") or {}
    status = node.get("status") or {}
    return {
        "metadata": {
            "name": metadata.get("name"),
            "labels": metadata.get("labels") or {},
            "resourceVersion": metadata.get("resourceVersion"),
        },
        "spec": {"taints": spec.get("taints") or [], "unschedulable": bool(spec.get("unschedulable", False))},
        "status": {
            "capacity": status.get("capacity") or {},
            "allocatable": status.get("allocatable") or {},
            "conditions": [
                {"type": cond.get("type"), "status": cond.get("status")}
                for cond in status.get("conditions") or []
                if cond.get("type") == "Ready"
            ],
            "nodeInfo": {"kubeletVersion": (status.get("nodeInfo") or {}).get("kubeletVersion")},
        },
    }


#: Distinct parts a :class:`NodeTrimmer` keeps for sharing before it starts afresh (a bound for
#: a member whose every node differs; equal parts are shared again from then on).
SHARED_PARTS = 4096


class NodeTrimmer:
    """:func:`trim_node` for a cache of many nodes: equal parts are one shared object.

    Nodes of one pool differ in little but their names, so the trimmed copies' ``spec`` and
    ``status``, and their labels without the per-node identities (:data:`PER_NODE_LABELS`, and a
    label whose value is the node's own name, which :func:`selection_labels` leaves out too),
    are kept once per distinct value. Those identity labels are not kept: nothing the agent
    reads from its node cache uses them. The results are shared and must not be changed.
    """

    def __init__(self, max_parts: int = SHARED_PARTS) -> None:
        self._max_parts = max_parts
        self._parts: dict[bytes, dict[str, Any]] = {}

    @property
    def parts(self) -> int:
        """Distinct parts kept for sharing."""
        return len(self._parts)

    def __call__(self, node: Mapping[str, Any]) -> dict[str, Any]:
        trimmed = trim_node(node)
        metadata = trimmed["metadata"]
        name = metadata["name"]
        metadata["labels"] = self._shared({
            key: value for key, value in metadata["labels"].items() if key not in PER_NODE_LABELS and value != name
        })
        trimmed["spec"] = self._shared(trimmed["spec"])
        trimmed["status"] = self._shared(trimmed["status"])
        return trimmed

    def _shared(self, part: dict[str, Any]) -> dict[str, Any]:
        key = orjson.dumps(part, option=orjson.OPT_SORT_KEYS)
        found = self._parts.get(key)
        if found is not None:
            return found
        if len(self._parts) >= self._max_parts:
            self._parts.clear()
        self._parts[key] = part
        return part


def _trim_container(container: Mapping[str, Any]) -> dict[str, Any]:
    resources = container.get("resources") or {}
    out = {
        "name": container.get("name"),
        "resources": {k: resources[k] for k in ("requests", "limits") if k in resources},
    }
    if "restartPolicy" in container:  # a sidecar init container's requests count for the pod's life
        out["restartPolicy"] = container["restartPolicy"]
    return out


def trim_pod(pod: Mapping[str, Any]) -> dict[str, Any]:
    """The parts of a Pod the report and the Work status need."""
    metadata = pod.get("metadata") or {}
    spec = pod.get("spec") or {}
    status = pod.get("status") or {}
    labels = metadata.get("labels") or {}
    trimmed_labels = {k: v for k, v in labels.items() if k in OWNER_LABELS}
    trimmed_spec: dict[str, Any] = {
        "nodeName": spec.get("nodeName"),
        "containers": [_trim_container(ct) for ct in spec.get("containers") or []],
        "initContainers": [_trim_container(ct) for ct in spec.get("initContainers") or []],
        "overhead": spec.get("overhead") or {},
    }
    if resource_claims := spec.get("resourceClaims"):  # the GPUs they hold count as requests
        trimmed_spec["resourceClaims"] = resource_claims
    if not spec.get("nodeName") and (claims := pods.pod_claims(spec)):
        # Why such a pod waits may be its claim's (member_agent.claims): only unplaced pods keep them.
        trimmed_spec["volumes"] = [{"persistentVolumeClaim": {"claimName": name}} for name in claims]
    return {
        "metadata": {
            "name": metadata.get("name"),
            "namespace": metadata.get("namespace"),
            "uid": metadata.get("uid"),
            "resourceVersion": metadata.get("resourceVersion"),
            "labels": trimmed_labels,
            "ownerReferences": [
                {k: ref.get(k) for k in ("apiVersion", "kind", "name", "uid", "controller") if k in ref}
                for ref in metadata.get("ownerReferences") or []
            ],
        },
        "spec": trimmed_spec,
        "status": _trimmed_status(pod, status),
    }


def _trimmed_status(pod: Mapping[str, Any], status: Mapping[str, Any]) -> dict[str, Any]:
    """Phase, the PodScheduled condition, and the waiting state of a container that cannot
    start by itself (:func:`pods.stuck_container`), the one container state the Work status reads."""
    trimmed: dict[str, Any] = {
        "phase": status.get("phase"),
        "conditions": [
            {k: cond.get(k) for k in ("type", "status", "reason", "message") if cond.get(k) is not None}
            for cond in status.get("conditions") or []
            if cond.get("type") == "PodScheduled"
        ],
    }
    if claim_statuses := status.get("resourceClaimStatuses"):  # the claims made from templates
        trimmed["resourceClaimStatuses"] = claim_statuses
    waiting = pods.stuck_container(pod)
    if waiting is not None:
        state = {"waiting": {k: waiting[k] for k in ("reason", "message") if waiting.get(k)}}
        trimmed["containerStatuses"] = [{"state": state}]
    return trimmed


def kubelet_version(nodes: Iterable[Mapping[str, Any]]) -> str | None:
    """The most common kubelet version, a fallback when the member's /version is unknown."""
    versions = Counter(
        v for n in nodes if (v := ((n.get("status") or {}).get("nodeInfo") or {}).get("kubeletVersion"))
    )
    return versions.most_common(1)[0][0] if versions else None
