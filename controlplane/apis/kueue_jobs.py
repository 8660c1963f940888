"""Where Kueue's job integrations keep the flag it flips to start a job it admitted, how the hub
reads and sets it on a wire object, and the rules Kueue's webhooks keep on update: the queue-name
label (jobs, Deployments, StatefulSets, LeaderWorkerSets; Kueue's ``jobframework`` keeps the same
per kind) and a StatefulSet's pod-group name and replicas. Pure."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from controlplane.apis.kube import objects
from controlplane.apis.kube.field import FieldError, forbidden, immutable
from controlplane.apis.kubeflow import GROUP as KUBEFLOW_GROUP
from controlplane.apis.kubeflow import TRAINING_KINDS
from controlplane.apis.kueue_names import LABEL_POD_GROUP_NAME, LABEL_QUEUE_NAME
from controlplane.apis.kueue_names import MULTIKUEUE_CONTROLLER_NAME as MULTIKUEUE
from controlplane.apis.trainer import DEFAULT_MANAGED_BY as TRAINER_CONTROLLER
from controlplane.apis.trainer import GROUP as TRAINER_GROUP
from controlplane.apis.trainer import TRAIN_JOB
from controlplane.gojson import go_quote

#: Where Kueue's job integrations keep the flag it flips to start a job it admitted (Kueue suspends
#: a queued job when it is created and unsuspends it on admission), by API group and kind.
SUSPEND_PATHS: Final[dict[tuple[str, str], tuple[str, ...]]] = {
    ("batch", "Job"): ("spec", "suspend"),
    ("jobset.x-k8s.io", "JobSet"): ("spec", "suspend"),
    ("ray.io", "RayJob"): ("spec", "suspend"),
    ("ray.io", "RayCluster"): ("spec", "suspend"),
    (TRAINER_GROUP, TRAIN_JOB): ("spec", "suspend"),
    **{(KUBEFLOW_GROUP, kind): ("spec", "runPolicy", "suspend") for kind in TRAINING_KINDS},
}


def suspend_path(api_version: str, kind: str) -> tuple[str, ...] | None:
    """The path of the field Kueue flips to start a job of this kind (None: not a Kueue job kind)."""
    group = api_version.rpartition("/")[0]
    return SUSPEND_PATHS.get((group, kind))


def job_suspend(obj: Mapping[str, Any]) -> bool | None:
    """The suspend flag of a job of a kind Kueue manages (None: another kind, or not set)."""
    path = suspend_path(str(obj.get("apiVersion") or ""), str(obj.get("kind") or ""))
    if path is None:
        return None
    parent: dict[str, Any] | None = dict(obj)
    for key in path[:-1]:
        parent = objects.child(parent, key)
    value = parent.get(path[-1]) if parent is not None else None
    return value if isinstance(value, bool) else None


def set_job_suspend(obj: dict[str, Any], value: bool) -> bool:
    """Set, in place, the suspend flag of a job of a kind Kueue manages; False for another kind
    (or one whose parents of the flag are not maps: left as written for validation to report)."""
    path = suspend_path(str(obj.get("apiVersion") or ""), str(obj.get("kind") or ""))
    parent: dict[str, Any] | None = obj if path is not None else None
    for key in (path or ())[:-1]:
        parent = objects.ensure(parent, key) if parent is not None else None
    if path is None or parent is None:
        return False
    parent[path[-1]] = value
    return True


_SPEC_MANAGED_BY: Final = ("spec", "managedBy")
_RUN_POLICY_MANAGED_BY: Final = ("spec", "runPolicy", "managedBy")
#: Per kind Kueue's MultiKueue dispatches (by API group and kind): where the job keeps its
#: ``managedBy``, and the name of the kind's own controller, which Kueue's webhook may replace
#: (its ``CanDefaultManagedBy``: the field unset or naming that controller).
MANAGED_BY: Final[dict[tuple[str, str], tuple[tuple[str, ...], str]]] = {
    ("batch", "Job"): (_SPEC_MANAGED_BY, "kubernetes.io/job-controller"),
    ("jobset.x-k8s.io", "JobSet"): (_SPEC_MANAGED_BY, "jobset.sigs.k8s.io/jobset-controller"),
    ("ray.io", "RayJob"): (_SPEC_MANAGED_BY, "ray.io/kuberay-operator"),
    ("ray.io", "RayCluster"): (_SPEC_MANAGED_BY, "ray.io/kuberay-operator"),
    (TRAINER_GROUP, TRAIN_JOB): (_SPEC_MANAGED_BY, TRAINER_CONTROLLER),
    **{(KUBEFLOW_GROUP, kind): (_RUN_POLICY_MANAGED_BY,
                                "kubeflow.org/mpi-operator" if kind == "MPIJob" else "kubeflow.org/training-operator")
       for kind in TRAINING_KINDS},
}


def _managed_by_of(obj: Mapping[str, Any]) -> tuple[tuple[str, ...], str] | None:
    group = str(obj.get("apiVersion") or "").rpartition("/")[0]
    return MANAGED_BY.get((group, str(obj.get("kind") or "")))


def _field_parent(obj: Any, path: tuple[str, ...], *, create: bool) -> dict[str, Any] | None:
    """The map that holds the last key of ``path`` (made where absent when ``create``), or None."""
    parent: dict[str, Any] | None = obj if isinstance(obj, dict) else None
    for key in path[:-1]:
        if parent is None:
            return None
        parent = objects.ensure(parent, key) if create else objects.child(parent, key)
    return parent


def managed_by(obj: Mapping[str, Any]) -> Any:
    """A job's ``managedBy`` (None: unset, or a kind Kueue's MultiKueue does not dispatch)."""
    entry = _managed_by_of(obj)
    parent = _field_parent(dict(obj), entry[0], create=False) if entry is not None else None
    return parent.get(entry[0][-1]) if parent is not None and entry is not None else None


def can_default_managed_by(obj: Mapping[str, Any]) -> bool:
    """Kueue's ``CanDefaultManagedBy`` (MultiKueue and, for a Job, ``MultiKueueBatchJobWithManagedBy``
    are on by default in the Kueue the hub follows): a job of a kind MultiKueue dispatches whose
    ``managedBy`` is unset or names the kind's own controller."""
    entry = _managed_by_of(obj)
    return entry is not None and managed_by(obj) in (None, entry[1])


def set_managed_by(obj: dict[str, Any], value: str | None) -> None:
    """Set, in place, a job's ``managedBy`` (None: removed); a kind MultiKueue does not dispatch,
    or one whose parents of the field are not maps, is left alone."""
    entry = _managed_by_of(obj)
    parent = _field_parent(obj, entry[0], create=value is not None) if entry is not None else None
    if entry is None or parent is None:
        return
    if value is None:
        parent.pop(entry[0][-1], None)
    else:
        parent[entry[0][-1]] = value


def multikueue_unmanaged(obj: Mapping[str, Any]) -> str | None:
    """Why Kueue's MultiKueue does not dispatch a job (its adapters' ``IsJobManagedByKueue``), in
    their words: a job of a kind it dispatches whose ``managedBy`` is not
    ``kueue.x-k8s.io/multikueue`` (``Expecting spec.managedBy to be "kueue.x-k8s.io/multikueue" not
    "<its managedBy>"``; MPIJob's adapter names ``spec.runPolicy.managedBy``, the other Kubeflow
    jobs' say ``spec.managedBy`` too). None: MultiKueue's, or a kind without the field."""
    entry = _managed_by_of(obj)
    if entry is None:
        return None
    value = managed_by(obj)
    value = value if isinstance(value, str) else ""
    if value == MULTIKUEUE:
        return None
    path = "spec.runPolicy.managedBy" if obj.get("kind") == "MPIJob" else "spec.managedBy"
    return f"Expecting {path} to be {go_quote(MULTIKUEUE)} not {go_quote(value)}"


def for_worker(manifest: dict[str, Any]) -> None:
    """In place: a job's copy for a member as Kueue's MultiKueue adapters create it in a worker
    cluster: a ``managedBy`` of MultiKueue removed, so that the member's own controller of the
    kind (the Job controller, JobSet's, the training operator, KubeRay, the trainer) runs it. Any
    other job, or object, is left alone."""
    if managed_by(manifest) == MULTIKUEUE:
        set_managed_by(manifest, None)


#: Where Kueue's job webhooks report a queue name that may not change.
QUEUE_NAME_PATH: Final = f"metadata.labels[{LABEL_QUEUE_NAME}]"
TEMPLATE_QUEUE_NAME_PATH: Final = f"spec.template.{QUEUE_NAME_PATH}"
#: Where Kueue's StatefulSet webhook reports a pod-group name or a replica count that may not change.
GROUP_NAME_PATH: Final = f"metadata.labels[{LABEL_POD_GROUP_NAME}]"
REPLICAS_PATH: Final = "spec.replicas"
#: Kueue's StatefulSet webhook's refusal of a scale up from zero while Pods of the scale down remain.
SCALING_DOWN: Final = "scaling down is still in progress"
_STATEFULSET: Final = ("apps/v1", "StatefulSet")


def queue_label(obj: Mapping[str, Any]) -> str:
    """An object's label ``kueue.x-k8s.io/queue-name`` ("" when it has none)."""
    return _label(obj, LABEL_QUEUE_NAME)


def _label(obj: Mapping[str, Any], key: str) -> str:
    labels = (obj.get("metadata") or {}).get("labels")
    value = labels.get(key) if isinstance(labels, Mapping) else None
    return value if isinstance(value, str) else ""


def update_errors(new: Mapping[str, Any], old: Mapping[str, Any]) -> list[FieldError]:
    """What Kueue's webhook of the kind refuses in an update, in its order: the queue-name rule
    (:func:`queue_name_update_errors`), then for a StatefulSet (its webhook's ``ValidateUpdate``):

    * its label ``kueue.x-k8s.io/pod-group-name`` never changes (the new value shown);
    * one with a queue name (Kueue leaves the others alone) changes ``spec.replicas`` only to or
      from 0 (absent counts 1): from one count to another is "field is immutable" (the new count
      shown); from 0 up while Pods of the scale down remain (``status.replicas`` above 0) is
      forbidden, "scaling down is still in progress"."""
    errors = queue_name_update_errors(new, old)
    if (str(new.get("apiVersion") or ""), str(new.get("kind") or "")) == _STATEFULSET:
        errors += _statefulset_errors(new, old)
    return errors


def _statefulset_errors(new: Mapping[str, Any], old: Mapping[str, Any]) -> list[FieldError]:
    errors = immutable(_label(new, LABEL_POD_GROUP_NAME), _label(old, LABEL_POD_GROUP_NAME), GROUP_NAME_PATH)
    if not queue_label(new):
        return errors
    written = objects.child(dict(new), "spec") or {}
    stored = objects.child(dict(old), "spec") or {}
    before, after = _replicas(stored.get("replicas")), _replicas(written.get("replicas"))
    if before != 0 and after != 0:
        errors += immutable(written.get("replicas"), stored.get("replicas"), REPLICAS_PATH)
    elif before == 0 and after > 0 and _positive((objects.child(dict(new), "status") or {}).get("replicas")):
        errors.append(forbidden(REPLICAS_PATH, SCALING_DOWN))
    return errors


def _replicas(value: Any) -> int:
    """``ptr.Deref(spec.replicas, 1)``."""
    return value if isinstance(value, int) and not isinstance(value, bool) else 1


def queue_name_update_errors(new: Mapping[str, Any], old: Mapping[str, Any]) -> list[FieldError]:
    """Kueue's webhooks' queue-name rule on an update, by kind (none for a kind Kueue neither
    suspends nor serves, or a plain Pod: :func:`controlplane.admission.pods.queue_name_update_errors`):

    * a job of a kind Kueue suspends (``ValidateJobOnUpdate``): while the job as written is not
      suspended, its label ``kueue.x-k8s.io/queue-name`` may be neither added, changed nor removed
      (kube's "field is immutable", with the new value, "" when removed). A suspended job may
      change queues;
    * a Deployment (its webhook's ``ValidateUpdate``): the label may not change once the Deployment
      as it was has ready replicas, nor be removed at all; the error shows the old value;
    * a StatefulSet (its webhook's ``ValidateUpdate``): the label never changes (the old value
      shown), nor does the one in its Pod template (the new value shown);
    * a LeaderWorkerSet (its webhook's ``ValidateUpdate``): the label never changes (the new
      value shown, "" when removed)."""
    api_version, kind = str(new.get("apiVersion") or ""), str(new.get("kind") or "")
    before, after = queue_label(old), queue_label(new)
    if (api_version, kind) == ("apps/v1", "Deployment"):
        ready = objects.child(dict(old), "status") or {}
        if _positive(ready.get("readyReplicas")) or after == "":
            return immutable(before, after, QUEUE_NAME_PATH)
        return []
    if (api_version, kind) == _STATEFULSET:
        return immutable(before, after, QUEUE_NAME_PATH) + immutable(
            _template_queue_label(new), _template_queue_label(old), TEMPLATE_QUEUE_NAME_PATH)
    if (api_version, kind) == ("leaderworkerset.x-k8s.io/v1", "LeaderWorkerSet"):
        return immutable(after, before, QUEUE_NAME_PATH)
    if suspend_path(api_version, kind) is None or job_suspend(new) is True:
        return []
    return immutable(after, before, QUEUE_NAME_PATH)


def _positive(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value > 0


def _template_queue_label(obj: Mapping[str, Any]) -> str:
    template = objects.child(objects.child(dict(obj), "spec"), "template")
    return queue_label(template or {})
