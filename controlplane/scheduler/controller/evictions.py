"""Failover evictions of the scheduler controller: which clusters a binding must leave, and when.

Failover (the pure rules are :mod:`controlplane.controllers.failover`) evicts a binding's
replicas from a cluster it runs in when the cluster has a ``NoExecute`` taint whose toleration
ran out (the placement's ``clusterTolerations``, plus default tolerations of the hub's
unreachable/not-ready taints, :func:`with_default_tolerations`), or when the workload has been
Unhealthy there for ``failover.application.decisionConditions.tolerationSeconds``. The binding
is requeued for the moment that happens. Its replicas in that cluster (a gang's whole) are
scheduled elsewhere (the pure
:func:`~controlplane.scheduler.core.rescheduling.decide_with_evictions`) and a
``gracefulEvictionTasks`` entry records the eviction; the cluster's Work stays until the
graceful eviction controller ends the task. An eviction happens only when the replicas find
room elsewhere (as many as run now): with nowhere to go they stay, and are retried on capacity
reports, so a cluster that is only cut off is not emptied for nothing.

Unhealthy-since timers live in memory: a new leader counts an application's unhealthy time
afresh.

In: the binding's request and policy, the cluster snapshots, the Clusters' taints and the
Works' health (informers). Out: an :class:`~controlplane.controllers.failover.EvictionCheck`
per binding (what is due now, when the next is due), and the bindings whose due eviction found
no room (:attr:`FailoverEvictions.blocked`).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from dataclasses import replace
from datetime import datetime
from typing import Any

from pydantic import ValidationError

from controlplane.apis.meta import Taint
from controlplane.apis.views import ClusterObjectView
from controlplane.apis.work_v1alpha1 import BindingKey, ResourceBinding
from controlplane.controllers.context import INDEX_BINDING, ControllerContext
from controlplane.controllers.failover import (
    EvictionCheck,
    PurgeMode,
    application_evictions,
    effective_tolerations,
    merge_checks,
    purge_mode_of,
    reported_health,
    taint_evictions,
)
from controlplane.controllers.works import cluster_of_namespace
from controlplane.scheduler.controller.reading import binding_key, key_text
from controlplane.scheduler.core.framework import BindingRequest
from controlplane.scheduler.core.snapshot import ClusterSnapshot
from policies.affinity import ClusterView
from policies.models import AnyPropagationPolicy

log = logging.getLogger(__name__)


def with_default_tolerations(request: BindingRequest, *, unreachable_seconds: int, not_ready_seconds: int) -> BindingRequest:
    """``request`` whose placement also tolerates the hub's health taints for the default time
    when it does not say otherwise (see :func:`failover.effective_tolerations`)."""
    tolerations = effective_tolerations(
        request.placement.cluster_tolerations,
        unreachable_seconds=unreachable_seconds,
        not_ready_seconds=not_ready_seconds,
    )
    if len(tolerations) == len(request.placement.cluster_tolerations or ()):
        return request
    placement = request.placement.model_copy(update={"cluster_tolerations": tolerations})
    return replace(request, placement=placement)


def binding_request(ctx: ControllerContext, binding: dict[str, Any]) -> BindingRequest | None:
    """The scheduler's request for ``binding`` (None when it is not valid), tolerating the hub's
    health taints for the default time (:func:`with_default_tolerations`)."""
    try:
        model = ResourceBinding.model_validate(binding)
    except ValidationError as exc:
        log.warning("binding %s is not valid: %s", key_text(binding_key(binding)), exc)
        return None
    return with_default_tolerations(
        BindingRequest.from_binding(model),  # GPU shapes as the binding carries them (detector)
        unreachable_seconds=ctx.settings.default_unreachable_toleration_seconds,
        not_ready_seconds=ctx.settings.default_not_ready_toleration_seconds,
    )


class FailoverEvictions:
    """Per binding, since when the workload reports Unhealthy in each cluster, and the bindings
    whose due eviction found no room elsewhere."""

    def __init__(self, ctx: ControllerContext) -> None:
        self.ctx = ctx
        # Per binding and cluster, since when (hub clock) the workload reports Unhealthy there.
        self._unhealthy_since: dict[BindingKey, dict[str, datetime]] = {}
        # Bindings with an eviction due that found no room elsewhere: retried on capacity reports.
        self.blocked: set[BindingKey] = set()

    def check(
        self,
        key: BindingKey,
        request: BindingRequest,
        policy: AnyPropagationPolicy | None,
        snapshots: Mapping[str, ClusterSnapshot],
        resource: Mapping[str, Any],
        *,
        now: datetime,
    ) -> EvictionCheck:
        """The clusters the binding runs in that failover evicts now, and when the next one is due."""
        settings = self.ctx.settings
        failover = policy.spec.failover if policy is not None else None
        cluster_failover = failover.cluster if failover is not None else None
        purge = purge_mode_of(cluster_failover.purge_mode if cluster_failover else None)
        grace = (cluster_failover.grace_period_seconds if cluster_failover else None) or (
            settings.graceful_eviction_timeout_seconds
        )
        taints = taint_evictions(
            request.previous,
            self._taint_views(request.previous, snapshots),
            request.tolerations,
            now=now,
            purge_mode=purge,
            grace_period_seconds=grace if purge is PurgeMode.GRACEFULLY else None,
        )
        application = failover.application if failover is not None else None
        if application is None:
            self._unhealthy_since.pop(key, None)
            return taints
        seen = self._unhealthy_since.get(key) or {}
        unhealthy: dict[str, datetime] = {}
        for work in self.ctx.works.by_index(INDEX_BINDING, key):
            cluster = cluster_of_namespace(str(work["metadata"].get("namespace") or ""))
            if cluster is not None and cluster in request.previous and reported_health(work, resource) == "Unhealthy":
                unhealthy[cluster] = seen.get(cluster, now)
        if unhealthy:
            self._unhealthy_since[key] = unhealthy
        else:
            self._unhealthy_since.pop(key, None)
        app_purge = purge_mode_of(application.purge_mode)
        app_grace = application.grace_period_seconds or settings.graceful_eviction_timeout_seconds
        apps = application_evictions(
            unhealthy,
            toleration_seconds=application.effective_toleration_seconds,
            now=now,
            purge_mode=app_purge,
            grace_period_seconds=app_grace if app_purge is PurgeMode.GRACEFULLY else None,
        )
        return merge_checks(taints, apps)

    def _taint_views(self, names: Iterable[str], snapshots: Mapping[str, ClusterSnapshot]) -> dict[str, ClusterView]:
        """The taints of the clusters ``names``, with their ``timeAdded`` (tolerationSeconds count
        from it; the scheduler's snapshots leave it out)."""
        views: dict[str, ClusterView] = {}
        for name in names:
            obj = self.ctx.clusters.get(None, name)
            if obj is None or name not in snapshots:
                continue
            taints: list[Taint] = []
            for raw in ClusterObjectView(obj).taints:
                try:
                    taints.append(Taint.model_validate(raw))
                except ValidationError:
                    log.warning("cluster %s has an invalid taint %r; ignored", name, raw)
            views[name] = ClusterView(name=name, taints=tuple(taints))
        return views

    def evicted(self, key: BindingKey, clusters: Iterable[str]) -> None:
        """The binding left ``clusters``: their unhealthy time no longer counts."""
        unhealthy = self._unhealthy_since.get(key)
        if unhealthy is not None:
            for cluster in clusters:
                unhealthy.pop(cluster, None)

    def forget(self, key: BindingKey) -> None:
        self._unhealthy_since.pop(key, None)
        self.blocked.discard(key)
