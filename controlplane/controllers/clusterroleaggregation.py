"""ClusterRole aggregation: fills an aggregated ClusterRole's rules from labelled ClusterRoles.

As kube-controller-manager's ``clusterrole-aggregation`` controller: a ClusterRole with an
``aggregationRule`` gets, as its ``rules``, the rules of every other ClusterRole matched by
one of its ``clusterRoleSelectors`` (:mod:`controlplane.apis.kube.roleaggregation`).
That is how ``admin``, ``edit`` and ``view`` grow when a ClusterRole labelled
``rbac.authorization.k8s.io/aggregate-to-edit: "true"`` is created, and shrink when it goes.
``view`` is itself labelled aggregate-to-edit, so ``edit`` includes ``view`` (and ``admin``
``edit``): a change re-runs every aggregated role until nothing changes.

Level-based: any ClusterRole event re-checks every aggregated ClusterRole; an update is a
compare-and-swap on the role as cached (a conflict is retried once the watch brings the newer one).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any

from controlplane.apis.kube.roleaggregation import aggregated_rules
from controlplane.controllers.informing import Informer
from controlplane.controllers.reconciling import ReconcileLoop
from controlplane.controllers.workqueuemetrics import WorkqueueMetrics
from controlplane.objectclient import ObjectClient, WatchEventType, errors

log = logging.getLogger(__name__)


class ClusterRoleAggregationController:
    def __init__(self, objects: ObjectClient, *, workqueue_metrics: WorkqueueMetrics | None = None) -> None:
        self._objects = objects
        self._rt = objects.registry.require("rbac.authorization.k8s.io/v1", "ClusterRole")
        self.roles = Informer(objects, self._rt)
        self._loop: ReconcileLoop[str] = ReconcileLoop(
            "clusterrole-aggregation", self.reconcile, workers=1, metrics=workqueue_metrics
        )
        self.roles.add_handler(self._on_role)

    async def _on_role(self, _event: WatchEventType, _obj: dict[str, Any], _old: dict[str, Any] | None) -> None:
        for role in self.roles.items():
            if role.get("aggregationRule") is not None:
                await self._loop.add(role["metadata"]["name"])

    async def run(self) -> None:
        async with asyncio.TaskGroup() as group:
            group.create_task(self.roles.run())
            group.create_task(self._loop.run())

    async def reconcile(self, name: str) -> None:
        role = self.roles.get(None, name)
        if role is None:
            return
        rules = aggregated_rules(role, self.roles.items())
        if rules is None or rules == (role.get("rules") or []):
            return
        with contextlib.suppress(errors.NotFound):
            # A Conflict is retried by the loop; the watch brings the newer role first.
            await self._objects.update(self._rt, {**role, "rules": rules})
            log.info("aggregated %d rules into cluster role %s", len(rules), name)
