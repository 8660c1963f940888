"""The escalation check of a RoleBinding whose Role the RBAC index has not seen yet: kube's RBAC
storage reads roles from its registry, so the hub reads the store instead of refusing."""

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
