"""The pure planning of a workload's rollout history (controlplane.apis.revisions): kube's
revision numbering, revision-history, pruning, paused Deployments, ControllerRevision data."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from controlplane.apis.revisions import (
    ANNOTATION_REVISION,
    ANNOTATION_REVISION_HISTORY,
    is_deployment_replica_set,
    new_replica_set,
    plan_controller_revisions,
    plan_replica_sets,
    revision_data,
)
from controlplane.apis.templatehash import template_hash


def deployment(image: str = "app:1", **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "ml", "uid": "u-1", "annotations": {"team": "a"}},
        "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "web"}},
                 "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "c", "image": image}]}},
                 **spec},
    }


def stored(rs: dict[str, Any], *, created: str = "2026-01-01T00:00:00Z") -> dict[str, Any]:
    out = copy.deepcopy(rs)
    out["metadata"]["creationTimestamp"] = created
    out["metadata"]["uid"] = f"rs-{out['metadata']['name']}"
    return out


def test_a_new_deployment_gets_revision_1_named_by_its_template_hash() -> None:
    plan = plan_replica_sets(deployment(), [])
    (rs,) = plan.create
    pod_hash = template_hash(deployment()["spec"]["template"])
    assert rs["metadata"]["name"] == f"web-{pod_hash}"
    assert rs["metadata"]["annotations"] == {"team": "a", ANNOTATION_REVISION: "1"}
    assert rs["spec"]["replicas"] == 3
    assert plan.workload_revision == "1" and not plan.update and not plan.delete
    assert is_deployment_replica_set(rs)


def test_nothing_is_written_when_the_history_is_current() -> None:
    d = deployment()
    d["metadata"]["annotations"][ANNOTATION_REVISION] = "1"
    rs = stored(new_replica_set(d, revision=1))
    plan = plan_replica_sets(d, [rs])
    assert (plan.create, plan.update, plan.delete, plan.workload_revision) == ([], [], [], None)


def test_a_template_put_back_takes_the_next_revision_and_keeps_the_old_one_in_its_history() -> None:
    first = stored(new_replica_set(deployment("app:1"), revision=1))
    second = stored(new_replica_set(deployment("app:2"), revision=2), created="2026-01-02T00:00:00Z")
    second["spec"]["replicas"] = 3
    plan = plan_replica_sets(deployment("app:1"), [first, second])
    reused = next(rs for rs in plan.update if rs["metadata"]["name"] == first["metadata"]["name"])
    assert reused["metadata"]["annotations"][ANNOTATION_REVISION] == "3"
    assert reused["metadata"]["annotations"][ANNOTATION_REVISION_HISTORY] == "1"
    scaled_down = next(rs for rs in plan.update if rs["metadata"]["name"] == second["metadata"]["name"])
    assert scaled_down["spec"]["replicas"] == 0
    assert plan.workload_revision == "3"


@pytest.mark.parametrize(("limit", "kept"), [(0, []), (1, ["3"]), (2, ["2", "3"]), (None, ["1", "2", "3"])])
def test_old_replica_sets_beyond_the_history_limit_are_deleted_oldest_first(limit: int | None, kept: list[str]) -> None:
    spec = {} if limit is None else {"revisionHistoryLimit": limit}
    old = [stored(new_replica_set(deployment(f"app:{n}"), revision=n)) for n in (1, 2, 3)]
    for rs in old:
        rs["spec"]["replicas"] = 0
    current = stored(new_replica_set(deployment("app:4"), revision=4))
    plan = plan_replica_sets(deployment("app:4", **spec), [*old, current])
    deleted = set(plan.delete)
    assert sorted(rs["metadata"]["annotations"][ANNOTATION_REVISION] for rs in old if rs["metadata"]["name"] not in deleted) == kept
    assert not [rs for rs in plan.update if rs["metadata"]["name"] in deleted]


def test_a_paused_deployments_new_template_gets_no_replica_set_until_resumed() -> None:
    first = stored(new_replica_set(deployment("app:1"), revision=1))
    plan = plan_replica_sets(deployment("app:2", paused=True), [first])
    assert not plan.create and plan.workload_revision is None
    assert len(plan_replica_sets(deployment("app:2"), [first]).create) == 1


def test_controller_revisions_put_the_template_back_and_renumber_a_reused_one() -> None:
    sts = deployment("db:1")
    sts["kind"] = "StatefulSet"
    (first,) = plan_controller_revisions(sts, []).create
    assert first["data"] == revision_data(sts)
    assert first["data"]["spec"]["template"]["$patch"] == "replace"
    assert first["revision"] == 1
    assert first["metadata"]["labels"]["controller-revision-hash"] == first["metadata"]["name"].removeprefix("web-")
    newer = copy.deepcopy(sts)
    newer["spec"]["template"]["spec"]["containers"][0]["image"] = "db:2"
    (second,) = plan_controller_revisions(newer, [first]).create
    assert second["revision"] == 2
    back = plan_controller_revisions(sts, [first, second])
    assert not back.create and [r["revision"] for r in back.update] == [3]
    assert plan_controller_revisions(newer, [first, second]).update == []


def test_a_template_put_back_by_kubectls_rollback_matches_its_replica_set_despite_null_fields() -> None:
    """kubectl's rollback sends the ReplicaSet's template as Go encodes it, with
    ``metadata.creationTimestamp: null``: kube's semantic equality reads it as unset."""
    first = stored(new_replica_set(deployment("app:1"), revision=1))
    second = stored(new_replica_set(deployment("app:2"), revision=2))
    undone = deployment("app:1")
    undone["spec"]["template"]["metadata"]["creationTimestamp"] = None
    plan = plan_replica_sets(undone, [first, second])
    assert not plan.create and plan.workload_revision == "3"
