"""RBAC escalation prevention: nobody grants rights they do not hold.

As kube's RBAC storage (``pkg/registry/rbac/*/policybased``), checked on every create and
update of the four kinds by an admission plugin, with kube's messages:

- a Role or ClusterRole may grant only rules the writer holds in its namespace (at the
  cluster scope for a ClusterRole), unless the writer may ``escalate`` roles there;
  writing a ClusterRole that has an ``aggregationRule``, or had one (removing it stops the
  aggregation), needs ``escalate`` (an aggregation can gather any rule);
- a RoleBinding or ClusterRoleBinding may reference only a role whose rules the writer
  holds where the binding applies, unless the writer may ``bind`` that role;
- an update that changes only what the garbage collector writes (``ownerReferences``,
  ``finalizers``) is not checked, as kube's ``IsOnlyMutatingGCFields``: the collector, or an
  operator owning a role it could not grant, may add and remove them.

A refusal is 403 Forbidden: ``roles.rbac.authorization.k8s.io "x" is forbidden: user
"alice" (groups=["team-a" "system:authenticated"]) is attempting to grant RBAC permissions
not currently held:`` followed by each missing right. The roles and bindings come from the
hub's RBAC index; a role a binding references that the index has not seen yet (created a moment
before, on a loaded hub) is read from the store, as kube's RBAC storage reads roles from its
registry, so creating a Role and then its RoleBinding never fails on the cache's lag.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from typing import Any

from controlplane.apiserver import errors
from controlplane.apiserver.admission import WriteAttributes
from controlplane.apiserver.auth.rbac.index import CLUSTER_ROLE, ROLE, RbacIndex
from controlplane.apiserver.auth.rbac.policy import RBAC_GROUP
from controlplane.apiserver.auth.rbac.rules import (
    PolicyRule,
    compact,
    compact_string,
    go_quoted,
    rules_of,
    uncovered,
)
from controlplane.apiserver.identity import Authorizer, RequestAttributes, UserInfo

_ROLES = {"roles": ROLE, "clusterroles": CLUSTER_ROLE}
#: Reads a role from the store: (kind, name, namespace) -> its rules, None when it does not exist.
ReadRole = Callable[[str, str, str], Awaitable[tuple[PolicyRule, ...] | None]]
_BINDINGS = {"rolebindings", "clusterrolebindings"}
#: The metadata an update may change without the check (kube's ``IsOnlyMutatingGCFields``: the garbage
#: collector's fields, and what the API server itself writes).
_GC_FIELDS = frozenset({"ownerReferences", "finalizers", "selfLink", "managedFields", "resourceVersion"})


class RbacEscalationCheck:
    """The admission plugin; see the module docstring."""

    def __init__(self, index: RbacIndex, authorizer: Authorizer, *, read_role: ReadRole | None = None) -> None:
        self._index = index
        self._authorizer = authorizer
        self._read_role = read_role

    def validate(self, user: UserInfo, write: WriteAttributes) -> Awaitable[None] | None:
        rt = write.resource
        if rt.group != RBAC_GROUP or only_gc_fields(write.new, write.old):
            return None
        meta = write.new.get("metadata") or {}
        name, namespace = str(meta.get("name", "")), meta.get("namespace") or None
        if rt.plural in _ROLES:
            if self._may(user, "escalate", rt.plural, namespace, name):
                return None
            self._confirm_no_escalation(user, rt.plural, name, namespace, rules_of(write.new))
            if _aggregates(write.new) or _aggregates(write.old):
                # kube asks for every right (``*`` on ``*.*`` and every path), which includes ``escalate``.
                raise _forbidden(rt.plural, name, "must have cluster-admin privileges to use the aggregationRule")
        elif rt.plural in _BINDINGS:
            ref = write.new.get("roleRef") or {}
            kind, role_name = str(ref.get("kind", "")), str(ref.get("name", ""))
            role_plural = "clusterroles" if kind == CLUSTER_ROLE else "roles"
            if self._may(user, "bind", role_plural, namespace, role_name):
                return None
            rules = self._index.role_rules(kind, role_name, namespace or "")
            if rules is None and self._read_role is not None:
                return self._bind_stored_role(user, rt.plural, name, namespace, kind, role_name)
            self._confirm_binding(user, rt.plural, name, namespace, role_plural, role_name, rules)
        return None

    async def _bind_stored_role(
        self, user: UserInfo, plural: str, name: str, namespace: str | None, kind: str, role_name: str
    ) -> None:
        assert self._read_role is not None
        rules = await self._read_role(kind, role_name, namespace or "")
        role_plural = "clusterroles" if kind == CLUSTER_ROLE else "roles"
        self._confirm_binding(user, plural, name, namespace, role_plural, role_name, rules)

    def _confirm_binding(
        self, user: UserInfo, plural: str, name: str, namespace: str | None, role_plural: str, role_name: str,
        rules: Iterable[PolicyRule] | None,
    ) -> None:
        if rules is None:
            raise _forbidden(plural, name, f'{role_plural[:-1]}.{RBAC_GROUP} "{role_name}" not found')
        self._confirm_no_escalation(user, plural, name, namespace, rules)

    def _may(self, user: UserInfo, verb: str, plural: str, namespace: str | None, name: str) -> bool:
        attributes = RequestAttributes(
            user=user, verb=verb, api_group=RBAC_GROUP, resource=plural, namespace=namespace, name=name
        )
        return self._authorizer.authorize(attributes).allowed

    def _confirm_no_escalation(
        self, user: UserInfo, plural: str, name: str, namespace: str | None, rules: Iterable[PolicyRule]
    ) -> None:
        held = list(self._index.rules_for(user, namespace))
        missing = uncovered(held, rules)
        if not missing:
            return
        listed = "\n".join(sorted(compact_string(rule) for rule in compact(missing)))
        message = (
            f"user {_q(user.name)} (groups={go_quoted(user.groups)}) is attempting to grant RBAC "
            f"permissions not currently held:\n{listed}"
        )
        resolution = self._index.resolution_error(user, namespace)
        if resolution:  # Go's %v of the one error kube's rule resolver returns
            message += f"; resolution errors: [{resolution}]"
        raise _forbidden(plural, name, message)


def only_gc_fields(new: dict[str, Any], old: dict[str, Any] | None) -> bool:
    """Whether updating ``old`` to ``new`` changes nothing but :data:`_GC_FIELDS`."""
    if old is None:
        return False
    return _without_gc_fields(new) == _without_gc_fields(old)


def _without_gc_fields(obj: dict[str, Any]) -> dict[str, Any]:
    meta = obj.get("metadata") or {}
    return {**obj, "metadata": {k: v for k, v in meta.items() if k not in _GC_FIELDS}}


def _aggregates(role: dict[str, Any] | None) -> bool:
    return bool(role and ((role.get("aggregationRule") or {}).get("clusterRoleSelectors")))


def _q(value: str) -> str:
    return go_quoted([value])[1:-1]


def _forbidden(plural: str, name: str, reason: str) -> errors.Forbidden:
    target = errors.Target(name=name, group=RBAC_GROUP, kind=plural)
    return errors.Forbidden(f'{plural}.{RBAC_GROUP} "{name}" is forbidden: {reason}', target=target)
