"""One hollow member cluster: its objects, compact pods, and pods that start at once.

What a kubemark hollow node or KWOK does for a kube cluster, this does for a gpufed member
inside one process: nodes are rendered from one template (:mod:`simulator.hollow.nodes`),
pods are compact records rendered to manifests only when listed or watched, and a workload
(Deployment, StatefulSet, Job) gets its pods at once: created, placed by the simulated
member's real device allocator (:class:`~simulator.scheduling.cluster_state.ClusterState`)
and Running in the same step, or left Pending with the allocator's Unschedulable message
(placed as soon as a release makes room). A placed pod gets an IP, and a Service with a
selector its EndpointSlices (:mod:`simulator.hollow.endpointslices`, kept by pod). Other kinds
(ConfigMaps, Services ...) are kept as they were applied.

In: calls of the kube API's verbs by collection ("<apiVersion>/<plural>"), namespace and
name. Out: plain dict objects, :class:`HollowError` (a Kubernetes ``Status``), and watch
events through :class:`~simulator.hollow.watching.WatchHub`. Pure: no I/O.
"""

from __future__ import annotations

import hashlib
import itertools
import time
import uuid
from dataclasses import dataclass
from typing import Any, Final

import orjson

from controlplane.apis.bookmarks import BOOKMARK_PERIOD
from controlplane.apis.kube.unconditional import allows_create_on_update, allows_unconditional_update
from simulator.clock import rfc3339
from simulator.controllers.endpointslice import selects
from simulator.hollow.endpointslices import COLLECTION as ENDPOINT_SLICES
from simulator.hollow.endpointslices import HollowEndpointSlices
from simulator.hollow.nodes import HollowNodes
from simulator.hollow.watching import Event, WatchHub
from simulator.profile import ClusterProfile
from simulator.scheduling.cluster_state import ClusterState
from simulator.scheduling.model import PodRequest
from simulator.scheduling.reading import pod_request

#: The kinds a hollow member serves: apiVersion -> (plural, kind, namespaced).
SERVED: Final[dict[str, tuple[tuple[str, str, bool], ...]]] = {
    "v1": (
        ("namespaces", "Namespace", False),
        ("nodes", "Node", False),
        ("pods", "Pod", True),
        ("configmaps", "ConfigMap", True),
        ("secrets", "Secret", True),
        ("services", "Service", True),
        ("serviceaccounts", "ServiceAccount", True),
    ),
    "apps/v1": (("deployments", "Deployment", True), ("statefulsets", "StatefulSet", True)),
    "batch/v1": (("jobs", "Job", True),),
    "discovery.k8s.io/v1": (("endpointslices", "EndpointSlice", True),),
}
NODES: Final = "v1/nodes"
PODS: Final = "v1/pods"
SERVICES: Final = "v1/services"
WORKLOADS: Final = frozenset({"apps/v1/deployments", "apps/v1/statefulsets", "batch/v1/jobs"})

#: (collection, namespace, name) of an object.
Key = tuple[str, str, str]


class HollowError(Exception):
    """A request the member refuses, as a Kubernetes ``Status``."""

    def __init__(self, code: int, reason: str, message: str) -> None:
        super().__init__(message)
        self.code, self.reason, self.message = code, reason, message

    def status(self) -> dict[str, Any]:
        return {
            "kind": "Status",
            "apiVersion": "v1",
            "status": "Failure",
            "code": self.code,
            "reason": self.reason,
            "message": self.message,
        }


@dataclass(slots=True)
class _Pod:
    """A pod as a compact record; its labels, spec and owner are shared with its siblings."""

    namespace: str
    name: str
    uid: str
    owner: Key
    labels: dict[str, str]
    spec: dict[str, Any]
    owner_ref: dict[str, Any]
    created: str
    resource_version: int = 0
    node: str | None = None
    unschedulable: str | None = None
    #: What the allocator needs of the pod, read once.
    request: PodRequest | None = None
    #: The pod's IP, given when it is placed.
    ip: str | None = None

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    def manifest(self) -> dict[str, Any]:
        spec = dict(self.spec)
        if self.node:
            spec["nodeName"] = self.node
        if self.node:
            status: dict[str, Any] = {
                "phase": "Running",
                "startTime": self.created,
                "conditions": [
                    {"type": "PodScheduled", "status": "True"},
                    {"type": "Ready", "status": "True"},
                ],
            }
            if self.ip:
                status.update(podIP=self.ip, podIPs=[{"ip": self.ip}])
        else:
            status = {
                "phase": "Pending",
                "conditions": [
                    {
                        "type": "PodScheduled",
                        "status": "False",
                        "reason": "Unschedulable",
                        "message": self.unschedulable or "",
                    }
                ],
            }
        return {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": self.name,
                "namespace": self.namespace,
                "uid": self.uid,
                "resourceVersion": str(self.resource_version),
                "creationTimestamp": self.created,
                "labels": self.labels,
                "ownerReferences": [self.owner_ref],
            },
            "spec": spec,
            "status": status,
        }


def _now() -> str:
    return rfc3339(time.time())


def _copy(obj: Any) -> Any:
    return orjson.loads(orjson.dumps(obj))


def kind_of(collection: str) -> tuple[str, str, bool] | None:
    """(apiVersion, kind, namespaced) of a served collection."""
    api_version, _, plural = collection.rpartition("/")
    for name, kind, namespaced in SERVED.get(api_version, ()):
        if name == plural:
            return api_version, kind, namespaced
    return None


class HollowMember:
    """The state of one hollow member cluster."""

    def __init__(
        self,
        profile: ClusterProfile,
        *,
        seed: int | None = None,
        history: int = 512,
        bookmark_period: float = BOOKMARK_PERIOD,
    ) -> None:
        self.name = profile.name
        self.kubernetes_version = profile.simulation.kubernetesVersion
        self.nodes = HollowNodes(profile)
        self.allocator = ClusterState(scoring=profile.simulation.scoring, seed=seed)
        self.nodes.fill(self.allocator)
        self.watches = WatchHub(history=history, bookmark_period=bookmark_period)
        self.objects: dict[Key, dict[str, Any]] = {}
        self.pods: dict[str, _Pod] = {}
        self._pods_of: dict[Key, dict[str, _Pod]] = {}
        self._pending: dict[str, _Pod] = {}
        self._names = itertools.count(1)
        self._ips = itertools.count(1)
        self.endpoint_slices = HollowEndpointSlices(seed=seed)
        for namespace in ("default", "kube-system"):
            self.create("v1/namespaces", "", {"metadata": {"name": namespace}})

    # --- reads ----------------------------------------------------------------------------

    def get(self, collection: str, namespace: str, name: str) -> dict[str, Any]:
        if collection == NODES:
            index = self.nodes.index(name)
            if index is None:
                raise HollowError(404, "NotFound", f'nodes "{name}" not found')
            return self.nodes.manifest(index, resource_version="1")
        if collection == PODS:
            pod = self.pods.get(f"{namespace}/{name}")
            if pod is None:
                raise HollowError(404, "NotFound", f'pods "{name}" not found')
            return pod.manifest()
        obj = self.objects.get((collection, namespace, name))
        if obj is None:
            raise HollowError(404, "NotFound", f'{collection.rpartition("/")[2]} "{name}" not found')
        return obj

    def count(self, collection: str) -> int:
        if collection == NODES:
            return self.nodes.count
        if collection == PODS:
            return len(self.pods)
        return sum(1 for key in self.objects if key[0] == collection)

    def page(self, collection: str, namespace: str | None, start: int, limit: int) -> list[dict[str, Any]]:
        """Items ``start`` .. ``start + limit`` of a collection (in a stable order), each a fresh
        copy the caller may keep."""
        if collection == NODES:
            rv = "1"
            return [
                self.nodes.manifest(i, resource_version=rv)
                for i in range(start, min(self.nodes.count, start + limit))
            ]
        if collection == PODS:
            pods = (p for p in self.pods.values() if namespace is None or p.namespace == namespace)
            return [p.manifest() for p in itertools.islice(pods, start, start + limit)]
        objs = (
            o
            for k, o in self.objects.items()
            if k[0] == collection and (namespace is None or k[1] == namespace)
        )
        copied: list[dict[str, Any]] = _copy(list(itertools.islice(objs, start, start + limit)))
        return copied

    # --- writes ---------------------------------------------------------------------------

    def _publish(self, collection: str, namespace: str, kind: str, obj: dict[str, Any]) -> None:
        rv = int(obj["metadata"]["resourceVersion"])
        self.watches.publish(Event(rv, collection, namespace, kind, obj))

    def _store(self, key: Key, obj: dict[str, Any], event: str) -> dict[str, Any]:
        obj["metadata"]["resourceVersion"] = str(self.watches.next_revision())
        self.objects[key] = obj
        self._publish(key[0], key[1], event, obj)
        return obj

    def _checked(
        self, collection: str, namespace: str, body: dict[str, Any], name: str | None
    ) -> tuple[Key, dict[str, Any]]:
        served = kind_of(collection)
        if served is None or collection in (NODES, PODS):
            raise HollowError(
                405, "MethodNotAllowed", f"the hollow member does not write {collection} directly"
            )
        api_version, kind, namespaced = served
        obj: dict[str, Any] = _copy(body)
        meta = obj.setdefault("metadata", {})
        name = name or meta.get("name")
        if not name:
            raise HollowError(422, "Invalid", "metadata.name: Required value")
        if name != meta.get("name", name):
            raise HollowError(400, "BadRequest", "the name of the object does not match the name on the URL")
        meta["name"] = name
        if namespaced:
            meta["namespace"] = namespace
            if ("v1/namespaces", "", namespace) not in self.objects:
                raise HollowError(404, "NotFound", f'namespaces "{namespace}" not found')
        obj["apiVersion"], obj["kind"] = api_version, kind
        if collection in WORKLOADS:
            template = (obj.get("spec") or {}).get("template") or {}
            try:  # as kube's admission would, refuse a pod template the allocator cannot read
                pod_request(
                    {"metadata": {"name": name, "namespace": namespace}, "spec": template.get("spec") or {}}
                )
            except (ValueError, TypeError, AttributeError) as exc:
                raise HollowError(422, "Invalid", f"spec.template: {exc}") from exc
        return (collection, namespace if namespaced else "", name), obj

    def create(self, collection: str, namespace: str, body: dict[str, Any]) -> dict[str, Any]:
        key, obj = self._checked(collection, namespace, body, None)
        if key in self.objects:
            raise HollowError(
                409, "AlreadyExists", f'{collection.rpartition("/")[2]} "{key[2]}" already exists'
            )
        return self._write(key, obj, None)

    def apply(self, collection: str, namespace: str, name: str, body: dict[str, Any]) -> dict[str, Any]:
        """Server-side apply with force: the applied fields win, status and identity are kept."""
        key, obj = self._checked(collection, namespace, body, name)
        return self._write(key, obj, self.objects.get(key))

    def replace(self, collection: str, namespace: str, name: str, body: dict[str, Any]) -> dict[str, Any]:
        """A PUT, as kube's store takes it: a missing object is a 404 but for the kinds whose
        strategy creates it (:func:`allows_create_on_update`: a Service), which are created;
        an update without resourceVersion is kube's 422 for the kinds whose strategy refuses
        one (:func:`allows_unconditional_update`)."""
        key, obj = self._checked(collection, namespace, body, name)
        existing = self.objects.get(key)
        group, _, _ = obj["apiVersion"].rpartition("/")
        if existing is None:
            if allows_create_on_update(group, obj["kind"]):
                obj["metadata"].pop("resourceVersion", None)
                return self._write(key, obj, None)
            raise HollowError(404, "NotFound", f'{collection.rpartition("/")[2]} "{name}" not found')
        wanted = obj["metadata"].get("resourceVersion")
        if not wanted and not allows_unconditional_update(group, obj["kind"]):
            resource = ".".join(filter(None, (collection.rpartition("/")[2], group)))
            raise HollowError(
                422,
                "Invalid",
                f'{resource} "{name}" is invalid: metadata.resourceVersion: '
                "Invalid value: 0x0: must be specified for an update",
            )
        if wanted and wanted != existing["metadata"]["resourceVersion"]:
            raise HollowError(
                409,
                "Conflict",
                f'Operation cannot be fulfilled on "{name}": the object has been '
                "modified; please apply your changes to the latest version and try again",
            )
        return self._write(key, obj, existing)

    def _write(self, key: Key, obj: dict[str, Any], existing: dict[str, Any] | None) -> dict[str, Any]:
        meta = obj["metadata"]
        if existing is None:
            meta.update(uid=str(uuid.uuid4()), creationTimestamp=_now(), generation=1)
            obj["status"] = obj.get("status") or {}
        else:
            old = existing["metadata"]
            meta.update(
                uid=old["uid"],
                creationTimestamp=old["creationTimestamp"],
                generation=old.get("generation", 1) + (obj.get("spec") != existing.get("spec")),
            )
            obj["status"] = existing.get("status") or {}
        stored = self._store(key, obj, "ADDED" if existing is None else "MODIFIED")
        if key[0] in WORKLOADS:
            self._reconcile(key)
        elif key[0] == SERVICES and (
            existing is None
            or existing.get("spec") != obj.get("spec")
            or existing["metadata"].get("labels") != meta.get("labels")
        ):  # a Service written again unchanged (an agent's re-apply) keeps its slices: no pod walk
            pods = (
                p.manifest() for p in self.pods.values() if p.namespace == key[1] and selects(obj, p.labels)
            )
            self.endpoint_slices.service_changed(key[1], key[2], obj, pods)
            self._write_slices()
        return self.objects.get(key, stored)

    def delete(self, collection: str, namespace: str, name: str) -> dict[str, Any]:
        if collection == PODS:
            pod = self.pods.get(f"{namespace}/{name}")
            if pod is None:
                raise HollowError(404, "NotFound", f'pods "{name}" not found')
            self._remove_pod(pod)
            self._reconcile(pod.owner)
            self._place_pending()
            return pod.manifest()
        key: Key = (collection, namespace, name)
        if key not in self.objects:
            raise HollowError(404, "NotFound", f'{collection.rpartition("/")[2]} "{name}" not found')
        obj = self._drop(key)
        if collection == SERVICES:
            self.endpoint_slices.service_changed(namespace, name, None)
            self._write_slices()
        elif collection == ENDPOINT_SLICES:
            self.endpoint_slices.slice_deleted(obj)
            self._write_slices()
        if collection in WORKLOADS:
            for pod in list(self._pods_of.pop(key, {}).values()):
                self._remove_pod(pod)
            self._place_pending()
        return obj

    def _drop(self, key: Key) -> dict[str, Any]:
        """Remove a stored object, publishing its deletion."""
        obj = self.objects.pop(key)
        obj = {**obj, "metadata": {**obj["metadata"], "resourceVersion": str(self.watches.next_revision())}}
        self._publish(key[0], key[1], "DELETED", obj)
        return obj

    def _write_slices(self) -> None:
        """Store the EndpointSlice writes of the Services whose endpoints changed."""
        for (namespace, _), changes in self.endpoint_slices.changes():
            for obj in changes.create:
                meta = obj["metadata"]
                meta.update(uid=str(uuid.uuid4()), creationTimestamp=_now(), generation=1)
                self._store((ENDPOINT_SLICES, namespace, meta["name"]), obj, "ADDED")
            for obj in changes.update:
                key = (ENDPOINT_SLICES, namespace, obj["metadata"]["name"])
                self._store(key, obj, "MODIFIED" if key in self.objects else "ADDED")
            for name in changes.delete:
                if (ENDPOINT_SLICES, namespace, name) in self.objects:
                    self._drop((ENDPOINT_SLICES, namespace, name))

    def _pod_changed(self, pod: _Pod, *, removed: bool = False) -> None:
        if self.endpoint_slices.selecting(pod.namespace, pod.labels):
            self.endpoint_slices.pod_changed(
                pod.namespace, pod.name, pod.labels, None if removed else pod.manifest()
            )

    # --- workloads ------------------------------------------------------------------------

    def _remove_pod(self, pod: _Pod) -> None:
        self.pods.pop(pod.key, None)
        self._pending.pop(pod.key, None)
        self._pods_of.get(pod.owner, {}).pop(pod.name, None)
        self.allocator.release(pod.key)
        pod.resource_version = self.watches.next_revision()
        self._publish(PODS, pod.namespace, "DELETED", pod.manifest())
        self._pod_changed(pod, removed=True)

    def _new_pod(self, key: Key, workload: dict[str, Any], template_hash: str, index: int) -> _Pod:
        _, namespace, name = key
        kind = workload["kind"]
        template = workload.get("spec", {}).get("template") or {}
        labels = dict((template.get("metadata") or {}).get("labels") or {})
        owner = {
            "apiVersion": workload["apiVersion"],
            "kind": kind,
            "name": name,
            "uid": workload["metadata"]["uid"],
            "controller": True,
        }
        if kind == "Deployment":
            labels["pod-template-hash"] = template_hash
            owner = {**owner, "kind": "ReplicaSet", "name": f"{name}-{template_hash}"}
            pod_name = f"{name}-{template_hash}-{next(self._names):05x}"
        elif kind == "StatefulSet":
            pod_name = f"{name}-{index}"
        else:
            labels["job-name"] = name
            pod_name = f"{name}-{next(self._names):05x}"
        pod = _Pod(
            namespace,
            pod_name,
            str(uuid.uuid4()),
            key,
            labels,
            dict(template.get("spec") or {}),
            owner,
            _now(),
        )
        pod.request = pod_request(pod.manifest())
        return pod

    def _reconcile(self, key: Key) -> None:
        """Give the workload its pods (placed and Running at once) and its status."""
        workload = self.objects.get(key)
        if workload is None:
            return
        spec = workload.get("spec") or {}
        wanted = int(spec.get("parallelism" if workload["kind"] == "Job" else "replicas", 1) or 0)
        template_hash = hashlib.sha256(
            orjson.dumps(spec.get("template") or {}, option=orjson.OPT_SORT_KEYS)
        ).hexdigest()[:10]
        pods = self._pods_of.setdefault(key, {})
        for pod in list(pods.values()):
            if pod.labels.get("pod-template-hash", template_hash) != template_hash or pod.spec != (
                spec.get("template") or {}
            ).get("spec", {}):
                self._remove_pod(pod)
        for pod in sorted(pods.values(), key=lambda p: p.name)[wanted:]:
            self._remove_pod(pod)
        for index in range(len(pods), wanted):
            pod = self._new_pod(key, workload, template_hash, index)
            pods[pod.name] = pod
            self.pods[pod.key] = pod
            self._pending[pod.key] = pod
        self._place_pending()
        self._workload_status(key)

    def _place_pending(self) -> None:
        self._place()
        self._write_slices()  # of the pods placed and of those removed before

    def _place(self) -> None:
        if not self._pending:
            return
        requests = [pod.request or pod_request(pod.manifest()) for pod in self._pending.values()]
        result = self.allocator.schedule(requests)
        touched: set[Key] = set()
        for binding in result.bindings:
            pod = self._pending.pop(binding.pod_key)
            pod.node, pod.unschedulable = binding.node, None
            n = next(self._ips)
            pod.ip = f"10.{n >> 16 & 255}.{n >> 8 & 255}.{n & 255}"
            pod.resource_version = self.watches.next_revision()
            self._publish(PODS, pod.namespace, "ADDED", pod.manifest())
            self._pod_changed(pod)
            touched.add(pod.owner)
        for failed in result.unschedulable:
            pod = self._pending[failed.pod_key]
            if pod.unschedulable != failed.message:
                first = pod.unschedulable is None and pod.resource_version == 0
                pod.unschedulable = failed.message
                pod.resource_version = self.watches.next_revision()
                self._publish(PODS, pod.namespace, "ADDED" if first else "MODIFIED", pod.manifest())
        for owner in touched:
            self._workload_status(owner)

    def _workload_status(self, key: Key) -> None:
        workload = self.objects.get(key)
        if workload is None:
            return
        pods = self._pods_of.get(key, {}).values()
        total, running = len(pods), sum(1 for p in pods if p.node)
        generation = workload["metadata"].get("generation", 1)
        if workload["kind"] == "Job":
            status: dict[str, Any] = {
                "active": total,
                "ready": running,
                "startTime": workload["metadata"]["creationTimestamp"],
            }
        else:
            status = {"observedGeneration": generation, "replicas": total, "updatedReplicas": total}
            if running:
                status.update(readyReplicas=running, availableReplicas=running)
            if workload["kind"] == "StatefulSet":
                status["currentReplicas"] = total
            else:
                if total > running:
                    status["unavailableReplicas"] = total - running
                wanted = int((workload.get("spec") or {}).get("replicas", 1) or 0)
                status["conditions"] = [
                    {
                        "type": "Available",
                        "status": "True" if running >= wanted else "False",
                        "reason": "MinimumReplicasAvailable"
                        if running >= wanted
                        else "MinimumReplicasUnavailable",
                    }
                ]
        if status != workload.get("status"):
            self._store(
                key, {**workload, "metadata": dict(workload["metadata"]), "status": status}, "MODIFIED"
            )
