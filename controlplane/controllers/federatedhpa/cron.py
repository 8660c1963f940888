"""The CronFederatedHPA controller: scales a workload, or a FederatedHPA's bounds, on schedules.

In: ``autoscaling.karmada.io/v1alpha1`` CronFederatedHPAs (informer) and their targets. Out: when
a rule fires, the workload's ``spec.replicas`` set to ``targetReplicas`` (what its ``scale``
subresource sets), or the FederatedHPA's (or an ``autoscaling/v2`` HorizontalPodAutoscaler's)
``spec.minReplicas`` / ``spec.maxReplicas`` set to ``targetMinReplicas`` / ``targetMaxReplicas``; and ``status.executionHistories`` as Karmada
records them: per rule its ``nextExecutionTime`` and its last successful executions (with the
replicas applied) and failed ones (with why), within the rule's history limits
(:mod:`.cronrules`), in the status's order; and Karmada's Warning Events, ``ScaleFailed`` (a
failed execution, its message) and ``StartRuleFailed`` (a rule whose schedule or time zone
cannot be read). Rules removed from the spec lose their history.

Each CronFederatedHPA's key comes back when its next rule is due (one queue, one timer for all),
and at once when it changes. A rule without a ``timeZone`` (or with ``Local``) is read in the hub
process's local time zone, found as Go finds ``time.Local`` for Karmada's controller
(:func:`local_zone`): ``TZ``, else ``/etc/localtime``, else UTC.
"""

from __future__ import annotations

import copy
import logging
import os
from collections.abc import Mapping
from datetime import UTC, datetime, tzinfo
from typing import Any
from zoneinfo import ZoneInfo

from controlplane.apis.autoscaling_karmada_v1alpha1 import (
    API_VERSION,
    CRON_FEDERATED_HPA_KIND,
    FEDERATED_HPA_KIND,
    CronFederatedHPAView,
)
from controlplane.apis.events import EventType
from controlplane.apis.timestamps import format_time
from controlplane.apis.untyped import dig
from controlplane.apis.views import ObjectView
from controlplane.controllers.context import ControllerContext
from controlplane.controllers.events import EventReason, record_event
from controlplane.controllers.federatedhpa.cronrules import in_status_order, plan, recorded
from controlplane.controllers.informing import ObjectKey
from controlplane.controllers.reconciling import KeyedController
from controlplane.controllers.workloads import is_deleting
from controlplane.objectclient import WatchEventType, errors

log = logging.getLogger(__name__)

#: The longest a key waits before its rules are looked at again (a clock that jumps is caught up).
MAX_WAIT_SECONDS = 300.0
#: The autoscalers whose ``minReplicas``/``maxReplicas`` a rule sets (Karmada's ``minMaxScaleHandler``);
#: any other target has its replicas set.
MIN_MAX_TARGETS = frozenset({(API_VERSION, FEDERATED_HPA_KIND), ("autoscaling/v2", "HorizontalPodAutoscaler")})
#: A successful execution's ``applied*`` field of each of a rule's targets.
_APPLIED = (("appliedReplicas", "targetReplicas"), ("appliedMinReplicas", "targetMinReplicas"),
            ("appliedMaxReplicas", "targetMaxReplicas"))


def _zone_file(path: str) -> tzinfo | None:
    try:
        with open(path, "rb") as data:
            return ZoneInfo.from_file(data, key=path)
    except (OSError, ValueError):
        return None


def local_zone(environ: Mapping[str, str] = os.environ, localtime: str = "/etc/localtime") -> tzinfo:
    """Go's ``time.Local`` (its ``initLocal``): no ``TZ``, the ``localtime`` file; ``TZ`` empty
    or ``UTC``, UTC; ``TZ`` (a leading ``:`` dropped) an absolute path, that file; else the zone
    it names. UTC when what it names cannot be read."""
    name = environ.get("TZ")
    if name is None:
        return _zone_file(localtime) or UTC
    name = name.removeprefix(":")
    if name.startswith("/"):
        return _zone_file(name) or UTC
    if name in ("", "UTC"):
        return UTC
    try:
        return ZoneInfo(name)
    except (KeyError, ValueError, OSError):  # ZoneInfoNotFoundError is a KeyError
        return UTC


class ScaleFailed(Exception):
    """A rule's scaling could not be applied (the failed execution's message)."""


class CronFederatedHPAController(KeyedController[ObjectKey]):
    """Reconciles CronFederatedHPAs (keys: namespace, name)."""

    name = "cron-federated-hpa"

    def __init__(self, ctx: ControllerContext) -> None:
        super().__init__(ctx, workers=1)
        #: The zone of a rule without one, read once, as Go reads ``time.Local``.
        self.local_zone = local_zone()
        self.rt = ctx.watch_kind(API_VERSION, CRON_FEDERATED_HPA_KIND, self._on_cron)

    async def _on_cron(self, event: WatchEventType, obj: dict[str, Any], old: dict[str, Any] | None) -> None:
        view = ObjectView(obj)
        if event is not WatchEventType.DELETED and (old is None or ObjectView(old).generation != view.generation):
            await self.loop.add((view.namespace, view.name))

    async def reconcile(self, key: ObjectKey) -> float | None:
        if self.rt is None:
            return None
        cron = await self.ctx.get(self.rt, *key)
        if cron is None or is_deleting(cron):
            return None
        now = self.ctx.now()
        view = CronFederatedHPAView(cron)
        status, old = view.status, view.execution_histories
        histories = {h.get("ruleName"): h for h in old}
        by_rule: dict[str, dict[str, Any]] = {}
        upcoming: list[datetime] = []
        for rule in view.rules:
            rule_name = str(rule.get("name"))
            history = histories.get(rule_name)
            try:
                planned = plan(rule, history, now, local=self.local_zone)
            except (ValueError, KeyError) as exc:  # a schedule or zone stored before validation refused it
                # Karmada's rule that cannot start: its Event, its history left as it was.
                log.info("CronFederatedHPA %s/%s rule %s: %s", *key, rule_name, exc)
                await record_event(self.ctx, cron, type=EventType.WARNING, reason=EventReason.START_RULE_FAILED,
                                   message=str(exc))
                if history is not None:
                    by_rule[rule_name] = history
                continue
            if planned.next is not None:
                upcoming.append(planned.next)
            if planned.due is None:
                by_rule[rule_name] = recorded(rule, history, next_execution=planned.next)
                continue
            execution: dict[str, Any] = {"scheduleTime": format_time(planned.due), "executionTime": format_time(now)}
            try:
                await self._scale(cron, rule)
            except ScaleFailed as exc:
                execution["message"] = str(exc)
                by_rule[rule_name] = recorded(rule, history, next_execution=planned.next, execution=execution,
                                              failed=True)
                await record_event(self.ctx, cron, type=EventType.WARNING, reason=EventReason.SCALE_FAILED,
                                   message=str(exc))
                log.info("CronFederatedHPA %s/%s rule %s failed: %s", *key, rule_name, exc)
            else:
                # Karmada records the rule's targets as applied, whichever the target's kind reads.
                execution.update({applied: rule[target] for applied, target in _APPLIED if rule.get(target) is not None})
                by_rule[rule_name] = recorded(rule, history, next_execution=planned.next, execution=execution)
                log.info("CronFederatedHPA %s/%s rule %s applied %s", *key, rule_name, execution)
        out = in_status_order(old, by_rule)
        new_status = {**copy.deepcopy(status), "executionHistories": out}
        if not out:
            new_status.pop("executionHistories")
        if new_status != status:
            written, requeue_after = await self.ctx.write_status(self.rt, {**cron, "status": new_status})
            if written is None:
                return requeue_after
        if not upcoming:
            return None
        return min(max((min(upcoming) - now).total_seconds(), 0.0) + 0.01, MAX_WAIT_SECONDS)

    async def _scale(self, cron: dict[str, Any], rule: Mapping[str, Any]) -> None:
        """Apply ``rule`` to the target."""
        view = CronFederatedHPAView(cron)
        namespace, ref = view.namespace, view.scale_target_ref
        api_version, kind, name = str(ref.get("apiVersion") or ""), str(ref.get("kind") or ""), str(ref.get("name") or "")
        rt = self.ctx.registry.for_kind(api_version, kind)
        if rt is None:
            raise ScaleFailed(f'no matches for kind "{kind}" in version "{api_version}"')
        sets_bounds = (api_version, kind) in MIN_MAX_TARGETS
        if not sets_bounds and rt.scale is None:
            raise ScaleFailed(f"{kind} {namespace}/{name} has no scale subresource")
        for _attempt in range(3):
            target = await self.ctx.get(rt, namespace, name)
            if target is None:
                raise ScaleFailed(f'{rt.plural}{"." + rt.group if rt.group else ""} "{name}" not found')
            written = copy.deepcopy(target)
            if sets_bounds:
                fhpa_spec = written.setdefault("spec", {})
                if rule.get("targetMaxReplicas") is not None:
                    fhpa_spec["maxReplicas"] = rule["targetMaxReplicas"]
                if rule.get("targetMinReplicas") is not None:
                    fhpa_spec["minReplicas"] = rule["targetMinReplicas"]
            else:
                assert rt.scale is not None
                path = rt.scale.spec_replicas.split(".")
                parent = dig(written, *path[:-1])
                if not isinstance(parent, dict):
                    raise ScaleFailed(f"{kind} {namespace}/{name} has no {rt.scale.spec_replicas}")
                parent[path[-1]] = rule.get("targetReplicas")
            if written == target:
                return
            try:
                await self.ctx.objects.update(rt, written)
            except errors.Conflict:
                continue  # changed under us: read it again
            except errors.NotFound as exc:
                raise ScaleFailed(str(exc)) from exc
            except errors.ApiError as exc:  # refused, e.g. minReplicas above maxReplicas
                raise ScaleFailed(str(exc)) from exc
            return
        raise ScaleFailed(f"{kind} {namespace}/{name} kept changing; the rule is retried at its next time")
