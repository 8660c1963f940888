"""Running the bound ValidatingAdmissionPolicies for one write, as kube's policy dispatcher
(``generic/policy_dispatcher.go``, ``validating/dispatcher.go``).

In: the request's :class:`~.dispatching.RequestWebhooks` (the bound policies, the selectors' and
CEL's lookups, the request's warnings) and the write. Each binding whose policy and own match
select the write is evaluated once per param (:mod:`.params`); its failures go to the binding's
actions — Deny (the first refuses the write), Warn (a warning), Audit (logged: the hub keeps no
audit log) — and each decision is counted in :mod:`.metrics` as kube's dispatcher counts it.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Any

from controlplane.apiserver import audit
from controlplane.apiserver.admission import WebhookRequest
from controlplane.apiserver.resources import ResourceType
from controlplane.apiserver.webhooks import matching, policies, review
from controlplane.apiserver.webhooks.params import ConfigurationError, params_of

if TYPE_CHECKING:
    from controlplane.apiserver.webhooks.dispatching import RequestWebhooks

logger = logging.getLogger(__name__)


async def run_policies(calls: RequestWebhooks, request: WebhookRequest) -> None:
    """kube's ValidatingAdmissionPolicy dispatcher: every matching binding's policy evaluated (once
    per param), Warn decisions as warnings, and the first Deny decision refuses the write."""
    denials: list[tuple[policies.Policy, policies.Binding, policies.Decision]] = []
    registry = calls.admission.objects.registry
    #: Each policy's match: the type it sees the write as (its rule's, under matchPolicy: Equivalent).
    selected: dict[str, ResourceType | None] = {}
    bases: dict[int, dict[str, Any]] = {}
    for policy, binding in calls.admission.bound:
        if policy.name not in selected:
            rt = policies.matched_resource(policy.match, request, registry)
            selected[policy.name] = rt if rt is not None and await calls.selects(policy.match, request) else None
        rt = selected[policy.name]
        if rt is None:
            continue
        if binding.match is not None and not (
            policies.matched_resource(binding.match, request, registry) is not None
            and await calls.selects(binding.match, request)
        ):
            continue
        try:
            params = await params_of(calls.admission.objects, policy, binding, request, calls.admission.cache)
        except ConfigurationError as exc:
            if not policy.fails_open:  # kube: a configuration error denies, whatever the actions (uncounted)
                denials.append((policy, binding, policies.Decision(True, f"failed to configure binding: {exc}")))
            continue
        if id(rt) not in bases:  # kube evaluates with the object in the version the policy matched
            seen = await calls.as_type(request, rt)
            bases[id(rt)] = {**calls.cel_variables(seen), "namespaceObject": None}
        base = bases[id(rt)]
        if policy.reads_namespace and request.namespace and not matching.is_namespace(request):
            base["namespaceObject"] = await calls.namespace_of(request.namespace)
        annotations: list[tuple[str, str]] = []
        for param in params:
            started = time.monotonic()
            decisions = policies.evaluate(policy, {**base, "params": param}, calls.functions, annotations)
            elapsed = time.monotonic() - started
            for decision in decisions:
                _act(calls, policy, binding, decision, denials, elapsed)
        _log_audit_annotations(request, policy, binding, annotations)
    if denials:
        raise review.policy_denial(request, *denials[0])


def _act(
    calls: RequestWebhooks, policy: policies.Policy, binding: policies.Binding, decision: policies.Decision,
    denials: list[tuple[policies.Policy, policies.Binding, policies.Decision]], elapsed: float = 0.0,
) -> None:
    observe = calls.admission.metrics.observe_policy
    if not decision.denied:  # an error ignored under failurePolicy: Ignore, counted as kube does
        observe(policy.name, binding.name, "allow", elapsed, message=decision.message)
        return
    if decision.denies_always:  # an audit annotation's error under failurePolicy: Fail
        denials.append((policy, binding, decision))
        observe(policy.name, binding.name, "deny", elapsed, message=decision.message)
        return
    for action in binding.actions:
        observe(policy.name, binding.name, action.lower(), elapsed, message=decision.message)
        if action == "Deny":
            denials.append((policy, binding, decision))
        elif action == "Warn":
            calls.warnings.append(
                f"Validation failed for ValidatingAdmissionPolicy '{policy.name}' with binding "
                f"'{binding.name}': {decision.message}"
            )
        elif action == "Audit":  # in the request's audit events (kube's annotation), and logged
            audit.add_validation_failure({"message": decision.message, "policy": policy.name,
                                          "binding": binding.name, "validationActions": list(binding.actions)})
            logger.info(
                "ValidatingAdmissionPolicy %s with binding %s failed (Audit): %s",
                policy.name, binding.name, decision.message,
            )


def _log_audit_annotations(
    request: WebhookRequest, policy: policies.Policy, binding: policies.Binding, annotations: list[tuple[str, str]]
) -> None:
    """A binding's audit annotations, in the request's audit events and logged at info: kube's key
    ``<policy>/<key>``, the distinct values of its params joined by ``, `` as kube's collector does."""
    values: dict[str, list[str]] = {}
    for key, value in annotations:
        if value not in values.setdefault(key, []):
            values[key].append(value)
    for key, distinct in values.items():
        audit.annotate(f"{policy.name}/{key}", ", ".join(distinct))
        logger.info(
            "ValidatingAdmissionPolicy %s with binding %s: audit annotation %s/%s=%s (%s %s %s)",
            policy.name, binding.name, policy.name, key, ", ".join(distinct), request.operation,
            request.resource.qualified(), f"{request.namespace}/{request.name}" if request.namespace else request.name,
        )
