"""The hub's rollout-history controller against the real object store and controllers: a
Deployment's templates become ReplicaSets ``<name>-<pod-template-hash>`` numbered by
``deployment.kubernetes.io/revision`` (a template put back reuses its ReplicaSet with the next
number and revision-history), pruned to ``revisionHistoryLimit``; a StatefulSet's and a
DaemonSet's become ControllerRevisions whose data puts the template back. The records stay on
the hub, even under a policy that selects every ReplicaSet, and go with their workload."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from controlplane.apis.templatehash import template_hash
from controlplane.apiserver.objects import ObjectStore
from controlplane.controllers.manager import ControllerManager

from .fleet import deployment, eventually, get_object, node_shape, propagation_policy, put_cluster, settled

pytestmark = pytest.mark.waiting

REVISION = "deployment.kubernetes.io/revision"
HISTORY = "deployment.kubernetes.io/revision-history"
CAUSE = "kubernetes.io/change-cause"


def rt(objects: ObjectStore, api_version: str, kind: str) -> Any:
    return objects.registry.require(api_version, kind)


async def owned(objects: ObjectStore, kind: str, owner: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The ``kind`` records ``owner`` controls, by name (what kubectl's history viewers list)."""
    listed = await objects.list(rt(objects, "apps/v1", kind), namespace="default")
    uid = owner["metadata"]["uid"]
    return {
        item["metadata"]["name"]: item
        for item in listed.items
        if any(ref.get("controller") and ref.get("uid") == uid for ref in item["metadata"].get("ownerReferences") or ())
    }


def revisions_of(records: dict[str, dict[str, Any]]) -> dict[str, int]:
    return {
        name: int(item["revision"]) if item["kind"] == "ControllerRevision" else int(item["metadata"]["annotations"][REVISION])
        for name, item in records.items()
    }


async def set_image(objects: ObjectStore, kind: str, name: str, image: str, **annotations: str) -> dict[str, Any]:
    current = await get_object(objects, "apps/v1", kind, name)
    assert current is not None
    body = copy.deepcopy(current)
    body["spec"]["template"]["spec"]["containers"][0]["image"] = image
    body["metadata"].setdefault("annotations", {}).update(annotations)
    updated: dict[str, Any] = await objects.update(rt(objects, "apps/v1", kind), body)
    return updated


async def history_of(objects: ObjectStore, manager: ControllerManager, kind: str, name: str) -> tuple[dict[str, Any], dict[str, int]]:
    await settled(manager)
    workload = await get_object(objects, "apps/v1", kind, name)
    assert workload is not None
    return workload, revisions_of(await owned(objects, "ReplicaSet" if kind == "Deployment" else "ControllerRevision", workload))


async def test_a_deployment_keeps_one_replica_set_per_template_numbered_as_kube_numbers_them(
    objects: ObjectStore, manager: ControllerManager
) -> None:
    deployments = rt(objects, "apps/v1", "Deployment")
    created = await objects.create(deployments, deployment("web", replicas=3, image="serve:1"))
    first_hash = template_hash(created["spec"]["template"])
    # Nothing is recorded while the template has not changed (no write for most workloads).
    web, found = await history_of(objects, manager, "Deployment", "web")
    assert found == {} and REVISION not in (web["metadata"].get("annotations") or {})

    second = await set_image(objects, "Deployment", "web", "serve:2", **{CAUSE: "kubectl set image serve:2"})
    second_hash = template_hash(second["spec"]["template"])
    web, found = await history_of(objects, manager, "Deployment", "web")
    # At the first change the template before it becomes revision 1.
    assert found == {f"web-{first_hash}": 1, f"web-{second_hash}": 2}
    assert web["metadata"]["annotations"][REVISION] == "2"
    records = await owned(objects, "ReplicaSet", web)
    rs = records[f"web-{first_hash}"]
    assert rs["metadata"]["labels"] == {"app": "web", "pod-template-hash": first_hash}
    assert rs["spec"]["selector"]["matchLabels"] == {"app": "web", "pod-template-hash": first_hash}
    assert rs["spec"]["template"]["metadata"]["labels"]["pod-template-hash"] == first_hash
    assert rs["spec"]["template"]["spec"]["containers"][0]["image"] == "serve:1"
    assert rs["metadata"]["ownerReferences"][0] | {"uid": ""} == {
        "apiVersion": "apps/v1", "kind": "Deployment", "name": "web", "uid": "", "controller": True, "blockOwnerDeletion": True,
    }
    assert records[f"web-{second_hash}"]["metadata"]["annotations"][CAUSE] == "kubectl set image serve:2"
    assert (records[f"web-{first_hash}"]["spec"]["replicas"], records[f"web-{second_hash}"]["spec"]["replicas"]) == (0, 3)

    # Back to the first template (what kubectl rollout undo writes): its ReplicaSet is reused
    # with the next number, and the number it had goes to revision-history.
    await set_image(objects, "Deployment", "web", "serve:1")
    web, found = await history_of(objects, manager, "Deployment", "web")
    assert found == {f"web-{first_hash}": 3, f"web-{second_hash}": 2}
    assert web["metadata"]["annotations"][REVISION] == "3"
    reused = (await owned(objects, "ReplicaSet", web))[f"web-{first_hash}"]
    assert reused["metadata"]["annotations"][HISTORY] == "1"
    assert reused["spec"]["replicas"] == 3


async def test_history_is_pruned_to_the_revision_history_limit(objects: ObjectStore, manager: ControllerManager) -> None:
    body = deployment("web", replicas=1, image="serve:0")
    body["spec"]["revisionHistoryLimit"] = 2
    await objects.create(rt(objects, "apps/v1", "Deployment"), body)
    for n in range(1, 6):
        await history_of(objects, manager, "Deployment", "web")
        await set_image(objects, "Deployment", "web", f"serve:{n}")
    _, found = await history_of(objects, manager, "Deployment", "web")
    assert sorted(found.values()) == [4, 5, 6]  # the current one and two old ones


async def test_a_deployments_replica_sets_stay_on_the_hub_and_go_with_it(objects: ObjectStore, manager: ControllerManager) -> None:
    await put_cluster(objects, "onprem", node_shape(2, gpus=8))
    policies = rt(objects, "policy.gpufed.io/v1alpha1", "PropagationPolicy")
    await objects.create(policies, propagation_policy("web"))
    await objects.create(policies, propagation_policy("every-replicaset", kind="ReplicaSet"))
    created = await objects.create(rt(objects, "apps/v1", "Deployment"), deployment("web", replicas=1))

    async def web_placed() -> dict[str, Any] | None:
        return await get_object(objects, "work.gpufed.io/v1alpha1", "Work", "default-web-deployment", "gpufed-es-onprem")

    await eventually(web_placed, what="web's Work")
    await set_image(objects, "Deployment", "web", "serve:2")
    _, found = await history_of(objects, manager, "Deployment", "web")
    assert len(found) == 2
    works = await objects.list(rt(objects, "work.gpufed.io/v1alpha1", "Work"))
    assert [w["metadata"]["name"] for w in works.items] == ["default-web-deployment"]
    bindings = await objects.list(rt(objects, "work.gpufed.io/v1alpha1", "ResourceBinding"))
    assert [b["metadata"]["name"] for b in bindings.items] == ["web-deployment"]
    rs = await get_object(objects, "apps/v1", "ReplicaSet", next(iter(found)))
    # Not claimed: no propagation finalizer, no Propagated condition.
    assert rs is not None and not rs["metadata"].get("finalizers") and not (rs.get("status") or {}).get("conditions")

    await objects.delete(rt(objects, "apps/v1", "Deployment"), namespace="default", name="web")

    async def history_gone() -> bool:
        return not await owned(objects, "ReplicaSet", created)

    await eventually(history_gone, what="web's ReplicaSets deleted with it")


def statefulset(name: str, image: str) -> dict[str, Any]:
    body = deployment(name, replicas=2, image=image)
    body["kind"] = "StatefulSet"
    body["spec"]["serviceName"] = name
    return body


def daemonset(name: str, image: str) -> dict[str, Any]:
    body = deployment(name, replicas=1, image=image)
    body["kind"] = "DaemonSet"
    del body["spec"]["replicas"]
    return body


async def test_statefulsets_and_daemonsets_keep_controller_revisions(objects: ObjectStore, manager: ControllerManager) -> None:
    for kind, make in (("StatefulSet", statefulset), ("DaemonSet", daemonset)):
        created = await objects.create(rt(objects, "apps/v1", kind), make("db", "db:1"))
        first = f"db-{template_hash(created['spec']['template'])}"
        second_obj = await set_image(objects, kind, "db", "db:2")
        second = f"db-{template_hash(second_obj['spec']['template'])}"
        _, found = await history_of(objects, manager, kind, "db")
        # Created before the controller saw the first template, or after: either way the latest is the current one.
        assert found[second] == max(found.values()) and set(found) <= {first, second}
        records = await owned(objects, "ControllerRevision", second_obj)
        data = records[second]["data"]
        assert data["spec"]["template"]["$patch"] == "replace"
        assert data["spec"]["template"]["spec"]["containers"][0]["image"] == "db:2"
        assert records[second]["metadata"]["labels"]["controller-revision-hash"] == second.removeprefix("db-")

        await set_image(objects, kind, "db", "db:3")
        await history_of(objects, manager, kind, "db")
        back = await set_image(objects, kind, "db", "db:2")
        _, found = await history_of(objects, manager, kind, "db")
        assert found[second] == max(found.values())
        assert sorted(found.values())[-2] < found[second]
        assert len(found) == len(set(found.values()))
        await objects.delete(rt(objects, "apps/v1", kind), namespace="default", name="db")

        async def gone(owner: dict[str, Any] = back) -> bool:
            return not await owned(objects, "ControllerRevision", owner)

        await eventually(gone, what=f"the {kind}'s ControllerRevisions deleted with it")


async def test_a_first_record_that_could_not_be_written_is_written_later_from_the_held_template(
    objects: ObjectStore, manager: ControllerManager
) -> None:
    """The template before a workload's first change is held until its record is written: while the
    create of revision 1 fails (another ReplicaSet has the name), each look tries again from it, and
    once the name is free revision 1 is that template, not the one after the change."""
    created = await objects.create(rt(objects, "apps/v1", "Deployment"), deployment("web", replicas=1, image="serve:1"))
    first_hash = template_hash(created["spec"]["template"])
    replicasets = rt(objects, "apps/v1", "ReplicaSet")
    labels = {"app": "other"}
    await objects.create(replicasets, {"metadata": {"name": f"web-{first_hash}", "namespace": "default"}, "spec": {
        "replicas": 0, "selector": {"matchLabels": labels},
        "template": {"metadata": {"labels": labels}, "spec": {"containers": [{"name": "c", "image": "other"}]}},
    }})
    await settled(manager)
    looks = manager.reconciles().get("rollout-history", 0)
    second = await set_image(objects, "Deployment", "web", "serve:2")

    async def tried_again() -> bool:
        return manager.reconciles().get("rollout-history", 0) >= looks + 2

    await eventually(tried_again, what="the failed create of revision 1 tried again")
    # Tried again with the loop's growing backoff, not at a fixed 0.1 s while the name stays taken.
    history = next(loop for loop in manager._loops if loop.name == "rollout-history")

    async def backed_off() -> bool:
        return history.queue.num_requeues(("Deployment", "default", "web")) >= 2

    await eventually(backed_off, what="the clash of revision 1's name backed off")
    assert await owned(objects, "ReplicaSet", created) == {}, "nothing recorded while the name is taken"
    await objects.delete(replicasets, namespace="default", name=f"web-{first_hash}")

    web, found = await history_of(objects, manager, "Deployment", "web")
    assert found == {f"web-{first_hash}": 1, f"web-{template_hash(second['spec']['template'])}": 2}
    first = (await owned(objects, "ReplicaSet", web))[f"web-{first_hash}"]
    assert first["spec"]["template"]["spec"]["containers"][0]["image"] == "serve:1"
