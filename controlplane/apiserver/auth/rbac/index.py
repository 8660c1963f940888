"""The RBAC objects in memory, indexed by subject: what rules apply to a user, where.

The authorizer asks on every request, so the index answers from dicts: ClusterRoleBindings
and RoleBindings are indexed by subject (``User``/``Group``/``ServiceAccount`` name, and the
namespace for RoleBindings), roles by name. A user's rules in a namespace are the rules of
every ClusterRoleBinding naming the user or one of its groups (granted everywhere) and of
every RoleBinding in that namespace naming them (a RoleBinding to a ClusterRole grants the
ClusterRole's rules in its own namespace only), as kube's ``DefaultRuleResolver``.

In: Role, ClusterRole, RoleBinding and ClusterRoleBinding objects (:meth:`RbacIndex.put`,
:meth:`RbacIndex.remove`, fed by an informer). Out: rules and allow decisions. Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Final

from controlplane.apis.kube.field import aggregate
from controlplane.apiserver.auth.rbac.rules import PolicyRule, rule_allows, rules_of
from controlplane.apiserver.identity import SERVICE_ACCOUNT_PREFIX, RequestAttributes, UserInfo
from controlplane.gojson import go_quote

ROLE: Final = "Role"
CLUSTER_ROLE: Final = "ClusterRole"
ROLE_BINDING: Final = "RoleBinding"
CLUSTER_ROLE_BINDING: Final = "ClusterRoleBinding"

#: (subject kind, name): ("User", "alice"), ("Group", "team-a"), ("ServiceAccount", "ns:name").
SubjectKey = tuple[str, str]


@dataclass(frozen=True, slots=True)
class Binding:
    role_kind: str
    role_name: str
    subjects: tuple[SubjectKey, ...]

    @classmethod
    def of(cls, obj: dict[str, Any]) -> Binding:
        ref = _mapping(obj.get("roleRef"))
        subjects: list[SubjectKey] = []
        for subject in obj.get("subjects") or []:
            if not isinstance(subject, dict):
                continue
            kind, name = str(subject.get("kind", "")), str(subject.get("name", ""))
            if kind == "ServiceAccount":
                namespace = subject.get("namespace") or _mapping(obj.get("metadata")).get("namespace") or ""
                name = f"{namespace}:{name}"
            subjects.append((kind, name))
        return cls(str(ref.get("kind", "")), str(ref.get("name", "")), tuple(subjects))


def _mapping(value: object) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def subject_keys(user: UserInfo) -> list[SubjectKey]:
    """The binding subjects that name ``user``: its name, each group, its service account."""
    keys: list[SubjectKey] = [("User", user.name)]
    keys.extend(("Group", group) for group in user.groups)
    if user.name.startswith(SERVICE_ACCOUNT_PREFIX):
        keys.append(("ServiceAccount", user.name[len(SERVICE_ACCOUNT_PREFIX):]))
    return keys


def _name(obj: dict[str, Any]) -> tuple[str, str]:
    meta = _mapping(obj.get("metadata"))
    return str(meta.get("namespace") or ""), str(meta.get("name") or "")


class RbacIndex:
    """Roles by name and bindings by subject; see the module docstring."""

    def __init__(self) -> None:
        self._cluster_roles: dict[str, tuple[PolicyRule, ...]] = {}
        self._roles: dict[tuple[str, str], tuple[PolicyRule, ...]] = {}
        self._cluster_bindings: dict[str, Binding] = {}
        self._role_bindings: dict[tuple[str, str], Binding] = {}
        #: subject -> ClusterRoleBinding names
        self._cluster_by_subject: dict[SubjectKey, set[str]] = {}
        #: (subject, namespace) -> RoleBinding names
        self._namespaced_by_subject: dict[tuple[SubjectKey, str], set[str]] = {}

    def put(self, kind: str, obj: dict[str, Any]) -> None:
        namespace, name = _name(obj)
        if kind == CLUSTER_ROLE:
            self._cluster_roles[name] = rules_of(obj)
        elif kind == ROLE:
            self._roles[(namespace, name)] = rules_of(obj)
        elif kind == CLUSTER_ROLE_BINDING:
            self.remove(kind, namespace, name)
            binding = self._cluster_bindings[name] = Binding.of(obj)
            for subject in binding.subjects:
                self._cluster_by_subject.setdefault(subject, set()).add(name)
        elif kind == ROLE_BINDING:
            self.remove(kind, namespace, name)
            binding = self._role_bindings[(namespace, name)] = Binding.of(obj)
            for subject in binding.subjects:
                self._namespaced_by_subject.setdefault((subject, namespace), set()).add(name)

    def remove(self, kind: str, namespace: str, name: str) -> None:
        if kind == CLUSTER_ROLE:
            self._cluster_roles.pop(name, None)
        elif kind == ROLE:
            self._roles.pop((namespace, name), None)
        elif kind == CLUSTER_ROLE_BINDING:
            old = self._cluster_bindings.pop(name, None)
            for subject in old.subjects if old else ():
                _discard(self._cluster_by_subject, subject, name)
        elif kind == ROLE_BINDING:
            old_rb = self._role_bindings.pop((namespace, name), None)
            for subject in old_rb.subjects if old_rb else ():
                _discard(self._namespaced_by_subject, (subject, namespace), name)

    def role_rules(self, kind: str, name: str, namespace: str = "") -> tuple[PolicyRule, ...] | None:
        """The rules of a referenced role, or None when it does not exist."""
        if kind == CLUSTER_ROLE:
            return self._cluster_roles.get(name)
        if kind == ROLE:
            return self._roles.get((namespace, name))
        return None

    def _bindings(self, user: UserInfo, namespace: str | None) -> Iterator[tuple[str, Binding, str]]:
        """Every binding naming ``user`` that applies in ``namespace`` (None: cluster scope only),
        with its name and its namespace, where its role lives ("" for a ClusterRoleBinding)."""
        keys = subject_keys(user)
        seen: set[str] = set()
        for key in keys:
            for name in self._cluster_by_subject.get(key, ()):
                if name not in seen:
                    seen.add(name)
                    yield name, self._cluster_bindings[name], ""
        if not namespace:
            return
        seen_ns: set[str] = set()
        for key in keys:
            for name in self._namespaced_by_subject.get((key, namespace), ()):
                if name not in seen_ns:
                    seen_ns.add(name)
                    yield name, self._role_bindings[(namespace, name)], namespace

    def rules_for(self, user: UserInfo, namespace: str | None) -> Iterator[PolicyRule]:
        """Every rule granted to ``user`` in ``namespace`` (None or "": at the cluster scope)."""
        for _, binding, role_namespace in self._bindings(user, namespace):
            rules = self.role_rules(binding.role_kind, binding.role_name, role_namespace)
            if rules:
                yield from rules

    def allowed_by(self, attributes: RequestAttributes) -> str | None:
        """What allows a request, as kube's RBAC authorizer names it in its reason: the binding, its
        role and the subject naming the user (``RoleBinding "team-a-edit/team-a" of ClusterRole "edit"
        to Group "team-a"``); None when no rule allows it."""
        user = attributes.user
        for name, binding, namespace in self._bindings(user, attributes.namespace):
            rules = self.role_rules(binding.role_kind, binding.role_name, namespace)
            if rules and any(rule_allows(rule, attributes) for rule in rules):
                keys = subject_keys(user)
                return _describe(name, namespace, binding, next(s for s in binding.subjects if s in keys))
        return None

    def missing_roles(self, user: UserInfo, namespace: str | None) -> list[str]:
        """kube's rule-resolution errors: bindings of ``user`` whose role does not exist."""
        missing = []
        for _, binding, role_namespace in self._bindings(user, namespace):
            if self.role_rules(binding.role_kind, binding.role_name, role_namespace) is None:
                kind = "clusterrole" if binding.role_kind == CLUSTER_ROLE else "role"
                missing.append(f'{kind}.rbac.authorization.k8s.io "{binding.role_name}" not found')
        return missing

    def resolution_error(self, user: UserInfo, namespace: str | None) -> str:
        """kube's rule resolver's error, :meth:`missing_roles` aggregated (``""`` when none)."""
        missing = self.missing_roles(user, namespace)
        return aggregate(list(dict.fromkeys(missing))) if missing else ""

    def allows(self, attributes: RequestAttributes) -> bool:
        for rule in self.rules_for(attributes.user, attributes.namespace):
            if rule_allows(rule, attributes):
                return True
        return False


def _describe(name: str, namespace: str, binding: Binding, subject: SubjectKey) -> str:
    """kube's ``roleBindingDescriber``/``clusterRoleBindingDescriber`` (a service account as ``name/namespace``)."""
    kind, subject_name = subject
    if kind == "ServiceAccount":
        account_namespace, _, account = subject_name.partition(":")
        subject_name = f"{account}/{account_namespace}"
    source = f"RoleBinding {go_quote(f'{name}/{namespace}')}" if namespace else f"ClusterRoleBinding {go_quote(name)}"
    return f"{source} of {binding.role_kind} {go_quote(binding.role_name)} to {kind} {go_quote(subject_name)}"


def _discard(index: dict[Any, set[str]], key: Any, name: str) -> None:
    names = index.get(key)
    if names is not None:
        names.discard(name)
        if not names:
            del index[key]
