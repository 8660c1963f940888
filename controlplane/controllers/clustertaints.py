"""Karmada's ClusterTaintPolicies: clusters' taints added and removed by their status conditions.

In: ``policy.karmada.io/v1alpha1`` ClusterTaintPolicies and the Clusters (informers). Out: each
cluster's ``spec.taints`` as :func:`~policies.taint_policy.apply_taint_policies` makes them, an
Event ``TaintClusterSucceed`` on the cluster when they changed. A cluster is looked at again when
its conditions change and when a policy is created or its spec changes (every cluster it targets);
deleting a policy leaves the taints it added, as in Karmada (the policies are read from their
informer, as Karmada's from its cache: a condition change handled before the deletion's event
arrives is handled with the policy). The hub's own health taints
(:mod:`controlplane.controllers.health`) are other keys and stay as they are.
"""

from __future__ import annotations

import copy
import logging
from typing import Any

from controlplane.apis.events import EventType
from controlplane.apis.timestamps import format_time
from controlplane.apis.views import ClusterObjectView
from controlplane.controllers.context import CONFLICT_RETRY_SECONDS, ControllerContext
from controlplane.controllers.events import EventReason, record_event
from controlplane.controllers.reconciling import KeyedController
from controlplane.objectclient import WatchEventType, errors
from policies.affinity import ClusterView, cluster_matches_affinity
from policies.taint_policy import KIND, ClusterTaintPolicy, apply_taint_policies

log = logging.getLogger(__name__)

API_VERSION = "policy.karmada.io/v1alpha1"


def _policy(obj: dict[str, Any]) -> ClusterTaintPolicy | None:
    try:
        return ClusterTaintPolicy.model_validate(obj)
    except ValueError:  # stored before a rule the hub now enforces: skipped, not fatal
        return None


def _targets(policy: ClusterTaintPolicy, cluster: dict[str, Any]) -> bool:
    view = ClusterObjectView(cluster)
    spec = cluster.get("spec") or {}
    target = ClusterView(
        name=view.name, labels=view.labels, provider=spec.get("provider"), region=spec.get("region"), zone=spec.get("zone"),
    )
    return cluster_matches_affinity(target, policy.spec.target_clusters).fits


class ClusterTaintPolicyController(KeyedController[str]):
    """Reconciles clusters' taints (keys: cluster names) against the ClusterTaintPolicies."""

    name = "cluster-taint-policies"

    def __init__(self, ctx: ControllerContext) -> None:
        super().__init__(ctx, workers=1)
        self.rt = ctx.watch_kind(API_VERSION, KIND, self._on_policy)
        ctx.clusters.add_handler(self._on_cluster)

    async def _on_policy(self, event: WatchEventType, obj: dict[str, Any], old: dict[str, Any] | None) -> None:
        if event is WatchEventType.DELETED or (old is not None and old.get("spec") == obj.get("spec")):
            return
        policy = _policy(obj)
        for cluster in self.ctx.clusters.items():
            if policy is None or _targets(policy, cluster):
                await self.loop.add(str(cluster["metadata"]["name"]))

    async def _on_cluster(self, event: WatchEventType, obj: dict[str, Any], old: dict[str, Any] | None) -> None:
        if event is WatchEventType.DELETED or self.rt is None:
            return
        conditions = (obj.get("status") or {}).get("conditions")
        if old is None or conditions != (old.get("status") or {}).get("conditions"):
            await self.loop.add(str(obj["metadata"]["name"]))

    def _policies(self) -> list[ClusterTaintPolicy]:
        """The stored policies, oldest first (Karmada's order), by name when created together."""
        if self.rt is None:
            return []
        informer = self.ctx.informer_if_any(self.rt)
        found = [p for p in (_policy(o) for o in (informer.items() if informer else ())) if p is not None]
        return sorted(found, key=lambda p: (p.metadata.creation_timestamp or "", p.metadata.name or ""))

    async def reconcile(self, name: str) -> float | None:
        ctx = self.ctx
        cluster = await ctx.get(ctx.cluster_rt, None, name)
        if cluster is None:
            return None
        spec = cluster.get("spec") or {}
        taints = spec.get("taints") or []
        policies = [p for p in self._policies() if p.spec.target_clusters is None or _targets(p, cluster)]
        conditions = (cluster.get("status") or {}).get("conditions") or []
        wanted = apply_taint_policies(taints, conditions, policies, now=format_time(ctx.now()))
        if wanted == taints:
            return None
        written = copy.deepcopy(cluster)
        if wanted:
            written["spec"]["taints"] = wanted
        else:
            written["spec"].pop("taints", None)
        try:
            updated = await ctx.objects.update(ctx.cluster_rt, written)
        except errors.Conflict:
            return CONFLICT_RETRY_SECONDS
        except errors.NotFound:
            return None
        # kube's Taint.ToString, joined as Karmada's GenerateTaintsMessage joins them.
        described = ",".join(
            f"{t['key']}={t['value']}:{t['effect']}" if t.get("value") else f"{t['key']}:{t['effect']}" for t in wanted
        )
        log.info("cluster %s: taints %s (ClusterTaintPolicies)", name, described)
        await record_event(ctx, updated, type=EventType.NORMAL, reason=EventReason.TAINT_CLUSTER_SUCCEED,
                           message=f"Update Cluster({name}) with taints({described}) succeed")
        return None
