"""A simulated GPU member cluster running in-process over the API machinery's ObjectStore.

:class:`SimulatedCluster` gives the object store of a member cluster its GPU nodes
and the behaviour a real cluster would show: the scheduler binds pending pods (see
:mod:`simulator.scheduling`), the kubelet runs them (:mod:`simulator.kubelet`), the
workload controllers turn Deployments, StatefulSets, Jobs, PyTorchJobs, MPIJobs,
RayClusters and RayJobs into pods and keep their status (:mod:`simulator.controllers`),
a garbage collector removes pods whose owner is gone, and :meth:`metrics_text` renders
the nodes' dcgm-exporter page (:mod:`simulator.dcgm`).

Each loop is level-based over watches of the ObjectStore: an informer per kind keeps
a cache (updated by watch events and by our own writes, newest resourceVersion wins),
and one worker task per loop reconciles what changed. Writes are compare-and-swap on
the resourceVersion; on conflict the object is looked at again on the next pass.

In: a :class:`~simulator.profile.ClusterProfile` and an ``ObjectStore`` serving at least
Namespace, Node and Pod (the workload kinds it also serves get controllers).
Out: ``async run()`` (until ``shutdown()``), or ``async with`` (returns once the nodes
exist and the loops are watching).
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import logging
import random
from collections.abc import Callable, Mapping
from types import TracebackType
from typing import Any, Final, Self

from controlplane.apiserver import errors
from controlplane.apiserver.objects import ObjectStore, WatchEventType
from controlplane.apiserver.resources import ResourceType
from simulator import controllers as ctl
from simulator import kubelet
from simulator.clock import Clock, ScaledClock, rfc3339
from simulator.dcgm import PodDevice, render_metrics
from simulator.devices import NodeInventory
from simulator.nodes import build_inventory, build_nodes
from simulator.profile import ClusterProfile
from simulator.scheduling import Binding, ClusterState, PodRequest, Scoring, Unschedulable, pod_request

logger = logging.getLogger(__name__)

#: Devices the scheduler assigned, on the pod (comma-separated device plugin ids).
ANNOTATION_DEVICES: Final = "sim.gpufed.io/devices"
SCHEDULER_NAME: Final = "default-scheduler"
_DEFAULT_NAMESPACES: Final = ("default", "kube-system", "kube-public", "kube-node-lease")

Listener = Callable[[WatchEventType, dict[str, Any] | None, dict[str, Any] | None], None]


def _key(obj: Mapping[str, Any]) -> str:
    meta = obj.get("metadata") or {}
    namespace = meta.get("namespace")
    return f"{namespace}/{meta['name']}" if namespace else str(meta["name"])


def _rv(obj: Mapping[str, Any]) -> int:
    try:
        return int((obj.get("metadata") or {}).get("resourceVersion") or 0)
    except ValueError:
        return 0


class _Informer:
    """A watch-fed cache of one kind; our own writes are put in at once (newest rv wins)."""

    def __init__(self, objects: ObjectStore, rt: ResourceType) -> None:
        self.objects = objects
        self.rt = rt
        self.cache: dict[str, dict[str, Any]] = {}
        self.synced = asyncio.Event()
        self.listeners: list[Listener] = []
        self._tombstones: dict[str, int] = {}

    def put(self, obj: dict[str, Any]) -> None:
        key = _key(obj)
        rv = _rv(obj)
        if rv <= self._tombstones.get(key, 0):
            return
        old = self.cache.get(key)
        if old is not None and _rv(old) >= rv:
            return
        self.cache[key] = obj
        event = WatchEventType.ADDED if old is None else WatchEventType.MODIFIED
        for listener in self.listeners:
            listener(event, old, obj)

    def remove(self, obj: dict[str, Any]) -> None:
        key = _key(obj)
        self._tombstones[key] = max(self._tombstones.get(key, 0), _rv(obj))
        old = self.cache.pop(key, None)
        if old is not None:
            for listener in self.listeners:
                listener(WatchEventType.DELETED, old, None)

    async def run(self) -> None:
        while True:
            listed = await self.objects.list(self.rt)
            seen = set()
            for obj in listed.items:
                seen.add(_key(obj))
                self.put(obj)
            for key in [k for k in self.cache if k not in seen]:
                self.remove(self.cache[key])
            self.synced.set()
            try:
                async for event in self.objects.watch(self.rt, resource_version=listed.resource_version):
                    if event.type is WatchEventType.DELETED:
                        self.remove(event.object)
                    elif event.type in (WatchEventType.ADDED, WatchEventType.MODIFIED):
                        self.put(event.object)
            except errors.Gone:
                logger.info("watch of %s expired; relisting", self.rt.plural)


class _Queue:
    def __init__(self) -> None:
        self.keys: set[str] = set()
        self.wake = asyncio.Event()

    def add(self, key: str) -> None:
        self.keys.add(key)
        self.wake.set()

    async def take(self) -> set[str]:
        await self.wake.wait()
        self.wake.clear()
        keys, self.keys = self.keys, set()
        return keys


class SimulatedCluster:
    """Nodes, scheduler, kubelet, controllers and DCGM metrics of one simulated member."""

    def __init__(
        self,
        profile: ClusterProfile,
        objects: ObjectStore,
        *,
        clock: Clock | None = None,
        time_scale: float = 1.0,
        seed: int | None = None,
        scoring: Scoring | None = None,
    ) -> None:
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
        self._workload_rts: dict[str, ResourceType] = {}
        for api_version, kind in ctl.RECONCILERS:
            rt = registry.for_kind(api_version, kind)
            if rt is not None:
                self._workload_rts[kind] = rt
        self.pods = _Informer(objects, self._pod_rt)
        self.node_objects = _Informer(objects, self._node_rt)
        self.workloads = {kind: _Informer(objects, rt) for kind, rt in self._workload_rts.items()}
        self._queues = {kind: _Queue() for kind in self._workload_rts}
        self._by_owner: dict[str, set[str]] = {}
        self._schedule_wake = asyncio.Event()
        self._kubelet_wake = asyncio.Event()
        self._capacity_changed = True
        self._new_pending: set[str] = set()
        self._requests: dict[str, tuple[int, PodRequest]] = {}
        self._times: dict[str, kubelet.KubeletTimes] = {}
        self._stop = asyncio.Event()
        self.started = asyncio.Event()
        self._runner: asyncio.Task[None] | None = None
        self._garbage = _Queue()
        self.pods.listeners.append(self._on_pod)
        self.node_objects.listeners.append(self._on_node)
        for kind, informer in self.workloads.items():
            informer.listeners.append(self._workload_listener(kind))

    # --- lifecycle -----------------------------------------------------------------------

    async def __aenter__(self) -> Self:
        self._runner = asyncio.create_task(self.run(), name=f"sim-cluster-{self.profile.name}")
        started = asyncio.create_task(self.started.wait())
        await asyncio.wait({self._runner, started}, return_when=asyncio.FIRST_COMPLETED)
        if self._runner.done():
            started.cancel()
            self._runner.result()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.shutdown()
        if self._runner is not None:
            with contextlib.suppress(asyncio.CancelledError):
                await self._runner

    async def shutdown(self) -> None:
        """Stop every loop (idempotent)."""
        self._stop.set()

    async def run(self) -> None:
        """Create namespaces and nodes, then run the loops until :meth:`shutdown`."""
        await self._create_namespaces()
        await self._create_nodes()
        async with asyncio.TaskGroup() as group:
            tasks = [
                group.create_task(self.pods.run(), name="informer-pods"),
                group.create_task(self.node_objects.run(), name="informer-nodes"),
            ]
            tasks += [group.create_task(inf.run(), name=f"informer-{k}") for k, inf in self.workloads.items()]
            await self.pods.synced.wait()
            await self.node_objects.synced.wait()
            for informer in self.workloads.values():
                await informer.synced.wait()
            tasks.append(group.create_task(self._schedule_loop(), name="scheduler"))
            tasks.append(group.create_task(self._kubelet_loop(), name="kubelet"))
            tasks.append(group.create_task(self._garbage_loop(), name="garbage-collector"))
            tasks += [
                group.create_task(self._controller_loop(k), name=f"controller-{k}") for k in self.workloads
            ]
            await self._collect_garbage()
            self.started.set()
            await self._stop.wait()
            for task in tasks:
                task.cancel()

    # --- setup -----------------------------------------------------------------------------

    async def _create_namespaces(self) -> None:
        for name in _DEFAULT_NAMESPACES:
            with contextlib.suppress(errors.AlreadyExists):
                await self.objects.create(
                    self._namespace_rt, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}
                )

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

    def _workload_listener(self, kind: str) -> Listener:
        def listener(event: WatchEventType, old: dict[str, Any] | None, new: dict[str, Any] | None) -> None:
            obj = new or old
            assert obj is not None
            if event is WatchEventType.DELETED:
                uid = str(obj["metadata"].get("uid") or "")
                for key in list(self._by_owner.get(uid, ())):
                    self._garbage.add(key)
                return
            self._queues[kind].add(_key(obj))

        return listener

    def _on_node(self, event: WatchEventType, old: dict[str, Any] | None, new: dict[str, Any] | None) -> None:
        if event is WatchEventType.DELETED and old is not None:
            self.state.remove_node(old["metadata"]["name"])
        elif new is not None and new.get("status"):
            name = new["metadata"]["name"]
            self.state.add_node(new, self.inventory.get(name))
        self._capacity_changed = True
        self._schedule_wake.set()

    def _on_pod(self, event: WatchEventType, old: dict[str, Any] | None, new: dict[str, Any] | None) -> None:
        obj = new or old
        assert obj is not None
        key = _key(obj)
        uid = ctl.controller_uid(obj)
        if uid is not None:
            if new is None:
                self._by_owner.get(uid, set()).discard(key)
            else:
                self._by_owner.setdefault(uid, set()).add(key)
            for ref in obj["metadata"].get("ownerReferences") or []:
                queue = self._queues.get(str(ref.get("kind")))
                if queue is not None and ref.get("controller"):
                    queue.add(f"{obj['metadata'].get('namespace')}/{ref.get('name')}")
        if new is None or ctl.phase(new) in ("Succeeded", "Failed"):
            if self.state.release(key) is not None:
                self._capacity_changed = True
                self._schedule_wake.set()
            if new is None:
                self._times.pop(key, None)
                self._requests.pop(key, None)
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
            self._schedule_wake.set()

    @staticmethod
    def _wants_scheduling(pod: Mapping[str, Any]) -> bool:
        spec = pod.get("spec") or {}
        return (
            not spec.get("nodeName")
            and (spec.get("schedulerName") or SCHEDULER_NAME) == SCHEDULER_NAME
            and ctl.phase(pod) == "Pending"
            and not ctl.is_terminating(pod)
        )

    def _request(self, pod: dict[str, Any]) -> PodRequest | None:
        key = _key(pod)
        rv = _rv(pod)
        cached = self._requests.get(key)
        if cached is not None and cached[0] == rv:
            return cached[1]
        try:
            request = pod_request(pod)
        except (ValueError, KeyError) as exc:
            logger.warning("pod %s cannot be scheduled: %s", key, exc)
            return None
        self._requests[key] = (rv, request)
        return request

    # --- scheduler -----------------------------------------------------------------------------

    async def _schedule_loop(self) -> None:
        while True:
            await self._schedule_wake.wait()
            self._schedule_wake.clear()
            full = self._capacity_changed
            self._capacity_changed = False
            candidates = self.pods.cache.keys() if full else self._new_pending
            self._new_pending = set()
            pending = []
            for key in list(candidates):
                pod = self.pods.cache.get(key)
                if pod is None or not self._wants_scheduling(pod) or key in self.state.allocations:
                    continue
                request = self._request(pod)
                if request is not None:
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

    async def _bind(self, binding: Binding) -> None:
        pod = self.pods.cache.get(binding.pod_key)
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
        self.pods.put(await self._write_status(written) or written)
        self._kubelet_wake.set()

    async def _mark_unschedulable(self, failure: Unschedulable) -> None:
        pod = self.pods.cache.get(failure.pod_key)
        if pod is None:
            return
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
        written = await self._write_status(updated)
        if written is not None:
            self.pods.put(written)

    async def _write_status(self, obj: dict[str, Any]) -> dict[str, Any] | None:
        try:
            return await self.objects.update_status(self._pod_rt, obj)
        except (errors.Conflict, errors.NotFound):
            return None

    # --- kubelet -------------------------------------------------------------------------------

    async def _kubelet_loop(self) -> None:
        sim = self.profile.simulation
        while True:
            self._kubelet_wake.clear()
            now = self.clock.now()
            next_due: float | None = None
            for key, pod in list(self.pods.cache.items()):
                node = (pod.get("spec") or {}).get("nodeName")
                if not node or ctl.phase(pod) in ("Succeeded", "Failed") or ctl.is_terminating(pod):
                    continue
                times = self._times.get(key)
                if times is None:
                    times = self._times[key] = kubelet.KubeletTimes(bound_at=now)
                self._utilization(key, pod)
                status, due = kubelet.next_status(
                    pod,
                    times,
                    now=now,
                    startup_delay=sim.startupDelaySeconds,
                    default_duration=sim.jobDurationSeconds,
                    host_ip=self._node_ip(node),
                    pod_ip=self._pod_ip(key),
                )
                if status is not None:
                    if status.get("phase") == "Running" and times.started_at is None:
                        self._times[key] = kubelet.KubeletTimes(
                            times.bound_at, times.bound_at + sim.startupDelaySeconds
                        )
                    updated = dict(pod)
                    updated["status"] = status
                    written = await self._write_status(updated)
                    if written is not None:
                        self.pods.put(written)
                if due is not None and (next_due is None or due < next_due):
                    next_due = due
            await self.clock.sleep_until(next_due, self._kubelet_wake)

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
        obj = self.node_objects.cache.get(node) or {}
        for address in (obj.get("status") or {}).get("addresses") or []:
            if address.get("type") == "InternalIP":
                return str(address["address"])
        return "10.0.0.1"

    @staticmethod
    def _pod_ip(key: str) -> str:
        digest = abs(hash(key))
        return f"10.{128 + digest % 64}.{(digest >> 8) % 256}.{1 + (digest >> 16) % 254}"

    # --- controllers -----------------------------------------------------------------------------

    async def _controller_loop(self, kind: str) -> None:
        queue = self._queues[kind]
        informer = self.workloads[kind]
        reconcile = next(fn for (_, k), fn in ctl.RECONCILERS.items() if k == kind)
        rt = self._workload_rts[kind]
        for key in informer.cache:
            queue.add(key)
        while True:
            for key in sorted(await queue.take()):
                obj = informer.cache.get(key)
                if obj is None:
                    continue
                uid = str(obj["metadata"].get("uid") or "")
                pods = [
                    self.pods.cache[k] for k in sorted(self._by_owner.get(uid, ())) if k in self.pods.cache
                ]
                try:
                    changes = reconcile(obj, pods, now=rfc3339(self.clock.now()), rng=self.rng)
                except (KeyError, TypeError, ValueError) as exc:
                    logger.warning("cannot reconcile %s %s: %s", kind, key, exc)
                    continue
                await self._apply(kind, rt, informer, obj, changes)

    async def _apply(
        self, kind: str, rt: ResourceType, informer: _Informer, obj: dict[str, Any], changes: ctl.Changes
    ) -> None:
        namespace = obj["metadata"].get("namespace")
        for pod in changes.create:
            try:
                self.pods.put(await self.objects.create(self._pod_rt, pod))
            except errors.AlreadyExists:
                continue
            except errors.ApiError as exc:
                logger.warning(
                    "%s %s/%s: cannot create pod: %s", kind, namespace, obj["metadata"]["name"], exc
                )
        for name in changes.delete:
            doomed = self.pods.cache.get(f"{namespace}/{name}")
            if doomed is not None:
                await self._delete_pod(doomed)
        if changes.status is not None:
            updated = dict(obj)
            updated["status"] = changes.status
            try:
                informer.put(await self.objects.update_status(rt, updated))
            except errors.Conflict:
                self._queues[kind].add(_key(obj))
            except errors.NotFound:
                pass

    async def _delete_pod(self, pod: dict[str, Any]) -> None:
        meta = pod["metadata"]
        try:
            result = await self.objects.delete(
                self._pod_rt, namespace=meta.get("namespace"), name=meta["name"]
            )
        except errors.NotFound:
            return
        if result.deleted:
            self.pods.remove(result.object)

    async def _garbage_loop(self) -> None:
        """Delete the pods of owners that were deleted (background cascading deletion)."""
        while True:
            for key in sorted(await self._garbage.take()):
                pod = self.pods.cache.get(key)
                if pod is not None:
                    await self._delete_pod(pod)

    async def _collect_garbage(self) -> None:
        live = {
            str(obj["metadata"].get("uid"))
            for informer in self.workloads.values()
            for obj in informer.cache.values()
        }
        owned_kinds = set(self.workloads)
        for pod in list(self.pods.cache.values()):
            refs = [r for r in pod["metadata"].get("ownerReferences") or [] if r.get("controller")]
            if refs and refs[0].get("kind") in owned_kinds and str(refs[0].get("uid")) not in live:
                await self._delete_pod(pod)

    # --- DCGM ---------------------------------------------------------------------------------

    def metrics_text(self) -> str:
        """The dcgm-exporter page of every node (Hostname tells them apart)."""
        uses: list[PodDevice] = []
        utilization: dict[str, float] = {}
        for key, allocation in self.state.allocations.items():
            pod = self.pods.cache.get(key)
            if pod is None or not allocation.devices:
                continue
            running = ctl.phase(pod) == "Running"
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
