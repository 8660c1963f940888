"""Kueue's pod integration for the hub's Pods: the scheduling gate that holds a queued Pod.

Kueue's pod webhook gives a Pod created with ``kueue.x-k8s.io/queue-name`` the scheduling gate
``kueue.x-k8s.io/admission``, and its pod controller removes the gate once the Pod's Workload is
admitted, merging the admission's node labels and its checks' ``podSetUpdates`` into the Pod
(``podset.Merge``). A Pod cannot be suspended again: kube lets scheduling gates only be removed.
In: a Pod (wire dict). Out: whether it is gated, the Pod with the gate added (in place, as the
create check does it), and the Pod as it starts or as a member gets it (without the gate). Pure.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from typing import Any, Final

from controlplane.admission import checks

SCHEDULING_GATE: Final = "kueue.x-k8s.io/admission"
"""Kueue's ``SchedulingGateName``."""


def is_pod(obj: Mapping[str, Any]) -> bool:
    return (obj.get("apiVersion"), obj.get("kind")) == ("v1", "Pod")


def _gates(obj: Mapping[str, Any]) -> list[Any]:
    gates = (obj.get("spec") or {}).get("schedulingGates")
    return gates if isinstance(gates, list) else []


def gated(obj: Mapping[str, Any]) -> bool:
    """Whether a Pod carries Kueue's scheduling gate (Kueue's ``gateIndex != -1``)."""
    return any(isinstance(g, Mapping) and g.get("name") == SCHEDULING_GATE for g in _gates(obj))


def add_gate(pod: dict[str, Any]) -> None:
    """Kueue's webhook ``gate``, in place: the gate appended unless the Pod has it."""
    if not gated(pod):
        spec = pod.setdefault("spec", {})
        spec["schedulingGates"] = [*_gates(pod), {"name": SCHEDULING_GATE}]


def without_gate(pod: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of ``pod`` without Kueue's gate (Kueue's ``ungatePod``); its other gates stay."""
    out = copy.deepcopy(dict(pod))
    if gated(out):
        kept = [g for g in _gates(out) if not (isinstance(g, Mapping) and g.get("name") == SCHEDULING_GATE)]
        if kept:
            out["spec"]["schedulingGates"] = kept
        else:
            del out["spec"]["schedulingGates"]
    return out


def start(pod: Mapping[str, Any], node_labels: Mapping[str, str], states: Sequence[Mapping[str, Any]],
          *, pod_set: str = "main") -> dict[str, Any]:
    """Kueue's ``Run`` of a single Pod: ungated, with its pod set's flavor ``node_labels`` and its
    Ready checks' ``podSetUpdates`` merged into its labels, annotations, nodeSelector and
    tolerations. Raises :class:`~controlplane.admission.checks.PodSetUpdateConflict`."""
    out = without_gate(pod)
    started = checks.start_pod_template({"metadata": out.get("metadata") or {}, "spec": out.get("spec") or {}},
                                        pod_set, node_labels, states)
    out["metadata"], out["spec"] = started["metadata"], started["spec"]
    return out


__all__ = ["SCHEDULING_GATE", "add_gate", "gated", "is_pod", "start", "without_gate"]
