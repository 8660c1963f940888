"""A workload's pods per member cluster, read by the hub through the agents' tunnels.

``GET /apis/work.gpufed.io/v1alpha1/namespaces/<ns>/resourcebindings/<name>/pods`` answers a
``WorkloadPodList``: for each cluster the binding places the workload on, the pods that belong
to it (:func:`controlplane.apis.podview.owned_by`) with READY, STATUS and RESTARTS as ``kubectl get
pods`` words them, node, GPU request (a pod's DRA
claims read from the hub's claim templates and claims of the namespace), the GPU
devices DCGM says they hold, and per pod the proxy path of its log. The
dashboard's pod list reads it.

Authorization, so nothing leaks: the API server has already checked ``get
resourcebindings/pods`` in the namespace. Then, per cluster, this handler asks the authorizer
the same question the proxy route asks (``get clusters/proxy`` named after the cluster): a
cluster the caller may not proxy to is listed with ``forbidden`` and the authorizer's reason,
without pods. Allowed clusters are read as the caller (impersonated at the member, as every
proxied request is), so the member's RBAC limits it too. The claim templates and claims a pod
names are read from the hub's store, so each is read only when the authorizer lets the caller
``get`` it (by name) or ``list`` its kind in the namespace (:func:`may_read_claim`, the
SubjectAccessReview kube would answer); a claim the caller may not read shows in the GPU request
as ``(DRA claim gpus: not readable)``, without what it asks. A request's DeviceClass is the hub's
of that name (its selectors read as placement reads them, :func:`controlplane.apis.dra.class_selection`)
when the caller may ``get`` it or ``list`` DeviceClasses (cluster-scoped), else NVIDIA's published
class of the name, as when the hub holds none.

The member's answer is read whole, bounded by :data:`MAX_LIST_BYTES`; the hub never opens a
connection toward a member (a cluster without a tunnel is listed with its error).
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from aiohttp import web

from controlplane.apis import proxyframing as framing
from controlplane.apis.constants import CLUSTER_GROUP, VERSION, WORK_GROUP
from controlplane.apis.dra import (
    CLAIM,
    DEVICE_CLASS,
    RESOURCE_API_VERSION,
    RESOURCE_GROUP,
    TEMPLATE,
    ClaimLookup,
    ClassLookup,
    claim_entries,
    claim_spec_of,
    classes_asked,
)
from controlplane.apis.podview import devices_by_pod, owned_by, pod_rows
from controlplane.apis.proxyframing import FrameKind
from controlplane.apiserver import errors
from controlplane.apiserver.app import OBJECT_STORE, USER
from controlplane.apiserver.identity import Authorizer, RequestAttributes, UserInfo
from controlplane.apiserver.proxy.routes import CLUSTERS_PATH, ProxyEndpoints, proxy_request
from controlplane.apiserver.proxy.tunnels import TooManyStreams, TunnelRegistry

logger = logging.getLogger(__name__)

PODS_PATH = f"/apis/{WORK_GROUP}/{VERSION}/namespaces/{{namespace}}/resourcebindings/{{name}}/pods"
#: The most bytes of one member's pod list the hub reads.
MAX_LIST_BYTES = 16 * 1024 * 1024
#: Per-cluster time for the whole list.
FETCH_TIMEOUT_SECONDS = 30.0


class FetchError(Exception):
    """A member could not be read through its tunnel; the message names the cluster. ``status`` is
    the member's HTTP code when it answered with an error (0 when it did not answer)."""

    def __init__(self, message: str, *, status: int = 0) -> None:
        super().__init__(message)
        self.status = status


async def fetch_json(
    tunnels: TunnelRegistry, cluster: str, path: str, user: UserInfo, *,
    timeout_seconds: float = FETCH_TIMEOUT_SECONDS,
) -> Any:
    """GET ``path`` on member ``cluster`` as ``user``, through its agent, within ``timeout_seconds``;
    the parsed JSON body."""
    tunnel = tunnels.get(cluster)
    if tunnel is None:
        raise FetchError(f"cluster {cluster}'s agent is not connected")
    request = proxy_request("GET", path, [("Accept", "application/json")], user)
    try:
        stream = tunnel.open_stream()
    except TooManyStreams as exc:
        raise FetchError(str(exc)) from None
    finished = False
    try:
        async with asyncio.timeout(timeout_seconds):
            await tunnel.send(framing.open_frame(stream.id, request, b""))
            status, body = 0, bytearray()
            while True:
                frame = await stream.next_frame()
                if frame.kind is FrameKind.HEAD:
                    status, _ = framing.parse_head(frame.payload)
                elif frame.kind is FrameKind.DATA:
                    body += frame.payload
                    if len(body) > MAX_LIST_BYTES:
                        raise FetchError(f"cluster {cluster}'s answer exceeds {MAX_LIST_BYTES} bytes")
                    await stream.credit(len(frame.payload))
                elif frame.kind is FrameKind.ERROR:
                    raise FetchError(framing.parse_error(frame.payload)[1])
                elif frame.kind is FrameKind.END:
                    finished = True
                    break
    except TimeoutError:
        raise FetchError(f"cluster {cluster} did not answer within {timeout_seconds:g}s") from None
    except ConnectionResetError:
        raise FetchError(f"cluster {cluster}'s agent disconnected") from None
    finally:
        await stream.close(cancel=not finished)
    try:
        answer = json.loads(body)
    except ValueError:
        raise FetchError(f"cluster {cluster} answered {status} with a body that is not JSON") from None
    if status >= 400:
        message = answer.get("message") if isinstance(answer, dict) else None
        raise FetchError(f"cluster {cluster}: {message or status}", status=status)
    return answer


#: The resource each DRA kind is authorized as (``resource.k8s.io``).
CLAIM_RESOURCES = {CLAIM: "resourceclaims", TEMPLATE: "resourceclaimtemplates", DEVICE_CLASS: "deviceclasses"}


def may_read_claim(authorizer: Authorizer, user: UserInfo, namespace: str, kind: str, name: str) -> bool:
    """Whether ``user`` may read the claim (or claim template) ``name`` of ``namespace`` on the hub
    (a DeviceClass: ``namespace`` ``""``): ``get`` on it by name, or ``list`` in the namespace (a
    list returns whole objects), as kube's authorizer would answer a SubjectAccessReview for either."""
    resource = CLAIM_RESOURCES[kind]
    asks = (
        RequestAttributes(user=user, verb="get", api_group=RESOURCE_GROUP, resource=resource,
                          namespace=namespace, name=name),
        RequestAttributes(user=user, verb="list", api_group=RESOURCE_GROUP, resource=resource, namespace=namespace),
    )
    return any(authorizer.authorize(ask).allowed for ask in asks)


def pod_list_routes(proxy: ProxyEndpoints, authorizer: Authorizer) -> list[web.RouteDef]:
    """The ``resourcebindings/<name>/pods`` route over ``proxy``'s tunnels; register it before the
    generic ``/apis`` routes."""

    async def workload_pods(request: web.Request) -> web.StreamResponse:
        namespace, name = request.match_info["namespace"], request.match_info["name"]
        user: UserInfo = request[USER]
        objects = request.app[OBJECT_STORE]
        binding = await objects.get(
            objects.registry.require(f"{WORK_GROUP}/{VERSION}", "ResourceBinding"), namespace=namespace, name=name
        )
        resource = (binding.get("spec") or {}).get("resource") or {}
        kind, workload = str(resource.get("kind") or ""), str(resource.get("name") or "")
        placed = [str(c.get("name")) for c in (binding.get("spec") or {}).get("clusters") or [] if c.get("name")]
        cluster_type = objects.registry.require(f"{CLUSTER_GROUP}/{VERSION}", "Cluster")

        specs: dict[tuple[str, str], Mapping[str, Any] | None] = {}
        unreadable: set[tuple[str, str]] = set()
        classes: dict[str, Mapping[str, Any] | None] = {}  # None: not the caller's to read, or not held
        reading = asyncio.Lock()  # clusters are listed together: one reads what the others then find

        async def read(kind: str, name: str, namespace: str) -> Mapping[str, Any] | None:
            rt = objects.registry.for_kind(RESOURCE_API_VERSION, kind)
            try:
                return await objects.get(rt, namespace=namespace or None, name=name) if rt is not None else None
            except errors.NotFound:
                return None

        async def read_classes() -> ClassLookup:
            """The specs of the hub's DeviceClasses the claims read so far name, where the caller may
            read them; any other class is read as NVIDIA's published one of the name."""
            for class_name in sorted(classes_asked(list(specs.values())) - classes.keys()):
                readable = may_read_claim(authorizer, user, "", DEVICE_CLASS, class_name)
                found = await read(DEVICE_CLASS, class_name, "") if readable else None
                classes[class_name] = None if found is None else (found.get("spec") or {})
            return classes.get

        async def read_claims(pods: list[dict[str, Any]]) -> tuple[ClaimLookup, ClassLookup]:
            """The specs of the claim templates and claims ``pods`` name, and of the DeviceClasses they
            ask, read from the hub only where the caller may read them (shared by all clusters: each
            object is asked about once)."""
            async with reading:
                for _entry, claim_kind, claim_name in (e for pod in pods for e in claim_entries(pod.get("spec"))):
                    key = (claim_kind, claim_name)
                    if key in specs or key in unreadable:
                        continue
                    if not may_read_claim(authorizer, user, namespace, claim_kind, claim_name):
                        unreadable.add(key)  # never read for this caller: its GPUs are not shown
                        continue
                    specs[key] = claim_spec_of(claim_kind, await read(claim_kind, claim_name, namespace))
                return (lambda claim_kind, claim_name: specs.get((claim_kind, claim_name))), await read_classes()

        async def one(cluster: str) -> dict[str, Any]:
            entry: dict[str, Any] = {"name": cluster, "pods": []}
            decision = authorizer.authorize(RequestAttributes(
                user=user, verb="get", api_group=CLUSTER_GROUP, resource="clusters", subresource="proxy", name=cluster,
            ))
            if not decision.allowed:
                entry["forbidden"] = decision.reason or f"no right on clusters/proxy for {cluster}"
                return entry
            try:
                listing = await fetch_json(proxy.tunnels, cluster, f"/api/v1/namespaces/{namespace}/pods", user)
            except FetchError as exc:
                entry["error"] = str(exc)
                return entry
            try:
                utilization = ((await objects.get(cluster_type, name=cluster)).get("status") or {}).get("utilization")
            except errors.NotFound:
                utilization = None
            pods = [pod for pod in listing.get("items") or [] if owned_by(pod, kind, workload)]
            claims, device_classes = (await read_claims(pods) if any((pod.get("spec") or {}).get("resourceClaims")
                                                                     for pod in pods) else (None, None))
            now = datetime.now(UTC)
            for row in pod_rows(cluster, pods, devices_by_pod(utilization), now, claims, unreadable, device_classes):
                pod = row.as_json()
                pod["logPath"] = f"{CLUSTERS_PATH}/{cluster}/proxy/api/v1/namespaces/{namespace}/pods/{row.name}/log"
                entry["pods"].append(pod)
            return entry

        clusters = await asyncio.gather(*(one(cluster) for cluster in sorted(placed)))
        return web.json_response({
            "kind": "WorkloadPodList", "apiVersion": f"{WORK_GROUP}/{VERSION}",
            "workload": {"apiVersion": resource.get("apiVersion"), "kind": kind, "namespace": namespace,
                         "name": workload},
            "clusters": list(clusters),
        })

    return [web.get(PODS_PATH.format(namespace="{namespace}", name="{name}"), workload_pods)]

