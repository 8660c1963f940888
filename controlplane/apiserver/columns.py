"""Cell getters for ``kubectl get`` columns, one small pure function per column.

Each getter takes an object dict and "now" and returns the printed cell, following
kubectl's own printers where a kind is a built-in one (READY "1/3", AGE "5m",
STATUS from the pod's container states). ``resources.py`` wires them into columns.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

from controlplane.apis import constants as c
from controlplane.apis.durations import human_duration
from controlplane.apis.timestamps import parse_time_or_none
from controlplane.apis.untyped import Obj, dig, json_int


def _when(value: Any) -> datetime | None:
    """A timestamp a cell shows, read leniently: None when it is not one, UTC when it names no zone."""
    return parse_time_or_none(value, naive_as_utc=True)


def since(value: Any, now: datetime) -> str:
    when = _when(value)
    if when is None:
        return "<unknown>"
    return human_duration((now - when).total_seconds())


def age(obj: Obj, now: datetime) -> str:
    return since(dig(obj, "metadata", "creationTimestamp"), now)


def data_count(obj: Obj, _now: datetime) -> int:
    data = obj.get("data")
    binary = obj.get("binaryData")
    return (len(data) if isinstance(data, dict) else 0) + (len(binary) if isinstance(binary, dict) else 0)


def secrets_count(obj: Obj, _now: datetime) -> int:
    """A ServiceAccount's ``secrets`` (kube's SECRETS column)."""
    secrets = obj.get("secrets")
    return len(secrets) if isinstance(secrets, list) else 0


def selector_string(dotted: str) -> Callable[[Obj, datetime], str]:
    keys = dotted.split(".")

    def get(obj: Obj, _now: datetime) -> str:
        selector = dig(obj, *keys)
        if not isinstance(selector, dict) or not selector:
            return "<none>"
        return ",".join(f"{k}={v}" for k, v in sorted(selector.items()))

    return get


def ready_of(ready_path: str, total_path: str, *, default_total: int) -> Callable[[Obj, datetime], str]:
    ready_keys = ready_path.split(".")
    total_keys = total_path.split(".")

    def get(obj: Obj, _now: datetime) -> str:
        total = dig(obj, *total_keys)
        return f"{json_int(dig(obj, *ready_keys))}/{total if isinstance(total, int) else default_total}"

    return get


def _pod_template_containers(obj: Obj) -> list[Obj]:
    containers = dig(obj, "spec", "template", "spec", "containers")
    return [ctr for ctr in containers if isinstance(ctr, dict)] if isinstance(containers, list) else []


def containers_names(obj: Obj, _now: datetime) -> str:
    return ",".join(str(ctr.get("name", "")) for ctr in _pod_template_containers(obj))


def containers_images(obj: Obj, _now: datetime) -> str:
    return ",".join(str(ctr.get("image", "")) for ctr in _pod_template_containers(obj))


def condition(obj: Obj, condition_type: str) -> Obj | None:
    conditions = dig(obj, "status", "conditions")
    if not isinstance(conditions, list):
        return None
    for cond in conditions:
        if isinstance(cond, dict) and cond.get("type") == condition_type:
            return cond
    return None


def condition_status(condition_type: str) -> Callable[[Obj, datetime], str]:
    def get(obj: Obj, _now: datetime) -> str:
        cond = condition(obj, condition_type)
        return str(cond.get("status", "Unknown")) if cond else "Unknown"

    return get


# --- services and events --------------------------------------------------------------


def load_balancer_ingress(obj: Obj) -> str:
    """kube's ``loadBalancerStatusStringer`` for a Service's or an Ingress's ``status.loadBalancer``:
    each ingress point's IP, else its host name, once each and sorted (the server's tables are
    wide: never clipped)."""
    points = set()
    for ingress in dig(obj, "status", "loadBalancer", "ingress") or ():
        if isinstance(ingress, dict) and (ingress.get("ip") or ingress.get("hostname")):
            points.add(str(ingress.get("ip") or ingress.get("hostname")))
    return ",".join(sorted(points))


def service_cluster_ip(obj: Obj, _now: datetime) -> str:
    """The first of ``spec.clusterIPs``, or ``<none>`` (an ExternalName Service has none)."""
    ips = dig(obj, "spec", "clusterIPs")
    return str(ips[0]) if isinstance(ips, list) and ips else "<none>"


def service_external_ips(obj: Obj, _now: datetime) -> str:
    """kube's ``getServiceExternalIP``, by the Service's type: its external IPs; a load balancer's
    ingress points before them (``<pending>`` while it has neither); an ExternalName's name."""
    kind = dig(obj, "spec", "type") or "ClusterIP"
    external = [str(ip) for ip in dig(obj, "spec", "externalIPs") or ()]
    if kind in ("ClusterIP", "NodePort"):
        return ",".join(external) or "<none>"
    if kind == "LoadBalancer":
        balancer = load_balancer_ingress(obj)
        return ",".join([balancer, *external] if balancer else external) or "<pending>"
    if kind == "ExternalName":
        return str(dig(obj, "spec", "externalName") or "")
    return "<unknown>"


def service_ports(obj: Obj, _now: datetime) -> str:
    parts = []
    for port in dig(obj, "spec", "ports") or []:
        if not isinstance(port, dict):
            continue
        text = str(port.get("port", ""))
        if port.get("nodePort"):
            text += f":{port['nodePort']}"
        parts.append(f"{text}/{port.get('protocol', 'TCP')}")
    return ",".join(parts) or "<none>"


def event_first_seen(obj: Obj, now: datetime) -> str:
    """kube's FIRST SEEN: since ``firstTimestamp``, else since ``eventTime`` (a new-style Event)."""
    return since(obj.get("firstTimestamp") or obj.get("eventTime"), now)


def _event_series(obj: Obj) -> Obj | None:
    series = obj.get("series")
    return series if isinstance(series, dict) else None


def event_last_seen(obj: Obj, now: datetime) -> str:
    """kube's LAST SEEN: since the series' last observation, else ``lastTimestamp``, else as FIRST SEEN."""
    series = _event_series(obj)
    if series is not None:
        return since(series.get("lastObservedTime"), now)
    if obj.get("lastTimestamp"):
        return since(obj["lastTimestamp"], now)
    return event_first_seen(obj, now)


def event_count(obj: Obj, _now: datetime) -> int:
    """kube's COUNT: the series' count, else ``count``, 1 for a singleton Event that has none."""
    series = _event_series(obj)
    if series is not None:
        return json_int(series.get("count"))
    return json_int(obj.get("count")) or 1


def event_message(obj: Obj, _now: datetime) -> str:
    return str(obj.get("message") or "").strip()


def event_source(obj: Obj, _now: datetime) -> str:
    """``component, host`` as kubectl prints it (``reportingController`` for new-style Events)."""
    source = obj.get("source") or {}
    component = source.get("component") or obj.get("reportingController") or obj.get("reportingComponent") or ""
    host = source.get("host") or obj.get("reportingInstance") or ""
    return f"{component}, {host}" if host else str(component)


def event_object(obj: Obj, _now: datetime) -> str:
    """``kind/name`` of the object the Event is about, lowercased kind (the kind alone without a name)."""
    involved = obj.get("involvedObject") or {}
    kind = str(involved.get("kind") or "").lower()
    return f"{kind}/{involved['name']}" if involved.get("name") else kind


# --- nodes (a pod's cells: podcolumns) ----------------------------------------------


def node_status(obj: Obj, _now: datetime) -> str:
    ready = condition(obj, "Ready")
    status = "Ready" if ready and ready.get("status") == "True" else ("NotReady" if ready else "Unknown")
    if dig(obj, "spec", "unschedulable"):
        status += ",SchedulingDisabled"
    return status


def node_roles(obj: Obj, _now: datetime) -> str:
    """kube's ``findNodeRoles``: each ``node-role.kubernetes.io/<role>`` label's role and the value of
    a ``kubernetes.io/role`` label, sorted, once each."""
    labels = dig(obj, "metadata", "labels")
    roles: set[str] = set()
    for key, value in labels.items() if isinstance(labels, dict) else ():
        if key.startswith("node-role.kubernetes.io/") and key != "node-role.kubernetes.io/":
            roles.add(key.removeprefix("node-role.kubernetes.io/"))
        elif key == "kubernetes.io/role" and value:
            roles.add(str(value))
    return ",".join(sorted(roles)) or "<none>"


def node_address(address_type: str) -> Callable[[Obj, datetime], str]:
    """The node's first address of that type (``InternalIP``, ``ExternalIP``), ``<none>`` without one."""

    def get(obj: Obj, _now: datetime) -> str:
        for address in dig(obj, "status", "addresses") or []:
            if isinstance(address, dict) and address.get("type") == address_type:
                return str(address.get("address", ""))
        return "<none>"

    return get


def node_gpus(obj: Obj, _now: datetime) -> str:
    allocatable = dig(obj, "status", "allocatable") or {}
    parts = [
        f"{name.removeprefix('nvidia.com/')}={qty}"
        for name, qty in sorted(allocatable.items())
        if name == c.RESOURCE_GPU or name.startswith(c.RESOURCE_MIG_PREFIX) or name == c.RESOURCE_GPU_SHARED
    ]
    return ",".join(parts) or "<none>"


# --- jobs -----------------------------------------------------------------------------


def _job_condition(obj: Obj, condition_type: str) -> bool:
    """kube's ``hasJobCondition``: the first condition of that type is True."""
    cond = condition(obj, condition_type)
    return cond is not None and cond.get("status") == "True"


def job_status(obj: Obj, _now: datetime) -> str:
    """kube's Job STATUS: Complete, Failed, Terminating while deleted, Suspended, FailureTarget, else Running."""
    if _job_condition(obj, "Complete"):
        return "Complete"
    if _job_condition(obj, "Failed"):
        return "Failed"
    if dig(obj, "metadata", "deletionTimestamp"):
        return "Terminating"
    for cond_type in ("Suspended", "FailureTarget"):
        if _job_condition(obj, cond_type):
            return cond_type
    return "Running"


def job_completions(obj: Obj, _now: datetime) -> str:
    """``succeeded/completions``; a Job without completions runs until one pod succeeds: ``0/1``,
    ``0/1 of 3`` with more than one pod at a time."""
    succeeded = json_int(dig(obj, "status", "succeeded"))
    completions = dig(obj, "spec", "completions")
    if isinstance(completions, int):
        return f"{succeeded}/{completions}"
    parallelism = json_int(dig(obj, "spec", "parallelism"))
    return f"{succeeded}/1 of {parallelism}" if parallelism > 1 else f"{succeeded}/1"


def job_duration(obj: Obj, now: datetime) -> str:
    start = _when(dig(obj, "status", "startTime"))
    if start is None:
        return ""
    end = _when(dig(obj, "status", "completionTime")) or now
    return human_duration((end - start).total_seconds())


def job_state(obj: Obj, _now: datetime) -> str:
    """Training-operator jobs: the type of the last condition whose status is True.

    The job's own conditions (Created, Running, Succeeded, Failed, as its members report them),
    never the hub's ``Propagated``: that one says where the job went, not how it is doing.
    """
    conditions = dig(obj, "status", "conditions") or []
    current = [
        cd for cd in conditions
        if isinstance(cd, dict) and cd.get("status") == "True" and cd.get("type") != c.CONDITION_PROPAGATED
    ]
    return str(current[-1].get("type", "")) if current else ""


# --- gpufed kinds ---------------------------------------------------------------------


def _gpu_summary(obj: Obj) -> list[Obj]:
    summary = dig(obj, "status", "gpuSummary")
    return [entry for entry in summary if isinstance(entry, dict)] if isinstance(summary, list) else []


def cluster_gpus(obj: Obj, _now: datetime) -> int:
    return sum(json_int(e.get("capacity")) for e in _gpu_summary(obj) if e.get("resource") == c.RESOURCE_GPU)


def cluster_free_gpus(obj: Obj, _now: datetime) -> int:
    return sum(
        max(0, json_int(e.get("allocatable")) - json_int(e.get("allocated")))
        for e in _gpu_summary(obj)
        if e.get("resource") == c.RESOURCE_GPU
    )


def cluster_models(obj: Obj, _now: datetime) -> str:
    products = sorted({str(e["product"]) for e in _gpu_summary(obj) if e.get("product")})
    return ",".join(products) or "<none>"


def cluster_ready(obj: Obj, _now: datetime) -> str:
    """The Ready condition's status, plus ``,SchedulingDisabled`` when the cluster is cordoned
    (as kubectl marks a cordoned node ``Ready,SchedulingDisabled``)."""
    cond = condition(obj, "Ready")
    status = str(cond.get("status", "Unknown")) if cond else "Unknown"
    if dig(obj, "spec", "unschedulable"):
        status += ",SchedulingDisabled"
    return status


def cluster_mig(obj: Obj, _now: datetime) -> str:
    entries = [e for e in _gpu_summary(obj) if str(e.get("resource", "")).startswith(c.RESOURCE_MIG_PREFIX)]
    if not entries:
        return "<none>"
    free = sum(max(0, json_int(e.get("allocatable")) - json_int(e.get("allocated"))) for e in entries)
    total = sum(json_int(e.get("capacity")) for e in entries)
    return f"{free}/{total}"


def cluster_spot(obj: Obj, _now: datetime) -> str:
    spot = json_int(dig(obj, "status", "nodeSummary", "spot"))
    return f"{spot}/{json_int(dig(obj, 'status', 'nodeSummary', 'total'))}" if spot else "<none>"


def cluster_tier(obj: Obj, _now: datetime) -> int:
    tier = dig(obj, "spec", "tier")
    if isinstance(tier, int):
        return tier
    return 0 if dig(obj, "spec", "provider") == "onprem" else 1


def binding_clusters(obj: Obj, _now: datetime) -> str:
    targets = dig(obj, "spec", "clusters") or []
    parts = [f"{t.get('name', '')}:{json_int(t.get('replicas'))}" for t in targets if isinstance(t, dict)]
    return ",".join(parts) or "<none>"


#: kube's ``GetAccessModesAsString``: each mode once, in this order, abbreviated (others left out).
_ACCESS_MODE_SHORT = {
    "ReadWriteOnce": "RWO",
    "ReadOnlyMany": "ROX",
    "ReadWriteMany": "RWX",
    "ReadWriteOncePod": "RWOP",
}


def _access_modes(modes: Any) -> str:
    present = {mode for mode in modes if isinstance(mode, str)} if isinstance(modes, list) else set()
    return ",".join(short for mode, short in _ACCESS_MODE_SHORT.items() if mode in present)


def volume_access_modes(obj: Obj, _now: datetime) -> str:
    """A PersistentVolume's ACCESS MODES."""
    return _access_modes(dig(obj, "spec", "accessModes"))


def _bound(claim: Obj) -> bool:
    return bool(dig(claim, "spec", "volumeName"))


def claim_access_modes(obj: Obj, _now: datetime) -> str:
    """A PersistentVolumeClaim's ACCESS MODES: those granted, once it names its volume (empty before)."""
    return _access_modes(dig(obj, "status", "accessModes")) if _bound(obj) else ""


def claim_capacity(obj: Obj, _now: datetime) -> str:
    """A PersistentVolumeClaim's CAPACITY: its volume's, once it names its volume (empty before)."""
    capacity = dig(obj, "status", "capacity", "storage")
    return str(capacity) if _bound(obj) and capacity is not None else ""


def endpoints_addresses(obj: Obj, _now: datetime) -> str:
    """kube's ``formatEndpoints``: ``ip:port`` of each address and port, the first three, then
    ``+ N more...``; the bare IPs of a subset without ports; ``<none>`` without subsets."""
    subsets = [s for s in (dig(obj, "subsets") or []) if isinstance(s, dict)]
    if not subsets:
        return "<none>"
    shown: list[str] = []
    count = 0
    for subset in subsets:
        addresses = [str(a.get("ip", "")) for a in subset.get("addresses") or [] if isinstance(a, dict)]
        ports = [p for p in subset.get("ports") or [] if isinstance(p, dict)]
        pairs = [(ip, None) for ip in addresses] if not ports else [
            (ip, port.get("port")) for port in ports for ip in addresses
        ]
        count += len(pairs)
        for ip, port in pairs:
            if len(shown) < _ENDPOINTS_SHOWN:
                shown.append(ip if port is None else (f"[{ip}]:{port}" if ":" in ip else f"{ip}:{port}"))
    text = ",".join(shown)
    return f"{text} + {count - _ENDPOINTS_SHOWN} more..." if count > _ENDPOINTS_SHOWN else text


_ENDPOINTS_SHOWN = 3


def persistent_volume_claim(obj: Obj, _now: datetime) -> str:
    """The claim a PersistentVolume is bound to, ``namespace/name`` (empty while unbound)."""
    ref = dig(obj, "spec", "claimRef")
    if not isinstance(ref, dict) or not ref.get("name"):
        return ""
    return f"{ref.get('namespace', '')}/{ref['name']}"


def storage_phase(obj: Obj, _now: datetime) -> str:
    """A PersistentVolume's or claim's STATUS: its phase, ``Terminating`` once it is being deleted."""
    if dig(obj, "metadata", "deletionTimestamp"):
        return "Terminating"
    return str(dig(obj, "status", "phase") or "")


def persistent_volume_class(obj: Obj, _now: datetime) -> str:
    """A volume's or claim's STORAGECLASS: the beta annotation older ones carry, else
    ``spec.storageClassName`` (kube's ``GetPersistentVolumeClass`` and ``GetPersistentVolumeClaimClass``)."""
    annotated = dig(obj, "metadata", "annotations", "volume.beta.kubernetes.io/storage-class")
    return str(annotated if annotated is not None else dig(obj, "spec", "storageClassName") or "")
