"""The agent's own objects on the hub: its Cluster (spec and status) and its heartbeat Lease.

In: the hub :class:`~member_agent.kubeapi.KubeApi`, the cluster's name and its declared
properties (provider, region, zone, tier, labels, pricing). Out: a Cluster created or updated
idempotently by server-side apply (fields the agent does not declare — taints, cordon,
labels set on the hub — are kept, and a declared field an admin has since set keeps the
admin's value), its status replaced by each report, and the Lease
``gpufed-cluster-lease/<cluster>`` renewed. Status and Lease writes are compare-and-swap on
resourceVersion; a conflict re-reads and retries.
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from controlplane.apis import constants as c
from controlplane.apis.timestamps import format_micro_time
from member_agent.kubeapi import ApiError, Conflict, Forbidden, KubeApi, NotFound

logger = logging.getLogger(__name__)

CLUSTER_API_VERSION = f"{c.CLUSTER_GROUP}/{c.VERSION}"
CLUSTERS_PATH = f"/apis/{CLUSTER_API_VERSION}/clusters"
LEASES_PATH = f"/apis/coordination.k8s.io/v1/namespaces/{c.LEASE_NAMESPACE}/leases"
MAX_CONFLICT_RETRIES = 5


def desired_cluster(
    name: str,
    *,
    provider: str,
    region: str | None,
    zone: str | None,
    tier: int | None,
    labels: Mapping[str, str],
    pricing: Mapping[str, float],
) -> dict[str, Any]:
    """The Cluster as this agent declares it (only the fields the agent owns).

    No empty map is declared: under server-side apply an empty ``pricing`` or ``labels`` is a
    field of its own, which an agent that registered entries there before would newly own, and
    the hub's ClusterRestriction refuses an agent gaining a field (a re-joined agent without
    the first one's cluster file could then not register at all).
    """
    spec: dict[str, Any] = {"provider": provider}
    if pricing:
        spec["pricing"] = dict(pricing)
    if region is not None:
        spec["region"] = region
    if zone is not None:
        spec["zone"] = zone
    if tier is not None:
        spec["tier"] = tier
    metadata: dict[str, Any] = {"name": name}
    if labels:
        metadata["labels"] = dict(labels)
    return {"apiVersion": CLUSTER_API_VERSION, "kind": "Cluster", "metadata": metadata, "spec": spec}


async def register_cluster(hub: KubeApi, desired: Mapping[str, Any]) -> dict[str, Any]:
    """Create the Cluster or bring the agent's fields up to date; returns the stored object.

    A server-side apply by field manager ``gpufed-agent``: it creates a missing Cluster,
    updates only the fields the agent declares, and leaves what others set (taints,
    cordon, other labels) alone. Registering again with the same flags changes nothing.
    (Apply, rather than create, also names the object in the URL, which an authorizer
    scoped to one Cluster needs.)

    The apply is not forced: a declared field an admin has since changed (a 409 conflict),
    or one the hub does not let this agent change (a 403 naming fields it did not register
    when it joined), is left out with a warning and the rest is applied — the admin's
    value stands, as the hub's ClusterRestriction requires.
    """
    name = desired["metadata"]["name"]
    applied: dict[str, Any] = copy.deepcopy(dict(desired))
    for _ in range(MAX_CONFLICT_RETRIES):
        try:
            stored = await hub.apply(
                f"{CLUSTERS_PATH}/{name}", applied, field_manager=c.FIELD_MANAGER_AGENT, force=False
            )
        except (Conflict, Forbidden) as exc:
            applied, dropped = without_fields(applied, _cause_fields(exc))
            if not dropped:
                raise
            logger.warning(
                "cluster %s: not applying %s, which the hub keeps as an admin set it (%s); "
                "ask an admin to change them on the hub",
                name, ", ".join(dropped), exc.message,
            )
            continue
        logger.info("registered cluster %s", name)
        return stored
    raise Conflict(409, "Conflict", f"cluster {name}: the hub kept refusing this agent's registration")


def declared_fields(cluster: Mapping[str, Any]) -> dict[str, tuple[str, ...]]:
    """The fields an agent's Cluster declares, by the name the hub gives them in errors
    (``spec.tier``, ``metadata.labels.team``), each with its key path in the object."""
    out: dict[str, tuple[str, ...]] = {}
    for key in cluster.get("metadata", {}).get("labels") or {}:
        out[f"metadata.labels.{key}"] = ("metadata", "labels", key)
    for key, value in (cluster.get("spec") or {}).items():
        if key == "pricing" and isinstance(value, Mapping):
            for product in value:
                out[f"spec.pricing.{product}"] = ("spec", "pricing", product)
        else:
            out[f"spec.{key}"] = ("spec", key)
    return out


def without_fields(cluster: Mapping[str, Any], fields: set[str]) -> tuple[dict[str, Any], list[str]]:
    """``cluster`` without the declared ``fields``; also the names of those it removed."""
    out: dict[str, Any] = copy.deepcopy(dict(cluster))
    dropped = []
    for field, keys in declared_fields(cluster).items():
        if field not in fields:
            continue
        parent = out
        for key in keys[:-1]:
            parent = parent[key]
        del parent[keys[-1]]
        if not parent and len(keys) == 3:
            # An empty map left behind would be a new field of the agent's (spec.pricing: {}).
            del out[keys[0]][keys[1]]
        dropped.append(field)
    return out, sorted(dropped)


def _cause_fields(exc: ApiError) -> set[str]:
    """The fields a Status' causes name, without the leading dot apply conflicts use."""
    causes = (exc.status.get("details") or {}).get("causes") or []
    return {str(cause.get("field", "")).lstrip(".") for cause in causes if isinstance(cause, Mapping)}


async def write_cluster_status(
    hub: KubeApi, cluster: Mapping[str, Any], status: Mapping[str, Any]
) -> dict[str, Any]:
    """Replace the Cluster's status; ``cluster`` is the last known object (re-read on conflict)."""
    name = cluster["metadata"]["name"]
    path = f"{CLUSTERS_PATH}/{name}/status"
    current = dict(cluster)
    for _ in range(MAX_CONFLICT_RETRIES):
        body = {**current, "status": dict(status)}
        try:
            return await hub.replace(path, body)
        except Conflict:
            current = await hub.get(f"{CLUSTERS_PATH}/{name}")
    raise Conflict(409, "Conflict", f"cluster {name} kept changing while the agent wrote its status")


def lease_object(name: str, *, now: datetime, duration_seconds: int) -> dict[str, Any]:
    return {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {"name": name, "namespace": c.LEASE_NAMESPACE},
        "spec": {
            "holderIdentity": name,
            "leaseDurationSeconds": duration_seconds,
            "acquireTime": format_micro_time(now),
            "renewTime": format_micro_time(now),
        },
    }


async def renew_lease(
    hub: KubeApi, name: str, *, now: datetime, duration_seconds: int, last: Mapping[str, Any] | None
) -> dict[str, Any]:
    """Create or renew the heartbeat Lease; ``last`` is the Lease from the previous renewal."""
    current = dict(last) if last else None
    for _ in range(MAX_CONFLICT_RETRIES):
        if current is None:
            try:
                current = await hub.get(f"{LEASES_PATH}/{name}")
            except NotFound:
                # Server-side apply creates it under its name (see register_cluster).
                lease = lease_object(name, now=now, duration_seconds=duration_seconds)
                return await hub.apply(
                    f"{LEASES_PATH}/{name}", lease, field_manager=c.FIELD_MANAGER_AGENT, force=True
                )
        body = copy.deepcopy(current)
        spec = body.setdefault("spec", {})
        spec.update(
            {"holderIdentity": name, "leaseDurationSeconds": duration_seconds, "renewTime": format_micro_time(now)}
        )
        try:
            return await hub.replace(f"{LEASES_PATH}/{name}", body)
        except (NotFound, Conflict):
            # Re-read: changed meanwhile, or deleted (a PUT of a deleted Lease, which kube would
            # create, is a Conflict on the uid the body still names); a missing one is applied again.
            current = None
    raise Conflict(409, "Conflict", f"lease {name} kept changing while the agent renewed it")
