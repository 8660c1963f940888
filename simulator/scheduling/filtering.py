"""kube-scheduler's usage-independent filters, its search limit and its FitError text.

In: a :class:`~.model.PodRequest` and a :class:`~.model.NodeState`; out: the first
filter that rejects the node, in kube's plugin order (NodeUnschedulable, TaintToleration
for NoSchedule/NoExecute taints, NodeAffinity for ``nodeSelector`` and required node
affinity), or None. Resource fit (NodeResourcesFit) depends on usage and is checked over
arrays in :mod:`.cluster_state`. Also: how many feasible nodes kube looks for before it
stops (``percentageOfNodesToScore``, adaptive by default) and the message a pod that fits
nowhere gets, and VolumeBinding's PreFilter: a pod whose PersistentVolumeClaim does not
exist fits nowhere (:func:`missing_claim`; a claim that exists counts as bound: the
simulator has no volumes to bind or topology to honour). Pure.
"""

from __future__ import annotations

from collections.abc import Container, Mapping
from typing import Final

from controlplane.apis.pods import FrozenTaint, node_selector_matches
from simulator.scheduling.model import TAINT_UNSCHEDULABLE, FilterReason, NodeState, PodRequest

_MIN_FEASIBLE_NODES: Final = 100


def adaptive_nodes_to_find(node_count: int, percentage: int = 0) -> int:
    """How many feasible nodes kube-scheduler looks for before it stops filtering."""
    if node_count < _MIN_FEASIBLE_NODES or percentage >= 100:
        return node_count
    if percentage <= 0:
        percentage = max(5, 50 - node_count // 125)
    return max(_MIN_FEASIBLE_NODES, node_count * percentage // 100)


def static_reason(pod: PodRequest, node: NodeState) -> str | None:
    """The first usage-independent filter that rejects ``node``, in kube's plugin order."""
    if node.unschedulable and not any(
        t.tolerates(FrozenTaint(TAINT_UNSCHEDULABLE, "", "NoSchedule")) for t in pod.tolerations
    ):
        return FilterReason.UNSCHEDULABLE.value
    for taint in node.taints:
        if taint.effect == "PreferNoSchedule":
            continue
        if not any(t.tolerates(taint) for t in pod.tolerations):
            return f"{FilterReason.UNTOLERATED_TAINT.value} {{{taint.key}: {taint.value}}}"
    labels = node.labels
    if not node_selector_matches(pod.node_selector.items(), labels):
        return FilterReason.AFFINITY.value
    if pod.affinity is not None and not any(
        term and all(req.matches(node.name, labels) for req in term) for term in pod.affinity
    ):
        return FilterReason.AFFINITY.value
    return None


def fit_error_message(node_count: int, reasons: Mapping[str, int]) -> str:
    """kube-scheduler's FitError text: ``0/N nodes are available: <count reason>, ....``"""
    if node_count == 0:
        return "no nodes available to schedule pods"
    parts = sorted(f"{count} {reason}" for reason, count in reasons.items())
    return f"0/{node_count} nodes are available: {', '.join(parts)}."


def missing_claim(pod: PodRequest, claims: Container[str]) -> str | None:
    """The first PersistentVolumeClaim ``pod`` names that is not among ``claims`` (the names in
    its namespace), or None. Only a missing claim fails: one that exists is taken as bound."""
    return next((claim for claim in pod.claims if claim not in claims), None)


def missing_claim_message(node_count: int, claim: str) -> str:
    """kube-scheduler's text for a pod whose claim is missing: VolumeBinding's PreFilter status,
    then DefaultPreemption's (no node can help: the failure does not depend on them)."""
    return (
        f'0/{node_count} nodes are available: persistentvolumeclaim "{claim}" not found. '
        f"preemption: 0/{node_count} nodes are available: {node_count} Preemption is not helpful for scheduling."
    )
