"""Which configured webhooks a write calls, as kube's webhook admission decides it.

In: the webhook configurations (stored objects, already defaulted and validated) and one
request's attributes. Out: :class:`Webhook` views, and whether each matches the request —
kube's ``predicates/rules`` (group, version, resource and subresource with ``*`` and ``*/*``,
scope, operation), ``namespace/matcher.go`` (the namespace's labels; a cluster-scoped object but a
Namespace is never exempted) and ``object/matcher.go`` (the new or the old object's labels).

A webhook's ``matchConditions`` are compiled here, once per change of its configuration, and
evaluated by the dispatcher (:func:`.expressions.conditions_match`).

Under ``matchPolicy: Equivalent`` (the default) a webhook none of whose rules names the request's
resource is matched by its first rule naming an equivalent one (:mod:`.equivalence`), as kube's
``ShouldCallHook``: :func:`matched_type`. Pure: no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from controlplane.apis.kube import field, label_selectors
from controlplane.apiserver.admission import Operation, WebhookRequest
from controlplane.apiserver.resources import Registry, ResourceType
from controlplane.apiserver.webhooks import equivalence
from controlplane.apiserver.webhooks.expressions import Expression, expression

#: Webhooks (and admission policies) are never called for writes of their own configurations (kube: a webhook cannot lock
#: the cluster out of fixing it).
CONFIGURATION_RESOURCES = frozenset({
    ("admissionregistration.k8s.io", "validatingwebhookconfigurations"),
    ("admissionregistration.k8s.io", "mutatingwebhookconfigurations"),
    ("admissionregistration.k8s.io", "validatingadmissionpolicies"),
    ("admissionregistration.k8s.io", "validatingadmissionpolicybindings"),
})


class Selection(Protocol):
    """What a webhook or an admission policy selects: its rules and label selectors."""

    @property
    def rules(self) -> tuple[dict[str, Any], ...]: ...
    @property
    def namespace_selector(self) -> dict[str, Any]: ...
    @property
    def object_selector(self) -> dict[str, Any]: ...
    @property
    def match_policy(self) -> str: ...


@dataclass(frozen=True, slots=True)
class Webhook:
    """One webhook of a configuration, read once from its stored (defaulted) object."""

    name: str
    configuration: str
    rules: tuple[dict[str, Any], ...]
    namespace_selector: dict[str, Any]
    object_selector: dict[str, Any]
    failure_policy: str
    side_effects: str
    timeout_seconds: int
    review_versions: tuple[str, ...]
    url: str | None
    service: dict[str, Any] | None
    ca_bundle: str | None
    reinvocation_policy: str = "Never"
    match_conditions: tuple[Expression, ...] = ()
    match_policy: str = "Equivalent"

    @property
    def fails_open(self) -> bool:
        return self.failure_policy == "Ignore"


def webhooks_of(configuration: dict[str, Any]) -> list[Webhook]:
    """The webhooks of a stored configuration, in its order."""
    name = str(configuration.get("metadata", {}).get("name") or "")
    out = []
    for raw in field.items(configuration.get("webhooks")):
        hook = field.mapping(raw)
        client = field.mapping(hook.get("clientConfig"))
        out.append(Webhook(
            name=str(hook.get("name") or ""),
            configuration=name,
            rules=tuple(field.mapping(rule) for rule in field.items(hook.get("rules"))),
            namespace_selector=field.mapping(hook.get("namespaceSelector")),
            object_selector=field.mapping(hook.get("objectSelector")),
            failure_policy=str(hook.get("failurePolicy") or "Fail"),
            side_effects=str(hook.get("sideEffects") or ""),
            timeout_seconds=int(hook.get("timeoutSeconds") or 10),
            review_versions=tuple(str(v) for v in field.items(hook.get("admissionReviewVersions"))),
            url=str(client["url"]) if client.get("url") is not None else None,
            service=field.mapping(client.get("service")) or None,
            ca_bundle=str(client["caBundle"]) if client.get("caBundle") else None,
            reinvocation_policy=str(hook.get("reinvocationPolicy") or "Never"),
            match_policy=str(hook.get("matchPolicy") or "Equivalent"),
            match_conditions=tuple(
                expression(str(field.mapping(c).get("expression") or "")) for c in field.items(hook.get("matchConditions"))
            ),
        ))
    return out


def called(request: WebhookRequest) -> bool:
    """Whether any webhook may be called for ``request`` (not for the configurations themselves)."""
    return (request.resource.group, request.resource.plural) not in CONFIGURATION_RESOURCES


def rules_match(hook: Selection, request: WebhookRequest) -> bool:
    """kube's ``rules.Matcher``: any of the webhook's (or policy's) rules matches the request."""
    return any(rule_matches(rule, request) for rule in hook.rules)


def matched_type(hook: Selection, request: WebhookRequest, registry: Registry) -> ResourceType | None:
    """The type a webhook (or policy) sees the write as: the request's own when a rule names it;
    else, under ``matchPolicy: Equivalent``, the first equivalent type a rule names (rules in
    order, then the equivalents); None when none matches."""
    if rules_match(hook, request):
        return request.resource
    if hook.match_policy != "Equivalent":
        return None
    candidates = equivalence.equivalents(registry, request.resource, request.subresource)
    for rule in hook.rules:
        for candidate in candidates:
            if rule_matches(rule, request, candidate):
                return candidate
    return None


def rule_matches(rule: dict[str, Any], request: WebhookRequest, resource: ResourceType | None = None) -> bool:
    """Whether ``rule`` matches ``request`` (as a write of ``resource``, when given)."""
    rt = resource or request.resource
    return (
        _scope_matches(str(rule.get("scope") or "*"), request)
        and _exact_or_wildcard(rule.get("operations"), str(request.operation))
        and _exact_or_wildcard(rule.get("apiGroups"), rt.group)
        and _exact_or_wildcard(rule.get("apiVersions"), rt.version)
        and _resource_matches(rule.get("resources"), rt.plural, request.subresource or "")
        and _name_matches(rule.get("resourceNames"), request.name)
    )


def _name_matches(names: Any, name: str) -> bool:
    """A policy rule's ``resourceNames`` (a webhook rule has none): empty matches any name."""
    return not names or name in field.items(names)


def _exact_or_wildcard(items: Any, requested: str) -> bool:
    return any(item == "*" or item == requested for item in field.items(items))


def is_namespace(request: WebhookRequest) -> bool:
    return request.resource.group == "" and request.resource.plural == "namespaces"


def _scope_matches(scope: str, request: WebhookRequest) -> bool:
    if scope == "*":
        return True
    if scope == "Namespaced":
        return not is_namespace(request) and bool(request.namespace)
    if scope == "Cluster":
        return is_namespace(request) or not request.namespace
    return False


def _resource_matches(resources: Any, resource: str, subresource: str) -> bool:
    for entry in field.items(resources):
        res, _, sub = str(entry).partition("/")
        if (res == "*" or res == resource) and (sub == "*" or sub == subresource):
            return True
    return False


def needs_namespace_labels(hook: Selection, request: WebhookRequest) -> bool:
    """Whether matching ``hook`` reads the labels of the request's namespace from the store."""
    return bool(request.namespace) and not is_namespace(request) and not label_selectors.is_empty(
        hook.namespace_selector
    )


def namespace_matches(hook: Selection, request: WebhookRequest, namespace_labels: dict[str, Any] | None) -> bool:
    """kube's ``MatchNamespaceSelector``; ``namespace_labels`` are those of the request's namespace
    (read by the caller when :func:`needs_namespace_labels`)."""
    if not request.namespace and not is_namespace(request):
        return True  # a cluster-scoped object (but a Namespace) is never exempted
    if label_selectors.is_empty(hook.namespace_selector):
        return True
    if is_namespace(request):
        own = request.old if request.operation is Operation.DELETE else request.obj
        namespace_labels = field.mapping(field.mapping(field.mapping(own).get("metadata")).get("labels"))
    return label_selectors.matches(hook.namespace_selector, namespace_labels or {})


def object_matches(hook: Selection, request: WebhookRequest) -> bool:
    """kube's ``MatchObjectSelector``: the new or the old object's labels are selected."""
    if label_selectors.is_empty(hook.object_selector):
        return True
    return any(
        obj is not None and label_selectors.matches(hook.object_selector, field.mapping(obj.get("metadata")).get("labels"))
        for obj in (request.obj, request.old)
    )
