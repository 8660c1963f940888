"""Read-only typed views over stored objects, for code that reads one object more than once.

A controller holds objects as the object layer stores them: plain JSON dicts. Reading one
field used to be a chain such as ``((binding.get("spec") or {}).get("resource") or {})``;
a view names it once: ``BindingView(binding).resource``.

* :class:`ObjectView` — any object: ``metadata`` (name, namespace, uid, generation, labels,
  annotations, finalizers, ownerReferences, deletion), ``spec``, ``status`` and its conditions.
* :class:`BindingView` — a ResourceBinding: the workload it binds (``spec.resource``), the
  clusters the scheduler chose, eviction tasks, the claiming policy, priority, dependencies.
* :class:`WorkView` — a Work: its manifests and the agent's per-manifest statuses.
* :class:`ManifestStatusView` — one of those statuses: which manifest, the member object's
  health, the hooks that interpreted it, its conditions.
* :class:`ClusterObjectView` — a Cluster: taints, cordon, the agent's last report. (The
  scheduler's snapshot of a cluster is :class:`policies.affinity.ClusterView`.)

The view of a kind with an API module of its own is there, built on :class:`ObjectView`:
``FlowSchemaView`` (:mod:`controlplane.apis.kube.flowcontrol`), ``WorkloadRebalancerView``
(:mod:`controlplane.apis.apps_karmada_v1alpha1`), ``FederatedHPAView`` and
``CronFederatedHPAView`` (:mod:`controlplane.apis.autoscaling_karmada_v1alpha1`), ``PodView``
(:mod:`controlplane.apis.pods`); Kueue's ``WorkloadView``, ``ClusterQueueView``, ``CohortView`` and
``LocalQueueView`` have a module of their own (:mod:`controlplane.apis.kueue_views`), its API module
being near its size limit.

Zero-copy: a view wraps the dict it is given (``None`` reads as an empty object) and every
property is one or two lookups, so views are cheap on hot paths; a missing or empty field
reads as a fresh empty dict or an empty tuple, exactly as the ``.get(...) or {}`` chains did.
Views never write (their mappings are typed read-only): writers still copy and change the
dict (:attr:`ObjectView.raw`). Pure: no I/O,
no other layer.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

from controlplane.apis.untyped import json_int

#: Looked into, never handed out (typed read-only): a property that returns a part returns a fresh ``{}``.
_NOTHING: Final[Mapping[str, Any]] = {}


class ObjectView:
    """Any stored object: its metadata, spec, status and conditions."""

    __slots__ = ("raw",)

    def __init__(self, raw: Mapping[str, Any] | None) -> None:
        self.raw: Mapping[str, Any] = raw or {}

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.namespace}/{self.name})"

    @property
    def api_version(self) -> str:
        return str(self.raw.get("apiVersion") or "")

    @property
    def kind(self) -> str:
        return str(self.raw.get("kind") or "")

    @property
    def metadata(self) -> Mapping[str, Any]:
        return self.raw.get("metadata") or {}

    @property
    def spec(self) -> Mapping[str, Any]:
        return self.raw.get("spec") or {}

    @property
    def status(self) -> Mapping[str, Any]:
        return self.raw.get("status") or {}

    @property
    def name(self) -> str:
        return str((self.raw.get("metadata") or _NOTHING).get("name") or "")

    @property
    def namespace(self) -> str:
        """The namespace ("" for a cluster-scoped object)."""
        return str((self.raw.get("metadata") or _NOTHING).get("namespace") or "")

    @property
    def uid(self) -> str | None:
        uid = (self.raw.get("metadata") or _NOTHING).get("uid")
        return str(uid) if uid else None

    @property
    def generation(self) -> Any:
        """``metadata.generation`` as stored (compared, never computed with)."""
        return (self.raw.get("metadata") or _NOTHING).get("generation")

    @property
    def creation_timestamp(self) -> str:
        """``metadata.creationTimestamp`` as stored ("" when unset)."""
        return str((self.raw.get("metadata") or _NOTHING).get("creationTimestamp") or "")

    @property
    def deletion_timestamp(self) -> str | None:
        stamp = (self.raw.get("metadata") or _NOTHING).get("deletionTimestamp")
        return str(stamp) if stamp else None

    @property
    def is_deleting(self) -> bool:
        return bool((self.raw.get("metadata") or _NOTHING).get("deletionTimestamp"))

    @property
    def labels(self) -> Mapping[str, str]:
        return (self.raw.get("metadata") or _NOTHING).get("labels") or {}

    @property
    def annotations(self) -> Mapping[str, str]:
        return (self.raw.get("metadata") or _NOTHING).get("annotations") or {}

    @property
    def finalizers(self) -> Sequence[str]:
        return (self.raw.get("metadata") or _NOTHING).get("finalizers") or ()

    @property
    def owner_references(self) -> Sequence[Mapping[str, Any]]:
        return (self.raw.get("metadata") or _NOTHING).get("ownerReferences") or ()

    @property
    def conditions(self) -> Sequence[Mapping[str, Any]]:
        return (self.raw.get("status") or _NOTHING).get("conditions") or ()

    def condition(self, ctype: str) -> Mapping[str, Any] | None:
        """The status condition of type ``ctype`` (None when there is none)."""
        for cond in self.conditions:
            if cond.get("type") == ctype:
                return cond
        return None


class BindingView(ObjectView):
    """A ResourceBinding (``work.gpufed.io``)."""

    __slots__ = ()

    @property
    def resource(self) -> Mapping[str, Any]:
        """``spec.resource``: the workload bound (apiVersion, kind, namespace, name, uid …)."""
        return (self.raw.get("spec") or _NOTHING).get("resource") or {}

    @property
    def clusters(self) -> Sequence[Mapping[str, Any]]:
        """``spec.clusters``: the scheduler's targets (``name``, ``replicas``)."""
        return (self.raw.get("spec") or _NOTHING).get("clusters") or ()

    @property
    def cluster_names(self) -> tuple[str, ...]:
        return tuple(str(t.get("name")) for t in self.clusters if t.get("name"))

    @property
    def eviction_tasks(self) -> Sequence[Mapping[str, Any]]:
        """``spec.gracefulEvictionTasks``."""
        return (self.raw.get("spec") or _NOTHING).get("gracefulEvictionTasks") or ()

    @property
    def policy(self) -> Mapping[str, Any]:
        """``spec.policy``: the policy that claimed the workload (kind, name, namespace)."""
        return (self.raw.get("spec") or _NOTHING).get("policy") or {}

    @property
    def priority(self) -> int:
        """``spec.schedulePriority.priority`` (0 when it has none): the scheduling order."""
        return json_int(((self.raw.get("spec") or _NOTHING).get("schedulePriority") or _NOTHING).get("priority"))

    @property
    def placement(self) -> Mapping[str, Any]:
        """``spec.placement``: the policy's placement the binding was scheduled with."""
        return (self.raw.get("spec") or _NOTHING).get("placement") or {}

    @property
    def replicas(self) -> int:
        """``spec.replicas``: the replicas to divide (0 when it has none)."""
        return int((self.raw.get("spec") or _NOTHING).get("replicas") or 0)

    @property
    def propagate_deps(self) -> bool:
        return bool((self.raw.get("spec") or _NOTHING).get("propagateDeps"))

    @property
    def preserve_resources_on_deletion(self) -> bool:
        return bool((self.raw.get("spec") or _NOTHING).get("preserveResourcesOnDeletion"))

    @property
    def explanation(self) -> Sequence[Mapping[str, Any]]:
        """``status.explanation``: the scheduler's last per-cluster reasons."""
        return (self.raw.get("status") or _NOTHING).get("explanation") or ()


class WorkView(ObjectView):
    """A Work (``work.gpufed.io``) in a cluster's execution namespace."""

    __slots__ = ()

    @property
    def manifests(self) -> Sequence[dict[str, Any]]:
        """``spec.workload.manifests``: the objects the agent applies (as stored: the interpreters
        read them as they read any object)."""
        return ((self.raw.get("spec") or _NOTHING).get("workload") or _NOTHING).get("manifests") or ()

    @property
    def manifest_statuses(self) -> Sequence[Mapping[str, Any]]:
        """``status.manifestStatuses``: the agent's report per manifest."""
        return (self.raw.get("status") or _NOTHING).get("manifestStatuses") or ()


class ManifestStatusView:
    """One entry of a Work's ``status.manifestStatuses``: the agent's report of one manifest."""

    __slots__ = ("raw",)

    def __init__(self, raw: Mapping[str, Any] | None) -> None:
        self.raw: Mapping[str, Any] = raw or {}

    @property
    def identifier(self) -> Mapping[str, Any]:
        """``identifier``: the manifest reported (group, version, kind, namespace, name, ordinal)."""
        return self.raw.get("identifier") or {}

    @property
    def interpreted_by(self) -> Mapping[str, Any]:
        """``interpretedBy``: the customization hooks the agent ran on the member object."""
        return self.raw.get("interpretedBy") or {}

    @property
    def health(self) -> str | None:
        """``health``: the agent's verdict on the member object (None when it gave none)."""
        health = self.raw.get("health")
        return str(health) if health else None

    @property
    def conditions(self) -> Sequence[Mapping[str, Any]]:
        """``conditions``: the agent's conditions of this manifest (its hooks' failures among them)."""
        return self.raw.get("conditions") or ()


class ClusterObjectView(ObjectView):
    """A Cluster (``cluster.gpufed.io``) as stored."""

    __slots__ = ()

    @property
    def taints(self) -> Sequence[Mapping[str, Any]]:
        return (self.raw.get("spec") or _NOTHING).get("taints") or ()

    @property
    def unschedulable(self) -> bool:
        """``spec.unschedulable``: cordoned."""
        return bool((self.raw.get("spec") or _NOTHING).get("unschedulable"))

    @property
    def last_report_time(self) -> str | None:
        """``status.lastReportTime``: when the agent last reported."""
        value = (self.raw.get("status") or _NOTHING).get("lastReportTime")
        return str(value) if value else None
