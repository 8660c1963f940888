"""The simulated member's EndpointSlice controller (discovery.k8s.io/v1), as pure functions.

What kube-controller-manager's endpointslice controller writes for a Service with a selector
(kubernetes ``pkg/controller/endpointslice``, ``staging/src/k8s.io/endpointslice``): slices owned
by the Service, named ``<service>-<5 chars>`` (``generateName: <service>-``), labelled with the
Service's own labels plus ``kubernetes.io/service-name`` and ``endpointslice.kubernetes.io/managed-by:
endpointslice-controller.k8s.io``, ``addressType: IPv4``. An endpoint per selected pod that has an
IP and may be in endpoints (a pod of ``restartPolicy: Never`` that finished, or of ``OnFailure``
that succeeded, is not): its ``addresses``, ``conditions`` (``ready`` = ready and not terminating,
or the Service publishes not-ready addresses; ``serving`` = ready; ``terminating``), ``nodeName``
and ``targetRef``. Pods whose ports resolve alike share slices of at most
:data:`MAX_ENDPOINTS_PER_SLICE` endpoints; a Service port's ``targetPort`` resolves through the
pod's container ports by name (a name no container has leaves that port out for the pod, as
kube's ``FindPort`` error does). A Service without endpoints keeps one placeholder slice (no
ports, no endpoints), as kube's reconciler does.

In: a Service, its pods (or their entries, kept by a caller that follows pods one by one:
:func:`pod_entry`, :func:`packed`), the slices it owns. Out: :class:`SliceChanges`. Unlike kube, slices are
not packed to minimise churn: the desired slices are matched to the existing ones by port set.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from controlplane.apis.kube.endpointslices import (
    API_VERSION,
    KIND,
    LABEL_MANAGED_BY,
    LABEL_SERVICE_NAME,
    MANAGED_BY_CONTROLLER,
    MAX_ENDPOINTS_PER_SLICE,
)
from simulator.controllers.base import is_ready, is_terminating, owner_reference, phase, random_suffix

Ports = tuple[tuple[str, int, str, str | None], ...]


@dataclass(slots=True)
class SliceChanges:
    """What one sync of a Service wants written."""

    create: list[dict[str, Any]] = field(default_factory=list)
    update: list[dict[str, Any]] = field(default_factory=list)
    #: Names of slices to delete (the Service's namespace).
    delete: list[str] = field(default_factory=list)


def selects(service: Mapping[str, Any], labels: Mapping[str, Any] | None) -> bool:
    """Whether the Service's (non-empty) selector selects a pod with ``labels``."""
    selector = (service.get("spec") or {}).get("selector") or {}
    return bool(selector) and all((labels or {}).get(k) == v for k, v in selector.items())


def pod_in_endpoints(pod: Mapping[str, Any]) -> bool:
    """kube's ``ShouldPodBeInEndpoints`` with terminating pods included: it has an IP, and a pod
    that will not run again (by its restart policy) is left out."""
    if not (pod.get("status") or {}).get("podIP"):
        return False
    restart = (pod.get("spec") or {}).get("restartPolicy") or "Always"
    if restart == "Never":
        return phase(pod) not in ("Succeeded", "Failed")
    if restart == "OnFailure":
        return phase(pod) != "Succeeded"
    return True


def _target_port(service_port: Mapping[str, Any], pod: Mapping[str, Any]) -> int | None:
    """kube's ``podutil.FindPort``: the number, or the container port of that name."""
    target = service_port.get("targetPort", service_port.get("port"))
    if isinstance(target, int):
        return target
    if isinstance(target, str) and target.isdigit():
        return int(target)
    protocol = service_port.get("protocol") or "TCP"
    for container in (pod.get("spec") or {}).get("containers") or []:
        for port in container.get("ports") or []:
            if port.get("name") == target and (port.get("protocol") or "TCP") == protocol:
                return int(port["containerPort"])
    return None


def endpoint_ports(service: Mapping[str, Any], pod: Mapping[str, Any]) -> Ports:
    """The slice ports of ``pod`` for the Service: (name, port, protocol, appProtocol)."""
    out = []
    for port in (service.get("spec") or {}).get("ports") or []:
        number = _target_port(port, pod)
        if number is not None:
            out.append(
                (
                    str(port.get("name") or ""),
                    number,
                    str(port.get("protocol") or "TCP"),
                    port.get("appProtocol"),
                )
            )
    return tuple(out)


def endpoint(service: Mapping[str, Any], pod: Mapping[str, Any]) -> dict[str, Any]:
    """kube's ``podToEndpoint`` (IPv4)."""
    meta = pod["metadata"]
    terminating = is_terminating(pod)
    serving = is_ready(pod)
    publish = bool((service.get("spec") or {}).get("publishNotReadyAddresses"))
    out: dict[str, Any] = {
        "addresses": [str(pod["status"]["podIP"])],
        "conditions": {
            "ready": publish or (serving and not terminating),
            "serving": serving,
            "terminating": terminating,
        },
    }
    node = (pod.get("spec") or {}).get("nodeName")
    if node:
        out["nodeName"] = node
    out["targetRef"] = {
        "kind": "Pod",
        "namespace": meta.get("namespace"),
        "name": meta["name"],
        "uid": meta.get("uid", ""),
    }
    return out


def _wire_ports(ports: Ports) -> list[dict[str, Any]]:
    out = []
    for name, number, protocol, app_protocol in ports:
        port: dict[str, Any] = {"name": name, "port": number, "protocol": protocol}
        if app_protocol:
            port["appProtocol"] = app_protocol
        out.append(port)
    return out


def slice_labels(service: Mapping[str, Any]) -> dict[str, str]:
    """kube's ``setEndpointSliceLabels``: the Service's labels, its name and the managing controller."""
    labels = {k: str(v) for k, v in ((service.get("metadata") or {}).get("labels") or {}).items()}
    labels[LABEL_SERVICE_NAME] = str(service["metadata"]["name"])
    labels[LABEL_MANAGED_BY] = MANAGED_BY_CONTROLLER
    return labels


#: A pod's place in its Service's slices: its resolved ports and its endpoint.
Entry = tuple[Ports, dict[str, Any]]
#: (ports, endpoints) of each slice a Service should have (ports None: the placeholder).
Desired = list[tuple[Ports | None, list[dict[str, Any]]]]


def pod_entry(service: Mapping[str, Any], pod: Mapping[str, Any]) -> Entry | None:
    """The pod's ports and endpoint in the Service's slices; None when it is not one of them."""
    if selects(service, (pod.get("metadata") or {}).get("labels")) and pod_in_endpoints(pod):
        return endpoint_ports(service, pod), endpoint(service, pod)
    return None


def desired_slices(service: Mapping[str, Any], pods: Sequence[Mapping[str, Any]]) -> Desired:
    """(ports, endpoints) of each slice the Service should have, from its pods (:func:`packed`)."""
    entries = {}
    for pod in pods:
        entry = pod_entry(service, pod)
        if entry is not None:
            entries[str(pod["metadata"]["name"])] = entry
    return packed(entries)


def packed(entries: Mapping[str, Entry]) -> Desired:
    """The slices of the endpoints ``entries`` (by pod name): grouped by resolved ports, by pod
    name, in chunks of :data:`MAX_ENDPOINTS_PER_SLICE`; a placeholder without ports and endpoints
    when there is none."""
    groups: dict[Ports, list[dict[str, Any]]] = {}
    for name in sorted(entries):
        ports, found = entries[name]
        groups.setdefault(ports, []).append(found)
    out: Desired = []
    for ports in sorted(groups):
        endpoints = groups[ports]
        out += [
            (ports, endpoints[i : i + MAX_ENDPOINTS_PER_SLICE])
            for i in range(0, len(endpoints), MAX_ENDPOINTS_PER_SLICE)
        ]
    return out or [(None, [])]


def _ports_of(existing: Mapping[str, Any]) -> Ports | None:
    ports = existing.get("ports")
    if ports is None:
        return None
    return tuple(
        (str(p.get("name") or ""), int(p["port"]), str(p.get("protocol") or "TCP"), p.get("appProtocol"))
        for p in ports
    )


def reconcile_endpointslices(
    service: Mapping[str, Any],
    pods: Sequence[Mapping[str, Any]],
    slices: Sequence[Mapping[str, Any]],
    *,
    rng: random.Random,
) -> SliceChanges:
    """The writes that bring the Service's slices (``slices``: those it owns, by this controller)
    to its pods (``pods``: at least those it selects)."""
    return reconcile_desired(service, desired_slices(service, pods), slices, rng=rng)


def reconcile_desired(
    service: Mapping[str, Any], desired: Desired, slices: Sequence[Mapping[str, Any]], *, rng: random.Random
) -> SliceChanges:
    """The writes that bring the Service's slices (``slices``: those it owns, by this controller)
    to ``desired`` (:func:`packed`)."""
    meta = service["metadata"]
    name, labels = str(meta["name"]), slice_labels(service)
    changes = SliceChanges()
    unused = sorted(slices, key=lambda s: str(s["metadata"]["name"]))
    for ports, endpoints in desired:
        wire: dict[str, Any] = {"addressType": "IPv4", "endpoints": endpoints}
        if ports is not None:
            wire["ports"] = _wire_ports(ports)
        match = next((s for s in unused if _ports_of(s) == ports), None)
        if match is None:
            changes.create.append(
                {
                    "apiVersion": API_VERSION,
                    "kind": KIND,
                    "metadata": {
                        "name": f"{name}-{random_suffix(rng)}",
                        "generateName": f"{name}-",
                        "namespace": meta.get("namespace"),
                        "labels": labels,
                        "ownerReferences": [owner_reference(service)],
                    },
                    **wire,
                }
            )
            continue
        unused.remove(match)
        current = {"addressType": match.get("addressType"), "endpoints": match.get("endpoints") or []}
        if match.get("ports") is not None:
            current["ports"] = match["ports"]
        if current != wire or (match["metadata"].get("labels") or {}) != labels:
            updated = {k: v for k, v in match.items() if k != "ports"}
            changes.update.append({**updated, "metadata": {**match["metadata"], "labels": labels}, **wire})
    changes.delete = [str(s["metadata"]["name"]) for s in unused]
    return changes
