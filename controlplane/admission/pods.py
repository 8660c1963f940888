"""Kueue's pod integration for the hub's Pods: the scheduling gate that holds a queued Pod.

Kueue's pod webhook gives a Pod created with ``kueue.x-k8s.io/queue-name`` the scheduling gate
``kueue.x-k8s.io/admission``, and its pod controller removes the gate once the Pod's Workload is
admitted, merging the admission's node labels and its checks' ``podSetUpdates`` into the Pod
(``podset.Merge``). A Pod cannot be suspended again: kube lets scheduling gates only be removed.
So Kueue stops a started Pod whose Workload is evicted, no longer admitted, deleted or missing
(its pod controller's ``Stop``): the condition ``TerminationTarget`` on the Pod, then the Pod
deleted. The webhook also marks the Pod it gates as managed (label and finalizer
``kueue.x-k8s.io/managed``); the finalizer stays while the Workload needs the Pod and goes once
the Pod finishes, is deleted, or its Workload finishes (``Finalize``). Kueue leaves a Pod
without the label alone (``Skip``).
In: a Pod (wire dict) and its Workload. Out: whether it is gated or managed, the Pod marked and
gated (in place, as the create check does it), the Pod as it starts or as a member gets it
(without the gate), and why a Pod is stopped. Pure.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from typing import Any, Final

from controlplane.admission import checks
from controlplane.admission.jobevents import Stop, stop_of_started
from controlplane.admission.objects import is_finished
from controlplane.apis import kueue_jobs
from controlplane.apis import kueue_v1beta1 as kueue
from controlplane.apis.kube.field import FieldError, forbidden, immutable

SCHEDULING_GATE: Final = "kueue.x-k8s.io/admission"
"""Kueue's ``SchedulingGateName``."""
MANAGED_VALUE: Final = "true"
"""The value of Kueue's label ``kueue.x-k8s.io/managed`` (``ManagedByKueueLabelValue``)."""
TERMINATION_TARGET: Final = "TerminationTarget"
"""The Pod condition Kueue sets on a Pod it stops (``ConditionTypeTerminationTarget``)."""


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


def _meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    meta = obj.get("metadata")
    return meta if isinstance(meta, Mapping) else {}


def managed(obj: Mapping[str, Any]) -> bool:
    """Whether a Pod carries Kueue's ``kueue.x-k8s.io/managed: "true"`` (else Kueue's ``Skip``)."""
    labels = _meta(obj).get("labels")
    return isinstance(labels, Mapping) and labels.get(kueue.LABEL_MANAGED) == MANAGED_VALUE


def managed_label_errors(obj: Mapping[str, Any]) -> list[FieldError]:
    """Kueue's pod webhook's ``validateManagedLabel`` (on create and update): the label
    ``kueue.x-k8s.io/managed``, when set, must be ``"true"``."""
    labels = _meta(obj).get("labels")
    value = labels.get(kueue.LABEL_MANAGED) if isinstance(labels, Mapping) else None
    if value is None or value == MANAGED_VALUE:
        return []
    return [forbidden(f"metadata.labels[{kueue.LABEL_MANAGED}]", f"managed label value can only be '{MANAGED_VALUE}'")]


def queue_name_update_errors(new: Mapping[str, Any], old: Mapping[str, Any]) -> list[FieldError]:
    """Kueue's pod webhook's queue-name rule on update (``ValidateJobOnUpdate`` for a Pod): a Pod
    that, as written, neither carries Kueue's scheduling gate nor has finished may have its label
    ``kueue.x-k8s.io/queue-name`` neither added, changed nor removed (the new value shown, ""
    when removed). A gated Pod may change queues."""
    if gated(new) or finished(new):
        return []
    return immutable(kueue_jobs.queue_label(new), kueue_jobs.queue_label(old), kueue_jobs.QUEUE_NAME_PATH)


def has_finalizer(obj: Mapping[str, Any]) -> bool:
    finalizers = _meta(obj).get("finalizers")
    return isinstance(finalizers, list) and kueue.MANAGED_FINALIZER in finalizers


def manage(pod: dict[str, Any]) -> None:
    """Kueue's pod webhook ``Default`` for a Pod it suspends, in place: its finalizer, its label
    ``kueue.x-k8s.io/managed: "true"`` and its scheduling gate."""
    meta = pod.setdefault("metadata", {})
    if not has_finalizer(pod):
        meta["finalizers"] = [*(meta.get("finalizers") or []), kueue.MANAGED_FINALIZER]
    meta["labels"] = {**(meta.get("labels") or {}), kueue.LABEL_MANAGED: MANAGED_VALUE}
    add_gate(pod)


def without_finalizer(pod: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of ``pod`` without Kueue's finalizer (Kueue's ``Finalize``); its others stay."""
    out = copy.deepcopy(dict(pod))
    kept = [f for f in (out.get("metadata") or {}).get("finalizers") or [] if f != kueue.MANAGED_FINALIZER]
    if kept:
        out["metadata"]["finalizers"] = kept
    else:
        out.get("metadata", {}).pop("finalizers", None)
    return out


def finished(pod: Mapping[str, Any]) -> bool:
    """A Pod ``Succeeded`` or ``Failed`` (Kueue's ``isPodTerminated``)."""
    return (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed")


def stop_of(pod: Mapping[str, Any], workload: Mapping[str, Any] | None) -> Stop | None:
    """Whether Kueue's job reconciler stops a managed Pod whose Workload is ``workload`` (None:
    it has none), in its order: a Workload being deleted stops even a gated or finished Pod; a
    finished Workload stops nothing; a gated or finished Pod is not stopped; a started Pod is
    stopped when its Workload is missing, evicted (reason ``WorkloadEvictedDueTo<Evicted's
    reason>``, its message) or not admitted. None: the Pod stays (a Pod being deleted too)."""
    if _meta(pod).get("deletionTimestamp"):
        return None
    if workload is not None and is_finished(workload):
        return None
    if workload is not None and _meta(workload).get("deletionTimestamp"):
        return stop_of_started(workload)
    if gated(pod) or finished(pod):
        return None
    return stop_of_started(workload)


def termination_target(stop: Stop) -> dict[str, str]:
    """The ``TerminationTarget=True`` condition Kueue gives a Pod it stops."""
    return {"type": TERMINATION_TARGET, "status": "True", "reason": stop.reason, "message": stop.message}


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


__all__ = [
    "MANAGED_VALUE", "SCHEDULING_GATE", "TERMINATION_TARGET", "Stop", "add_gate", "finished", "gated", "has_finalizer",
    "is_pod", "manage", "managed", "managed_label_errors", "queue_name_update_errors", "start", "stop_of",
    "termination_target", "without_finalizer", "without_gate",
]
