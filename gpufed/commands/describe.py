"""`gpufed describe KIND/NAME [-n NS] [--clusters c1,c2|all]`: an object as the hub and its members see it.

For a hub workload: the hub's object (labels, its status), its placement (the binding's
clusters and replica shares, Scheduled and FullyApplied), then per cluster the member's copy's
status and conditions (read through the cluster proxy), the workload's pods (READY, STATUS and
RESTARTS as ``kubectl get pods`` shows them, node, GPU request, the GPU devices DCGM says each
holds; the hub's ``resourcebindings/<name>/pods``)
and one events timeline, hub and members merged oldest first. For ``pod/NAME`` the pod as
``kubectl describe pod`` shows it in whichever cluster has it, with its GPU devices and events.

The rendering functions are pure; the I/O is in :func:`describe`.
"""

from __future__ import annotations

import argparse
import asyncio
from collections.abc import Collection, Iterable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from controlplane.apis.dra import (
    RESOURCE_API_VERSION,
    TEMPLATE,
    ClaimLookup,
    ClassLookup,
    claim_entries,
    claim_spec_of,
    classes_asked,
)
from controlplane.apis.podstatus import pod_cells
from controlplane.apis.podview import (
    GpuDevice,
    align,
    devices_by_pod,
    gpu_request,
    percent,
    render_pod_list,
)
from gpufed.commands.events import about, collect, timeline
from gpufed.commands.running import run_reporting
from gpufed.hubclient import HubClient, HubError
from gpufed.memberproxy import (
    add_object_arguments,
    cluster_utilization,
    clusters,
    print_unreached,
    proxy_path,
    resolve,
)

BINDING_PATH = "/apis/work.gpufed.io/v1alpha1/namespaces/{namespace}/resourcebindings/{name}"
POD_WORDS = ("pod", "pods", "po")
LABEL_WIDTH = 14


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_object_arguments(parser, examples="deployment/llm-serving, pytorchjob/train, pod/x-0")


def field(label: str, value: object, *, indent: str = "") -> str:
    return f"{indent}{label + ':':<{LABEL_WIDTH}}{value}".rstrip()


def _labels(meta: Mapping[str, Any]) -> str:
    labels = meta.get("labels") or {}
    return ",".join(f"{k}={v}" for k, v in sorted(labels.items())) or "<none>"


def status_fields(status: Mapping[str, Any]) -> str:
    """A status's plain fields (replicas, readyReplicas, phase, ...) on one line, by name."""
    plain = {k: v for k, v in status.items() if isinstance(v, str | int | float) and not isinstance(v, bool)}
    return ", ".join(f"{k}={v}" for k, v in sorted(plain.items())) or "<none>"


def condition_lines(obj: Mapping[str, Any], *, indent: str = "  ") -> list[str]:
    conditions = [c for c in (obj.get("status") or {}).get("conditions") or [] if isinstance(c, Mapping)]
    if not conditions:
        return []
    rows = [["TYPE", "STATUS", "REASON", "MESSAGE"]]
    rows += [[str(c.get("type", "")), str(c.get("status", "")), str(c.get("reason") or ""),
              " ".join(str(c.get("message") or "").split())] for c in conditions]
    return [indent + line for line in align(rows)]


def render_hub(workload: Mapping[str, Any], binding: Mapping[str, Any] | None) -> list[str]:
    """The hub's object and its placement."""
    meta = workload.get("metadata") or {}
    lines = [
        field("Name", meta.get("name")), field("Namespace", meta.get("namespace")),
        field("Kind", f"{workload.get('kind')} ({workload.get('apiVersion')})"),
        field("Labels", _labels(meta)), field("Created", meta.get("creationTimestamp", "")),
        field("Hub status", status_fields(workload.get("status") or {})),
    ]
    if binding is None:
        return [*lines, field("Placement", "no ResourceBinding: no policy claims it yet (see gpufed explain)")]
    placed = (binding.get("spec") or {}).get("clusters") or []
    shares = ", ".join(f"{c.get('name')}={c.get('replicas', '-')}" for c in placed) or "none yet"
    return [*lines, field("Placement", shares), *condition_lines(binding)]


def render_member(cluster: str, obj: Mapping[str, Any] | None, error: str | None) -> list[str]:
    """One cluster's copy of the workload."""
    lines = [f"Cluster {cluster}:"]
    if error is not None:
        return [*lines, field("Error", error, indent="  ")]
    if obj is None:
        return [*lines, field("Status", "not in this cluster (yet)", indent="  ")]
    return [*lines, field("Status", status_fields(obj.get("status") or {}), indent="  "), *condition_lines(obj)]


def render_pod(cluster: str, pod: Mapping[str, Any], devices: Sequence[GpuDevice],
               events: Iterable[tuple[str, Mapping[str, Any]]], claims: ClaimLookup | None = None,
               unreadable: Collection[tuple[str, str]] = (), classes: ClassLookup | None = None, *,
               now: datetime) -> list[str]:
    """``pod/NAME`` in ``cluster``, as kubectl describe shows a pod, with its GPU devices (its GPU
    request counts its DRA claims ``claims`` finds, their requests' DeviceClasses read from
    ``classes``; those in ``unreadable`` are named as not readable). Its Ready, Status and Restarts
    are the READY, STATUS and RESTARTS ``kubectl get pods`` shows at ``now``."""
    meta, spec, status = pod.get("metadata") or {}, pod.get("spec") or {}, pod.get("status") or {}
    cells = pod_cells(dict(pod), now)
    owners = ", ".join(f"{o.get('kind')}/{o.get('name')}" for o in meta.get("ownerReferences") or []) or "<none>"
    lines = [
        field("Name", meta.get("name")), field("Namespace", meta.get("namespace")), field("Cluster", cluster),
        field("Node", spec.get("nodeName") or "<none>"), field("Start Time", status.get("startTime") or "<none>"),
        field("Labels", _labels(meta)), field("Ready", cells.ready), field("Status", cells.status),
        field("IP", status.get("podIP") or "<none>"),
        field("Controlled By", owners), field("GPU request", gpu_request(pod, claims, unreadable, classes)),
        field("GPU devices", ", ".join(f"{d.label()} ({percent(d.utilization)} busy)" for d in devices) or "<none>"),
        field("Restarts", cells.restarts), "Containers:",
    ]
    states = {str(c.get("name")): c for c in status.get("containerStatuses") or []}
    for container in spec.get("containers") or []:
        name = str(container.get("name"))
        state = (states.get(name) or {}).get("state") or {}
        resources = container.get("resources") or {}
        lines += [
            f"  {name}:", field("Image", container.get("image", ""), indent="    "),
            field("State", ", ".join(sorted(state)) or "<unknown>", indent="    "),
            field("Restarts", (states.get(name) or {}).get("restartCount", 0), indent="    "),
            field("Requests", _resources(resources.get("requests")), indent="    "),
            field("Limits", _resources(resources.get("limits")), indent="    "),
        ]
    lines += ["Conditions:", *condition_lines(pod), "Events:"]
    return lines + (["  " + line for line in timeline(events)] or ["  <none>"])


def _resources(values: Mapping[str, Any] | None) -> str:
    return ", ".join(f"{k}={v}" for k, v in sorted((values or {}).items())) or "<none>"


async def _describe_pod(hub: HubClient, name: str, namespace: str, candidates: list[str]) -> list[str]:
    path = f"/api/v1/namespaces/{namespace}/pods/{name}"
    answers = await asyncio.gather(*(hub.get_or_none(proxy_path(c, path)) for c in candidates), return_exceptions=True)
    found = [(cluster, pod) for cluster, pod in zip(candidates, answers, strict=True) if isinstance(pod, dict)]
    if not found:
        raise HubError(f'pods "{name}" not found in namespace "{namespace}" on {", ".join(candidates) or "no cluster"}')
    out: list[str] = []
    for cluster, pod in found:
        utilization = await cluster_utilization(hub, cluster)
        listing = await hub.read_list(proxy_path(cluster, f"/api/v1/namespaces/{namespace}/events"))
        events = [(cluster, e) for e in listing.get("items") or [] if about(e, "Pod", name, {name})]
        claims, unreadable = await hub_claim_specs(hub, namespace, pod)
        classes = await hub_device_classes(hub, pod, claims)
        devices = devices_by_pod(utilization).get((namespace, name), [])
        out += [*([""] if out else []), *render_pod(cluster, pod, devices, events, claims, unreadable, classes,
                                                             now=datetime.now(UTC))]
    return out


async def hub_claim_specs(
    hub: HubClient, namespace: str, pod: Mapping[str, Any]
) -> tuple[ClaimLookup, set[tuple[str, str]]]:
    """The claim specs of the templates and claims the pod names, as the hub holds them (the ones its
    placement counted), read with the user's credentials; and, by kind and name, those the hub
    refused the user (shown as not readable). One the hub does not hold counts nothing."""
    specs: dict[tuple[str, str], Mapping[str, Any]] = {}
    unreadable: set[tuple[str, str]] = set()
    for _entry, kind, name in claim_entries(pod.get("spec")):
        plural = "resourceclaimtemplates" if kind == TEMPLATE else "resourceclaims"
        try:
            found = await hub.get_or_none(f"/apis/{RESOURCE_API_VERSION}/namespaces/{namespace}/{plural}/{name}")
        except HubError:  # not readable by this user: its GPUs are not shown
            unreadable.add((kind, name))
            continue
        if (spec := claim_spec_of(kind, found)) is not None:
            specs[(kind, name)] = spec
    return (lambda kind, name: specs.get((kind, name))), unreadable


async def hub_device_classes(hub: HubClient, pod: Mapping[str, Any], claims: ClaimLookup) -> ClassLookup:
    """The specs of the hub's DeviceClasses the pod's claims (as ``claims`` finds them) ask for,
    read with the user's credentials. A class the hub refuses the user, or does not hold, is read
    as NVIDIA's published class of the name (a GPU when it is one of NVIDIA's two, else nothing)."""
    classes: dict[str, Mapping[str, Any]] = {}
    for class_name in sorted(classes_asked(claims(kind, name) for _entry, kind, name in claim_entries(pod.get("spec")))):
        try:
            found = await hub.get_or_none(f"/apis/{RESOURCE_API_VERSION}/deviceclasses/{class_name}")
        except HubError:  # not readable by this user: NVIDIA's class of the name, if any
            continue
        if found is not None:
            classes[class_name] = found.get("spec") or {}
    return classes.get


async def describe(args: argparse.Namespace) -> list[str]:
    from controlplane.apis.work_v1alpha1 import binding_name

    hub = HubClient.from_kubeconfig(args.kubeconfig)
    hub.chunk_size = args.chunk_size
    kind_word, _, name = args.target.partition("/")
    if not name:
        raise HubError("give the object as KIND/NAME, e.g. deployment/llm-serving or pod/train-0")
    namespace = args.namespace
    candidates = await clusters(hub, args.clusters)
    if kind_word.lower() in POD_WORDS:
        return await _describe_pod(hub, name, namespace, candidates)
    resource = await resolve(hub, None, kind_word)
    object_path = resource.collection(namespace) + f"/{name}"
    workload = await hub.request("GET", object_path)  # a missing one is the hub's NotFound, as kubectl shows it
    binding_path = BINDING_PATH.format(namespace=namespace, name=binding_name(name, resource.kind))
    binding = await hub.get_or_none(binding_path)
    lines = render_hub(workload, binding)
    placed = {str(c.get("name")) for c in ((binding or {}).get("spec") or {}).get("clusters") or []}
    for cluster in (c for c in candidates if c in placed):
        try:
            member = await hub.get_or_none(proxy_path(cluster, object_path))
            lines += render_member(cluster, member, None)
        except HubError as exc:
            lines += render_member(cluster, None, str(exc))
    if binding is not None:
        try:
            pods = render_pod_list(await hub.request("GET", binding_path + "/pods"))
        except HubError as exc:
            pods = [f"  not shown: {exc}"]
        lines += ["Pods:", *(["  " + line for line in pods] or ["  <none>"])]
    merged, failed = await collect(hub, namespace, resource.kind, name, candidates)
    print_unreached(failed)
    lines += ["Events:", *(["  " + line for line in timeline(merged)] or ["  <none>"])]
    return lines


def run(args: argparse.Namespace) -> int:
    return run_reporting(_describe_and_print(args), (HubError,))


async def _describe_and_print(args: argparse.Namespace) -> int:
    print("\n".join(await describe(args)))
    return 0
