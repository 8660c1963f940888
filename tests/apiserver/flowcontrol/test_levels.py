"""The UIDs every response's APF headers name come from a table built once: each one must be the
flow schema's and the priority level's own stable UID, for every classification a request gets."""

from __future__ import annotations

import pytest

from controlplane.apiserver.flowcontrol.levels import (
    FLOW_SCHEMAS,
    Classification,
    Level,
    classify,
    object_uid,
)
from controlplane.apiserver.identity import AGENTS, AUTHENTICATED, SYSTEM_MASTERS, Role, UserInfo

USERS = [
    None,
    UserInfo("admin", Role.USER, user_groups=(SYSTEM_MASTERS, AUTHENTICATED)),
    UserInfo("agent", Role.USER, user_groups=(AGENTS, AUTHENTICATED)),
    UserInfo("alice", Role.USER, user_groups=(AUTHENTICATED,)),
    UserInfo("nobody", Role.USER),
]


@pytest.mark.parametrize("user", USERS, ids=lambda u: u.name if u else "unauthenticated")
@pytest.mark.parametrize("resource", [("", "configmaps"), ("coordination.k8s.io", "leases")])
def test_every_classification_names_its_own_uids(user: UserInfo | None, resource: tuple[str, str]) -> None:
    found = classify(user, verb="create", group=resource[0], resource=resource[1])
    assert found.flow_schema in FLOW_SCHEMAS
    assert found.flow_schema_uid == object_uid("flowschemas", found.flow_schema)
    assert found.level_uid == object_uid("prioritylevelconfigurations", found.level.value)


def test_the_uids_are_distinct_and_a_schema_outside_the_table_still_gets_its_own() -> None:
    uids = [Classification(name, Level.CATCH_ALL, "").flow_schema_uid for name in FLOW_SCHEMAS]
    uids += [Classification("catch-all", level, "").level_uid for level in Level]
    assert len(set(uids)) == len(FLOW_SCHEMAS) + len(Level)
    assert Classification("other", Level.CATCH_ALL, "").flow_schema_uid == object_uid("flowschemas", "other")
