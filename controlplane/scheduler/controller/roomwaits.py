"""Bindings that go to every feasible cluster, left out of some cluster for want of room there.

A Duplicated workload (or a kind without replicas) runs in every cluster its placement admits
where all its replicas fit. A cluster whose nodes were too busy when it was decided is not
written into the binding, and nothing about the binding changes when that cluster's work
finishes; the cluster's next report shows the freed room. As kube-scheduler moves a pod back to
its active queue on a cluster event that may make it schedulable (its queueing hints), only the
bindings left out of that cluster, and only when the report shows more free of a resource their
pods request, are decided again; the decision then adds the cluster, as Karmada's Duplicated
scheduling does. No rescan of every binding on a report.

Room can also free on the hub alone: a binding deleted before its pods ever started (or a hold
whose report never came, expired) drops its reservation in a cluster, and no report follows to
show it. The bindings left out of that cluster whose pods request a resource the reservation held
are decided again then, as for a report.

In: each decision of such a binding (:attr:`~controlplane.scheduler.core.outcome.ScheduleResult.short_of_room`
and the resources its pods request), each cluster report with the one before, and each
reservation dropped on the hub. Out: the bindings to decide again.
"""

from __future__ import annotations

from controlplane.apis.work_v1alpha1 import BindingKey
from controlplane.scheduler.core.framework import BindingRequest
from controlplane.scheduler.core.outcome import ScheduleResult
from controlplane.scheduler.core.reservations import Reservation
from controlplane.scheduler.core.snapshot import ClusterSnapshot, resources_freed


def requested_resources(request: BindingRequest) -> frozenset[str]:
    """The resources a replica of ``request`` asks for, in any of its GPU shapes."""
    names = {name for name, _ in request.requirements.resources}
    for shape in request.gpu_shapes:
        names.update(name for name, _ in shape.resources)
    return frozenset(names)


class RoomWaits:
    """Per cluster, the bindings left out of it for want of room, and the resources they request."""

    def __init__(self) -> None:
        self._by_cluster: dict[str, dict[BindingKey, frozenset[str]]] = {}
        self._clusters_of: dict[BindingKey, frozenset[str]] = {}

    def record(self, key: BindingKey, request: BindingRequest, result: ScheduleResult) -> None:
        """Remember (or, when none is left, forget) where ``result`` left ``key`` out for want of room."""
        self.forget(key)
        clusters = result.short_of_room
        if not clusters:
            return
        resources = requested_resources(request)
        self._clusters_of[key] = clusters
        for cluster in clusters:
            self._by_cluster.setdefault(cluster, {})[key] = resources

    def freed(self, cluster: str, before: ClusterSnapshot | None, after: ClusterSnapshot) -> list[BindingKey]:
        """The bindings left out of ``cluster`` for want of room whose pods request a resource its
        new report ``after`` shows more of free than ``before`` did."""
        waiting = self._by_cluster.get(cluster)
        if not waiting:
            return []
        freed = resources_freed(before, after)
        if not freed:
            return []
        # Pods that name no resource (a kind without replicas) can only wait for pod slots: any freed resource counts.
        return sorted(key for key, resources in waiting.items() if not resources or resources & freed)

    def released(self, reservation: Reservation) -> list[BindingKey]:
        """The bindings left out of ``reservation``'s cluster for want of room whose pods request a
        resource it held, now that it is dropped on the hub (no report shows that room freed)."""
        waiting = self._by_cluster.get(reservation.cluster)
        if not waiting:
            return []
        held = {name for demand in reservation.demands for name, _ in demand.requirements.resources}
        return sorted(key for key, resources in waiting.items() if not resources or resources & held)

    def waiting_in(self, cluster: str) -> frozenset[BindingKey]:
        return frozenset(self._by_cluster.get(cluster) or ())

    def forget(self, key: BindingKey) -> None:
        for cluster in self._clusters_of.pop(key, ()):
            waiting = self._by_cluster.get(cluster)
            if waiting is not None:
                waiting.pop(key, None)
                if not waiting:
                    del self._by_cluster[cluster]

    def forget_cluster(self, cluster: str) -> None:
        """A cluster that left the fleet: nothing waits for room there any more."""
        for key in self._by_cluster.pop(cluster, {}):
            left = self._clusters_of.get(key, frozenset()) - {cluster}
            if left:
                self._clusters_of[key] = left
            else:
                self._clusters_of.pop(key, None)
