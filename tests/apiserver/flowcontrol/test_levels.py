"""The configuration the objects make: stored objects' UIDs name a request's schema and level (the
bootstrap ones not stored yet: a stable UID of their name), matching order is matchingPrecedence
then name, a schema whose level is missing is skipped, and each level's limits come from its spec."""

from __future__ import annotations

import copy
from typing import Any

from controlplane.apis.kube.flowcontrol_bootstrap import FLOW_SCHEMAS, PRIORITY_LEVELS
from controlplane.apiserver.flowcontrol import RequestDigest, configuration
from controlplane.apiserver.flowcontrol.levels import object_uid
from controlplane.apiserver.flowcontrol.queueing import LevelLimits

ALICE = RequestDigest("alice", ("system:authenticated",), "list", True, "", "configmaps", "", "team-a")


def stored(obj: dict[str, Any], uid: str, **spec: Any) -> dict[str, Any]:
    out = copy.deepcopy(obj)
    out["metadata"]["uid"] = uid
    out["spec"].update(spec)
    return out


def schema(name: str, level: str, precedence: int, *, user: str = "alice") -> dict[str, Any]:
    return {"kind": "FlowSchema", "metadata": {"name": name, "uid": f"uid-{name}"}, "spec": {
        "priorityLevelConfiguration": {"name": level}, "matchingPrecedence": precedence,
        "distinguisherMethod": {"type": "ByNamespace"},
        "rules": [{"subjects": [{"kind": "User", "user": {"name": user}}],
                   "resourceRules": [{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"], "namespaces": ["*"]}]}],
    }}


def test_stored_objects_name_their_uids_and_missing_bootstrap_ones_a_stable_one() -> None:
    config = configuration([stored(FLOW_SCHEMAS["global-default"], "fs-uid")], [], total=600)
    found = config.classify(ALICE)
    assert (found.flow_schema, found.flow_schema_uid) == ("global-default", "fs-uid")
    assert found.level_uid == object_uid("prioritylevelconfigurations", "global-default")
    assert found.level_uid != object_uid("prioritylevelconfigurations", "catch-all")


def test_matching_order_is_precedence_then_name_and_a_dangling_schema_is_skipped() -> None:
    levels = [stored(PRIORITY_LEVELS["workload-low"], "pl-uid")]
    config = configuration([schema("b-team", "workload-low", 500), schema("a-team", "workload-high", 500),
                            schema("early", "no-such-level", 100)], levels, total=600)
    found = config.classify(ALICE)
    assert (found.flow_schema, found.level, found.flow) == ("a-team", "workload-high", "team-a")
    config = configuration([schema("b-team", "workload-low", 400), schema("a-team", "workload-high", 500)], levels, total=600)
    assert (config.classify(ALICE).flow_schema, config.classify(ALICE).level_uid) == ("b-team", "pl-uid")
    assert "early" not in [s.name for s in configuration([schema("early", "nope", 100)], [], total=1).schemas]


def test_limits_follow_the_level_objects() -> None:
    edited = stored(PRIORITY_LEVELS["global-default"], "u")
    edited["spec"]["limited"].update(nominalConcurrencyShares=245, limitResponse={"type": "Queue", "queuing": {
        "queues": 16, "handSize": 4, "queueLengthLimit": 7}})
    rejecting = {"kind": "PriorityLevelConfiguration", "metadata": {"name": "tiny"}, "spec": {
        "type": "Limited", "limited": {"nominalConcurrencyShares": 1, "limitResponse": {"type": "Reject"}}}}
    levels = configuration([], [edited, rejecting], total=490).levels
    # ceil(490 * 245 / 471): the other bootstrap levels hold 225 shares, tiny 1, exempt 0.
    assert levels["global-default"].limits == LevelLimits(255, 16, 7, 4)
    assert levels["tiny"].limits == LevelLimits(2, 1, 0, 1)



def test_a_level_of_no_shares_has_no_seats_of_its_own() -> None:
    """kube's nominalCL is ceil(total x shares / share sum), 0 for 0 shares (v1 allows them): such a
    level runs only what it borrows."""
    borrower = {"kind": "PriorityLevelConfiguration", "metadata": {"name": "borrower"}, "spec": {
        "type": "Limited", "limited": {"nominalConcurrencyShares": 0, "limitResponse": {
            "type": "Queue", "queuing": {"queues": 4, "handSize": 2, "queueLengthLimit": 5}}}}}
    level = configuration([], [borrower], total=600).levels["borrower"]
    assert level.limits == LevelLimits(0, 4, 5, 2)
    assert (level.bounds.nominal, level.bounds.lower, level.bounds.upper) == (0, 0, 600)
    assert level.max_seats == 1  # kube's max(1, ...)
