"""A workload's pods as the hub shows them: which pods are its, and one row per pod.

`gpufed explain`, `gpufed describe`, `gpufed top` and the dashboard's pod list (through the
hub's ``resourcebindings/<name>/pods`` route) all show the same thing, so it is computed once
here: which pods of a member's listing belong to a hub workload (:func:`owned_by`: owned by
it, or by one of a Deployment's ReplicaSets), and per pod its cluster, READY, STATUS and RESTARTS
as ``kubectl get pods`` shows them (:func:`controlplane.apis.podstatus.pod_cells`), node, GPU request (its containers' and, read from the hub's claim templates
and claims, its DRA claims'), the GPU devices it holds (whole GPUs by index, MIG instances with their
profile) with their utilization.

Where the devices come from: not the pod (a real kubelet records no device IDs on it) but the
DCGM exporter, whose series carry the pod that holds each device; the agent scrapes it and
reports it in ``Cluster.status.utilization`` (:mod:`controlplane.apis.utilization`), and
:func:`devices_by_pod` reads that back. The hub's waste report reads the same data.

Which workloads each member carries (:func:`propagated_workloads`, read from the hub's Works)
and how each kind names its pods (:data:`POD_NAME_AFTER_WORKLOAD`) live here too: `gpufed
logs/exec` find a workload's pods with them, and the waste report puts a pod reported without
an owner under its workload (:mod:`controlplane.reports.owners`).

In: pods as the member API returns them, the Cluster's ``status.utilization``, Works, "now" (a
pod's last restart is shown as kubectl shows it, ``3 (5m ago)``). Out: plain values and text rows. Pure: no I/O.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from controlplane.apis import constants as c
from controlplane.apis.dra import CLAIM, ClaimLookup, ClassLookup, claim_entries, claim_spec_gpus
from controlplane.apis.gpus import is_gpu_resource
from controlplane.apis.kubeflow import TRAINING_KINDS
from controlplane.apis.pods import pod_requests
from controlplane.apis.podstatus import pod_cells
from controlplane.apis.untyped import as_list, as_mapping
from controlplane.apis.utilization import expand_utilization

#: ``(namespace, pod)``
PodKey = tuple[str, str]


@dataclass(frozen=True, slots=True)
class GpuDevice:
    """A device a pod holds, as DCGM reports it: GPU index, MIG profile (None: whole GPU)."""

    gpu: str
    profile: str | None = None
    utilization: float | None = None

    def label(self) -> str:
        return f"gpu{self.gpu}/{self.profile}" if self.profile else f"gpu{self.gpu}"


@dataclass(frozen=True, slots=True)
class PodRow:
    cluster: str
    namespace: str
    name: str
    ready: str
    status: str
    node: str
    gpu_request: str
    devices: tuple[GpuDevice, ...] = field(default=())
    #: RESTARTS as kubectl shows it (``3 (5m ago)``), and its number.
    restarts: str = "0"
    restart_count: int = 0

    def utilization(self) -> float | None:
        """The mean utilization of the pod's devices (None when DCGM reported none)."""
        values = [d.utilization for d in self.devices if d.utilization is not None]
        return sum(values) / len(values) if values else None

    def as_json(self) -> dict[str, Any]:
        """The row as the hub's pod list serves it (and the dashboard reads it)."""
        util = self.utilization()
        return {
            "cluster": self.cluster, "namespace": self.namespace, "name": self.name, "ready": self.ready,
            "status": self.status,
            "node": self.node, "gpuRequest": self.gpu_request, "restarts": self.restart_count,
            "restartsShown": self.restarts,
            "devices": [
                {"gpu": d.gpu, **({"profile": d.profile} if d.profile else {}),
                 **({"utilization": d.utilization} if d.utilization is not None else {})}
                for d in self.devices
            ],
            **({"gpuUtilization": round(util, 4)} if util is not None else {}),
        }


#: How each kind's controller names its pods after ``<workload>-`` (kube's generateName rules:
#: a Deployment's ReplicaSet adds its pod-template-hash, a Job's pods a random suffix...).
POD_NAME_AFTER_WORKLOAD: Mapping[str, re.Pattern[str]] = {
    "Deployment": re.compile(r"[a-z0-9]+-[a-z0-9]{5}"),
    "StatefulSet": re.compile(r"\d+"),
    "Job": re.compile(r"(\d+-)?[a-z0-9]{5}"),
    **{kind: re.compile("(" + "|".join(role.lower() for role in training.roles) + r")-\d+")
       for kind, training in TRAINING_KINDS.items() if kind != "MPIJob"},
    "MPIJob": re.compile(r"launcher(-[a-z0-9]{5})?|worker-\d+"),
    "RayCluster": re.compile(r"[a-z0-9-]+"),
    "RayJob": re.compile(r"[a-z0-9-]+"),
}


def propagated_workloads(works: Iterable[Mapping[str, Any]]) -> dict[str, list[tuple[str, str, str]]]:
    """Per member cluster, the (namespace, kind, name) of the workloads its Works carry."""
    out: dict[str, list[tuple[str, str, str]]] = defaultdict(list)
    for work in works:
        namespace = str(as_mapping(work.get("metadata")).get("namespace") or "")
        if not namespace.startswith(c.EXECUTION_NAMESPACE_PREFIX):
            continue
        member = namespace.removeprefix(c.EXECUTION_NAMESPACE_PREFIX)
        for manifest in as_list(as_mapping(as_mapping(work.get("spec")).get("workload")).get("manifests")):
            kind = str(as_mapping(manifest).get("kind") or "")
            metadata = as_mapping(as_mapping(manifest).get("metadata"))
            if kind in POD_NAME_AFTER_WORKLOAD and metadata.get("name"):
                out[member].append((str(metadata.get("namespace") or ""), kind, str(metadata["name"])))
    return out


def owned_by(pod: Mapping[str, Any], kind: str, name: str) -> bool:
    """Whether ``pod`` belongs to workload ``kind/name``: owned by it, or (Deployments) by one of
    its ReplicaSets, which are named ``<deployment>-<pod-template-hash>``."""
    for ref in (pod.get("metadata") or {}).get("ownerReferences") or []:
        owner_kind, owner = ref.get("kind"), str(ref.get("name", ""))
        if owner_kind == kind and owner == name:
            return True
        if kind == "Deployment" and owner_kind == "ReplicaSet" and owner.rsplit("-", 1)[0] == name:
            return True
    return False


def gpu_request(
    pod: Mapping[str, Any], claims: ClaimLookup | None = None, unreadable: Collection[tuple[str, str]] = (),
    classes: ClassLookup | None = None,
) -> str:
    """What the pod asks for in GPUs: its containers' ``nvidia.com/gpu=2``, ``nvidia.com/mig-3g.40gb=1``,
    then what each of its DRA claims asks (:mod:`controlplane.apis.dra`), the claim's entry named:
    ``nvidia.com/gpu=2 (DRA claim gpus)``, ``(DRA claim gpus, shared)`` for a ResourceClaim the pod
    names directly. ``claims`` finds the hub's claim templates and claims in the pod's namespace
    (None: claims not shown); ``unreadable`` names (by kind and name) those the viewer may not read,
    shown as ``(DRA claim gpus: not readable)`` without what they ask; ``classes``: the hub's
    DeviceClasses the viewer may read (NVIDIA's two published classes are known without); "-": none."""
    spec = pod.get("spec") or {}
    try:
        requests = pod_requests(spec)
    except ValueError:  # a malformed quantity
        return "?"
    asked = [f"{name}={amount}" for name, amount in sorted(requests.items()) if is_gpu_resource(name)]
    if claims is not None:
        for entry, kind, name in claim_entries(spec):
            if (kind, name) in unreadable:
                asked.append(f"(DRA claim {entry}: not readable)")
                continue
            note = f"DRA claim {entry}" + (", shared" if kind == CLAIM else "")
            asked += [f"{resource}={amount} ({note})"
                      for resource, amount in sorted(claim_spec_gpus(claims(kind, name), classes).resources().items())]
    return ",".join(asked) or "-"


def devices_by_pod(utilization: Any) -> dict[PodKey, list[GpuDevice]]:
    """The devices each pod holds, from a Cluster's ``status.utilization`` (either encoding)."""
    out: dict[PodKey, list[GpuDevice]] = {}
    for node in expand_utilization(utilization):
        for device in node.get("devices") or []:
            pod, namespace = device.get("pod"), device.get("namespace")
            if not pod or not namespace:
                continue
            value = device.get("utilization")
            out.setdefault((str(namespace), str(pod)), []).append(
                GpuDevice(
                    str(device.get("gpu")),
                    str(device["profile"]) if device.get("profile") else None,
                    float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None,
                )
            )
    return out


def pod_rows(
    cluster: str, pods: Iterable[Mapping[str, Any]], devices: Mapping[PodKey, Sequence[GpuDevice]], now: datetime,
    claims: ClaimLookup | None = None, unreadable: Collection[tuple[str, str]] = (), classes: ClassLookup | None = None,
) -> list[PodRow]:
    """One row per pod of ``cluster``, by name (``claims``, ``unreadable``, ``classes``: as
    :func:`gpu_request` reads them)."""
    rows = []
    for pod in pods:
        meta = pod.get("metadata") or {}
        key = (str(meta.get("namespace") or ""), str(meta.get("name") or ""))
        cells = pod_cells(dict(pod), now)
        rows.append(PodRow(
            cluster, key[0], key[1], cells.ready, cells.status, str((pod.get("spec") or {}).get("nodeName") or "<none>"),
            gpu_request(pod, claims, unreadable, classes), tuple(devices.get(key, ())), cells.restarts,
            cells.restart_count,
        ))
    return sorted(rows, key=lambda row: (row.cluster, row.name))


def percent(value: float | None) -> str:
    return "-" if value is None else f"{round(value * 100)}%"


def align(rows: Sequence[Sequence[str]], *, gap: str = "   ") -> list[str]:
    """Rows as left-aligned columns (the last column unpadded), as kubectl prints tables."""
    if not rows:
        return []
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return [gap.join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip() for row in rows]


def render_pod_rows(rows: Sequence[PodRow]) -> list[str]:
    """The pod table `gpufed explain` and `gpufed describe` print (no lines when no pods)."""
    if not rows:
        return []
    table = [["CLUSTER", "NAME", "READY", "STATUS", "NODE", "GPU REQUEST", "DEVICES", "GPU UTIL", "RESTARTS"]]
    for row in rows:
        table.append([
            row.cluster, row.name, row.ready, row.status, row.node, row.gpu_request,
            ",".join(d.label() for d in row.devices) or "-", percent(row.utilization()), row.restarts,
        ])
    return align(table)


def row_from_json(cluster: str, pod: Mapping[str, Any]) -> PodRow:
    """A row of the hub's pod list read back (the inverse of :meth:`PodRow.as_json`)."""
    devices = tuple(
        GpuDevice(
            str(d.get("gpu")), str(d["profile"]) if d.get("profile") else None,
            float(d["utilization"]) if isinstance(d.get("utilization"), int | float) else None,
        )
        for d in pod.get("devices") or [] if isinstance(d, Mapping)
    )
    return PodRow(
        cluster, str(pod.get("namespace") or ""), str(pod.get("name") or ""), str(pod.get("ready") or "-"),
        str(pod.get("status") or ""), str(pod.get("node") or ""), str(pod.get("gpuRequest") or "-"), devices,
        str(pod.get("restartsShown") or pod.get("restarts") or 0),
        pod["restarts"] if isinstance(pod.get("restarts"), int) else 0,
    )


def render_pod_list(answer: Mapping[str, Any]) -> list[str]:
    """The hub's ``WorkloadPodList`` as a table, then one line per cluster it could not show."""
    rows: list[PodRow] = []
    notes: list[str] = []
    for entry in answer.get("clusters") or []:
        cluster = str(entry.get("name") or "")
        if entry.get("forbidden"):
            notes.append(f"cluster {cluster}: pods not shown: {entry['forbidden']}")
        elif entry.get("error"):
            notes.append(f"cluster {cluster}: {entry['error']}")
        rows.extend(row_from_json(cluster, pod) for pod in entry.get("pods") or [] if isinstance(pod, Mapping))
    return [*render_pod_rows(sorted(rows, key=lambda row: (row.cluster, row.name))), *notes]
