"""``rbac.authorization.k8s.io/v1``: Role, ClusterRole, RoleBinding, ClusterRoleBinding.

The four kinds as kube-apiserver serves them: kube's ``kubectl get`` tables (roles show
their creation time; bindings their role, and users, groups and service accounts with
``-o wide``), kube's defaulting (``roleRef.apiGroup`` and a User's or Group's
``apiGroup`` default to ``rbac.authorization.k8s.io``) and kube's validation
(``pkg/apis/rbac/validation``): a rule needs verbs, a resource rule needs API groups and
resources, non-resource URLs only in ClusterRoles and never beside resources, an
``aggregationRule`` needs selectors, a binding's ``roleRef`` and ``subjects`` are well
formed, and ``roleRef`` cannot change. Pure: no I/O.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Final

from controlplane.apis.kube.field import CauseType, FieldError, GoValue, go_strings, show
from controlplane.apiserver.auth.rbac.index import CLUSTER_ROLE, CLUSTER_ROLE_BINDING, ROLE, ROLE_BINDING
from controlplane.apiserver.auth.rbac.policy import RBAC_GROUP, RBAC_VERSION
from controlplane.apiserver.objectmeta import name_errors
from controlplane.apiserver.resources import (
    AGE,
    CREATED_AT,
    NameRule,
    ResourceType,
    TableColumn,
    with_kube_rules,
)
from controlplane.gojson import go_quote

_SUBJECT_KINDS: Final = ("ServiceAccount", "User", "Group")


def _role_ref(obj: dict[str, Any], _now: datetime) -> Any:
    ref = obj.get("roleRef") or {}
    return f"{ref.get('kind', '')}/{ref.get('name', '')}"


def _subjects(kind: str) -> Any:
    def cell(obj: dict[str, Any], _now: datetime) -> Any:
        names = []
        for subject in obj.get("subjects") or []:
            if isinstance(subject, dict) and subject.get("kind") == kind:
                name = str(subject.get("name", ""))
                names.append(f"{subject.get('namespace', '')}/{name}" if kind == "ServiceAccount" else name)
        return ", ".join(names)

    return cell


_ROLE_COLUMNS: Final = (CREATED_AT,)
_BINDING_COLUMNS: Final = (
    TableColumn("Role", _role_ref),
    AGE,
    TableColumn("Users", _subjects("User"), priority=1),
    TableColumn("Groups", _subjects("Group"), priority=1),
    TableColumn("ServiceAccounts", _subjects("ServiceAccount"), priority=1),
)


def _invalid(field: str, value: Any, detail: str) -> FieldError:
    return FieldError(CauseType.FIELD_VALUE_INVALID, field, f"Invalid value: {show(value)}: {detail}")


def _required(field: str, detail: str = "") -> FieldError:
    return FieldError(CauseType.FIELD_VALUE_REQUIRED, field, "Required value" + (f": {detail}" if detail else ""))


def _not_supported(field: str, value: Any, supported: tuple[str, ...]) -> FieldError:
    choices = ", ".join(f'"{s}"' for s in supported)
    return FieldError(CauseType.FIELD_VALUE_NOT_SUPPORTED, field, f"Unsupported value: {show(value)}: supported values: {choices}")


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def validate_rules(obj: dict[str, Any], *, namespaced: bool) -> list[FieldError]:
    errors: list[FieldError] = []
    for i, raw in enumerate(_list(obj.get("rules"))):
        rule = raw if isinstance(raw, dict) else {}
        path = f"rules[{i}]"
        if not _list(rule.get("verbs")):
            errors.append(_required(f"{path}.verbs", "verbs must contain at least one value"))
        urls = _list(rule.get("nonResourceURLs"))
        if urls:
            if namespaced:
                errors.append(_invalid(f"{path}.nonResourceURLs", go_strings(urls),
                                       "namespaced rules cannot apply to non-resource URLs"))
            if _list(rule.get("apiGroups")) or _list(rule.get("resources")) or _list(rule.get("resourceNames")):
                errors.append(_invalid(f"{path}.nonResourceURLs", go_strings(urls),
                                       "rules cannot apply to both regular resources and non-resource URLs"))
            continue
        if not _list(rule.get("apiGroups")):
            errors.append(_required(f"{path}.apiGroups", "resource rules must supply at least one api group"))
        if not _list(rule.get("resources")):
            errors.append(_required(f"{path}.resources", "resource rules must supply at least one resource"))
    return errors


def validate_role(obj: dict[str, Any], _old: dict[str, Any] | None) -> list[FieldError]:
    return validate_rules(obj, namespaced=True)


def validate_cluster_role(obj: dict[str, Any], _old: dict[str, Any] | None) -> list[FieldError]:
    errors = validate_rules(obj, namespaced=False)
    aggregation = obj.get("aggregationRule")
    if isinstance(aggregation, dict) and not _list(aggregation.get("clusterRoleSelectors")):
        errors.append(_required("aggregationRule.clusterRoleSelectors",
                                "at least one clusterRoleSelector required if aggregationRule is non-nil"))
    return errors


def _validate_binding(obj: dict[str, Any], old: dict[str, Any] | None, *, namespaced: bool) -> list[FieldError]:
    errors: list[FieldError] = []
    raw_ref = obj.get("roleRef")
    ref: dict[str, Any] = raw_ref if isinstance(raw_ref, dict) else {}
    if ref.get("apiGroup") != RBAC_GROUP:
        errors.append(_not_supported("roleRef.apiGroup", ref.get("apiGroup", ""), (RBAC_GROUP,)))
    kinds = (ROLE, CLUSTER_ROLE) if namespaced else (CLUSTER_ROLE,)
    if ref.get("kind") not in kinds:
        errors.append(_not_supported("roleRef.kind", ref.get("kind", ""), kinds))
    if not ref.get("name"):
        errors.append(_required("roleRef.name"))
    else:
        errors.extend(_invalid("roleRef.name", ref["name"], e) for e in name_errors(str(ref["name"]), NameRule.PATH_SEGMENT))
    for i, raw in enumerate(_list(obj.get("subjects"))):
        errors.extend(_validate_subject(raw if isinstance(raw, dict) else {}, f"subjects[{i}]", namespaced=namespaced))
    if old is not None and old.get("roleRef") != obj.get("roleRef"):
        shown = ", ".join(f"{field}:{go_quote(str(ref.get(key) or ''))}"
                          for field, key in (("APIGroup", "apiGroup"), ("Kind", "kind"), ("Name", "name")))
        errors.append(_invalid("roleRef", GoValue(f"rbac.RoleRef{{{shown}}}"), "cannot change roleRef"))
    return errors


def _validate_subject(subject: dict[str, Any], path: str, *, namespaced: bool) -> list[FieldError]:
    errors: list[FieldError] = []
    if not subject.get("name"):
        errors.append(_required(f"{path}.name"))
    kind, group = subject.get("kind", ""), subject.get("apiGroup", "")
    if kind == "ServiceAccount":
        if subject.get("name"):
            name = str(subject["name"])
            errors.extend(_invalid(f"{path}.name", name, e) for e in name_errors(name, NameRule.SUBDOMAIN))
        if group:
            errors.append(_not_supported(f"{path}.apiGroup", group, ("",)))
        if not namespaced and not subject.get("namespace"):
            errors.append(_required(f"{path}.namespace"))
    elif kind in ("User", "Group"):
        if group != RBAC_GROUP:
            errors.append(_not_supported(f"{path}.apiGroup", group, (RBAC_GROUP,)))
    else:
        errors.append(_not_supported(f"{path}.kind", kind, _SUBJECT_KINDS))
    return errors


def validate_role_binding(obj: dict[str, Any], old: dict[str, Any] | None) -> list[FieldError]:
    return _validate_binding(obj, old, namespaced=True)


def validate_cluster_role_binding(obj: dict[str, Any], old: dict[str, Any] | None) -> list[FieldError]:
    return _validate_binding(obj, old, namespaced=False)


def default_binding(obj: dict[str, Any]) -> None:
    """kube's ``SetDefaults_RoleBinding``/``ClusterRoleBinding``/``Subject``."""
    ref = obj.get("roleRef")
    if isinstance(ref, dict) and not ref.get("apiGroup"):
        ref["apiGroup"] = RBAC_GROUP
    for subject in _list(obj.get("subjects")):
        if isinstance(subject, dict) and not subject.get("apiGroup") and subject.get("kind") in ("User", "Group"):
            subject["apiGroup"] = RBAC_GROUP


def rbac_resources() -> list[ResourceType]:
    """The four RBAC kinds (decoded as kube decodes them: ``with_kube_rules``)."""
    def kind(name: str, plural: str, *, namespaced: bool, binding: bool, validate: Any) -> ResourceType:
        return ResourceType(
            RBAC_GROUP, RBAC_VERSION, name, plural, name.lower(), namespaced=namespaced, strategic_merge=True,
            name_rule=NameRule.PATH_SEGMENT,
            columns=_BINDING_COLUMNS if binding else _ROLE_COLUMNS,
            defaults=default_binding if binding else None, validate=validate,
        )

    return with_kube_rules([
        kind(ROLE, "roles", namespaced=True, binding=False, validate=validate_role),
        kind(CLUSTER_ROLE, "clusterroles", namespaced=False, binding=False, validate=validate_cluster_role),
        kind(ROLE_BINDING, "rolebindings", namespaced=True, binding=True, validate=validate_role_binding),
        kind(CLUSTER_ROLE_BINDING, "clusterrolebindings", namespaced=False, binding=True,
             validate=validate_cluster_role_binding),
    ])
