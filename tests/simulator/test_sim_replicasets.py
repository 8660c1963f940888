"""Pure Deployment and ReplicaSet controller logic: ReplicaSets per template, rollouts, pod ranking."""

from __future__ import annotations

import copy
import random
import re
from typing import Any

import pytest

from controlplane.apis.constants import LABEL_POD_TEMPLATE_HASH
from controlplane.apis.templatehash import template_hash
from member_agent.capacity import owner_workload
from simulator.controllers.base import Changes
from simulator.controllers.deployment import (
    ANNOTATION_DESIRED_REPLICAS,
    ANNOTATION_REVISION,
    reconcile_deployment,
    rolling_fenceposts,
    scaled_value,
)
from simulator.controllers.replicaset import reconcile_replicaset, with_replica_failure
from simulator.controlling import failed_create_message

NOW = "2025-01-01T00:00:00Z"
TEMPLATE: dict[str, Any] = {
    "metadata": {"labels": {"app": "x"}},
    "spec": {"containers": [{"name": "c", "image": "img:1"}]},
}
NEW_TEMPLATE: dict[str, Any] = {
    "metadata": {"labels": {"app": "x"}},
    "spec": {"containers": [{"name": "c", "image": "img:2"}]},
}


def _deployment(
    replicas: int, template: dict[str, Any] = TEMPLATE, *, strategy: dict[str, Any] | None = None, **spec: Any
) -> dict[str, Any]:
    body: dict[str, Any] = {
        "replicas": replicas,
        "selector": {"matchLabels": {"app": "x"}},
        "template": template,
        **spec,
    }
    if strategy is not None:
        body["strategy"] = strategy
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "d", "uid": "uid-web", "generation": 3},
        "spec": body,
    }


def _replicaset(
    deployment: dict[str, Any],
    template: dict[str, Any],
    *,
    replicas: int,
    available: int,
    current: int | None = None,
    revision: int = 1,
    created: str = NOW,
) -> dict[str, Any]:
    rs = reconcile_deployment(
        {**deployment, "spec": {**deployment["spec"], "template": template}}, [], now=NOW, rng=random.Random(0)
    ).create[0]
    rs["metadata"]["annotations"][ANNOTATION_REVISION] = str(revision)
    rs["metadata"]["creationTimestamp"] = created
    rs["metadata"]["uid"] = f"uid-{rs['metadata']['name']}"
    rs["spec"]["replicas"] = replicas
    rs["status"] = {
        "replicas": replicas if current is None else current,
        "readyReplicas": available,
        "availableReplicas": available,
    }
    return rs


def _sizes(deployment: dict[str, Any], sets: list[dict[str, Any]]) -> tuple[dict[str, int], Changes]:
    """Each ReplicaSet's replicas after one sync (new ones included), and the changes."""
    changes = reconcile_deployment(deployment, sets, now=NOW, rng=random.Random(0))
    sizes = {rs["metadata"]["name"]: rs["spec"]["replicas"] for rs in sets}
    for rs in [*changes.create, *changes.update]:
        sizes[rs["metadata"]["name"]] = rs["spec"]["replicas"]
    return sizes, changes


def test_template_hash_is_short_stable_and_safe() -> None:
    first = template_hash(TEMPLATE)
    assert first == template_hash(copy.deepcopy(TEMPLATE))
    assert re.fullmatch(r"[bcdfghjklmnpqrstvwxz2456789]{1,10}", first)
    assert template_hash(NEW_TEMPLATE) != first
    assert template_hash(TEMPLATE, collision_count=1) != first


@pytest.mark.parametrize(
    ("value", "total", "round_up", "expected"),
    [
        (None, 10, True, 3),  # 25% of 10, rounded up
        (None, 10, False, 2),  # rounded down
        ("50%", 3, True, 2),
        ("50%", 3, False, 1),
        (2, 10, True, 2),
        ("2", 10, False, 2),
        ("0%", 10, True, 0),
    ],
)
def test_scaled_value(value: int | str | None, total: int, round_up: bool, expected: int) -> None:
    assert scaled_value(value, total, round_up=round_up) == expected


@pytest.mark.parametrize(
    ("rolling", "replicas", "expected"),
    [
        ({}, 4, (1, 1)),
        ({}, 10, (3, 2)),
        ({"maxSurge": 0, "maxUnavailable": 0}, 4, (0, 1)),  # kube makes room for one
        ({"maxSurge": "100%", "maxUnavailable": 0}, 3, (3, 0)),
    ],
)
def test_rolling_fenceposts(rolling: dict[str, Any], replicas: int, expected: tuple[int, int]) -> None:
    deployment = _deployment(replicas, strategy={"type": "RollingUpdate", "rollingUpdate": rolling})
    assert rolling_fenceposts(deployment) == expected


def test_new_deployment_gets_one_replicaset_owned_and_labelled() -> None:
    deployment = _deployment(3)
    changes = reconcile_deployment(deployment, [], now=NOW, rng=random.Random(0))
    assert len(changes.create) == 1 and not changes.update and not changes.delete
    rs = changes.create[0]
    pod_hash = rs["metadata"]["labels"][LABEL_POD_TEMPLATE_HASH]
    assert rs["kind"] == "ReplicaSet" and rs["metadata"]["name"] == f"web-{pod_hash}"
    assert rs["spec"]["replicas"] == 3
    assert rs["spec"]["selector"]["matchLabels"] == {"app": "x", LABEL_POD_TEMPLATE_HASH: pod_hash}
    assert rs["spec"]["template"]["metadata"]["labels"] == {"app": "x", LABEL_POD_TEMPLATE_HASH: pod_hash}
    assert rs["metadata"]["annotations"][ANNOTATION_REVISION] == "1"
    ref = rs["metadata"]["ownerReferences"][0]
    assert (ref["kind"], ref["name"], ref["uid"], ref["controller"]) == ("Deployment", "web", "uid-web", True)
    # Nothing runs yet: not available, progressing.
    assert changes.status is not None
    conditions = {c["type"]: (c["status"], c["reason"]) for c in changes.status["conditions"]}
    assert conditions["Available"] == ("False", "MinimumReplicasUnavailable")
    assert conditions["Progressing"] == ("True", "ReplicaSetUpdated")
    assert changes.status["observedGeneration"] == 3


@pytest.mark.parametrize(
    ("old", "new", "expected_old", "expected_new"),
    [
        # (replicas, available) of the old and the new ReplicaSet; 4 replicas, surge 1, unavailable 1.
        ((4, 4), None, 4, 1),  # the new ReplicaSet starts within the surge
        ((4, 4), (1, 0), 3, 1),  # no room to surge: the old one goes down by maxUnavailable
        ((3, 3), (1, 0), 3, 2),  # room again: the new one goes up
        ((3, 3), (2, 2), 1, 2),  # new pods available: the old one goes down further
        ((1, 1), (4, 3), 0, 4),
        ((4, 2), (1, 0), 3, 1),  # unhealthy old pods go first, within the budget
    ],
)
def test_rolling_update_steps(
    old: tuple[int, int], new: tuple[int, int] | None, expected_old: int, expected_new: int
) -> None:
    deployment = _deployment(4, NEW_TEMPLATE)
    sets = [_replicaset(deployment, TEMPLATE, replicas=old[0], available=old[1], created="2025-01-01T00:00:00Z")]
    if new is not None:
        sets.append(
            _replicaset(
                deployment, NEW_TEMPLATE, replicas=new[0], available=new[1], revision=2,
                created="2025-01-01T00:01:00Z",
            )
        )
    sizes, _ = _sizes(deployment, sets)
    old_name = f"web-{template_hash(TEMPLATE)}"
    new_name = f"web-{template_hash(NEW_TEMPLATE)}"
    assert sizes == {old_name: expected_old, new_name: expected_new}
    assert sum(sizes.values()) <= 4 + 1


def test_rolling_update_ends_complete_and_keeps_history() -> None:
    deployment = _deployment(4, NEW_TEMPLATE)
    sets = [
        _replicaset(deployment, TEMPLATE, replicas=0, available=0),
        _replicaset(deployment, NEW_TEMPLATE, replicas=4, available=4, revision=2, created="2025-01-01T00:01:00Z"),
    ]
    changes = reconcile_deployment(deployment, sets, now=NOW, rng=random.Random(0))
    assert not changes.create and not changes.update and not changes.delete
    assert changes.status is not None
    status = changes.status
    assert (status["replicas"], status["updatedReplicas"], status["availableReplicas"]) == (4, 4, 4)
    assert "unavailableReplicas" not in status
    progressing = next(c for c in status["conditions"] if c["type"] == "Progressing")
    new_name = f"web-{template_hash(NEW_TEMPLATE)}"
    assert progressing["reason"] == "NewReplicaSetAvailable"
    assert progressing["message"] == f'ReplicaSet "{new_name}" has successfully progressed.'


def test_status_aggregates_replicasets_mid_rollout() -> None:
    deployment = _deployment(4, NEW_TEMPLATE)
    sets = [
        _replicaset(deployment, TEMPLATE, replicas=3, available=3),
        _replicaset(deployment, NEW_TEMPLATE, replicas=2, available=1, current=2, revision=2),
    ]
    changes = reconcile_deployment(deployment, sets, now=NOW, rng=random.Random(0))
    assert changes.status is not None
    status = changes.status
    assert status["replicas"] == 5 and status["updatedReplicas"] == 2
    assert status["readyReplicas"] == 4 and status["availableReplicas"] == 4
    # Available: 4 >= 4 - maxUnavailable(1).
    assert {c["type"]: c["status"] for c in status["conditions"]}["Available"] == "True"


@pytest.mark.parametrize(
    ("old_current", "expected_old", "new_created"),
    [
        (4, 0, False),  # first every old pod goes
        (0, 0, True),  # then the new ReplicaSet starts at full size
    ],
)
def test_recreate(old_current: int, expected_old: int, new_created: bool) -> None:
    deployment = _deployment(4, NEW_TEMPLATE, strategy={"type": "Recreate"})
    replicas = 4 if old_current else 0
    sets = [_replicaset(deployment, TEMPLATE, replicas=replicas, available=old_current, current=old_current)]
    sizes, changes = _sizes(deployment, sets)
    assert sizes[f"web-{template_hash(TEMPLATE)}"] == expected_old
    assert bool(changes.create) is new_created
    if new_created:
        assert changes.create[0]["spec"]["replicas"] == 4


@pytest.mark.parametrize(("replicas", "expected"), [(2, 2), (6, 6), (0, 0)])
def test_scaling_a_settled_deployment_scales_its_replicaset(replicas: int, expected: int) -> None:
    deployment = _deployment(replicas)
    sets = [_replicaset(deployment, TEMPLATE, replicas=4, available=4)]
    sizes, changes = _sizes(deployment, sets)
    assert list(sizes.values()) == [expected]
    assert changes.update[0]["metadata"]["annotations"][ANNOTATION_DESIRED_REPLICAS] == str(replicas)


def test_history_limit_deletes_the_oldest_idle_replicasets() -> None:
    deployment = _deployment(1, TEMPLATE, revisionHistoryLimit=1)
    templates = [
        {"metadata": {"labels": {"app": "x"}}, "spec": {"containers": [{"name": "c", "image": f"img:{i}"}]}}
        for i in range(10, 13)
    ]
    old = [
        _replicaset(deployment, t, replicas=0, available=0, revision=i + 1, created=f"2025-01-01T00:0{i}:00Z")
        for i, t in enumerate(templates)
    ]
    current = _replicaset(deployment, TEMPLATE, replicas=1, available=1, revision=9, created="2025-01-01T00:09:00Z")
    changes = reconcile_deployment(deployment, [*old, current], now=NOW, rng=random.Random(0))
    assert changes.delete == [old[0]["metadata"]["name"], old[1]["metadata"]["name"]]


def _pod(name: str, *, node: str | None, phase: str, ready: bool, created: str, rs: str = "web-abc") -> dict[str, Any]:
    return {
        "metadata": {
            "name": name,
            "namespace": "d",
            "creationTimestamp": created,
            "labels": {"app": "x", LABEL_POD_TEMPLATE_HASH: "abc"},
            "ownerReferences": [{"kind": "ReplicaSet", "name": rs, "uid": "uid-rs", "controller": True}],
        },
        "spec": {"nodeName": node} if node else {},
        "status": {"phase": phase, "conditions": [{"type": "Ready", "status": "True" if ready else "False"}]},
    }


def _rs(replicas: int) -> dict[str, Any]:
    template = copy.deepcopy(TEMPLATE)
    template["metadata"]["labels"][LABEL_POD_TEMPLATE_HASH] = "abc"
    return {
        "apiVersion": "apps/v1",
        "kind": "ReplicaSet",
        "metadata": {"name": "web-abc", "namespace": "d", "uid": "uid-rs", "generation": 1},
        "spec": {"replicas": replicas, "template": template},
    }


def test_replicaset_creates_pods_named_after_it() -> None:
    changes = reconcile_replicaset(_rs(3), [], now=NOW, rng=random.Random(0))
    assert len(changes.create) == 3
    for pod in changes.create:
        assert re.fullmatch(r"web-abc-[bcdfghjklmnpqrstvwxz2456789]{5}", pod["metadata"]["name"])
        assert pod["metadata"]["labels"][LABEL_POD_TEMPLATE_HASH] == "abc"
        assert pod["metadata"]["ownerReferences"][0]["kind"] == "ReplicaSet"
        # The member agent reports such a pod as its Deployment's.
        assert owner_workload(pod) == {"kind": "Deployment", "name": "web"}
    assert changes.status is not None and changes.status["replicas"] == 0


@pytest.mark.parametrize(
    ("keep", "expected_deleted"),
    [
        (3, ["unbound", "pending"]),  # unscheduled, then pending pods go first
        (2, ["unbound", "pending", "not-ready"]),
        (1, ["unbound", "pending", "not-ready", "ready-new"]),  # then the newest ready one
    ],
)
def test_replicaset_scale_down_order(keep: int, expected_deleted: list[str]) -> None:
    pods = [
        _pod("ready-old", node="n", phase="Running", ready=True, created="2025-01-01T00:00:01Z"),
        _pod("ready-new", node="n", phase="Running", ready=True, created="2025-01-01T00:00:05Z"),
        _pod("not-ready", node="n", phase="Running", ready=False, created="2025-01-01T00:00:02Z"),
        _pod("pending", node="n", phase="Pending", ready=False, created="2025-01-01T00:00:03Z"),
        _pod("unbound", node=None, phase="Pending", ready=False, created="2025-01-01T00:00:00Z"),
    ]
    changes = reconcile_replicaset(_rs(keep), pods, now=NOW, rng=random.Random(0))
    assert changes.delete == expected_deleted
    assert changes.status is not None
    assert changes.status["replicas"] == 5 and changes.status["readyReplicas"] == 2


def test_replicaset_replaces_finished_pods() -> None:
    pods = [
        _pod("done", node="n", phase="Failed", ready=False, created=NOW),
        _pod("up", node="n", phase="Running", ready=True, created=NOW),
    ]
    changes = reconcile_replicaset(_rs(2), pods, now=NOW, rng=random.Random(0))
    assert len(changes.create) == 1 and not changes.delete


REFUSED = 'pods "web-1-" is forbidden: error looking up service account ml/runner: serviceaccount "runner" not found'
FAILURE = {
    "type": "ReplicaFailure", "status": "True", "lastTransitionTime": NOW, "reason": "FailedCreate", "message": REFUSED,
}


@pytest.mark.parametrize(
    ("status", "error", "expected"),
    [
        ({"replicas": 0}, REFUSED, {"replicas": 0, "conditions": [FAILURE]}),
        # Set once: a later refusal does not rewrite it.
        ({"replicas": 0, "conditions": [FAILURE]}, "other", {"replicas": 0, "conditions": [FAILURE]}),
        ({"replicas": 1, "conditions": [FAILURE]}, None, {"replicas": 1}),
        ({"replicas": 1}, None, {"replicas": 1}),
    ],
)
def test_replica_failure_is_set_by_a_refused_create_and_cleared_by_a_clean_sync(
    status: dict[str, Any], error: str | None, expected: dict[str, Any]
) -> None:
    assert with_replica_failure(status, error, now=NOW) == expected


@pytest.mark.parametrize(
    ("kind", "expected"),
    [
        ("ReplicaSet", f"Error creating: {REFUSED}"),
        ("Job", f"Error creating: {REFUSED}"),
        ("StatefulSet", f"create Pod web-1-0 in StatefulSet web-1 failed error: {REFUSED}"),
    ],
)
def test_failed_create_events_say_what_kubes_controllers_say(kind: str, expected: str) -> None:
    child = "web-1-0" if kind == "StatefulSet" else "web-1-abcde"
    assert failed_create_message(kind, "web-1", child, REFUSED) == expected


def test_a_deployment_copies_its_replicasets_failure() -> None:
    deployment = _deployment(replicas=2)
    first = reconcile_deployment(deployment, [], now=NOW, rng=random.Random(1))
    (rs,) = first.create
    rs["status"] = {"replicas": 0, "conditions": [FAILURE]}
    deployment["status"] = first.status
    changes = reconcile_deployment(deployment, [rs], now=NOW, rng=random.Random(1))
    assert changes.status is not None
    (failure,) = [c for c in changes.status["conditions"] if c["type"] == "ReplicaFailure"]
    assert failure == {**FAILURE, "lastUpdateTime": NOW}
    rs["status"] = {"replicas": 2}
    deployment["status"] = changes.status
    cleared = reconcile_deployment(deployment, [rs], now=NOW, rng=random.Random(1))
    assert cleared.status is not None
    assert "ReplicaFailure" not in {c["type"] for c in cleared.status["conditions"]}


def test_a_paused_deployment_rolls_out_no_new_template_but_scales() -> None:
    """kube's sync of a paused Deployment (``dc.sync``): no new ReplicaSet for a changed template,
    the one active ReplicaSet scaled to the replicas, no update counted, and Progressing ``Unknown``
    with reason ``DeploymentPaused``, so ``kubectl rollout status`` waits."""
    deployment = _deployment(6, NEW_TEMPLATE, paused=True)
    sets = [_replicaset(_deployment(4), TEMPLATE, replicas=4, available=4)]
    sizes, changes = _sizes(deployment, sets)
    assert not changes.create
    assert list(sizes.values()) == [6]
    assert changes.status is not None
    assert "updatedReplicas" not in changes.status
    progressing = next(c for c in changes.status["conditions"] if c["type"] == "Progressing")
    assert (progressing["status"], progressing["reason"], progressing["message"]) == (
        "Unknown",
        "DeploymentPaused",
        "Deployment is paused",
    )
    resumed = reconcile_deployment(_deployment(6, NEW_TEMPLATE), sets, now=NOW, rng=random.Random(0))
    assert len(resumed.create) == 1, "resumed, the new template gets its ReplicaSet"
