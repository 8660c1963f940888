"""The admission gate: a workload queued with Kueue's API propagates only once its Workload is admitted.

In: the hub's Kueue kinds (:class:`Kinds`, read from the controllers' informers) and a queued
workload. Out: a :class:`Gate` (held, with why, or free with the admitted flavor's cluster
labels and the clusters its MultiKueue checks dispatch it to), which the detector asks before it writes a binding and adds to its placement
(:func:`constrain_placement`); a change of a Workload's status looks at its workload again.
The Workloads themselves are made and admitted by :mod:`controlplane.controllers.admission`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from controlplane.admission import checks, multikueue, podgroups, pods, podsets, requeuing
from controlplane.admission import objects as adm
from controlplane.apis import kueue_jobs
from controlplane.apis import kueue_v1beta1 as kueue
from controlplane.apis.kube.validate_core import validate_pod
from controlplane.apis.kueue_multikueue import CONTROLLER_NAME as MULTIKUEUE
from controlplane.apis.kueue_views import WorkloadView
from controlplane.apis.trainer import is_train_job
from controlplane.apis.trainer_runtime import seeded_kueue_patch
from controlplane.apis.views import ObjectView
from controlplane.controllers.context import ControllerContext
from controlplane.controllers.workloads import WorkloadRef
from controlplane.interpreter.registry import group_of
from controlplane.objectclient import ObjectClient, ResourceType, WatchEventType, errors

API: Final = kueue.API_VERSION
JOB: Final = ("batch/v1", "Job")
#: The Workloads' index by their controller owner: (namespace, group, kind, name).
INDEX_OWNER: Final = "kueue-owner"
#: The Pods' index by their Kueue pod group: (namespace, group name).
INDEX_POD_GROUP: Final = "kueue-pod-group"


def owner_of(wl: Mapping[str, Any]) -> WorkloadRef | None:
    """The workload a Workload was made for (its controller owner), or None."""
    view = ObjectView(wl)
    for ref in view.owner_references:
        if ref.get("controller"):
            return WorkloadRef(str(ref.get("apiVersion")), str(ref.get("kind")), view.namespace, str(ref.get("name")))
    return None


@dataclass
class Kinds:
    """Kueue's kinds as the hub serves them (None: not served)."""

    ctx: ControllerContext
    workload: ResourceType | None = field(init=False)
    cluster_queue: ResourceType | None = field(init=False)
    local_queue: ResourceType | None = field(init=False)
    flavor: ResourceType | None = field(init=False)
    priority_class: ResourceType | None = field(init=False)
    cohort: ResourceType | None = field(init=False)
    admission_check: ResourceType | None = field(init=False)
    multikueue_config: ResourceType | None = field(init=False)
    multikueue_cluster: ResourceType | None = field(init=False)
    pod: ResourceType | None = field(init=False)

    def __post_init__(self) -> None:
        kind = self.ctx.registry.for_kind
        self.workload, self.cluster_queue = kind(API, "Workload"), kind(API, "ClusterQueue")
        if self.workload is not None:
            self.ctx.informer(self.workload).add_index(INDEX_OWNER, _owner_index)
        self.local_queue, self.flavor = kind(API, "LocalQueue"), kind(API, "ResourceFlavor")
        self.priority_class = kind(API, "WorkloadPriorityClass")
        self.cohort = kind(API, "Cohort")
        self.admission_check = kind(API, "AdmissionCheck")
        self.multikueue_config, self.multikueue_cluster = kind(API, "MultiKueueConfig"), kind(API, "MultiKueueCluster")
        self.pod = kind("v1", "Pod")
        if self.pod is not None:
            self.ctx.informer(self.pod).add_index(INDEX_POD_GROUP, _pod_group_index)

    def items(self, rt: ResourceType | None) -> list[dict[str, Any]]:
        return self.ctx.informer(rt).items() if rt is not None else []

    def flavors(self) -> dict[str, dict[str, str]]:
        return adm.flavor_labels(self.items(self.flavor))

    def admission_checks(self) -> dict[str, dict[str, Any]]:
        """The AdmissionChecks by name."""
        return self.by_name(self.admission_check)

    def by_name(self, rt: ResourceType | None) -> dict[str, dict[str, Any]]:
        """The objects of a cluster-scoped kind by name."""
        return {str(o["metadata"]["name"]): o for o in self.items(rt)}

    def dispatch_clusters(self, wl: Mapping[str, Any]) -> frozenset[str] | None:
        """The clusters a Workload's MultiKueue checks let it be placed on (None: it has none)."""
        return multikueue.dispatch_clusters(
            checks.states_of(wl), self.admission_checks(), self.by_name(self.multikueue_config),
            self.by_name(self.multikueue_cluster),
        )

    def workload_of(self, ref: WorkloadRef, *, uid: str | None = None) -> dict[str, Any] | None:
        """The Workload of a queued workload, found by its controller owner reference as Kueue
        finds it (so one named before the hub named Workloads as Kueue does is found too); with
        ``uid``, only one owned by that incarnation of the workload."""
        if self.workload is None:
            return None
        key = (ref.namespace, group_of(ref.api_version), ref.kind, ref.name)
        for wl in self.ctx.informer(self.workload).by_index(INDEX_OWNER, key):
            owner = adm.controller_owner(wl)
            if uid is None or (owner is not None and owner[3] in (uid, "")):
                return wl
        return None

    def members(self, namespace: str, group: str) -> list[dict[str, Any]]:
        """The Pods of a Kueue pod group (label ``kueue.x-k8s.io/pod-group-name``)."""
        return self.ctx.informer(self.pod).by_index(INDEX_POD_GROUP, (namespace, group)) if self.pod is not None else []

    def group_workload(self, namespace: str, group: str) -> dict[str, Any] | None:
        """The Workload of a pod group: named for the group, as Kueue names it (one another
        workload owns is none of the group's)."""
        wl = self.ctx.cached(self.workload, namespace, group) if self.workload is not None else None
        return wl if wl is not None and adm.controller_owner(wl) is None else None

    def owners(self, wl: Mapping[str, Any]) -> list[WorkloadRef]:
        """The workloads a Workload queues: its controller owner, or a pod group's Pods."""
        owner = owner_of(wl)
        if owner is not None:
            return [owner]
        if not podgroups.is_group_workload(wl):
            return []
        view = ObjectView(wl)
        return [WorkloadRef.of(p) for p in self.members(view.namespace, view.name)]

    def workload_for(self, source: Mapping[str, Any]) -> dict[str, Any] | None:
        """The Workload of ``source`` (a queued workload as stored: its UID decides; a Pod of a
        pod group: the group's)."""
        view = ObjectView(source)
        if pods.is_pod(source) and (group := podgroups.group_name(source)) is not None:
            return self.group_workload(view.namespace, group)
        return self.workload_of(WorkloadRef.of(source), uid=view.uid)


def _pod_group_index(pod: dict[str, Any]) -> list[tuple[str, str]]:
    group = podgroups.group_name(pod)
    return [] if group is None else [(str((pod.get("metadata") or {}).get("namespace") or ""), group)]


def _owner_index(wl: dict[str, Any]) -> list[tuple[str, str, str, str]]:
    owner = adm.controller_owner(wl)
    if owner is None:
        return []
    return [(str((wl.get("metadata") or {}).get("namespace") or ""), owner[0], owner[1], owner[2])]


@dataclass(frozen=True)
class Gate:
    """What admission says of a workload's propagation: held (with why), or free with the
    admitted flavor's cluster labels (empty when it is not queued)."""

    held: str | None = None
    cluster_labels: Mapping[str, str] = field(default_factory=dict)
    cluster_names: frozenset[str] | None = None
    """The clusters its MultiKueue checks dispatch it to (None: no such check)."""
    evicted: bool = False
    """Held because its Workload was evicted: what it propagated must be removed."""


class AdmissionGate:
    """The detector's view of admission: a queued workload propagates only once admitted."""

    def __init__(self, ctx: ControllerContext, on_change: Callable[[WorkloadRef], Awaitable[None]]) -> None:
        self.kinds = Kinds(ctx)
        self._on_change = on_change
        if self.kinds.workload is not None:
            ctx.informer(self.kinds.workload).add_handler(self._on_workload)
            if self.kinds.multikueue_cluster is not None:
                ctx.informer(self.kinds.multikueue_cluster).add_handler(self._on_dispatch_cluster)

    async def _on_dispatch_cluster(self, event: WatchEventType, obj: dict[str, Any], old: dict[str, Any] | None) -> None:
        """A MultiKueueCluster that becomes active or inactive changes where the workloads its
        checks dispatch may go: those held for want of one are looked at again (rare: a cluster's
        readiness changing)."""
        if old is not None and event is not WatchEventType.DELETED and (
            multikueue.condition_of(obj, "Active") == multikueue.condition_of(old, "Active")
        ):
            return
        checks_by_name = self.kinds.admission_checks()
        for wl in self.kinds.items(self.kinds.workload):
            if any(multikueue.is_multikueue(checks_by_name.get(str(s.get("name"))) or {}) for s in checks.states_of(wl)):
                for owner in self.kinds.owners(wl):
                    await self._on_change(owner)

    async def _on_workload(self, event: WatchEventType, obj: dict[str, Any], old: dict[str, Any] | None) -> None:
        if old is None or old.get("status") != obj.get("status") or event is WatchEventType.DELETED:
            for owner in self.kinds.owners(obj):
                await self._on_change(owner)

    def gate(self, workload: Mapping[str, Any]) -> Gate:
        if adm.queue_name(workload) is None or self.kinds.workload is None:
            return Gate()
        if not adm.queued_kind(workload):
            return Gate()
        wl = self.kinds.workload_for(workload)
        if wl is None:
            return Gate(held="waiting for its Workload to be created")
        admission = adm.admission_of(wl)
        if admission is None or not adm.is_true(wl, kueue.COND_ADMITTED):
            if adm.is_finished(wl):
                finished = adm.condition(wl, kueue.COND_FINISHED) or {}
                if finished.get("reason") == checks.REASON_FAILED_TO_START:
                    return Gate(held=f"failed to start (Workload {adm.key_of(wl)}): {finished.get('message', '')}")
                return Gate()
            cond = adm.condition(wl, kueue.COND_QUOTA_RESERVED) or {}
            why = cond.get("message") or "not admitted yet"
            held = f"waiting for quota (Workload {adm.key_of(wl)}): {why}"
            if admission is not None:
                held = f"waiting for admission checks (Workload {adm.key_of(wl)}): {checks.waiting_on(checks.states_of(wl))}"
            if not requeuing.is_active(wl):
                held = f"its Workload {adm.key_of(wl)} is deactivated (spec.active: false)"
            elif requeuing.requeue_at(wl) is not None and (state := WorkloadView(wl).requeue_state).get("requeueAt"):
                if (adm.condition(wl, kueue.COND_REQUEUED) or {}).get("reason") == checks.REASON_ADMISSION_CHECK:
                    held += f"; requeued at {state.get('requeueAt')} (an admission check's requeueAfterSeconds)"
                else:
                    held += f"; requeued at {state.get('requeueAt')} (backoff after {state.get('count')} PodsReady timeout(s))"
            evicted = adm.condition(wl, kueue.COND_EVICTED) or {}
            if evicted.get("status") == "True":
                return Gate(held=f"evicted: {evicted.get('message', '')}; {held}", evicted=True)
            return Gate(held=held)
        if (podsets.startable(workload) and podsets.suspended(workload)) or (pods.is_pod(workload) and pods.gated(workload)):
            # Admitted, but the admission controller has not started the job yet: until it does,
            # it has neither the flavor's node labels nor the checks' podSetUpdates in its pod
            # templates, and a Job has its own parallelism, not the admitted count (a member given
            # it would be given another count soon after: kube refuses the completions that count
            # then divides to). A Pod waits the same way for its scheduling gate to go.
            return Gate(held=(
                f"admitted by ClusterQueue {admission.get('clusterQueue', '')} (Workload {adm.key_of(wl)}); "
                f"waiting for the {workload.get('kind')} to be started with its admission"
            ))
        cluster_keys = {k for c in self.kinds.ctx.clusters.items() for k in ((c.get("metadata") or {}).get("labels") or {})}
        on_clusters, _ = adm.flavor_constraints(admission, self.kinds.flavors(), cluster_keys)
        names = self.kinds.dispatch_clusters(wl)
        if names is not None and not names:
            return Gate(held=f"waiting for an active cluster of its MultiKueue check (Workload {adm.key_of(wl)})")
        return Gate(cluster_labels=on_clusters, cluster_names=names)


async def hold_queued_workload(rt: ResourceType, obj: dict[str, Any]) -> None:
    """Kueue's webhooks' defaults, as a create check of the hub's API, for a workload created
    with a queue name. A job of a kind Kueue suspends (batch/v1 Job, JobSet, the Kubeflow jobs,
    RayJob, RayCluster, TrainJob) is created suspended (a TrainJob with Kueue's runtime patch, still
    empty), so it starts only once its Workload is admitted, and
    then with the admitted flavor's node labels in its pod templates (kube lets a suspended Job's
    scheduling directives change until it starts). Without it, a job created unsuspended could be
    admitted before the admission controller suspended it, and run without them. A Pod gets
    Kueue's scheduling gate ``kueue.x-k8s.io/admission``, removed when it is admitted, and Kueue's
    mark of a Pod it manages, the label and finalizer ``kueue.x-k8s.io/managed`` (Kueue's pod
    webhook; :mod:`controlplane.admission.pods`), and a Pod of a pod group its role's hash in the
    annotation ``kueue.x-k8s.io/role-hash`` (:mod:`controlplane.admission.podgroups`)."""
    if adm.queue_name(obj) is None:
        return
    typed = {**obj, "apiVersion": rt.api_version, "kind": rt.kind, "spec": obj.setdefault("spec", {}),
             "metadata": obj.setdefault("metadata", {})}
    if pods.is_pod(typed):
        pods.manage(typed)  # in obj's own metadata and spec
        if podgroups.group_name(typed) is not None:  # Kueue's webhook: the Pod's role in its group
            meta = obj["metadata"]
            meta["annotations"] = {**(meta.get("annotations") or {}), kueue.ANNOTATION_ROLE_HASH: podgroups.role_hash(typed)}
        # kube validates what a mutating webhook made: a Pod bound to a node may not be gated.
        refused = validate_pod(typed, None)
        if refused:
            meta = obj.get("metadata") or {}
            causes = [errors.Cause(str(e.type), e.message, e.field) for e in refused]
            raise errors.invalid(kind="Pod", group="", name=str(meta.get("name") or ""), causes=causes)
    elif podsets.startable(typed):
        kueue_jobs.set_job_suspend(typed, True)  # in obj's own spec
        if is_train_job(typed):  # Kueue's webhook: the runtime patch it writes on admission, empty
            obj["spec"] = seeded_kueue_patch(typed)["spec"]


def default_managed_by(client: ObjectClient) -> Callable[[ResourceType, dict[str, Any]], Awaitable[None]]:
    """Kueue's job webhooks' ``ApplyDefaultForManagedBy``, as a create check of the hub's API that
    reads the queues from ``client``: a job of a kind Kueue's MultiKueue dispatches, whose
    ``managedBy`` is unset or names the kind's own controller
    (:func:`~controlplane.apis.kueue_jobs.can_default_managed_by`), created with the label
    ``kueue.x-k8s.io/queue-name`` of a LocalQueue whose ClusterQueue names (for any flavor) a stored
    AdmissionCheck of the ``kueue.x-k8s.io/multikueue`` controller, gets
    ``managedBy: kueue.x-k8s.io/multikueue``. Anything else is left as written: no LocalQueue,
    no ClusterQueue, no such check, or a job managed by another controller. The queues are read
    as the hub last saw them (its watches keep them), as Kueue's webhook reads its cache: a
    queued create costs no store round trip."""

    async def get(kind: str, namespace: str | None, name: str) -> dict[str, Any] | None:
        rt = client.registry.for_kind(API, kind)
        if rt is None or not name:
            return None
        try:
            return await client.get_latest_seen(rt, namespace=namespace, name=name)
        except errors.NotFound:
            return None

    async def default(rt: ResourceType, obj: dict[str, Any]) -> None:
        typed = {**obj, "apiVersion": rt.api_version, "kind": rt.kind}
        queue = kueue_jobs.queue_label(typed)
        if not queue or not kueue_jobs.can_default_managed_by(typed):
            return
        local = await get("LocalQueue", ObjectView(obj).namespace, queue)
        cluster_queue = await get("ClusterQueue", None, str(((local or {}).get("spec") or {}).get("clusterQueue") or ""))
        for name in checks.named_checks(cluster_queue) if cluster_queue is not None else ():
            if multikueue.is_multikueue(await get("AdmissionCheck", None, name)):
                kueue_jobs.set_managed_by(obj, MULTIKUEUE)  # obj's own spec: typed shares it
                return

    return default


def constrain_placement(spec: dict[str, Any], cluster_labels: Mapping[str, str]) -> None:
    """Add ``cluster_labels`` to a binding spec's cluster affinity (every term of
    ``clusterAffinities``), in place."""
    if not cluster_labels:
        return
    placement = spec.setdefault("placement", {})
    terms = placement.get("clusterAffinities")
    affinities = list(terms) if isinstance(terms, list) and terms else [placement.setdefault("clusterAffinity", {})]
    for affinity in affinities:
        selector = affinity.setdefault("labelSelector", {})
        selector["matchLabels"] = {**(selector.get("matchLabels") or {}), **cluster_labels}


__all__ = [
    "API", "JOB", "AdmissionGate", "Gate", "Kinds", "constrain_placement", "default_managed_by", "hold_queued_workload",
    "owner_of",
]
