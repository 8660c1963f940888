"""What the scheduler controller reads off bindings, Works and Clusters (wire dicts).

In: a ResourceBinding, a Work or a Cluster as the informers hold them. Out: the binding's key
(``(namespace, name)``, and its ``ns/name`` text, which names it in the reservations), what a
Work's status says about the binding's pods in its member (how many the member cannot place,
whether it reports the workload Unhealthy, the Applied condition of the Work's current
generation and its transition time), what about a Cluster can change where bindings may run,
and the hub workload a binding describes. Plain reads; the controller's modules act on them.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from controlplane.apis.cluster_v1alpha1 import ClusterConditionType
from controlplane.apis.timestamps import parse_time_or_none
from controlplane.apis.views import BindingView, ClusterObjectView, WorkView
from controlplane.apis.work_v1alpha1 import BindingKey, ConditionType
from controlplane.controllers.context import ControllerContext


def key_text(key: BindingKey) -> str:
    return f"{key[0]}/{key[1]}"


def binding_key(binding: Mapping[str, Any]) -> BindingKey:
    meta = BindingView(binding).metadata
    return (str(meta.get("namespace")), str(meta.get("name")))


def unhealthy_reported(work: Mapping[str, Any]) -> bool:
    return any(m.get("health") == "Unhealthy" for m in WorkView(work).manifest_statuses)


def placement_facts(obj: Mapping[str, Any] | None) -> Any:
    """What about a Cluster can change where bindings may run (not its capacity): among them the
    APIs it serves (``status.apiEnablements`` and whether that list is complete)."""
    if obj is None:
        return None
    view = ClusterObjectView(obj)
    meta = view.metadata
    ready = view.condition("Ready")
    complete = view.condition(ClusterConditionType.COMPLETE_API_ENABLEMENTS)
    return (
        obj.get("spec"),
        meta.get("labels"),
        (ready or {}).get("status"),
        meta.get("deletionTimestamp"),
        view.status.get("apiEnablements"),
        (complete or {}).get("status"),
    )


def unschedulable_pods(work: Mapping[str, Any]) -> int:
    """Pods the member reports it cannot place, when the report is about the Work's current generation."""
    view = WorkView(work)
    applied = view.condition(ConditionType.APPLIED)
    if applied is None or applied.get("observedGeneration") != view.generation:
        return 0
    return sum(int((m.get("unschedulable") or {}).get("pods") or 0) for m in view.manifest_statuses)


def applied_condition(work: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The Work's Applied=True condition when it is about the Work's current generation, else None."""
    view = WorkView(work)
    applied = view.condition(ConditionType.APPLIED)
    if applied is None or applied.get("status") != "True" or applied.get("observedGeneration") != view.generation:
        return None
    return applied


def transition_time(condition: Mapping[str, Any] | None) -> datetime | None:
    """A condition's ``lastTransitionTime`` (None when absent or unreadable)."""
    return parse_time_or_none((condition or {}).get("lastTransitionTime"))


def workload_of(ctx: ControllerContext, binding: Mapping[str, Any]) -> dict[str, Any] | None:
    """The hub workload ``binding`` describes, from its informer (None when not known)."""
    resource = BindingView(binding).resource
    informer = ctx.workload_informer(str(resource.get("apiVersion")), str(resource.get("kind")))
    return informer.get(resource.get("namespace"), str(resource.get("name"))) if informer else None


def goes_everywhere(binding: Mapping[str, Any]) -> bool:
    """Whether ``binding`` goes to every feasible cluster — a kind without replicas (no
    ``replicaRequirements``) or a workload whose placement is Duplicated (every feasible cluster runs
    all its replicas) — of its own placement (not propagateDeps')."""
    spec = binding.get("spec") or {}
    if spec.get("requiredBy"):
        return False
    has_replicas = spec.get("replicaRequirements") is not None or bool(spec.get("replicas"))
    return not has_replicas or duplicated(spec.get("placement"))


def goes_everywhere_but(binding: Mapping[str, Any], cluster: str) -> bool:
    """Whether ``binding`` :func:`goes_everywhere` and is not in ``cluster``.

    One with no placement yet counts too: its first decision may be on its way, taken before
    ``cluster`` joined or changed and not in the cache yet (Karmada's scheduler requeues a binding
    its scheduler has not observed for the same reason)."""
    if not goes_everywhere(binding):
        return False
    placed = (binding.get("spec") or {}).get("clusters")
    return not isinstance(placed, list) or all(
        not isinstance(target, Mapping) or target.get("name") != cluster for target in placed
    )


def duplicated(placement: Any) -> bool:
    """Whether a binding's ``spec.placement`` is Duplicated: no ``replicaScheduling`` (Karmada's
    default) or ``replicaSchedulingType: Duplicated``."""
    scheduling = placement.get("replicaScheduling") if isinstance(placement, Mapping) else None
    if not isinstance(scheduling, Mapping):
        return True
    return scheduling.get("replicaSchedulingType") == "Duplicated"
