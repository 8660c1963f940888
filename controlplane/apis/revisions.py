"""A workload's rollout history as kube's controllers keep it, computed from the hub's own objects.

``kubectl rollout history`` and ``kubectl rollout undo`` read a Deployment's history from the
ReplicaSets it controls (one per distinct pod template, ``<name>-<pod-template-hash>``, numbered by
``deployment.kubernetes.io/revision``), and a StatefulSet's or DaemonSet's from its
ControllerRevisions (``data`` is a strategic merge patch that puts the template back). The hub
keeps these records itself from the template it holds, as kube's deployment, statefulset and
daemonset controllers do: :func:`plan_replica_sets` and :func:`plan_controller_revisions` take the
workload and the records it controls now and say what to create, rewrite and delete.

In: the workload and its records as dicts. Out: a :class:`HistoryPlan`. Pure; no I/O.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from controlplane.apis.constants import LABEL_POD_TEMPLATE_HASH
from controlplane.apis.templatehash import template_hash
from controlplane.apis.views import ObjectView

ANNOTATION_REVISION: Final = "deployment.kubernetes.io/revision"
ANNOTATION_REVISION_HISTORY: Final = "deployment.kubernetes.io/revision-history"
ANNOTATION_CHANGE_CAUSE: Final = "kubernetes.io/change-cause"
ANNOTATION_LAST_APPLIED: Final = "kubectl.kubernetes.io/last-applied-configuration"
LABEL_CONTROLLER_REVISION_HASH: Final = "controller-revision-hash"
#: kube's ``annotationsToSkip`` (deployment_util.go): a Deployment's annotations its ReplicaSets
#: do not take (kubectl's rollback keeps the Deployment's own values of these).
ANNOTATIONS_NOT_COPIED: Final = frozenset({
    ANNOTATION_LAST_APPLIED, ANNOTATION_REVISION, ANNOTATION_REVISION_HISTORY,
    "deployment.kubernetes.io/desired-replicas", "deployment.kubernetes.io/max-replicas",
    "deprecated.deployment.rollback.to",
})
#: kube's default ``spec.revisionHistoryLimit`` for the three kinds.
DEFAULT_HISTORY_LIMIT: Final = 10
#: kube's ``maxRevHistoryLengthInChars``: a longer revision-history drops its oldest entries.
MAX_REVISION_HISTORY_CHARS: Final = 2000
#: Kinds whose history the hub records, and in which kind of object.
HISTORY_KINDS: Final = {("apps", "Deployment"): "ReplicaSet", ("apps", "StatefulSet"): "ControllerRevision",
                        ("apps", "DaemonSet"): "ControllerRevision"}


@dataclass
class HistoryPlan:
    """What one reconcile writes: records to create, to rewrite (compare-and-swap), to delete
    (by name), and the Deployment's revision annotation when it must change (None otherwise)."""

    create: list[dict[str, Any]] = field(default_factory=list)
    update: list[dict[str, Any]] = field(default_factory=list)
    delete: list[str] = field(default_factory=list)
    workload_revision: str | None = None
    conflict: str | None = None
    """A record of the wanted name exists and is not the workload's: nothing is written."""


def controller_ref(owner: Mapping[str, Any]) -> dict[str, Any]:
    """kube's ``metav1.NewControllerRef``: the owner as the controller of what it records."""
    view = ObjectView(owner)
    return {"apiVersion": view.api_version, "kind": view.kind, "name": view.name,
            "uid": view.uid or "", "controller": True, "blockOwnerDeletion": True}


def controller_uid(obj: Mapping[str, Any]) -> str | None:
    """The uid of the object's controller (its ownerReference with ``controller: true``)."""
    for ref in ObjectView(obj).owner_references:
        if ref.get("controller") is True:
            return str(ref.get("uid") or "")
    return None


def is_deployment_replica_set(obj: Mapping[str, Any]) -> bool:
    """A ReplicaSet a Deployment controls: on the hub, a record of its history, never propagated."""
    view = ObjectView(obj)
    if view.kind != "ReplicaSet" or not view.api_version.startswith("apps/"):
        return False
    return any(
        ref.get("controller") is True and ref.get("kind") == "Deployment"
        and str(ref.get("apiVersion") or "").startswith("apps/")
        for ref in view.owner_references
    )


def revision_of(record: Mapping[str, Any]) -> int:
    """A ReplicaSet's ``deployment.kubernetes.io/revision`` or a ControllerRevision's ``revision``
    (0 when absent or not a number, as kube's ``Revision`` reads it)."""
    if record.get("kind") == "ControllerRevision":
        value = record.get("revision")
        return value if isinstance(value, int) and not isinstance(value, bool) else 0
    try:
        return int(ObjectView(record).annotations.get(ANNOTATION_REVISION) or 0)
    except ValueError:
        return 0


def history_limit(workload: Mapping[str, Any]) -> int:
    value = ObjectView(workload).spec.get("revisionHistoryLimit")
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else DEFAULT_HISTORY_LIMIT


def _without_nulls(value: Any) -> Any:
    """``value`` without null fields: Go reads them as unset, so kube's semantic equality and its
    hash see ``creationTimestamp: null`` (which kubectl's rollback sends in a template) as absent."""
    if isinstance(value, dict):
        return {k: _without_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_without_nulls(v) for v in value]
    return value


def comparable_template(workload: Mapping[str, Any]) -> dict[str, Any]:
    """The workload's pod template, as kube compares and hashes it (:func:`_without_nulls`)."""
    template = ObjectView(workload).spec.get("template")
    return _without_nulls(template) if isinstance(template, dict) else {}


def without_hash_label(template: Mapping[str, Any]) -> dict[str, Any]:
    """A ReplicaSet's template as its Deployment wrote it (kube's ``EqualIgnoreHash``)."""
    out = copy.deepcopy(dict(template))
    meta = dict(out.get("metadata") or {})
    labels = {k: v for k, v in (meta.get("labels") or {}).items() if k != LABEL_POD_TEMPLATE_HASH}
    if labels:
        meta["labels"] = labels
    else:
        meta.pop("labels", None)
    if meta:
        out["metadata"] = meta
    else:
        out.pop("metadata", None)
    return out


def _copied_annotations(workload: Mapping[str, Any]) -> dict[str, str]:
    return {k: v for k, v in ObjectView(workload).annotations.items() if k not in ANNOTATIONS_NOT_COPIED}


def _next_history(history: str, revision: int) -> str:
    """revision-history with ``revision`` appended, its oldest entries dropped past the limit."""
    entries = [e for e in history.split(",") if e] + [str(revision)]
    while len(",".join(entries)) > MAX_REVISION_HISTORY_CHARS and len(entries) > 1:
        entries.pop(0)
    return ",".join(entries)


def _with_labels(labels: Mapping[str, str], key: str, value: str) -> dict[str, str]:
    return {**labels, key: value}


def replica_set_name(deployment: Mapping[str, Any]) -> tuple[str, str]:
    """(name, pod-template-hash) of the ReplicaSet of the Deployment's current template, hashed
    with its ``status.collisionCount`` as kube's ``getNewReplicaSet`` does."""
    collisions = ObjectView(deployment).status.get("collisionCount")
    pod_hash = template_hash(comparable_template(deployment), collision_count=collisions if isinstance(collisions, int) else None)
    return f"{ObjectView(deployment).name}-{pod_hash}", pod_hash


def new_replica_set(deployment: Mapping[str, Any], *, revision: int) -> dict[str, Any]:
    """The ReplicaSet kube's deployment controller makes for the Deployment's current template."""
    view = ObjectView(deployment)
    name, pod_hash = replica_set_name(deployment)
    template = comparable_template(deployment)
    template_meta = template.setdefault("metadata", {})
    template_meta["labels"] = _with_labels(template_meta.get("labels") or {}, LABEL_POD_TEMPLATE_HASH, pod_hash)
    selector = copy.deepcopy(view.spec.get("selector") or {})
    selector["matchLabels"] = _with_labels(selector.get("matchLabels") or {}, LABEL_POD_TEMPLATE_HASH, pod_hash)
    spec: dict[str, Any] = {"replicas": _replicas(deployment), "selector": selector, "template": template}
    if isinstance(view.spec.get("minReadySeconds"), int):
        spec["minReadySeconds"] = view.spec["minReadySeconds"]
    return {
        "apiVersion": "apps/v1", "kind": "ReplicaSet",
        "metadata": {
            "name": name, "namespace": view.namespace,
            "labels": dict(template_meta["labels"]),
            "annotations": {**_copied_annotations(deployment), ANNOTATION_REVISION: str(revision)},
            "ownerReferences": [controller_ref(deployment)],
        },
        "spec": spec,
    }


def _replicas(deployment: Mapping[str, Any]) -> int:
    value = ObjectView(deployment).spec.get("replicas")
    return value if isinstance(value, int) and not isinstance(value, bool) else 1


def _age(record: Mapping[str, Any]) -> tuple[str, str]:
    """Oldest first (kube's ``FindNewReplicaSet`` takes the oldest of equal templates)."""
    return (str(ObjectView(record).metadata.get("creationTimestamp") or ""), ObjectView(record).name)


def _by_revision(records: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    return sorted(records, key=lambda r: (revision_of(r), ObjectView(r).name))


def plan_replica_sets(deployment: Mapping[str, Any], owned: Sequence[dict[str, Any]]) -> HistoryPlan:
    """What makes ``owned`` (the ReplicaSets the Deployment controls) its history, as kube's
    ``getNewReplicaSet``, ``SetNewReplicaSetAnnotations`` and ``cleanupDeployment`` do: the one
    of the current template (created, or reused with the next revision and the old one appended
    to revision-history) carries the Deployment's replicas, the others 0, and the oldest of
    those beyond ``revisionHistoryLimit`` are deleted. A paused Deployment's new template gets its
    ReplicaSet once it is resumed (kube's sync of a paused Deployment creates none)."""
    plan = HistoryPlan()
    template = comparable_template(deployment)
    current = [rs for rs in owned if _without_nulls(without_hash_label(ObjectView(rs).spec.get("template") or {})) == template]
    current_rs = min(current, key=_age) if current else None
    old = [rs for rs in owned if rs is not current_rs]
    next_revision = max((revision_of(rs) for rs in old), default=0) + 1
    revision: int | None = None
    if current_rs is not None:
        revision = max(revision_of(current_rs), next_revision)
        updated = _current_replica_set(deployment, current_rs, revision)
        if updated is not None:
            plan.update.append(updated)
    elif ObjectView(deployment).spec.get("paused") is not True:  # kube's sync of a paused one creates none
        plan.create.append(new_replica_set(deployment, revision=next_revision))
        revision = next_revision
    alive = [rs for rs in old if not ObjectView(rs).is_deleting]
    for rs in _by_revision(alive)[: max(0, len(alive) - history_limit(deployment))]:
        plan.delete.append(ObjectView(rs).name)
    for rs in old:
        if ObjectView(rs).spec.get("replicas") != 0 and ObjectView(rs).name not in plan.delete:
            plan.update.append({**rs, "spec": {**rs["spec"], "replicas": 0}})
    if revision is not None and ObjectView(deployment).annotations.get(ANNOTATION_REVISION) != str(revision):
        plan.workload_revision = str(revision)
    return plan


def _current_replica_set(deployment: Mapping[str, Any], rs: dict[str, Any], revision: int) -> dict[str, Any] | None:
    """The current ReplicaSet as it should be (None when it already is): the next revision (the
    one it had goes to revision-history), the Deployment's annotations and replicas."""
    view = ObjectView(rs)
    annotations = {k: v for k, v in view.annotations.items() if k in ANNOTATIONS_NOT_COPIED}
    annotations.update(_copied_annotations(deployment))
    had = revision_of(rs)
    if 0 < had < revision:
        annotations[ANNOTATION_REVISION_HISTORY] = _next_history(
            view.annotations.get(ANNOTATION_REVISION_HISTORY, ""), had
        )
    annotations[ANNOTATION_REVISION] = str(revision)
    annotations.pop(ANNOTATION_LAST_APPLIED, None)
    replicas = _replicas(deployment)
    if annotations == dict(view.annotations) and view.spec.get("replicas") == replicas:
        return None
    return {**rs, "metadata": {**rs["metadata"], "annotations": annotations}, "spec": {**rs["spec"], "replicas": replicas}}


def revision_data(workload: Mapping[str, Any]) -> dict[str, Any]:
    """A ControllerRevision's ``data`` as kube's statefulset and daemonset ``getPatch`` make it:
    the template, to be put back whole (``$patch: replace``) by a strategic merge patch."""
    return {"spec": {"template": {**comparable_template(workload), "$patch": "replace"}}}


def new_controller_revision(workload: Mapping[str, Any], *, revision: int) -> dict[str, Any]:
    """The ControllerRevision of the workload's current template (kube's ``NewControllerRevision``):
    named ``<name>-<hash of the template>``, the name the simulated members' controllers give the
    same template, so the hub's record matches a StatefulSet's ``status.updateRevision``."""
    view = ObjectView(workload)
    template = comparable_template(workload)
    digest = template_hash(template)
    labels = _with_labels((template.get("metadata") or {}).get("labels") or {}, LABEL_CONTROLLER_REVISION_HASH, digest)
    meta: dict[str, Any] = {"name": f"{view.name}-{digest}", "namespace": view.namespace, "labels": labels,
                            "ownerReferences": [controller_ref(workload)]}
    annotations = {k: v for k, v in view.annotations.items() if k != ANNOTATION_LAST_APPLIED}
    if annotations:
        meta["annotations"] = annotations
    return {"apiVersion": "apps/v1", "kind": "ControllerRevision", "metadata": meta,
            "data": revision_data(workload), "revision": revision}


def plan_controller_revisions(workload: Mapping[str, Any], owned: Sequence[dict[str, Any]]) -> HistoryPlan:
    """What makes ``owned`` (the ControllerRevisions the workload controls) its history, as kube's
    statefulset ``getStatefulSetRevisions`` and ``truncateHistory`` do: the revision of the
    current template is reused (renumbered past the others when it is not the latest) or created
    with the next number; the oldest beyond ``revisionHistoryLimit`` besides it are deleted."""
    plan = HistoryPlan()
    data = revision_data(workload)
    equal = [r for r in _by_revision(owned) if r.get("data") == data]
    latest = max((revision_of(r) for r in owned), default=0)
    current = equal[-1] if equal else None
    if current is None:
        plan.create.append(new_controller_revision(workload, revision=latest + 1))
    elif revision_of(current) < latest:
        plan.update.append({**current, "revision": latest + 1})
    others = [r for r in owned if r is not current and not ObjectView(r).is_deleting]
    for record in _by_revision(others)[: max(0, len(others) - history_limit(workload))]:
        plan.delete.append(ObjectView(record).name)
    return plan
