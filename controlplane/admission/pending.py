"""Who waits in a ClusterQueue and a LocalQueue, in the admission cycle's order. Pure.

In: Workloads and LocalQueues (wire dicts, ``kueue.x-k8s.io/v1beta1``). Out: the waiting ones in
the order the admission cycle takes them (:func:`controlplane.admission.core.queue_order`: higher
priority first, then older; a Workload evicted by the PodsReady timeout counts from its eviction
unless ``requeuingStrategy.timestamp`` is ``Creation``; with admission fair sharing, the LocalQueue
that consumed least first), and the pages of Kueue's visibility API (``PendingWorkload`` items with their positions, 0-based, in the
ClusterQueue and in their LocalQueue; ``limit`` and ``offset`` as Kueue applies them), from
which ``gpufed explain`` reads a workload's place.

A waiting Workload holds no quota, has not finished, is not being deleted and is active (a
deactivated one, ``spec.active: false``, is out of line); one backing off after PodsReady
timeouts still counts, as the admission cycle counts it pending.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import replace
from typing import Any, Final

from controlplane.admission import objects as adm
from controlplane.admission import requeuing, stopping
from controlplane.admission.core import Pending, queue_order
from controlplane.admission.core.admissionfairsharing import LocalQueueUsage
from controlplane.admission.requeuing import RequeuingTimestamp
from controlplane.apis.kueue_views import LocalQueueView, WorkloadView

#: Kueue's default ``limit`` of a pending-workloads page.
DEFAULT_LIMIT: Final = 1000


def queued(
    workload: Mapping[str, Any], cluster_queue: str, *, timestamp: RequeuingTimestamp = RequeuingTimestamp.EVICTION
) -> Pending:
    """``workload`` as the admission cycle queues it in ``cluster_queue``: counting from its
    creation or, evicted by the PodsReady timeout, its eviction (``timestamp``)."""
    return replace(adm.pending_of(workload, cluster_queue), created=requeuing.queue_order_timestamp(workload, timestamp))


def _order(
    timestamp: RequeuingTimestamp, cluster_queue: str, fair_usage: LocalQueueUsage | None,
) -> Callable[[Mapping[str, Any]], tuple[float, int, str, str]]:
    order = fair_usage.order if fair_usage is not None else lambda p: (0.0, *queue_order(p))
    return lambda workload: order(queued(workload, cluster_queue, timestamp=timestamp))


def is_waiting(workload: Mapping[str, Any]) -> bool:
    meta = workload.get("metadata") or {}
    return (
        adm.admission_of(workload) is None and not adm.is_finished(workload) and not meta.get("deletionTimestamp")
        and requeuing.is_active(workload)
    )


def in_order(
    workloads: Iterable[Mapping[str, Any]], *, timestamp: RequeuingTimestamp = RequeuingTimestamp.EVICTION,
    cluster_queue: str = "", fair_usage: LocalQueueUsage | None = None,
) -> list[Mapping[str, Any]]:
    """The waiting ones of ``workloads``, in the admission cycle's order; with ``fair_usage``
    (Kueue's admission fair sharing), a usage-based ``cluster_queue`` orders them by their
    LocalQueue's usage first."""
    return sorted((w for w in workloads if is_waiting(w)), key=_order(timestamp, cluster_queue, fair_usage))


def _queue_of(obj: Mapping[str, Any], name_field: str) -> tuple[str, str]:
    meta = obj.get("metadata") or {}
    name = meta.get("name") if name_field == "" else (obj.get("spec") or {}).get(name_field)
    return str(meta.get("namespace")), str(name or "")


def in_cluster_queue(
    workloads: Iterable[Mapping[str, Any]], local_queues: Iterable[Mapping[str, Any]], cluster_queue: str
) -> list[Mapping[str, Any]]:
    """The Workloads submitted through LocalQueues that point at ``cluster_queue`` (a stopped
    LocalQueue's are out of line, as Kueue takes them out of its queues)."""
    targets = {
        _queue_of(lq, "") for lq in local_queues
        if LocalQueueView(lq).cluster_queue == cluster_queue and not stopping.is_stopped(lq)
    }
    return [w for w in workloads if _queue_of(w, "queueName") in targets]


def pending_workload(workload: Mapping[str, Any], *, in_cluster_queue: int, in_local_queue: int) -> dict[str, Any]:
    """Kueue's ``PendingWorkload``: the Workload's name, namespace, creation time and owners (their
    apiVersion, kind, name and uid), its priority and LocalQueue, and its two positions."""
    view = WorkloadView(workload)
    meta = view.metadata
    owners = [
        {key: ref.get(key, "") for key in ("apiVersion", "kind", "name", "uid")}
        for ref in view.owner_references if isinstance(ref, Mapping)
    ]
    out_meta: dict[str, Any] = {"name": meta.get("name"), "namespace": meta.get("namespace"),
                                "creationTimestamp": meta.get("creationTimestamp")}
    if owners:
        out_meta["ownerReferences"] = owners
    return {
        "metadata": out_meta,
        "priority": view.priority,
        "localQueueName": view.queue_name,
        "positionInClusterQueue": in_cluster_queue,
        "positionInLocalQueue": in_local_queue,
    }


def bounded(limit: int, offset: int) -> tuple[int, int]:
    """A negative ``limit`` or ``offset`` is 0, as Kueue bounds them."""
    return max(limit, 0), max(offset, 0)


def cluster_queue_page(ordered: Sequence[Mapping[str, Any]], *, limit: int, offset: int) -> list[dict[str, Any]]:
    """Kueue's page of a ClusterQueue's ``ordered`` waiting Workloads: from ``offset``, at most ``limit``."""
    limit, offset = bounded(limit, offset)
    seen: dict[tuple[str, str], int] = {}
    page = []
    for index, workload in enumerate(ordered[: offset + limit]):
        queue = _queue_of(workload, "queueName")
        place = seen.get(queue, 0)
        seen[queue] = place + 1
        if index >= offset:
            page.append(pending_workload(workload, in_cluster_queue=index, in_local_queue=place))
    return page


def local_queue_page(
    ordered: Sequence[Mapping[str, Any]], namespace: str, local_queue: str, *, limit: int, offset: int
) -> list[dict[str, Any]]:
    """Kueue's page of one LocalQueue among its ClusterQueue's ``ordered`` waiting Workloads."""
    limit, offset = bounded(limit, offset)
    mine = [(index, w) for index, w in enumerate(ordered) if _queue_of(w, "queueName") == (namespace, local_queue)]
    return [
        pending_workload(w, in_cluster_queue=index, in_local_queue=offset + i)
        for i, (index, w) in enumerate(mine[offset: offset + limit])
    ]
