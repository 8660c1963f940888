"""The escalation check, as kube's RBAC storage makes it: a RoleBinding whose Role the RBAC index has
not seen yet is checked against the stored Role (kube reads roles from its registry); an
aggregationRule, set or removed, needs every right; the garbage collector's fields are not checked."""

from __future__ import annotations

from typing import Any

import pytest

from controlplane.apiserver import errors
from controlplane.apiserver.admission import Operation, WriteAttributes
from controlplane.apiserver.auth.rbac.authorizing import HubAuthorizer
from controlplane.apiserver.auth.rbac.escalation import RbacEscalationCheck
from controlplane.apiserver.auth.rbac.index import CLUSTER_ROLE, ROLE, ROLE_BINDING, RbacIndex
from controlplane.apiserver.auth.rbac.kinds import rbac_resources
from controlplane.apiserver.auth.rbac.rules import PolicyRule, rules_of
from controlplane.apiserver.identity import Role, UserInfo

ALICE = UserInfo(name="alice", role=Role.USER, user_groups=("team-a", "system:authenticated"))
DEPLOYER = {"metadata": {"name": "deployer", "namespace": "team-a"},
            "rules": [{"apiGroups": ["apps"], "resources": ["deployments"], "verbs": ["get", "create"]}]}
ROLEBINDINGS = next(rt for rt in rbac_resources() if rt.plural == "rolebindings")


def alice_edits_team_a() -> RbacIndex:
    index = RbacIndex()
    index.put(CLUSTER_ROLE, {"metadata": {"name": "deployments-editor"},
                             "rules": [{"apiGroups": ["apps"], "resources": ["deployments"], "verbs": ["*"]}]})
    index.put(ROLE_BINDING, {"metadata": {"name": "alice", "namespace": "team-a"},
                             "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                                         "name": "deployments-editor"},
                             "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "alice"}]})
    return index


def binding_of(role: str) -> WriteAttributes:
    obj: dict[str, Any] = {
        "metadata": {"name": "bob-deployer", "namespace": "team-a"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": role},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "bob"}],
    }
    return WriteAttributes(Operation.CREATE, ROLEBINDINGS, obj)


async def test_a_role_the_index_has_not_seen_is_read_from_the_store() -> None:
    reads: list[tuple[str, str, str]] = []

    async def read_role(kind: str, name: str, namespace: str) -> tuple[PolicyRule, ...] | None:
        reads.append((kind, name, namespace))
        return rules_of(DEPLOYER) if (kind, name, namespace) == (ROLE, "deployer", "team-a") else None

    index = alice_edits_team_a()
    check = RbacEscalationCheck(index, HubAuthorizer(index), read_role=read_role)
    pending = check.validate(ALICE, binding_of("deployer"))
    assert pending is not None
    await pending  # she holds every right the stored Role grants
    assert reads == [(ROLE, "deployer", "team-a")]

    pending = check.validate(ALICE, binding_of("missing"))
    assert pending is not None
    with pytest.raises(errors.Forbidden, match=r'role\.rbac\.authorization\.k8s\.io "missing" not found'):
        await pending
    # Without a store to read, a role the index lacks is refused at once, as before.
    with pytest.raises(errors.Forbidden, match='"deployer" not found'):
        RbacEscalationCheck(index, HubAuthorizer(index)).validate(ALICE, binding_of("deployer"))


async def test_a_role_in_the_index_is_not_read_again() -> None:
    async def read_role(kind: str, name: str, namespace: str) -> tuple[PolicyRule, ...] | None:
        raise AssertionError("the index had it")

    index = alice_edits_team_a()
    index.put(ROLE, DEPLOYER)
    assert RbacEscalationCheck(index, HubAuthorizer(index), read_role=read_role).validate(ALICE, binding_of("deployer")) is None


CLUSTERROLES = next(rt for rt in rbac_resources() if rt.plural == "clusterroles")
#: Dave may write ClusterRoles and RoleBindings, without escalate or bind, and holds nothing else.
DAVE = UserInfo(name="dave", role=Role.USER, user_groups=("system:authenticated",))
AGGREGATED_ADMIN: dict[str, Any] = {
    "metadata": {"name": "admin", "resourceVersion": "7"},
    "aggregationRule": {"clusterRoleSelectors": [{"matchLabels": {"aggregate-to-admin": "true"}}]},
    "rules": [{"apiGroups": [""], "resources": ["secrets"], "verbs": ["*"]}],
}


def dave_writes_rbac() -> RbacEscalationCheck:
    index = RbacIndex()
    index.put(CLUSTER_ROLE, {"metadata": {"name": "rbac-writer"}, "rules": [{
        "apiGroups": ["rbac.authorization.k8s.io"], "resources": ["clusterroles", "rolebindings"],
        "verbs": ["create", "get", "update", "patch", "delete"]}]})
    index.put("ClusterRoleBinding", {"metadata": {"name": "dave"},
                                     "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                                                 "name": "rbac-writer"},
                                     "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User",
                                                   "name": "dave"}]})
    return RbacEscalationCheck(index, HubAuthorizer(index))


def update(resource: Any, old: dict[str, Any], **metadata: Any) -> WriteAttributes:
    new = {**old, "metadata": {**old["metadata"], **metadata}}
    return WriteAttributes(Operation.UPDATE, resource, new, old=old)


def test_removing_an_aggregation_rule_needs_every_right_as_setting_one() -> None:
    check = dave_writes_rbac()
    # Emptied of the rules Dave does not hold, without its aggregationRule: kube's storage still
    # refuses, as the aggregation would stop (``hasAggregationRule(old)``).
    emptied = {"metadata": AGGREGATED_ADMIN["metadata"], "rules": []}
    write = WriteAttributes(Operation.UPDATE, CLUSTERROLES, emptied, old=AGGREGATED_ADMIN)
    with pytest.raises(errors.Forbidden, match=r'^clusterroles\.rbac\.authorization\.k8s\.io "admin" is forbidden: '
                       "must have cluster-admin privileges to use the aggregationRule$"):
        check.validate(DAVE, write)
    created = {"metadata": {"name": "mine"}, "rules": [],
               "aggregationRule": {"clusterRoleSelectors": [{"matchLabels": {"x": "y"}}]}}
    with pytest.raises(errors.Forbidden, match="must have cluster-admin privileges to use the aggregationRule"):
        check.validate(DAVE, WriteAttributes(Operation.CREATE, CLUSTERROLES, created))
    # The rules are checked first, as kube's storage checks them.
    with pytest.raises(errors.Forbidden, match="attempting to grant RBAC permissions not currently held"):
        check.validate(DAVE, update(CLUSTERROLES, AGGREGATED_ADMIN, labels={"a": "b"}))


def test_an_update_of_the_garbage_collectors_fields_only_is_not_checked() -> None:
    check = dave_writes_rbac()
    owner = [{"apiVersion": "v1", "kind": "ConfigMap", "name": "c", "uid": "123e4567-e89b-12d3-a456-426614174000"}]
    managed = [{"manager": "kubectl-patch", "operation": "Update", "apiVersion": "rbac.authorization.k8s.io/v1"}]
    binding = {"metadata": {"name": "team-a-admin", "namespace": "team-a", "resourceVersion": "3"},
               "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "admin"},
               "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": "team-a"}]}
    for resource, old in ((CLUSTERROLES, AGGREGATED_ADMIN), (ROLEBINDINGS, binding)):
        assert check.validate(DAVE, update(resource, old, finalizers=["example.com/x"], managedFields=managed)) is None
        assert check.validate(DAVE, update(resource, old, ownerReferences=owner, resourceVersion="9")) is None
        with pytest.raises(errors.Forbidden):  # any other change is checked
            check.validate(DAVE, update(resource, old, finalizers=["example.com/x"], labels={"a": "b"}))
