"""The controllers' calls of Karmada's resource interpreter webhooks (awaited before the pure
building of a binding, a Work or a status, whose answers are handed to it).

A failed call is reported as Karmada does: a Warning Event naming the webhook and the error — on
the workload ``ApplyPolicyFailed`` for InterpretReplica, ``SyncWorkFailed`` for ReviseReplica,
``AggregateStatusFailed`` for AggregateStatus, ``GetDependenciesFailed`` for InterpretDependency;
on the Work ``ReflectStatusFailed`` for InterpretStatus and ``InterpretHealthFailed`` for
InterpretHealth — and :class:`InterpreterWebhookFailed` raised, so the reconcile loop retries it
with its backoff and nothing is written meanwhile; except InterpretHealth, whose failure makes that
member's health ``Unknown``, as Karmada's work status controller does.

The InterpretStatus and InterpretHealth answers about a member's report are kept in a bounded
:class:`MemberAnswers` (the status controller's), so a status reconcile that finds the report
unchanged sends nothing: an answer is kept by webhook, its configuration's resourceVersion, Work and
the Work's resourceVersion with the generation the member reported (a new report is a new Work
resourceVersion). A failed call is not kept.

``Retain`` is not called: it needs the member's object, which only the agent reads, and the agent
does not reach the hub's webhooks (a ``service`` is resolved on the hub's side).
"""

from __future__ import annotations

import copy
from collections import OrderedDict
from collections.abc import Callable, Hashable, Mapping
from typing import Any

from controlplane.apis.events import EventType
from controlplane.apis.views import BindingView, ObjectView
from controlplane.apis.work_v1alpha1 import Health
from controlplane.controllers.context import ControllerContext
from controlplane.controllers.events import EventReason, record_event
from controlplane.controllers.workloads import WorkloadConditionType, find_condition, is_deleting
from controlplane.controllers.works import main_manifest, with_main_manifest, work_manifest
from controlplane.interpreter.dependencies import Dependency
from controlplane.interpreter.webhook_calls import (
    InterpreterWebhookCaller,
    InterpreterWebhookFailed,
    webhook_interprets,
)
from controlplane.interpreter.webhook_context import (
    HookFailed,
    apply_patch,
    dependencies_of,
    healthy_of,
    raw_status_of,
)
from policies.matching import PolicyRef

__all__ = [
    "MemberAnswers", "aggregated_by_webhook", "reflected_by_webhook", "revised_by_webhook", "webhook_dependencies", "webhook_replicas",
]


#: How many answers about members' reports :class:`MemberAnswers` keeps by default.
ANSWERS_KEPT = 4096


class MemberAnswers:
    """The status and health webhooks' answers about members' reports, the least recently used
    dropped beyond ``size``."""

    def __init__(self, size: int = ANSWERS_KEPT) -> None:
        self._size = size
        self._answers: OrderedDict[Hashable, Any] = OrderedDict()

    def __len__(self) -> int:
        return len(self._answers)

    def get(self, key: Hashable) -> Any:
        """A copy of the answer kept for ``key`` (None: none)."""
        found = self._answers.get(key)
        if found is not None:
            self._answers.move_to_end(key)
        return copy.deepcopy(found)

    def put(self, key: Hashable, answer: Any) -> None:
        """Keep ``answer`` (None: nothing to keep)."""
        if answer is None:
            return
        self._answers[key] = answer
        while len(self._answers) > self._size:
            self._answers.popitem(last=False)


def _report_key(
    webhooks: InterpreterWebhookCaller, target: Mapping[str, str], operation: str, work: Mapping[str, Any],
    entry: Mapping[str, Any],
) -> Hashable:
    """What an answer about the member's report in ``work`` depends on."""
    hook = webhooks.hook_for(target["apiVersion"], target["kind"], operation)
    meta = ObjectView(work).metadata
    return (
        hook.uid if hook else None, hook.resource_version if hook else None, operation, meta.get("namespace"),
        meta.get("name"), meta.get("uid"), meta.get("resourceVersion"), entry.get("generation"),
    )


async def _called(
    ctx: ControllerContext, webhooks: InterpreterWebhookCaller, operation: str, workload: dict[str, Any],
    failed: tuple[EventReason, str], *, read: Callable[[dict[str, Any]], Any] | None = None,
    involved: Mapping[str, Any] | None = None, **request: Any,
) -> Any:
    """The webhook's answer to ``operation`` on ``workload`` (with ``read``: what it reads of the
    answer); None when no webhook answers. A failed call is a Warning Event on ``involved`` (by
    default the workload; ``failed``: its reason and message, ``{error}`` standing for the error)
    and :class:`InterpreterWebhookFailed`."""
    try:
        answer = await webhooks.interpret(operation, workload, **request)
        if read is None or answer is None:
            return answer
        try:
            return read(answer)
        except HookFailed as exc:
            hook = webhooks.hook_for(str(workload.get("apiVersion")), str(workload.get("kind")), operation)
            raise InterpreterWebhookFailed(exc.internal_error(hook) if hook is not None else str(exc)) from None
    except InterpreterWebhookFailed as exc:
        reason, message = failed
        await record_event(
            ctx, involved if involved is not None else workload, type=EventType.WARNING, reason=reason,
            message=message.replace("{error}", str(exc)),
        )
        raise


async def webhook_replicas(ctx: ControllerContext, workload: dict[str, Any], policy: PolicyRef) -> dict[str, Any] | None:
    """The webhook's ``replicas`` and ``replicaRequirements`` for the workload (None: no webhook
    interprets its replicas). ``policy``: the claiming policy, which Karmada's event names."""
    webhooks = ctx.interpreter_webhooks
    if webhooks is None or not webhook_interprets(webhooks, workload, "InterpretReplica"):
        return None
    failed = f"Apply policy({policy.namespace}/{policy.name}) failed: {{error}}" if policy.namespace else (
        f"Apply cluster policy({policy.name}) failed: {{error}}"
    )
    answer = await _called(ctx, webhooks, "InterpretReplica", workload, (EventReason.APPLY_POLICY_FAILED, failed))
    if answer is None:
        return None
    requirements = answer.get("replicaRequirements")
    return {"replicas": answer["replicas"], "replicaRequirements": requirements if isinstance(requirements, dict) else {}}


def _divides(binding: dict[str, Any]) -> bool:
    """Karmada revises replicas only where they are divided: the binding has some and its
    placement's ``replicaScheduling`` is Divided."""
    view = BindingView(binding)
    scheduling = view.placement.get("replicaScheduling")
    divided = isinstance(scheduling, dict) and scheduling.get("replicaSchedulingType", "Divided") == "Divided"
    return divided and view.replicas > 0


async def revised_by_webhook(
    ctx: ControllerContext, workload: dict[str, Any], binding: dict[str, Any], replicas: int, work: str
) -> dict[str, Any]:
    """The workload with ``replicas`` for one cluster as its ReviseReplica webhook patches it
    (unchanged when no webhook revises it or the binding's replicas are not divided).
    ``work``: the Work's ``namespace/name``, which the event names."""
    webhooks = ctx.interpreter_webhooks
    if webhooks is None or not _divides(binding) or not webhook_interprets(webhooks, workload, "ReviseReplica"):
        return workload
    failed = (EventReason.SYNC_WORK_FAILED, f"Failed to sync work({work}): {{error}}")
    revised = await _called(
        ctx, webhooks, "ReviseReplica", workload, failed, read=lambda a: apply_patch(workload, a), desired_replicas=replicas
    )
    return revised if revised is not None else workload


async def aggregated_by_webhook(
    ctx: ControllerContext, resource: Mapping[str, Any], items: list[dict[str, Any]]
) -> bool:
    """Whether an AggregateStatus webhook folds the members' statuses (``items``: the binding's
    ``aggregatedStatus``) into the hub workload's; its patched ``status`` is written, the hub's own
    conditions kept. False when no webhook does (the interpreter folds them)."""
    webhooks = ctx.interpreter_webhooks
    informer = ctx.workload_informer(str(resource.get("apiVersion")), str(resource.get("kind")))
    if webhooks is None or informer is None or not informer.rt.has_status:
        return False
    workload = informer.get(resource.get("namespace"), str(resource.get("name")))
    if workload is None or is_deleting(workload) or not webhook_interprets(webhooks, workload, "AggregateStatus"):
        return False
    if resource.get("uid") and ObjectView(workload).metadata.get("uid") != resource.get("uid"):
        return True  # the binding still describes an earlier object of that name
    failed = (EventReason.AGGREGATE_STATUS_FAILED, "Failed to aggregate status: {error}")
    patched = await _called(
        ctx, webhooks, "AggregateStatus", workload, failed, read=lambda a: apply_patch(workload, a), aggregated_status=items
    )
    patched = patched if patched is not None else workload
    current = workload.get("status") or {}
    status = dict(patched.get("status") or {})
    for ctype in WorkloadConditionType:  # the hub's own conditions stay
        own = find_condition(current.get("conditions"), ctype)
        if own is not None and find_condition(status.get("conditions"), ctype) is None:
            status["conditions"] = [*(status.get("conditions") or []), dict(own)]
    if status != current:
        await ctx.objects.update_status(informer.rt, {**workload, "status": status})
    return True


async def webhook_dependencies(ctx: ControllerContext, workload: dict[str, Any]) -> list[Dependency] | None:
    """The objects the workload's InterpretDependency webhook names (None: no webhook names them).
    Karmada's event on a failed call is the error alone."""
    webhooks = ctx.interpreter_webhooks
    if webhooks is None or not webhook_interprets(webhooks, workload, "InterpretDependency"):
        return None
    namespace = str(ObjectView(workload).metadata.get("namespace") or "")
    failed = (EventReason.GET_DEPENDENCIES_FAILED, "{error}")
    found: list[Dependency] | None = await _called(
        ctx, webhooks, "InterpretDependency", workload, failed, read=lambda a: dependencies_of(a, namespace)
    )
    return found


async def reflected_by_webhook(
    ctx: ControllerContext, resource: Mapping[str, Any], works: Mapping[str, dict[str, Any]], answers: MemberAnswers,
) -> dict[str, dict[str, Any]]:
    """``works`` (by cluster) with each member status an InterpretStatus webhook reflects
    (``rawStatus``) and each health an InterpretHealth webhook judges (``healthy``), unless the
    agent ran a customization's script for it. The object sent is the member's copy as the hub
    knows it: the Work's manifest with the status and generation its member reported; an answer
    about an unchanged report comes from ``answers``."""
    webhooks = ctx.interpreter_webhooks
    target = {"apiVersion": str(resource.get("apiVersion")), "kind": str(resource.get("kind"))}
    if webhooks is None:
        return dict(works)
    reflects = webhook_interprets(webhooks, target, "InterpretStatus")
    judges = webhook_interprets(webhooks, target, "InterpretHealth")
    if not reflects and not judges:
        return dict(works)
    out = dict(works)
    for cluster, work in works.items():
        entry = dict(main_manifest(work, resource) or {})
        interpreted = entry.get("interpretedBy") or {}
        if entry.get("status") is None:
            continue  # no member object reported yet
        report = (work, entry, _member_copy(work, resource, entry))
        what = f"object({target['kind']}/{resource.get('namespace') or ''}/{resource.get('name')})"
        if reflects and "statusReflection" not in interpreted:
            failed = (EventReason.REFLECT_STATUS_FAILED, f"Reflect status for {what} failed, err: {{error}}.")
            reflected = await _answer(ctx, webhooks, answers, target, report, "InterpretStatus", failed, raw_status_of)
            entry["status"] = reflected if reflected is not None else entry["status"]  # None: the webhook went meanwhile
        if judges and "healthInterpretation" not in interpreted:
            failed = (EventReason.INTERPRET_HEALTH_FAILED, f"Interpret health of {what} failed, err: {{error}}.")
            try:
                healthy = await _answer(ctx, webhooks, answers, target, report, "InterpretHealth", failed, healthy_of)
            except InterpreterWebhookFailed:
                entry["health"] = str(Health.UNKNOWN)  # Karmada's: the member's health is not known, no retry
            else:
                if healthy is not None:
                    entry["health"] = str(Health.HEALTHY if healthy else Health.UNHEALTHY)
        out[cluster] = with_main_manifest(work, resource, entry)
    return out


async def _answer(
    ctx: ControllerContext, webhooks: InterpreterWebhookCaller, answers: MemberAnswers, target: Mapping[str, str],
    report: tuple[Mapping[str, Any], Mapping[str, Any], dict[str, Any]], operation: str,
    failed: tuple[EventReason, str], read: Callable[[dict[str, Any]], Any],
) -> Any:
    """A webhook's answer about one member report (``report``: the Work, its manifest entry and the
    member's copy sent): the one ``answers`` keeps, else a call (kept unless it failed)."""
    work, entry, observed = report
    key = _report_key(webhooks, target, operation, work, entry)
    found = answers.get(key)
    if found is None:
        found = await _called(ctx, webhooks, operation, observed, failed, read=read, involved=work)
        answers.put(key, found)
    return found


def _member_copy(work: Mapping[str, Any], resource: Mapping[str, Any], entry: Mapping[str, Any]) -> dict[str, Any]:
    manifest = work_manifest(work, resource) or {
        "apiVersion": resource.get("apiVersion"), "kind": resource.get("kind"),
        "metadata": {"namespace": resource.get("namespace"), "name": resource.get("name")},
    }
    metadata = dict(manifest.get("metadata") or {})
    if isinstance(entry.get("generation"), int):
        metadata["generation"] = entry["generation"]
    return {**manifest, "metadata": metadata, "status": entry["status"]}
