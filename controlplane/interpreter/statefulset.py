"""StatefulSet (apps/v1): ``spec.replicas`` pods from ``spec.template``; never a gang.

Each member runs its share with ordinals 0..share-1, so pod names repeat across
clusters; that is how Karmada divides StatefulSets too. Status counts are summed, as Karmada's
``aggregateStatefulSetStatus`` sums them; the revisions are merged by :func:`merge_revisions`,
which Karmada leaves out. A member's copy is healthy when its ``spec.replicas`` are ready and
those its update strategy wants updated are (:meth:`StatefulSetInterpreter.updated_wanted`), at
the current generation.

A RollingUpdate ``partition`` keeps the pods below that ordinal at the old template. Sent
unchanged to members that each run a part, it would mean something else in each (with 4
replicas split 2+2 and partition 2, no member would update a pod); Karmada sends it unchanged.
The hub divides it instead (:func:`divide_partition`), so that the members update
``replicas - partition`` pods in all, as the hub's object asks and as ``kubectl rollout status``
counts them on the hub.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from controlplane.apis.untyped import Obj, as_int
from controlplane.interpreter.base import MemberStatuses, ReplicatedTemplateKind

REPLICA_FIELDS = ("replicas", "readyReplicas", "currentReplicas", "updatedReplicas", "availableReplicas")
REVISION_FIELDS = ("currentRevision", "updateRevision")


def partition_of(spec: Mapping[str, Any] | None) -> int | None:
    """The ``updateStrategy.rollingUpdate.partition`` of a RollingUpdate (the default type) spec,
    None when it has none (or is an OnDelete one)."""
    strategy = (spec or {}).get("updateStrategy") or {}
    if strategy.get("type") not in (None, "", "RollingUpdate"):
        return None
    partition = (strategy.get("rollingUpdate") or {}).get("partition")
    return None if partition is None else max(0, as_int(partition))


def divide_partition(partition: int, split: Mapping[str, int], *, replicas: int) -> dict[str, int]:
    """Each cluster's partition when ``split`` (cluster name to replicas) divides a StatefulSet of
    ``replicas`` with ``partition``: the hub's ordinals are the members' laid end to end in
    cluster-name order, so a member's partition is how many of the hub's ordinals below
    ``partition`` fall in its part (at most its replicas). The members then update
    ``replicas - partition`` pods in all (none when the partition is at or above the replicas),
    the highest hub ordinals: the last members' pods first. Within a member the ordinals are its
    own (0..share-1), so the pods kept are each member's lowest. When every cluster runs all the
    replicas (Duplicated), each runs the whole set and keeps the partition as it is."""
    if all(share == replicas for share in split.values()):
        return dict.fromkeys(split, partition)
    out: dict[str, int] = {}
    below = partition
    for cluster in sorted(split):
        share = max(0, split[cluster])
        out[cluster] = min(below, share)
        below -= out[cluster]
    return out


def merge_revisions(member_statuses: MemberStatuses) -> dict[str, str]:
    """The hub's ``currentRevision`` and ``updateRevision``: each is the one every member reports.

    A member's revision names its own ControllerRevision (``NAME-HASH`` of the template it runs,
    overrides included), so the hub has a revision only where the members agree; with a member
    not reported yet it has none. The pair differs exactly when some member's does, as a member's
    differs until its rolling update has finished: when members disagree on both while one of
    them is still rolling, the pair is that member's (the first in cluster order), so a tool that
    compares the two (Argo CD's StatefulSet health, kubectl's ``rollout status`` without a
    ``rollingUpdate``) keeps waiting instead of reading two missing values as equal.
    """
    statuses: list[Mapping[str, Any]] = []
    for _, status in member_statuses:
        if status is None:
            return {}
        statuses.append(status)
    merged: dict[str, str] = {}
    for field in REVISION_FIELDS:
        values = {str(s.get(field) or "") for s in statuses}
        if len(values) == 1 and (value := values.pop()):
            merged[field] = value
    rolling = [s for s in statuses if (s.get("currentRevision") or "") != (s.get("updateRevision") or "")]
    if rolling and merged.get("currentRevision") == merged.get("updateRevision"):
        first = rolling[0]
        merged = {field: str(first[field]) for field in REVISION_FIELDS if first.get(field)}
    return merged


class StatefulSetInterpreter(ReplicatedTemplateKind):
    group = "apps"
    kind = "StatefulSet"
    replica_fields = REPLICA_FIELDS
    kept_at_zero = frozenset({"replicas", "availableReplicas"})

    def with_split(self, obj: Obj, *, cluster: str, split: Mapping[str, int]) -> Obj:
        """``obj`` with the cluster's part of the partition (:func:`divide_partition`)."""
        spec = obj.get("spec") or {}
        partition = partition_of(spec)
        if partition is None or cluster not in split:
            return obj
        share = divide_partition(partition, split, replicas=self.replicas(obj))[cluster]
        if share == partition:
            return obj
        out = copy.deepcopy(obj)
        out["spec"]["updateStrategy"]["rollingUpdate"]["partition"] = share
        return out

    def updated_wanted(self, spec: Mapping[str, Any] | None, replicas: int) -> int:
        """As kubectl's ``rollout status`` reads a StatefulSet: with a partition, the pods at or
        above it (``replicas - partition``, none when the partition is higher); an OnDelete
        strategy updates nothing by itself, so none are awaited (Argo CD's health says the same)."""
        if spec is None:
            return replicas
        if ((spec.get("updateStrategy") or {}).get("type")) == "OnDelete":
            return 0
        partition = partition_of(spec)
        return replicas if partition is None else max(0, replicas - partition)

    def aggregate_status(self, obj: Obj, member_statuses: MemberStatuses) -> Obj:
        out = super().aggregate_status(obj, member_statuses)
        if out:
            out.update(merge_revisions(member_statuses))
        return out
