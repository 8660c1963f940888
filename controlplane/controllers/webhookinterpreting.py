"""The controllers' calls of Karmada's resource interpreter webhooks (awaited before the pure
building of a binding or a Work, whose answers are handed to it).

A failed call is reported as Karmada does: a Warning Event on the workload naming the webhook and
the error (``ApplyPolicyFailed`` for InterpretReplica, ``SyncWorkFailed`` for ReviseReplica), and
:class:`InterpreterWebhookFailed` raised, so the reconcile loop retries it with its backoff and
nothing is written meanwhile.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from controlplane.apis.events import EventType
from controlplane.apis.views import BindingView, ObjectView
from controlplane.controllers.context import ControllerContext
from controlplane.controllers.events import EventReason, record_event
from controlplane.controllers.workloads import WorkloadConditionType, find_condition, is_deleting
from controlplane.interpreter.webhook_calls import (
    InterpreterWebhookCaller,
    InterpreterWebhookFailed,
    webhook_interprets,
)
from controlplane.interpreter.webhook_context import HookFailed, apply_patch
from policies.matching import PolicyRef

__all__ = ["aggregated_by_webhook", "revised_by_webhook", "webhook_replicas"]


async def _called(
    ctx: ControllerContext, webhooks: InterpreterWebhookCaller, operation: str, workload: dict[str, Any],
    failed: tuple[EventReason, str], *, patch: bool = False, **request: Any,
) -> dict[str, Any] | None:
    """The webhook's answer to ``operation`` (with ``patch``: the workload as its JSONPatch leaves
    it); None when no webhook answers. A failed call is a Warning Event on the workload (``failed``:
    its reason and the words before the error) and :class:`InterpreterWebhookFailed`."""
    try:
        answer = await webhooks.interpret(operation, workload, **request)
        if not patch or answer is None:
            return answer
        try:
            return apply_patch(workload, answer)
        except HookFailed as exc:
            hook = webhooks.hook_for(str(workload.get("apiVersion")), str(workload.get("kind")), operation)
            raise InterpreterWebhookFailed(exc.internal_error(hook) if hook is not None else str(exc)) from None
    except InterpreterWebhookFailed as exc:
        reason, words = failed
        await record_event(ctx, workload, type=EventType.WARNING, reason=reason, message=f"{words}: {exc}")
        raise


async def webhook_replicas(ctx: ControllerContext, workload: dict[str, Any], policy: PolicyRef) -> dict[str, Any] | None:
    """The webhook's ``replicas`` and ``replicaRequirements`` for the workload (None: no webhook
    interprets its replicas). ``policy``: the claiming policy, which Karmada's event names."""
    webhooks = ctx.interpreter_webhooks
    if webhooks is None or not webhook_interprets(webhooks, workload, "InterpretReplica"):
        return None
    failed = f"Apply policy({policy.namespace}/{policy.name}) failed" if policy.namespace else (
        f"Apply cluster policy({policy.name}) failed"
    )
    answer = await _called(ctx, webhooks, "InterpretReplica", workload, (EventReason.APPLY_POLICY_FAILED, failed))
    if answer is None:
        return None
    requirements = answer.get("replicaRequirements")
    return {"replicas": answer["replicas"], "replicaRequirements": requirements if isinstance(requirements, dict) else {}}


def _divides(binding: dict[str, Any]) -> bool:
    """Karmada revises replicas only where they are divided: the binding has some and its
    placement's ``replicaScheduling`` is Divided."""
    spec = BindingView(binding).spec
    scheduling = (spec.get("placement") or {}).get("replicaScheduling")
    divided = isinstance(scheduling, dict) and scheduling.get("replicaSchedulingType", "Divided") == "Divided"
    return divided and int(spec.get("replicas") or 0) > 0


async def revised_by_webhook(
    ctx: ControllerContext, workload: dict[str, Any], binding: dict[str, Any], replicas: int, work: str
) -> dict[str, Any]:
    """The workload with ``replicas`` for one cluster as its ReviseReplica webhook patches it
    (unchanged when no webhook revises it or the binding's replicas are not divided).
    ``work``: the Work's ``namespace/name``, which the event names."""
    webhooks = ctx.interpreter_webhooks
    if webhooks is None or not _divides(binding) or not webhook_interprets(webhooks, workload, "ReviseReplica"):
        return workload
    failed = (EventReason.SYNC_WORK_FAILED, f"Failed to sync work({work})")
    revised = await _called(ctx, webhooks, "ReviseReplica", workload, failed, patch=True, desired_replicas=replicas)
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
    failed = (EventReason.AGGREGATE_STATUS_FAILED, "Failed to aggregate status")
    patched = await _called(ctx, webhooks, "AggregateStatus", workload, failed, patch=True, aggregated_status=items)
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
