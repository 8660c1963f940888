"""Which FlowSchema a request matches, as kube's APF does (``apiserver/pkg/util/flowcontrol/rule.go``).

A FlowSchema's rules are compiled once, when the objects change, into a :class:`SchemaMatcher`: sets
for the names, verbs, groups, resources and namespaces a rule lists, a flag where it lists ``*``.
A request matches a rule when one of its subjects matches the user (a user's name, one of their
groups, a service account's name or ``*`` for every account of its namespace) and, for a resource
request, one of its resource rules matches the verb, API group, resource (``pods/status`` for a
subresource), and namespace (``clusterScope`` for a request without one); for any other request, one
of its non-resource rules matches the verb and path (``/apis/*`` a prefix). Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, NamedTuple

from controlplane.apis.untyped import dig

_SERVICE_ACCOUNT_PREFIX = "system:serviceaccount:"


class RequestDigest(NamedTuple):
    """What matching reads of a request: who sends it and what it asks (a tuple: made and hashed
    on every request, the key of the classifications a configuration remembers)."""

    user: str
    groups: tuple[str, ...]
    verb: str
    is_resource: bool
    group: str = ""
    resource: str = ""
    subresource: str = ""
    namespace: str = ""
    path: str = ""


class _Names:
    """A list where ``*`` matches anything."""

    __slots__ = ("all", "names")

    def __init__(self, values: Iterable[Any]) -> None:
        names = [str(v) for v in values]
        self.all = "*" in names
        self.names = frozenset(names)

    def __contains__(self, value: str) -> bool:
        return self.all or value in self.names


@dataclass(frozen=True, slots=True)
class _ResourceRule:
    verbs: _Names
    groups: _Names
    resources: _Names
    namespaces: _Names
    cluster_scope: bool

    def matches(self, request: RequestDigest) -> bool:
        resource = f"{request.resource}/{request.subresource}" if request.subresource else request.resource
        if request.verb not in self.verbs or resource not in self.resources or request.group not in self.groups:
            return False
        return self.cluster_scope if not request.namespace else request.namespace in self.namespaces


@dataclass(frozen=True, slots=True)
class _NonResourceRule:
    verbs: _Names
    urls: tuple[str, ...]
    #: Each URL as the prefix it matches (``/apis/*`` and ``/healthz``: ``/apis/``, ``/healthz/``).
    prefixes: tuple[str, ...]

    def matches(self, request: RequestDigest) -> bool:
        if request.verb not in self.verbs:
            return False
        path = request.path
        return any(url in ("*", path) for url in self.urls) or path.startswith(self.prefixes)


@dataclass(frozen=True, slots=True)
class _Subjects:
    users: _Names
    groups: _Names
    #: Service accounts by user name; namespaces whose every account matches (``name: "*"``).
    accounts: frozenset[str]
    account_namespaces: frozenset[str]

    def match(self, user: str, groups: tuple[str, ...]) -> bool:
        if user in self.users or user in self.accounts:
            return True
        if self.groups.all or not self.groups.names.isdisjoint(groups):
            return True
        if self.account_namespaces and user.startswith(_SERVICE_ACCOUNT_PREFIX):
            namespace = user[len(_SERVICE_ACCOUNT_PREFIX):].partition(":")[0]
            return namespace in self.account_namespaces
        return False


@dataclass(frozen=True, slots=True)
class _Rule:
    subjects: _Subjects
    resource_rules: tuple[_ResourceRule, ...]
    non_resource_rules: tuple[_NonResourceRule, ...]

    def matches(self, request: RequestDigest) -> bool:
        if not self.subjects.match(request.user, request.groups):
            return False
        rules = self.resource_rules if request.is_resource else self.non_resource_rules
        return any(rule.matches(request) for rule in rules)


def _subjects(subjects: Iterable[Any]) -> _Subjects:
    users: list[str] = []
    groups: list[str] = []
    accounts: set[str] = set()
    namespaces: set[str] = set()
    for subject in subjects:
        kind = dig(subject, "kind")
        if kind == "User" and dig(subject, "user", "name"):
            users.append(str(dig(subject, "user", "name")))
        elif kind == "Group" and dig(subject, "group", "name"):
            groups.append(str(dig(subject, "group", "name")))
        elif kind == "ServiceAccount" and isinstance(dig(subject, "serviceAccount"), dict):
            name, namespace = dig(subject, "serviceAccount", "name"), dig(subject, "serviceAccount", "namespace")
            if name == "*":
                namespaces.add(str(namespace))
            else:
                accounts.add(f"{_SERVICE_ACCOUNT_PREFIX}{namespace}:{name}")
    return _Subjects(_Names(users), _Names(groups), frozenset(accounts), frozenset(namespaces))


def _url_prefix(url: str) -> str:
    prefix = url.removesuffix("*")
    return prefix if prefix.endswith("/") else prefix + "/"


def _rule(rule: Any) -> _Rule:
    resource_rules = tuple(
        _ResourceRule(
            _Names(dig(r, "verbs") or ()), _Names(dig(r, "apiGroups") or ()), _Names(dig(r, "resources") or ()),
            _Names(dig(r, "namespaces") or ()), dig(r, "clusterScope") is True,
        )
        for r in dig(rule, "resourceRules") or ()
    )
    non_resource_rules = []
    for r in dig(rule, "nonResourceRules") or ():
        urls = tuple(str(u) for u in dig(r, "nonResourceURLs") or ())
        non_resource_rules.append(_NonResourceRule(_Names(dig(r, "verbs") or ()), urls, tuple(_url_prefix(u) for u in urls)))
    return _Rule(_subjects(dig(rule, "subjects") or ()), resource_rules, tuple(non_resource_rules))


@dataclass(frozen=True, slots=True)
class SchemaMatcher:
    """One FlowSchema, compiled."""

    name: str
    uid: str
    level: str
    precedence: int
    #: ``ByUser``, ``ByNamespace`` or None (every request of the schema is one flow).
    distinguisher: str | None
    rules: tuple[_Rule, ...]

    def matches(self, request: RequestDigest) -> bool:
        return any(rule.matches(request) for rule in self.rules)

    def flow(self, request: RequestDigest) -> str:
        if self.distinguisher == "ByUser":
            return request.user
        if self.distinguisher == "ByNamespace":
            return request.namespace
        return ""


def schema_matcher(obj: dict[str, Any], *, uid: str) -> SchemaMatcher:
    """``obj`` (a FlowSchema) compiled; ``uid`` names it in responses."""
    spec = obj.get("spec") or {}
    method = dig(spec, "distinguisherMethod", "type")
    return SchemaMatcher(
        name=str(obj["metadata"]["name"]), uid=uid, level=str(dig(spec, "priorityLevelConfiguration", "name") or ""),
        precedence=int(spec.get("matchingPrecedence") or 0), distinguisher=str(method) if method else None,
        rules=tuple(_rule(rule) for rule in spec.get("rules") or ()),
    )
