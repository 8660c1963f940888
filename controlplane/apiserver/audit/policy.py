"""kube-apiserver's audit policy (``--audit-policy-file``, ``audit.k8s.io/v1`` Policy): which
requests are recorded, at what level and in which stages.

The first rule that matches a request decides its level (``None``, ``Metadata``, ``Request``,
``RequestResponse``); no match is ``None``. A rule matches when each of its lists that is set
matches: ``users`` (the user's name), ``userGroups`` (one of its groups), ``verbs``, and either
``resources`` (``group``, ``resources`` such as ``pods``, ``pods/log``, ``*``, ``*/scale``,
``pods/*``, ``resourceNames``) with ``namespaces`` (``""`` matches a cluster-scoped object) for a
resource request, or ``nonResourceURLs`` (``/healthz``, ``/version*``, ``*``) for any other.
Stages named in the policy's or the rule's ``omitStages`` are not written. As kube's
``policy/checker.go`` and the validation of ``pkg/apis/audit/validation``.

In: the policy document (YAML) and a request's attributes. Out: :class:`AuditPolicy` and its
:meth:`~AuditPolicy.decide`. Pure: no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Final

from controlplane.apiserver.identity import RequestAttributes


class Level(StrEnum):
    NONE = "None"
    METADATA = "Metadata"
    REQUEST = "Request"
    REQUEST_RESPONSE = "RequestResponse"


class Stage(StrEnum):
    REQUEST_RECEIVED = "RequestReceived"
    RESPONSE_STARTED = "ResponseStarted"
    RESPONSE_COMPLETE = "ResponseComplete"
    PANIC = "Panic"


_LEVELS: Final = {level.value: level for level in Level}
_STAGES: Final = {stage.value: stage for stage in Stage}


class PolicyError(ValueError):
    """An audit policy kube would refuse; the message names the field (``rules[2].level: ...``)."""


@dataclass(frozen=True, slots=True)
class GroupResources:
    group: str
    resources: tuple[str, ...]
    resource_names: tuple[str, ...]

    def matches(self, attrs: RequestAttributes) -> bool:
        if self.group != attrs.api_group:
            return False
        if not self.resources:
            return True
        if self.resource_names and (attrs.name or "") not in self.resource_names:
            return False
        return any(_resource_matches(pattern, attrs) for pattern in self.resources)


@dataclass(frozen=True, slots=True)
class Rule:
    level: Level
    users: tuple[str, ...] = ()
    user_groups: tuple[str, ...] = ()
    verbs: tuple[str, ...] = ()
    resources: tuple[GroupResources, ...] = ()
    namespaces: tuple[str, ...] = ()
    non_resource_urls: tuple[str, ...] = ()
    omit_stages: frozenset[Stage] = frozenset()

    def matches(self, attrs: RequestAttributes) -> bool:
        if self.users and attrs.user.name not in self.users:
            return False
        if self.user_groups and not set(self.user_groups) & set(attrs.user.groups):
            return False
        if self.verbs and attrs.verb not in self.verbs:
            return False
        if self.namespaces or self.resources:
            return self._resource_matches(attrs)
        if self.non_resource_urls:
            return attrs.non_resource_path is not None and any(
                _path_matches(pattern, attrs.non_resource_path) for pattern in self.non_resource_urls)
        return True

    def _resource_matches(self, attrs: RequestAttributes) -> bool:
        if attrs.non_resource_path is not None:
            return False
        if self.namespaces and (attrs.namespace or "") not in self.namespaces:
            return False
        return not self.resources or any(gr.matches(attrs) for gr in self.resources)


@dataclass(frozen=True, slots=True)
class Decision:
    level: Level
    omit_stages: frozenset[Stage] = frozenset()
    omit_managed_fields: bool = False

    def records(self, stage: Stage) -> bool:
        return self.level is not Level.NONE and stage not in self.omit_stages


@dataclass(frozen=True, slots=True)
class AuditPolicy:
    rules: tuple[Rule, ...]
    omit_stages: frozenset[Stage] = frozenset()
    omit_managed_fields: bool = False

    def decide(self, attrs: RequestAttributes) -> Decision:
        for rule in self.rules:
            if rule.matches(attrs):
                return Decision(rule.level, self.omit_stages | rule.omit_stages, self.omit_managed_fields)
        return Decision(Level.NONE)

    @classmethod
    def parse(cls, document: Any) -> AuditPolicy:
        """The policy of an ``audit.k8s.io/v1`` (or ``v1beta1``) Policy document."""
        if not isinstance(document, dict):
            raise PolicyError("the audit policy must be a YAML object of kind Policy")
        if document.get("kind") != "Policy" or document.get("apiVersion") not in ("audit.k8s.io/v1", "audit.k8s.io/v1beta1"):
            raise PolicyError(f'kind: Policy with apiVersion: audit.k8s.io/v1 expected, not kind: {document.get("kind")!r} '
                              f'apiVersion: {document.get("apiVersion")!r}')
        rules = document.get("rules")
        if not isinstance(rules, list) or not rules:
            raise PolicyError("rules: Required value: the policy needs at least one rule")
        return cls(
            rules=tuple(_rule(rule, f"rules[{i}]") for i, rule in enumerate(rules)),
            omit_stages=_stages(document.get("omitStages"), "omitStages"),
            omit_managed_fields=bool(document.get("omitManagedFields")),
        )


def _rule(document: Any, path: str) -> Rule:
    if not isinstance(document, dict):
        raise PolicyError(f"{path}: Invalid value: a rule must be an object")
    level = document.get("level")
    if level not in _LEVELS:
        raise PolicyError(f'{path}.level: Unsupported value: "{level}": supported values: '
                          + ", ".join(f'"{v}"' for v in _LEVELS))
    resources = document.get("resources") or []
    urls = _strings(document.get("nonResourceURLs"), f"{path}.nonResourceURLs")
    namespaces = _strings(document.get("namespaces"), f"{path}.namespaces")
    if urls and (resources or namespaces):
        raise PolicyError(f"{path}.nonResourceURLs: Invalid value: rules cannot apply to both regular resources "
                          "and non-resource URLs")
    for i, url in enumerate(urls):
        if url != "*" and not url.startswith("/"):
            raise PolicyError(f'{path}.nonResourceURLs[{i}]: Invalid value: "{url}": non-resource URL rules must '
                              'begin with a "/" character')
        if "*" in url[:-1]:
            raise PolicyError(f'{path}.nonResourceURLs[{i}]: Invalid value: "{url}": non-resource URL wildcards '
                              '("*") must be the final character')
    if not isinstance(resources, list):
        raise PolicyError(f"{path}.resources: Invalid value: must be a list")
    return Rule(
        level=_LEVELS[level],
        users=_strings(document.get("users"), f"{path}.users"),
        user_groups=_strings(document.get("userGroups"), f"{path}.userGroups"),
        verbs=_strings(document.get("verbs"), f"{path}.verbs"),
        resources=tuple(_group_resources(gr, f"{path}.resources[{i}]") for i, gr in enumerate(resources)),
        namespaces=namespaces,
        non_resource_urls=urls,
        omit_stages=_stages(document.get("omitStages"), f"{path}.omitStages"),
    )


def _group_resources(document: Any, path: str) -> GroupResources:
    if not isinstance(document, dict):
        raise PolicyError(f"{path}: Invalid value: must be an object with group, resources and resourceNames")
    group = document.get("group") or ""
    if not isinstance(group, str) or "/" in group:
        raise PolicyError(f'{path}.group: Invalid value: "{group}": must be an API group name, without a version')
    resources = _strings(document.get("resources"), f"{path}.resources")
    names = _strings(document.get("resourceNames"), f"{path}.resourceNames")
    for i, resource in enumerate(resources):
        if resource.count("/") > 1:
            raise PolicyError(f'{path}.resources[{i}]: Invalid value: "{resource}": a resource, or a resource and '
                              "one subresource (pods/log)")
    if names and any("*" in r.split("/")[0] for r in resources):
        raise PolicyError(f"{path}.resourceNames: Invalid value: using resourceNames with a resource wildcard")
    return GroupResources(group, resources, names)


def _strings(value: Any, path: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise PolicyError(f"{path}: Invalid value: must be a list of strings")
    return tuple(value)


def _stages(value: Any, path: str) -> frozenset[Stage]:
    stages = _strings(value, path)
    for i, stage in enumerate(stages):
        if stage not in _STAGES:
            raise PolicyError(f'{path}[{i}]: Unsupported value: "{stage}": supported values: '
                              + ", ".join(f'"{v}"' for v in _STAGES))
    return frozenset(_STAGES[s] for s in stages)


def _resource_matches(pattern: str, attrs: RequestAttributes) -> bool:
    """kube's ``ruleMatchesResource``: ``pods``, ``pods/log``, ``*``, ``*/log``, ``pods/*``."""
    combined = f"{attrs.resource}/{attrs.subresource}" if attrs.subresource else attrs.resource
    if pattern in ("*", combined):
        return True
    if attrs.subresource and pattern == f"*/{attrs.subresource}":
        return True
    return pattern == f"{attrs.resource}/*"  # the resource and any of its subresources


def _path_matches(pattern: str, path: str) -> bool:
    if pattern == "*" or pattern == path:
        return True
    return pattern.endswith("*") and path.startswith(pattern[:-1])
