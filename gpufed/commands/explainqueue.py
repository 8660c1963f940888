"""`gpufed explain`'s queue block: why a queued workload waits, or what admitted it.

In: a hub workload with the label ``kueue.x-k8s.io/queue-name``, and from the hub its Workload
(the one it owns, named as Kueue names it), its LocalQueue, the ClusterQueue behind it and the Workloads waiting there.
Out: lines — the LocalQueue and ClusterQueue (cohort, queueing strategy), the Workload's
QuotaReserved condition (Kueue's reason and message: which flavor and resource lacks quota,
how much more is needed), a queue's ``stopPolicy`` when it is stopped, the ClusterQueue's quota and usage for what the workload asks, its
eviction if it was preempted, its position among the workloads waiting in the ClusterQueue and
in its LocalQueue, once its quota is reserved the admission checks it still waits for (each with
its state and message), and once admitted the flavor each pod set got and whether the ClusterQueue borrows.

The positions are the hub's own: read from Kueue's visibility API (``pendingworkloads`` of the
ClusterQueue and of the LocalQueue), which lists the waiting Workloads in the order the hub's
admission cycle takes them, whatever the hub's requeuing timestamp. A user who may not read
cluster-wide (a team bound to view in its namespace) still gets the position in its LocalQueue;
the ClusterQueue's part is left out with what to ask for.
"""

from __future__ import annotations

from collections.abc import Awaitable, Mapping, Sequence
from typing import Any, Final

from controlplane.admission import checks, podgroups, requeuing, stopping
from controlplane.admission import objects as adm
from controlplane.apis import kueue_v1beta1 as kueue
from gpufed.hubclient import HubClient, HubError

BASE: Final = f"/apis/{kueue.API_VERSION}"
VISIBILITY: Final = "/apis/visibility.kueue.x-k8s.io/v1beta2"
PAGE: Final = 1000
"""Pending workloads read per request of the visibility API."""
Place = tuple[int | None, int]
"""A Workload's 1-based place among the waiting ones (None: it is not among them), and how many wait."""
W: Final = 13
"""Label width, as the rest of ``gpufed explain``."""


def _line(label: str, text: str) -> str:
    return f"{label:<{W}}{text}"


def _requeue_line(workload: Mapping[str, Any]) -> str | None:
    """Why a Workload is held out of its queue: deactivated, or its requeuing backoff after
    PodsReady timeouts (None: it is not held)."""
    state = (workload.get("status") or {}).get("requeueState") or {}
    if not requeuing.is_active(workload):
        return "deactivated (spec.active: false): not queued until it is active again"
    if requeuing.requeue_at(workload) is not None and state.get("requeueAt"):
        return (f"backing off until {state['requeueAt']} after {state.get('count')} PodsReady timeout(s); "
                "no candidate for admission until then")
    return None


def _stopped_lines(name: str, queue: Mapping[str, Any] | None) -> list[str]:
    """What a queue's ``stopPolicy`` does, when it is not None."""
    policy = stopping.stop_policy(queue)
    if policy == stopping.NONE:
        return []
    running = ("its admitted workloads are evicted" if policy == stopping.HOLD_AND_DRAIN
               else "its admitted workloads keep running")
    return [_line("Stopped:", f"{name} has stopPolicy {policy}: it admits nothing new, {running}; "
                  "stopPolicy None resumes it")]


def _requested(workload: Mapping[str, Any]) -> list[str]:
    resources: list[str] = []
    for ps in adm.pod_set_requests(workload):
        resources.extend(r for r, v in ps.per_pod.items() if v > 0 and r != "pods" and r not in resources)
    return resources


def _quota_lines(cq: Mapping[str, Any], resources: Sequence[str], flavors: set[str] | None) -> list[str]:
    """Per flavor and requested resource of the ClusterQueue: used of nominal, and borrowed."""
    used: dict[tuple[str, str], Mapping[str, Any]] = {}
    for fr in (cq.get("status") or {}).get("flavorsReservation") or ():
        for r in fr.get("resources") or ():
            used[(str(fr.get("name")), str(r.get("name")))] = r
    out: list[str] = []
    for group in (cq.get("spec") or {}).get("resourceGroups") or ():
        for flavor in group.get("flavors") or ():
            name = str(flavor.get("name"))
            if flavors is not None and name not in flavors:
                continue
            for quota in flavor.get("resources") or ():
                resource = str(quota.get("name"))
                if resource not in resources:
                    continue
                figures = used.get((name, resource), {})
                limit = f", may borrow {quota['borrowingLimit']}" if quota.get("borrowingLimit") is not None else ""
                borrowed = str(figures.get("borrowed", "0"))
                lent = f"; borrows {borrowed} from its cohort" if borrowed not in ("0", "") else ""
                out.append(f"{resource} in {name}: {figures.get('total', '0')} in use of {quota.get('nominalQuota')} "
                           f"nominal{limit}{lent}")
    return [_line("Quota:" if i == 0 else "", text) for i, text in enumerate(out)]


def _assignment_lines(admission: Mapping[str, Any], pod_sets: Sequence[Mapping[str, Any]]) -> list[str]:
    asked = {str(ps.get("name")): ps for ps in pod_sets}
    rows = []
    for psa in admission.get("podSetAssignments") or ():
        flavors = ", ".join(f"{r}={f}" for r, f in sorted((psa.get("flavors") or {}).items()))
        row = f"{psa.get('name')} x{psa.get('count', '?')}: {flavors or '(no resources)'}"
        ps = asked.get(str(psa.get("name"))) or {}
        count, wanted = psa.get("count"), ps.get("count")
        if isinstance(count, int) and isinstance(wanted, int) and count < wanted:
            row += f" (partially admitted: {count} of {wanted} pods, minCount {ps.get('minCount')})"
        rows.append(row)
    return [_line("Flavors:" if i == 0 else "", row) for i, row in enumerate(rows)]


def render_queue(
    workload: Mapping[str, Any],
    *,
    local_queue: Mapping[str, Any] | None,
    cluster_queue: Mapping[str, Any] | None,
    cluster_queue_place: Place | None,
    local_queue_place: Place | None,
) -> list[str]:
    """The queue block for a Workload. ``cluster_queue`` and a place are None when the caller may
    not read them. Pure."""
    meta, spec = workload.get("metadata") or {}, workload.get("spec") or {}
    namespace, queue_name = str(meta.get("namespace")), str(spec.get("queueName") or "")
    admission = (workload.get("status") or {}).get("admission") or {}
    cq_name = str(admission.get("clusterQueue") or ((local_queue or {}).get("spec") or {}).get("clusterQueue") or "")
    lines = []
    if local_queue is None:
        lines.append(_line("Queue:", f"LocalQueue {namespace}/{queue_name} does not exist: create it, or fix the "
                           f"label {kueue.LABEL_QUEUE_NAME}"))
    elif cluster_queue is None:
        lines.append(_line("Queue:", f"LocalQueue {namespace}/{queue_name} -> ClusterQueue {cq_name} (not readable "
                           "with these credentials: it takes `get clusterqueues` cluster-wide)"))
    else:
        cq_spec = cluster_queue.get("spec") or {}
        cohort = f"cohort {cq_spec['cohort']}, " if cq_spec.get("cohort") else ""
        strategy = cq_spec.get("queueingStrategy") or "BestEffortFIFO"
        lines.append(_line("Queue:", f"LocalQueue {namespace}/{queue_name} -> ClusterQueue {cq_name} ({cohort}{strategy})"))
    lines.extend(_stopped_lines(f"LocalQueue {namespace}/{queue_name}", local_queue))
    lines.extend(_stopped_lines(f"ClusterQueue {cq_name}", cluster_queue))
    priority = spec.get("priority", 0)
    by = f" (WorkloadPriorityClass {spec['priorityClassName']})" if spec.get("priorityClassName") else ""
    lines.append(_line("Workload:", f"{adm.key_of(workload)}, priority {priority}{by}"))
    reserved = adm.condition(workload, kueue.COND_QUOTA_RESERVED)
    finished = adm.condition(workload, kueue.COND_FINISHED)
    if finished is not None and finished.get("status") == "True":
        lines.append(_line("Admission:", f"finished ({finished.get('reason')}): its quota is free again"))
        return lines
    if admission and adm.is_true(workload, kueue.COND_ADMITTED):
        lines.append(_line("Admission:", f"admitted by ClusterQueue {cq_name}"))
        lines.extend(_assignment_lines(admission, spec.get("podSets") or []))
        if cluster_queue is not None:
            got = {str(f) for psa in admission.get("podSetAssignments") or () for f in (psa.get("flavors") or {}).values()}
            lines.extend(_quota_lines(cluster_queue, _requested(workload), got))
        return lines
    if reserved is None:
        lines.append(_line("Admission:", "not looked at yet (is the hub's admission controller running?)"))
    else:
        lines.append(_line("Admission:", f"QuotaReserved={reserved.get('status')} ({reserved.get('reason')}): "
                           f"{reserved.get('message') or ''}".rstrip()))
    if admission:  # quota reserved: the ClusterQueue's admission checks decide the rest
        lines.append(_line("Checks:", f"waiting for admission checks: {checks.waiting_on(checks.states_of(workload))}"))
        lines.extend(_assignment_lines(admission, spec.get("podSets") or []))
        return lines
    evicted = adm.condition(workload, kueue.COND_EVICTED)
    if evicted is not None and evicted.get("status") == "True":
        lines.append(_line("Evicted:", f"{evicted.get('reason')}: {evicted.get('message') or ''}".rstrip()))
    if (requeue := _requeue_line(workload)) is not None:
        lines.append(_line("Requeue:", requeue))
    if cluster_queue is not None:
        lines.extend(_quota_lines(cluster_queue, _requested(workload), None))
    if stopping.is_stopped(local_queue):
        lines.append(_line("Position:", f"out of line while LocalQueue {namespace}/{queue_name} is stopped"))
        return lines
    places = []
    if cluster_queue_place is not None:
        places.append(_place(cluster_queue_place, f"waiting in ClusterQueue {cq_name}"))
    if local_queue_place is not None:
        places.append(_place(local_queue_place, f"in LocalQueue {namespace}/{queue_name}"))
    if places:
        lines.append(_line("Position:", "; ".join(places) + " (higher priority first, then older)"))
    return lines


def _place(place: Place, where: str) -> str:
    at, total = place
    return f"{at} of {total} {where}" if at is not None else f"not among the {total} {where}"


async def _pending_place(client: HubClient, path: str, workload: Mapping[str, Any], field: str) -> Place | None:
    """``workload``'s place among the pending workloads the visibility API lists at ``path``
    (``field``: the position it reports), paging through them; None when they may not be read."""
    meta = workload.get("metadata") or {}
    key = (meta.get("namespace"), meta.get("name"))
    at: int | None = None
    offset = 0
    while True:
        summary = await _readable(client.request("GET", path, params={"limit": str(PAGE), "offset": str(offset)}))
        if summary is None:
            return None
        items = summary.get("items") or []
        for item in items:
            item_meta = item.get("metadata") or {}
            if (item_meta.get("namespace"), item_meta.get("name")) == key and isinstance(item.get(field), int):
                at = item[field] + 1
        offset += len(items)
        if len(items) < PAGE:
            return at, offset


async def _readable(answer: Awaitable[dict[str, Any] | None]) -> dict[str, Any] | None:
    """The object or list ``answer`` reads; None when it is missing or these credentials may not read it."""
    try:
        return await answer
    except HubError as exc:
        if exc.status in (403, 404):
            return None
        raise


async def workload_of(client: HubClient, workload: Mapping[str, Any]) -> dict[str, Any] | None:
    """The Workload of a queued workload: the one Kueue's name gives (:func:`~controlplane.admission.objects.workload_name`),
    else the one of its namespace the workload owns (a Workload made before the hub named them as Kueue does); a Pod
    of a Kueue pod group: its group's, named for the group."""
    namespace = str((workload.get("metadata") or {}).get("namespace"))
    if workload.get("kind") == "Pod" and (group := podgroups.group_name(workload)) is not None:
        wl = await client.get_or_none(f"{BASE}/namespaces/{namespace}/workloads/{group}")
        return wl if wl is not None and podgroups.is_group_workload(wl) else None
    wl = await client.get_or_none(f"{BASE}/namespaces/{namespace}/workloads/{adm.workload_name_of(workload)}")
    if wl is not None and adm.queues_for(wl, workload):
        return wl
    listed = await client.read_list(f"{BASE}/namespaces/{namespace}/workloads")
    return next((item for item in listed.get("items") or () if adm.queues_for(item, workload)), None)


async def queue_section(client: HubClient, workload: Mapping[str, Any]) -> list[str]:
    """The queue block of ``workload`` read from the hub ([] when it names no queue)."""
    if adm.queue_name(workload) is None:
        return []
    meta = workload.get("metadata") or {}
    namespace = str(meta.get("namespace"))
    wl = await workload_of(client, workload)
    if wl is None:
        kind, name = workload.get("kind"), meta.get("name")
        return [_line("Queue:", f"no Workload for {kind} {namespace}/{name} yet (is the hub's admission controller running?)")]
    queue_name = str((wl.get("spec") or {}).get("queueName") or "")
    local_queue = await client.get_or_none(f"{BASE}/namespaces/{namespace}/localqueues/{queue_name}")
    admission = (wl.get("status") or {}).get("admission") or {}
    cq_name = str(admission.get("clusterQueue") or ((local_queue or {}).get("spec") or {}).get("clusterQueue") or "")
    cluster_queue = await _readable(client.get_or_none(f"{BASE}/clusterqueues/{cq_name}")) if cq_name else None
    local_place = await _pending_place(
        client, f"{VISIBILITY}/namespaces/{namespace}/localqueues/{queue_name}/pendingworkloads", wl, "positionInLocalQueue")
    cq_place = None
    if cluster_queue is not None:
        cq_place = await _pending_place(
            client, f"{VISIBILITY}/clusterqueues/{cq_name}/pendingworkloads", wl, "positionInClusterQueue")
    return render_queue(wl, local_queue=local_queue, cluster_queue=cluster_queue,
                        cluster_queue_place=cq_place, local_queue_place=local_place)

__all__ = ["Place", "queue_section", "render_queue", "workload_of"]
