"""StatefulSet (apps/v1): ``spec.replicas`` pods from ``spec.template``; never a gang.

Each member runs its share with ordinals 0..share-1, so pod names repeat across
clusters; that is how Karmada divides StatefulSets too. Status counts are summed, as Karmada's
``aggregateStatefulSetStatus`` sums them; the revisions are merged by :func:`merge_revisions`,
which Karmada leaves out. A member's copy is healthy when its ``spec.replicas`` are ready and
updated, at the current generation.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from controlplane.interpreter.base import MemberStatuses, ReplicatedTemplateKind
from controlplane.interpreter.requirements import Obj

REPLICA_FIELDS = ("replicas", "readyReplicas", "currentReplicas", "updatedReplicas", "availableReplicas")
REVISION_FIELDS = ("currentRevision", "updateRevision")


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

    def aggregate_status(self, obj: Obj, member_statuses: MemberStatuses) -> Obj:
        out = super().aggregate_status(obj, member_statuses)
        if out:
            out.update(merge_revisions(member_statuses))
        return out
