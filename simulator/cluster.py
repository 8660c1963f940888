"""A simulated GPU member cluster running in-process over an ObjectClient (the API machinery's object layer).

:class:`SimulatedCluster` gives the object store of a member cluster its GPU nodes
and the behaviour a real cluster would show: the scheduler binds pending pods (see
:mod:`simulator.scheduling`; a pod whose PersistentVolumeClaim is missing or not bound yet stays unschedulable) and records its ``Scheduled`` / ``FailedScheduling``
Events (:mod:`simulator.recording`), the kubelet runs them (:mod:`simulator.kubelet`),
the workload controllers turn Deployments (through ReplicaSets), StatefulSets, Jobs,
the Kubeflow training jobs (PyTorchJob, TFJob, XGBoostJob, PaddleJob, JAXJob, MPIJob), RayClusters and RayJobs into pods and keep their status
(:mod:`simulator.controllers`, run by :mod:`simulator.controlling`), a garbage collector
removes ReplicaSets and pods whose controller owner is gone, claims bind once their StorageClass
exists (:mod:`simulator.volumes`), every Service with a selector gets its EndpointSlices
(:mod:`simulator.endpointslices`), every namespace gets its ``default``
ServiceAccount (the hub's :mod:`controlplane.controllers.serviceaccounts`), every ResourceQuota its
``status.used`` (the hub's :mod:`controlplane.controllers.resourcequota`; the member's API refuses
a pod past a quota with the hub's quota admission), finished Jobs are deleted once
their ``ttlSecondsAfterFinished`` passes (:mod:`simulator.expiring`), and :meth:`metrics_text`
renders the nodes' dcgm-exporter page (:mod:`simulator.dcgm`).

Each loop is level-based over the hub's informers
(:class:`controlplane.controllers.informing.Informer`: list + watch, an index of
children by their controller owner's uid; see :mod:`simulator.informers`). Caches are fed
by watches only; a write of ours shows up when its watch event arrives. Until then a controller does not act on an
owner whose children it has just created or deleted (kube's "expectations"), so a
stale cache never doubles pods; other writes are compare-and-swap on the
resourceVersion, and a conflict is left to the watch event that follows it.

In: a :class:`~simulator.profile.ClusterProfile` and an ``ObjectClient`` serving at least
Namespace, Node and Pod (the workload kinds it also serves get controllers; a served
Deployment needs ReplicaSet served too, see :func:`simulator.resources.member_registry`;
Events are recorded when Event is served).
Out: ``async run()`` (until ``shutdown()``), or ``async with`` (returns once the nodes
exist and the loops are watching).
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import dataclasses
import heapq
import logging
import random
from collections.abc import Mapping
from typing import Any, Final

from controlplane.apis.events import EventType
from controlplane.apis.kube.namespaces import SYSTEM_NAMESPACES
from controlplane.controllers.informing import Informer
from controlplane.controllers.resourcequota import ResourceQuotaController
from controlplane.controllers.serviceaccounts import ServiceAccountsController
from controlplane.lifecycle import Service
from controlplane.objectclient import ObjectClient, WatchEventType, errors
from simulator import kubelet
from simulator.admitting import system_priority_classes
from simulator.clock import Clock, ScaledClock, rfc3339
from simulator.controllers.base import is_terminating, phase
from simulator.controlling import WorkloadControllers
from simulator.dcgm import PodDevice, render_metrics
from simulator.devices import NodeInventory
from simulator.draclaims import DraClaims
from simulator.endpointslices import EndpointSliceController
from simulator.events import EventAction, EventReason
from simulator.expiring import FinishedJobsCleaner
from simulator.informers import as_handler, cached, object_key, owned_informer
from simulator.nodes import build_inventory, build_nodes
from simulator.profile import ClusterProfile
from simulator.recording import EventRecorder
from simulator.scheduling.cluster_state import ClusterState
from simulator.scheduling.filtering import missing_claim, missing_claim_message
from simulator.scheduling.model import Binding, PodRequest, Scoring, Unschedulable
from simulator.volumes import ClaimBinder, is_bound, unbound_claim_message

logger = logging.getLogger(__name__)

#: Devices the scheduler assigned, on the pod (comma-separated device plugin ids).
ANNOTATION_DEVICES: Final = "sim.gpufed.io/devices"
SCHEDULER_NAME: Final = "default-scheduler"
#: The ``source.component`` of the kubelet's Events (their ``source.host`` is the node).
KUBELET_COMPONENT: Final = "kubelet"


class SimulatedCluster(Service):
    """Nodes, scheduler, kubelet, controllers, Events and DCGM metrics of one simulated member."""

    def __init__(
        self,
        profile: ClusterProfile,
        objects: ObjectClient,
        *,
        clock: Clock | None = None,
        time_scale: float = 1.0,
        seed: int | None = None,
        scoring: Scoring | None = None,
    ) -> None:
        super().__init__(f"sim-cluster-{profile.name}")
        self.profile = profile
        self.objects = objects
        self.clock: Clock = clock if clock is not None else ScaledClock(time_scale)
        self.rng = random.Random(seed)
        self.state = ClusterState(scoring=scoring or profile.simulation.scoring, seed=seed)
        self.inventory: dict[str, NodeInventory] = build_inventory(profile)
        self.utilization: dict[str, float] = {}
        self._nodes = build_nodes(profile)
        registry = objects.registry
        self._pod_rt = registry.require("v1", "Pod")
        self._node_rt = registry.require("v1", "Node")
        self._namespace_rt = registry.require("v1", "Namespace")
        self._config_rts = {
            str(kind): rt for kind in kubelet.STARTUP_KINDS if (rt := registry.for_kind("v1", str(kind))) is not None
        }
        event_rt = registry.for_kind("v1", "Event")
        self.events = (
            EventRecorder(objects, event_rt, clock=self.clock, component=SCHEDULER_NAME) if event_rt else None
        )
        self.pods = owned_informer(objects, self._pod_rt, self._on_pod)
        self.node_objects = Informer(objects, self._node_rt)
        claim_rt = registry.for_kind("v1", "PersistentVolumeClaim")
        #: The claims pods name, for VolumeBinding's check (None: the member serves none).
        self.claims = Informer(objects, claim_rt) if claim_rt is not None else None
        if self.claims is not None:
            self.claims.add_handler(as_handler(self._on_claim))
        class_rt = registry.for_kind("storage.k8s.io/v1", "StorageClass")
        #: The StorageClasses claims name (None: the member serves no claims or no classes).
        self.storage_classes = Informer(objects, class_rt) if class_rt is not None and self.claims is not None else None
        self.claim_binder = (
            ClaimBinder(objects, self.claims, self.storage_classes, self.events)
            if self.claims is not None and self.storage_classes is not None else None
        )
        self.node_objects.add_handler(as_handler(self._on_node))
        #: DRA claims of NVIDIA GPUs count as GPU requests (a pod waits for a missing template).
        self.dra = DraClaims(objects, self._rescan)
        self.controllers = WorkloadControllers(
            objects, pods=self.pods, clock=self.clock, rng=self.rng, events=self.events
        )
        #: kube-controller-manager's: the ``default`` ServiceAccount of every namespace.
        self.service_accounts = (
            ServiceAccountsController(objects) if registry.for_kind("v1", "ServiceAccount") is not None else None
        )
        #: kube-controller-manager's resourcequota controller: each quota's ``status.used``.
        self.quotas = ResourceQuotaController(objects) if registry.for_kind("v1", "ResourceQuota") is not None else None
        #: kube-controller-manager's endpointslice controller (None: the member serves no EndpointSlices).
        self.endpoint_slices = EndpointSliceController.if_served(objects, pods=self.pods, rng=self.rng)
        jobs = self.controllers.informers.get("Job")
        self.finished_jobs = FinishedJobsCleaner(objects, jobs, clock=self.clock) if jobs is not None else None
        self._schedule_wake = asyncio.Event()
        self._kubelet_wake = asyncio.Event()
        #: Pods the kubelet looks at on its next pass: those whose object changed since its last.
        #: None: every pod (the first pass, over what the informer listed).
        self._kubelet_dirty: set[str] | None = None
        self._capacity_changed = True
        self._new_pending: set[str] = set()
        self._requests: dict[str, tuple[str, PodRequest]] = {}
        self._times: dict[str, kubelet.KubeletTimes] = {}
        self.started = asyncio.Event()

    # --- lifecycle -----------------------------------------------------------------------

    def ready(self) -> asyncio.Event:
        return self.started

    async def run(self) -> None:
        """Create namespaces and nodes, then run the loops until :meth:`shutdown`."""
        await self._create_namespaces()
        await self._create_nodes()
        informers = [self.pods, self.node_objects, *self.controllers.informers.values()]
        if self.claims is not None:
            informers.append(self.claims)
        if self.storage_classes is not None:
            informers.append(self.storage_classes)
        informers += [*self.dra.informers.values(), *(self.endpoint_slices.informers if self.endpoint_slices else ())]
        async with asyncio.TaskGroup() as group:
            tasks = [group.create_task(inf.run(), name=f"informer-{inf.rt.plural}") for inf in informers]
            for informer in informers:
                await informer.synced.wait()
            tasks.append(group.create_task(self._schedule_loop(), name="scheduler"))
            tasks.append(group.create_task(self._kubelet_loop(), name="kubelet"))
            tasks.append(group.create_task(self.controllers.garbage_loop(), name="garbage-collector"))
            tasks.append(group.create_task(self.controllers.retry_loop(), name="controller-retries"))
            for part, task_name in (  # the parts a member may lack (None: it serves none of their kinds)
                (self.service_accounts, "serviceaccounts"),
                (self.quotas, "resourcequota"),
                (self.claim_binder, "persistentvolume-binder"),
                (self.events, "event-recorder"),
                (self.finished_jobs, "ttl-after-finished"),
                (self.endpoint_slices, "endpointslice-controller"),
            ):
                if part is not None:
                    tasks.append(group.create_task(part.run(), name=task_name))
            tasks += [
                group.create_task(self.controllers.controller_loop(k), name=f"controller-{k}")
                for k in self.controllers.informers
            ]
            self.controllers.collect_garbage()
            self.started.set()
            await self._stop.wait()
            for task in tasks:
                task.cancel()

    # --- setup -----------------------------------------------------------------------------

    async def _create_namespaces(self) -> None:
        """The namespaces and the ``system-`` PriorityClasses every cluster starts with."""
        for name in SYSTEM_NAMESPACES:
            with contextlib.suppress(errors.AlreadyExists):
                await self.objects.create(
                    self._namespace_rt, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}
                )
        priority_rt = self.objects.registry.for_kind("scheduling.k8s.io/v1", "PriorityClass")
        if priority_rt is None:
            return
        for priority_class in system_priority_classes():
            with contextlib.suppress(errors.AlreadyExists):
                await self.objects.create(priority_rt, priority_class)

    async def _create_nodes(self) -> None:
        now = rfc3339(self.clock.now())
        for manifest in self._nodes:
            node = copy.deepcopy(manifest)
            for cond in node["status"]["conditions"]:
                cond["lastHeartbeatTime"] = now
                cond["lastTransitionTime"] = now
            try:
                created = await self.objects.create(self._node_rt, node)
            except errors.AlreadyExists:
                created = await self.objects.get(self._node_rt, name=node["metadata"]["name"])
            created["status"] = node["status"]
            await self.objects.update_status(self._node_rt, created)

    # --- event routing -----------------------------------------------------------------------

    def _on_node(self, event: WatchEventType, old: dict[str, Any] | None, new: dict[str, Any] | None) -> None:
        if event is WatchEventType.DELETED and old is not None:
            self.state.remove_node(old["metadata"]["name"])
        elif new is not None and new.get("status"):
            name = new["metadata"]["name"]
            self.state.add_node(new, self.inventory.get(name))
        self._capacity_changed = True
        self._schedule_wake.set()

    def _rescan(self) -> None:
        self._capacity_changed = True
        self._schedule_wake.set()

    def _on_claim(self, event: WatchEventType, old: dict[str, Any] | None, new: dict[str, Any] | None) -> None:
        if new is not None and (event is WatchEventType.ADDED or (is_bound(new) and not is_bound(old or {}))):
            # A pod waiting for this claim (or for it to bind) may be schedulable now.
            self._capacity_changed = True
            self._schedule_wake.set()

    def _on_pod(self, event: WatchEventType, old: dict[str, Any] | None, new: dict[str, Any] | None) -> None:
        obj = new or old
        assert obj is not None
        key = object_key(obj)
        self.controllers.child_changed("Pod", event, obj)
        if self._kubelet_dirty is not None:
            self._kubelet_dirty.add(key)
        if new is None or phase(new) in ("Succeeded", "Failed"):
            if self.state.release(key) is not None:
                self._capacity_changed = True
                self._schedule_wake.set()
            if new is None:
                self._times.pop(key, None)
                self._requests.pop(key, None)
                self.utilization.pop(key, None)
            return
        node_name = (new.get("spec") or {}).get("nodeName")
        if node_name:
            if key not in self.state.allocations:
                request = self._request(new)
                if request is not None:
                    ids = ((new["metadata"].get("annotations") or {}).get(ANNOTATION_DEVICES) or "").split(
                        ","
                    )
                    self.state.assume(request, node_name, [i for i in ids if i])
            self._kubelet_wake.set()
        elif self._wants_scheduling(new):
            self._new_pending.add(key)
            request = self._request(new)
            if request is not None and request.gang is not None:
                # Gang members arrive one watch event at a time: look at every pending pod,
                # so the members already cached are placed together with this one.
                self._capacity_changed = True
            self._schedule_wake.set()

    @staticmethod
    def _wants_scheduling(pod: Mapping[str, Any]) -> bool:
        spec = pod.get("spec") or {}
        return (
            not spec.get("nodeName")
            and (spec.get("schedulerName") or SCHEDULER_NAME) == SCHEDULER_NAME
            and phase(pod) == "Pending"
            and not is_terminating(pod)
        )

    def _request(self, pod: dict[str, Any]) -> PodRequest | None:
        key = object_key(pod)
        rv = str(pod["metadata"].get("resourceVersion") or "")
        cached = self._requests.get(key)
        if cached is not None and cached[0] == rv:
            return cached[1]
        try:
            request = self.dra.request(pod)
        except (ValueError, KeyError) as exc:
            logger.warning("pod %s cannot be scheduled: %s", key, exc)
            return None
        if request is None:
            return None  # a DRA claim it names is not here yet: Pending until it is (not cached)
        self._requests[key] = (rv, request)
        return request

    # --- scheduler -----------------------------------------------------------------------------

    async def _schedule_loop(self) -> None:
        while True:
            await self._schedule_wake.wait()
            self._schedule_wake.clear()
            full = self._capacity_changed
            self._capacity_changed = False
            candidates = [object_key(p) for p in self.pods.items()] if full else list(self._new_pending)
            self._new_pending = set()
            pending = []
            for key in candidates:
                pod = cached(self.pods, key)
                if pod is None or not self._wants_scheduling(pod) or key in self.state.allocations:
                    continue
                request = self._request(pod)
                if request is None:
                    continue
                claim_problem = self._claim_problem(request)
                if claim_problem is not None:
                    await self._mark_unschedulable(Unschedulable(key, claim_problem, {}))
                    continue
                pending.append((pod, request))
            if not pending:
                continue
            pending.sort(
                key=lambda item: (str(item[0]["metadata"].get("creationTimestamp") or ""), item[1].key)
            )
            result = self.state.schedule([request for _, request in pending])
            for binding in result.bindings:
                await self._bind(binding)
            for failure in result.unschedulable:
                await self._mark_unschedulable(failure)
            # Let other loops run between big scheduling passes.
            await asyncio.sleep(0)

    def _claim_problem(self, request: PodRequest) -> str | None:
        """Why VolumeBinding turns the pod away: a claim it names is missing or, where the member
        binds claims, not bound yet; None when neither."""
        if self.claims is None or not request.claims:
            return None
        found = {name: claim for name in request.claims if (claim := self.claims.get(request.namespace, name))}
        missing = missing_claim(request, found)
        if missing is not None:
            return missing_claim_message(len(self.state.nodes), missing)
        if self.claim_binder is not None and not all(is_bound(claim) for claim in found.values()):
            return unbound_claim_message(len(self.state.nodes))
        return None

    async def _bind(self, binding: Binding) -> None:
        pod = cached(self.pods, binding.pod_key)
        if pod is None:
            self.state.release(binding.pod_key)
            return
        updated = copy.deepcopy(pod)
        updated["spec"]["nodeName"] = binding.node
        if binding.devices:
            annotations = updated["metadata"].setdefault("annotations", {})
            annotations[ANNOTATION_DEVICES] = ",".join(d.id for d in binding.devices)
        try:
            written = await self.objects.update(self._pod_rt, updated)
        except (errors.Conflict, errors.NotFound):
            self.state.release(binding.pod_key)
            self._capacity_changed = True
            self._schedule_wake.set()
            return
        self._times[binding.pod_key] = kubelet.KubeletTimes(bound_at=self.clock.now())
        status = dict(written.get("status") or {})
        status["phase"] = "Pending"
        status["conditions"] = [_pod_condition("PodScheduled", "True", self.clock.now())]
        written["status"] = status
        await self._write_status(written)
        if self.events is not None:
            namespace, _, name = binding.pod_key.partition("/")
            self.events.record(
                written,
                type=EventType.NORMAL,
                reason=EventReason.SCHEDULED,
                message=f"Successfully assigned {namespace}/{name} to {binding.node}",
                action=EventAction.BINDING,
            )
        if self._kubelet_dirty is not None:
            self._kubelet_dirty.add(binding.pod_key)
        self._kubelet_wake.set()

    async def _mark_unschedulable(self, failure: Unschedulable) -> None:
        pod = cached(self.pods, failure.pod_key)
        if pod is None:
            return
        if self.events is not None:
            # Every failed attempt is an occurrence; the recorder folds repeats into count.
            self.events.record(
                pod,
                type=EventType.WARNING,
                reason=EventReason.FAILED_SCHEDULING,
                message=failure.message,
                action=EventAction.SCHEDULING,
            )
        status = dict(pod.get("status") or {})
        conditions = [c for c in status.get("conditions") or [] if c.get("type") != "PodScheduled"]
        old = next((c for c in status.get("conditions") or [] if c.get("type") == "PodScheduled"), None)
        if old is not None and old.get("reason") == "Unschedulable" and old.get("message") == failure.message:
            return
        cond = _pod_condition("PodScheduled", "False", self.clock.now())
        cond["reason"] = "Unschedulable"
        cond["message"] = failure.message
        status["phase"] = "Pending"
        status["conditions"] = [*conditions, cond]
        updated = dict(pod)
        updated["status"] = status
        await self._write_status(updated)

    async def _write_status(self, obj: dict[str, Any]) -> dict[str, Any] | None:
        """Write a pod's status; None when the pod changed or went meanwhile (its watch
        event brings the news, and the loop looks again)."""
        try:
            return await self.objects.update_status(self._pod_rt, obj)
        except (errors.Conflict, errors.NotFound):
            return None

    # --- kubelet -------------------------------------------------------------------------------

    async def _kubelet_loop(self) -> None:
        """Each pass looks at the pods whose objects changed since the last one and at those
        whose next transition is due (as kubelet's pod workers go by pod events and timers),
        not at every pod: a pass costs what changed, not the cluster's size."""
        sim = self.profile.simulation
        #: Pods whose status we wrote at a resourceVersion the cache has not moved past yet.
        written: dict[str, str] = {}
        #: When each pod's next transition is due, and the same as a heap (entries that no
        #: longer match ``due`` are skipped when they come up).
        due: dict[str, float] = {}
        timers: list[tuple[float, str]] = []
        while True:
            self._kubelet_wake.clear()
            now = self.clock.now()
            if self._kubelet_dirty is None:
                keys = {object_key(pod) for pod in self.pods.items()}
            else:
                keys = self._kubelet_dirty
            self._kubelet_dirty = set()
            while timers and timers[0][0] <= now:
                when, key = heapq.heappop(timers)
                if due.get(key) == when:
                    del due[key]
                    keys.add(key)
            for key in sorted(keys):  # a set's order varies by process: the seeded draws must not
                pod = cached(self.pods, key)
                node = (pod.get("spec") or {}).get("nodeName") if pod is not None else None
                if pod is None or not node or phase(pod) in ("Succeeded", "Failed") or is_terminating(pod):
                    written.pop(key, None)
                    due.pop(key, None)
                    continue
                if written.get(key) == pod["metadata"].get("resourceVersion"):
                    continue  # our last write has not come back through the watch yet
                written.pop(key, None)
                times = self._times.get(key)
                if times is None:
                    times = self._times[key] = kubelet.KubeletTimes(bound_at=now)
                self._utilization(key, pod)
                blocked = None
                if phase(pod) == "Pending" and now >= times.bound_at + sim.startupDelaySeconds:
                    blocked = await self._start_blocked(pod)
                status, next_at = kubelet.next_status(
                    pod,
                    times,
                    now=now,
                    startup_delay=sim.startupDelaySeconds,
                    default_duration=sim.jobDurationSeconds,
                    host_ip=self._node_ip(node),
                    pod_ip=self._pod_ip(key),
                    blocked=blocked,
                )
                if blocked is not None:
                    self._times[key] = dataclasses.replace(times, start_attempts=times.start_attempts + 1)
                    self._record_kubelet_event(pod, node, blocked)
                if status is not None:
                    if status.get("phase") == "Running" and times.started_at is None:
                        self._times[key] = kubelet.KubeletTimes(times.bound_at, kubelet.running_since(status))
                    updated = dict(pod)
                    updated["status"] = status
                    if await self._write_status(updated) is not None:
                        written[key] = str(pod["metadata"].get("resourceVersion"))
                if next_at is None:
                    due.pop(key, None)
                elif due.get(key) != next_at:
                    due[key] = next_at
                    heapq.heappush(timers, (next_at, key))
            while timers and due.get(timers[0][1]) != timers[0][0]:
                heapq.heappop(timers)  # a timer replaced or dropped since it was set
            if len(timers) > 2 * len(due) + 64:  # dropped timers far in the future: rebuild
                timers = [(when, key) for key, when in due.items()]
                heapq.heapify(timers)
            await self.clock.sleep_until(timers[0][0] if timers else None, self._kubelet_wake)

    async def _start_blocked(self, pod: Mapping[str, Any]) -> kubelet.StartBlocked | None:
        """What keeps the kubelet from starting ``pod`` now: the ConfigMaps and Secrets its
        volumes and environment name, as they are in the member (read, not cached: a pod
        rarely names any, and one that waits is looked at on a backoff)."""
        references = kubelet.startup_references(pod)
        if not references:
            return None
        namespace = str((pod.get("metadata") or {}).get("namespace") or "default")
        found: dict[tuple[str, str], frozenset[str] | None] = {}
        for reference in references:
            kind, name = str(reference.dependency.kind), reference.dependency.name
            if (kind, name) in found:
                continue
            rt = self._config_rts.get(kind)
            try:
                obj = await self.objects.get(rt, namespace=namespace, name=name) if rt is not None else None
            except errors.NotFound:
                obj = None
            found[(kind, name)] = None if obj is None else frozenset(
                key for field in ("data", "binaryData") for key in (obj.get(field) or {})
            )
        return kubelet.start_blocked(pod, found)

    def _record_kubelet_event(self, pod: Mapping[str, Any], node: str, blocked: kubelet.StartBlocked) -> None:
        if self.events is not None:
            self.events.record(
                pod,
                type=EventType.WARNING,
                reason=EventReason(blocked.event_reason),
                message=blocked.event_message,
                action=EventAction.STARTING,
                component=KUBELET_COMPONENT,
                host=node,
            )

    def _utilization(self, key: str, pod: Mapping[str, Any]) -> float:
        value = self.utilization.get(key)
        if value is None:
            annotated = kubelet.annotated_utilization(pod)
            value = (
                annotated if annotated is not None else self.profile.simulation.gpuUtilization.draw(self.rng)
            )
            self.utilization[key] = value
        return value

    def _node_ip(self, node: str) -> str:
        obj = self.node_objects.get(None, node) or {}
        for address in (obj.get("status") or {}).get("addresses") or []:
            if address.get("type") == "InternalIP":
                return str(address["address"])
        return "10.0.0.1"

    @staticmethod
    def _pod_ip(key: str) -> str:
        digest = abs(hash(key))
        return f"10.{128 + digest % 64}.{(digest >> 8) % 256}.{1 + (digest >> 16) % 254}"

    # --- DCGM ---------------------------------------------------------------------------------

    def metrics_text(self) -> str:
        """The dcgm-exporter page of every node (Hostname tells them apart)."""
        uses: list[PodDevice] = []
        utilization: dict[str, float] = {}
        for key, allocation in self.state.allocations.items():
            pod = cached(self.pods, key)
            if pod is None or not allocation.devices:
                continue
            running = phase(pod) == "Running"
            namespace, name = key.split("/", 1)
            for device in allocation.devices:
                uses.append(
                    PodDevice(
                        allocation.node, device.id, namespace, name, _container_for(pod, device.resource)
                    )
                )
            utilization[key] = self.utilization.get(key, 0.0) if running else 0.0
        return render_metrics(self.inventory.values(), uses, utilization)


def _container_for(pod: Mapping[str, Any], resource: str) -> str:
    containers = (pod.get("spec") or {}).get("containers") or []
    for container in containers:
        resources = container.get("resources") or {}
        if resource in (resources.get("limits") or {}) or resource in (resources.get("requests") or {}):
            return str(container.get("name") or "")
    return str(containers[0].get("name") or "") if containers else ""


def _pod_condition(kind: str, status: str, now: float) -> dict[str, Any]:
    return {"type": kind, "status": status, "lastProbeTime": None, "lastTransitionTime": rfc3339(now)}
