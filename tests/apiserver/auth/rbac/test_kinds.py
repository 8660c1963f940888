"""The RBAC kinds' validation and defaulting, with kube's field paths and messages."""

from __future__ import annotations

from typing import Any

import pytest

from controlplane.apiserver.auth.rbac.kinds import (
    default_binding,
    validate_cluster_role,
    validate_cluster_role_binding,
    validate_role,
    validate_role_binding,
)

G = "rbac.authorization.k8s.io"
REF = {"apiGroup": G, "kind": "ClusterRole", "name": "edit"}


def rb(**fields: Any) -> dict[str, Any]:
    return {"metadata": {"name": "b", "namespace": "ns"}, "roleRef": REF, "subjects": [{"apiGroup": G, "kind": "User", "name": "alice"}], **fields}


INVALID = [
    (validate_role, {"rules": [{"apiGroups": [""], "resources": ["pods"]}]},
     "rules[0].verbs", "Required value: verbs must contain at least one value"),
    (validate_role, {"rules": [{"verbs": ["get"], "resources": ["pods"]}]},
     "rules[0].apiGroups", "Required value: resource rules must supply at least one api group"),
    (validate_role, {"rules": [{"verbs": ["get"], "apiGroups": [""]}]},
     "rules[0].resources", "Required value: resource rules must supply at least one resource"),
    (validate_role, {"rules": [{"verbs": ["get"], "nonResourceURLs": ["/metrics"]}]},
     "rules[0].nonResourceURLs", 'Invalid value: []string{"/metrics"}: namespaced rules cannot apply to non-resource URLs'),
    (validate_cluster_role, {"rules": [{"verbs": ["get"], "nonResourceURLs": ["/x"], "apiGroups": [""], "resources": ["pods"]}]},
     "rules[0].nonResourceURLs", 'Invalid value: []string{"/x"}: rules cannot apply to both regular resources and non-resource URLs'),
    (validate_cluster_role, {"rules": [{"verbs": ["get"], "nonResourceURLs": ["/x"], "resourceNames": ["n"]}]},
     "rules[0].nonResourceURLs", 'Invalid value: []string{"/x"}: rules cannot apply to both regular resources and non-resource URLs'),
    (validate_cluster_role, {"aggregationRule": {}},
     "aggregationRule.clusterRoleSelectors", "Required value: at least one clusterRoleSelector required if aggregationRule is non-nil"),
    (validate_role_binding, rb(roleRef={**REF, "kind": "Thing"}),
     "roleRef.kind", 'Unsupported value: "Thing": supported values: "Role", "ClusterRole"'),
    (validate_role_binding, rb(roleRef={**REF, "apiGroup": "rbac"}),
     "roleRef.apiGroup", 'Unsupported value: "rbac": supported values: "rbac.authorization.k8s.io"'),
    (validate_role_binding, rb(roleRef={**REF, "name": ""}), "roleRef.name", "Required value"),
    (validate_role_binding, rb(roleRef={**REF, "name": "a/b"}), "roleRef.name", "Invalid value: \"a/b\": may not contain '/'"),
    (validate_cluster_role_binding, rb(roleRef={**REF, "kind": "Role"}),
     "roleRef.kind", 'Unsupported value: "Role": supported values: "ClusterRole"'),
    (validate_role_binding, rb(subjects=[{"kind": "Robot", "name": "r"}]),
     "subjects[0].kind", 'Unsupported value: "Robot": supported values: "ServiceAccount", "User", "Group"'),
    (validate_role_binding, rb(subjects=[{"kind": "User", "apiGroup": G}]), "subjects[0].name", "Required value"),
    (validate_role_binding, rb(subjects=[{"kind": "ServiceAccount", "name": "d", "apiGroup": G}]),
     "subjects[0].apiGroup", 'Unsupported value: "rbac.authorization.k8s.io": supported values: ""'),
    (validate_cluster_role_binding, rb(subjects=[{"kind": "ServiceAccount", "name": "d"}]),
     "subjects[0].namespace", "Required value"),
    (validate_role_binding, rb(subjects=[{"kind": "ServiceAccount", "name": "CI_bot"}]), "subjects[0].name",
     'Invalid value: "CI_bot": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '
     "'-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for "
     "validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"),
]


@pytest.mark.parametrize(("validate", "obj", "field", "message"), INVALID)
def test_invalid(validate: Any, obj: dict[str, Any], field: str, message: str) -> None:
    errors = validate(obj, None)
    assert [(e.field, e.message) for e in errors] == [(field, message)]


def test_valid_objects_pass_and_role_ref_is_immutable() -> None:
    assert validate_role({"rules": [{"verbs": ["get"], "apiGroups": [""], "resources": ["pods"]}]}, None) == []
    assert validate_cluster_role({"rules": [{"verbs": ["get"], "nonResourceURLs": ["/healthz"]}]}, None) == []
    assert validate_role_binding(rb(), None) == []
    changed = validate_role_binding(rb(roleRef={**REF, "name": "view"}), rb())
    assert [(e.field, e.message) for e in changed] == [("roleRef", 'Invalid value: rbac.RoleRef{APIGroup:'
                                                        '"rbac.authorization.k8s.io", Kind:"ClusterRole", Name:"view"}: '
                                                        "cannot change roleRef")]


def test_defaulting_sets_the_rbac_api_group_as_kube() -> None:
    obj = {"roleRef": {"kind": "ClusterRole", "name": "edit"},
           "subjects": [{"kind": "User", "name": "a"}, {"kind": "Group", "name": "g"}, {"kind": "ServiceAccount", "name": "s"}]}
    default_binding(obj)
    assert obj["roleRef"]["apiGroup"] == G
    assert [s.get("apiGroup") for s in obj["subjects"]] == [G, G, None]
