"""RBAC policy rules: does a rule allow a request, does a set of rules cover another.

As kube's ``plugin/pkg/auth/authorizer/rbac`` and ``pkg/registry/rbac/validation`` read
them: a resource rule matches a verb, an API group, a resource (``deployments``,
``deployments/scale``, ``*``, ``*/scale``) and, when it lists any, a resource name; a
non-resource rule matches a verb and a URL (exact, ``*``, or a prefix ending in ``*``).
``covers`` answers the escalation question ("does the writer hold every right this Role
grants?") by breaking the wanted rules into single rights, as kube's ``Covers`` does, and
``compact_string`` prints the missing ones as kube's escalation message does.

In: rule dicts as stored in Roles and ClusterRoles, and :class:`RequestAttributes`. Out:
booleans and :class:`PolicyRule` values. Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Final

from controlplane.apiserver.identity import RequestAttributes
from controlplane.gojson import go_quote

ALL: Final = "*"


@dataclass(frozen=True, slots=True)
class PolicyRule:
    """One ``rules[]`` entry; empty tuples for absent lists."""

    verbs: tuple[str, ...] = ()
    api_groups: tuple[str, ...] = ()
    resources: tuple[str, ...] = ()
    resource_names: tuple[str, ...] = ()
    non_resource_urls: tuple[str, ...] = ()

    @classmethod
    def of(cls, raw: object) -> PolicyRule:
        """A rule from its JSON form; anything malformed reads as an absent list."""
        data = raw if isinstance(raw, dict) else {}
        return cls(
            verbs=_strings(data.get("verbs")),
            api_groups=_strings(data.get("apiGroups")),
            resources=_strings(data.get("resources")),
            resource_names=_strings(data.get("resourceNames")),
            non_resource_urls=_strings(data.get("nonResourceURLs")),
        )

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"verbs": list(self.verbs)}
        if self.api_groups or self.resources:
            out["apiGroups"] = list(self.api_groups)
            out["resources"] = list(self.resources)
        if self.resource_names:
            out["resourceNames"] = list(self.resource_names)
        if self.non_resource_urls:
            out["nonResourceURLs"] = list(self.non_resource_urls)
        return out


def _strings(value: object) -> tuple[str, ...]:
    if not isinstance(value, list):
        return ()
    return tuple(item for item in value if isinstance(item, str))


def rules_of(obj: dict[str, Any]) -> tuple[PolicyRule, ...]:
    """The rules of a Role or ClusterRole object."""
    raw = obj.get("rules")
    return tuple(PolicyRule.of(rule) for rule in raw) if isinstance(raw, list) else ()


# --- request matching (rbac.go RuleAllows) ---------------------------------------------


def verb_matches(rule: PolicyRule, verb: str) -> bool:
    return ALL in rule.verbs or verb in rule.verbs


def api_group_matches(rule: PolicyRule, group: str) -> bool:
    return ALL in rule.api_groups or group in rule.api_groups


def resource_matches(rule: PolicyRule, combined: str, subresource: str) -> bool:
    for resource in rule.resources:
        if resource in (ALL, combined):
            return True
        # "*/scale" matches the scale subresource of every resource.
        if subresource and len(resource) == len(subresource) + 2 and resource == "*/" + subresource:
            return True
    return False


def resource_name_matches(rule: PolicyRule, name: str | None) -> bool:
    return not rule.resource_names or (name is not None and name in rule.resource_names)


def _any_url_matches(urls: Iterable[str], path: str) -> bool:
    """``*``, the exact path, or a prefix ending in ``*``."""
    return any(url in (ALL, path) or (url.endswith(ALL) and path.startswith(url[:-1])) for url in urls)


def non_resource_url_matches(rule: PolicyRule, path: str) -> bool:
    return _any_url_matches(rule.non_resource_urls, path)


def rule_allows(rule: PolicyRule, attributes: RequestAttributes) -> bool:
    if not verb_matches(rule, attributes.verb):
        return False
    if attributes.non_resource_path is not None:
        return non_resource_url_matches(rule, attributes.non_resource_path)
    combined = attributes.resource + (f"/{attributes.subresource}" if attributes.subresource else "")
    return (
        api_group_matches(rule, attributes.api_group)
        and resource_matches(rule, combined, attributes.subresource)
        and resource_name_matches(rule, attributes.name)
    )


def rules_allow(rules: Iterable[PolicyRule], attributes: RequestAttributes) -> bool:
    return any(rule_allows(rule, attributes) for rule in rules)


# --- coverage (pkg/registry/rbac/validation: Covers, BreakdownRule, CompactRules) ------


def breakdown(rule: PolicyRule) -> list[PolicyRule]:
    """``rule`` as single rights: one per (group, resource[, name], verb) or (url, verb)."""
    out: list[PolicyRule] = []
    for group in rule.api_groups:
        for resource in rule.resources:
            for verb in rule.verbs:
                if rule.resource_names:
                    out.extend(
                        PolicyRule((verb,), (group,), (resource,), resource_names=(name,))
                        for name in rule.resource_names
                    )
                else:
                    out.append(PolicyRule((verb,), (group,), (resource,)))
    for url in rule.non_resource_urls:
        out.extend(PolicyRule((verb,), non_resource_urls=(url,)) for verb in rule.verbs)
    return out


def _has_all(have: Sequence[str], want: Sequence[str]) -> bool:
    return ALL in have or all(item in have for item in want)


def _resources_cover(have: Sequence[str], want: Sequence[str]) -> bool:
    if ALL in have or all(item in have for item in want):
        return True
    for resource in want:
        if resource in have:
            continue
        if "/" not in resource:
            return False
        if "*/" + resource.split("/", 1)[1] not in have:
            return False
    return True


def rule_covers(owner: PolicyRule, servant: PolicyRule) -> bool:
    """Whether ``owner`` grants everything ``servant`` does (kube's ruleCovers)."""
    if not _has_all(owner.verbs, servant.verbs):
        return False
    if servant.non_resource_urls and not all(_any_url_matches(owner.non_resource_urls, u) for u in servant.non_resource_urls):
        return False
    if not _has_all(owner.api_groups, servant.api_groups):
        return False
    if not _resources_cover(owner.resources, servant.resources):
        return False
    if owner.resource_names:
        return bool(servant.resource_names) and all(n in owner.resource_names for n in servant.resource_names)
    return True


def uncovered(owner: Sequence[PolicyRule], servant: Iterable[PolicyRule]) -> list[PolicyRule]:
    """The single rights of ``servant`` that no rule of ``owner`` grants."""
    missing: list[PolicyRule] = []
    for rule in servant:
        for right in breakdown(rule):
            if not any(rule_covers(mine, right) for mine in owner) and right not in missing:
                missing.append(right)
    return missing


def compact(rules: Iterable[PolicyRule]) -> list[PolicyRule]:
    """Single rights that differ only in their verb merged into one rule (kube's CompactRules)."""
    merged: dict[tuple[tuple[str, ...], ...], list[str]] = {}
    for rule in rules:
        key = (rule.api_groups, rule.resources, rule.resource_names, rule.non_resource_urls)
        verbs = merged.setdefault(key, [])
        verbs.extend(v for v in rule.verbs if v not in verbs)
    return [PolicyRule(tuple(verbs), *key) for key, verbs in merged.items()]


def go_quoted(values: Sequence[str]) -> str:
    """Go's ``%q`` of a ``[]string``: ``["a" "b"]``."""
    return "[" + " ".join(go_quote(v) for v in values) + "]"


def compact_string(rule: PolicyRule) -> str:
    """kube's ``CompactString``: ``{APIGroups:["apps"], Resources:["deployments"], Verbs:["create"]}``."""
    parts = []
    for label, values in (
        ("APIGroups", rule.api_groups),
        ("Resources", rule.resources),
        ("NonResourceURLs", rule.non_resource_urls),
        ("ResourceNames", rule.resource_names),
        ("Verbs", rule.verbs),
    ):
        if values:
            parts.append(f"{label}:{go_quoted(values)}")
    return "{" + ", ".join(parts) + "}"
