"""Karmada's ``preserveResourcesOnDeletion`` and ``schedulePriority`` on the hub.

The priority queue is pure and tested table-driven; the rest runs the controllers on an
in-process hub store with fake members (``fleet``): the flag travels policy -> binding ->
Work and is cleared before a Work goes for a rescheduling (so only deleting the workload
preserves), a PriorityClass's value becomes the binding's priority, and with room for one
the higher priority is placed first.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from controlplane.apis.timestamps import format_time
from controlplane.apis.work_v1alpha1 import PriorityReason
from controlplane.apiserver import errors
from controlplane.apiserver.objects import ObjectStore, WatchEventType
from controlplane.controllers.detecting import binding_priority, resolve_schedule_priority
from controlplane.controllers.manager import ControllerManager
from controlplane.controllers.queueing import WorkQueue
from controlplane.controllers.works import works_preserve
from policies.models import SchedulePriority

from .fleet import deployment, eventually, node_shape, propagation_policy, put_cluster, settled

pytestmark = pytest.mark.waiting

WORK_API = "work.gpufed.io/v1alpha1"

# --- the priority queue (pure) ---------------------------------------------------------------

# Each step: ("add", key, priority or None) or ("get", expected key).
Step = tuple[Any, ...]


@pytest.mark.parametrize(
    "steps",
    [
        pytest.param([("add", "a", None), ("add", "b", None), ("add", "c", None),
                      ("get", "a"), ("get", "b"), ("get", "c")], id="fifo-without-priorities"),
        pytest.param([("add", "low", 1), ("add", "high", 10), ("add", "mid", 5),
                      ("get", "high"), ("get", "mid"), ("get", "low")], id="higher-first"),
        pytest.param([("add", "a", 5), ("add", "b", 5), ("add", "c", 9), ("add", "d", 5),
                      ("get", "c"), ("get", "a"), ("get", "b"), ("get", "d")], id="fifo-among-equals"),
        pytest.param([("add", "a", 1), ("add", "b", 5), ("add", "a", 9),
                      ("get", "a"), ("get", "b")], id="raised-while-waiting"),
        pytest.param([("add", "a", 9), ("add", "b", 5), ("add", "a", 1),
                      ("get", "b"), ("get", "a")], id="lowered-while-waiting"),
        pytest.param([("add", "a", 9), ("add", "b", 5), ("add", "a", None),
                      ("get", "a"), ("get", "b")], id="re-add-keeps-priority"),
        pytest.param([("add", "a", 1), ("add", "a", 5), ("add", "a", 1), ("add", "b", 0),
                      ("get", "a"), ("get", "b")], id="a-key-is-handed-out-once"),
        pytest.param([("add", "neg", -5), ("add", "zero", None),
                      ("get", "zero"), ("get", "neg")], id="negative-priorities"),
    ],
)
async def test_queue_order(steps: list[Step]) -> None:
    queue: WorkQueue[str] = WorkQueue()
    for step in steps:
        if step[0] == "add":
            await queue.add(step[1], priority=step[2])
        else:
            async with asyncio.timeout(1):
                key = await queue.get()
            assert key == step[1]
            await queue.done(key)
    assert len(queue) == 0
    assert not queue.busy()


async def test_a_key_processing_is_not_handed_out_again_and_requeues_with_its_new_priority() -> None:
    queue: WorkQueue[str] = WorkQueue()
    await queue.add("a", priority=1)
    assert await queue.get() == "a"
    await queue.add("a", priority=9)  # while it is processed
    await queue.add("b", priority=5)
    assert await queue.get() == "b"  # never "a" twice at once
    getter = asyncio.create_task(queue.get())
    await asyncio.sleep(0.05)
    assert not getter.done()
    await queue.done("b")
    await queue.add("c", priority=5)
    await queue.done("a")  # re-queued at 9, ahead of c
    async with asyncio.timeout(1):
        assert await getter == "a"
    assert await queue.get() == "c"


async def test_a_delayed_retry_keeps_its_priority() -> None:
    queue: WorkQueue[str] = WorkQueue()
    await queue.add("urgent", priority=100)
    assert await queue.get() == "urgent"
    await queue.add_after("urgent", 0.05)  # as ReconcileLoop does on "look again later"
    await queue.done("urgent")
    await queue.add("routine")  # ready at once, priority 0
    await asyncio.sleep(0.1)
    async with asyncio.timeout(1):
        assert await queue.get() == "urgent"
    assert await queue.get() == "routine"


async def test_lower_priorities_run_once_higher_ones_are_handed_out() -> None:
    queue: WorkQueue[int] = WorkQueue()
    for key in range(50):
        await queue.add(key, priority=key % 3)
    order = []
    for _ in range(50):
        key = await queue.get()
        order.append(key)
        await queue.done(key)
    assert sorted(order) == list(range(50))
    assert [k % 3 for k in order] == sorted((k % 3 for k in range(50)), reverse=True)
    assert len(queue) == 0


# --- schedulePriority resolution (pure) ------------------------------------------------------


def priority_class(name: str, value: int, *, default: bool = False) -> dict[str, Any]:
    obj: dict[str, Any] = {
        "apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": name}, "value": value,
    }
    if default:
        obj["globalDefault"] = True
    return obj


CLASSES = [priority_class("high", 1000), priority_class("low", 10), priority_class("usual", 100, default=True)]


@pytest.mark.parametrize(
    ("source", "name", "classes", "expected"),
    [
        ("KubePriorityClass", "high", CLASSES, (1000, True, PriorityReason.RESOLVED)),
        ("KubePriorityClass", "low", CLASSES, (10, True, PriorityReason.RESOLVED)),
        ("KubePriorityClass", "missing", CLASSES, (0, False, PriorityReason.NOT_FOUND)),
        ("KubePriorityClass", None, CLASSES, (100, True, PriorityReason.DEFAULT)),
        ("KubePriorityClass", None, CLASSES[:2], (0, True, PriorityReason.DEFAULT)),
        # Two defaults (a race kube's admission cannot stop): the lowest valued, as kube picks it.
        ("KubePriorityClass", None, [priority_class("a", 500, default=True), *CLASSES],
         (100, True, PriorityReason.DEFAULT)),
        ("PodPriorityClass", "high", CLASSES, (0, False, PriorityReason.UNSUPPORTED_SOURCE)),
    ],
)
def test_resolve_schedule_priority(
    source: Any, name: str | None, classes: list[dict[str, Any]], expected: tuple[int, bool, PriorityReason]
) -> None:
    resolution = resolve_schedule_priority(
        SchedulePriority(priority_class_source=source, priority_class_name=name), priority_classes=classes
    )
    assert resolution is not None
    assert (resolution.priority, resolution.resolved, resolution.reason) == expected


def test_no_schedule_priority_resolves_to_nothing() -> None:
    assert resolve_schedule_priority(None, priority_classes=CLASSES) is None


@pytest.mark.parametrize(
    ("binding", "expected"),
    [
        (None, 0),
        ({"spec": {}}, 0),
        ({"spec": {"schedulePriority": {"priority": 7}}}, 7),
        ({"spec": {"schedulePriority": {"priority": "7"}}}, 0),
        ({"spec": {"schedulePriority": {"priority": True}}}, 0),
    ],
)
def test_binding_priority(binding: dict[str, Any] | None, expected: int) -> None:
    assert binding_priority(binding) == expected


# --- which Works carry preserveResourcesOnDeletion (pure) -------------------------------------

KEEP: dict[str, Any] = {"metadata": {"name": "p"}, "spec": {"preserveResourcesOnDeletion": True}}
PLAIN: dict[str, Any] = {"metadata": {"name": "q"}, "spec": {}}
ATTACHED: dict[str, Any] = {"metadata": {"name": "cm"}, "spec": {"requiredBy": [{"name": "p"}, {"name": "q"}]}}
# After the dependencies controller dropped p, whose binding is gone, from requiredBy.
ATTACHED_TO_Q: dict[str, Any] = {"metadata": {"name": "cm"}, "spec": {"requiredBy": [{"name": "q"}]}}


@pytest.mark.parametrize(
    ("binding", "parents", "existing", "expected"),
    [
        pytest.param(KEEP, [], [], True, id="own-flag"),
        pytest.param(PLAIN, [], [KEEP], False, id="own-flag-unset"),
        pytest.param(ATTACHED, [KEEP, PLAIN], [], True, id="any-parent-preserves"),
        pytest.param(ATTACHED, [PLAIN, PLAIN], [KEEP], False, id="no-parent-preserves-any-more"),
        # p's workload is being deleted: p's binding, unchanged, stays listed until it is gone.
        pytest.param(ATTACHED, [KEEP, PLAIN], [KEEP], True, id="a-parent-being-deleted-keeps-the-flag"),
        # p's binding is gone and still listed: the Works keep what they have.
        pytest.param(ATTACHED, [None, PLAIN], [KEEP], True, id="a-parent-gone-keeps-the-flag"),
        pytest.param(ATTACHED, [None, PLAIN], [PLAIN], False, id="a-parent-gone-adds-no-flag"),
        # p dropped: its only clusters' Works were deleted with the flag; the rest follow q.
        pytest.param(ATTACHED_TO_Q, [PLAIN], [KEEP], False, id="a-parent-dropped-the-rest-follow"),
    ],
)
def test_works_preserve(
    binding: dict[str, Any], parents: list[dict[str, Any] | None], existing: list[dict[str, Any]], expected: bool
) -> None:
    assert works_preserve(binding, parents=parents, existing=existing) is expected


# --- on the hub ------------------------------------------------------------------------------


def later(seconds: float) -> str:
    return format_time(datetime.now(UTC) + timedelta(seconds=seconds))


async def create(objects: ObjectStore, obj: dict[str, Any]) -> dict[str, Any]:
    return await objects.create(objects.registry.require(obj["apiVersion"], obj["kind"]), obj)


async def get(objects: ObjectStore, api_version: str, kind: str, name: str, namespace: str | None) -> dict[str, Any] | None:
    try:
        return await objects.get(objects.registry.require(api_version, kind), namespace=namespace, name=name)
    except errors.NotFound:
        return None


async def binding_of(objects: ObjectStore, workload: str) -> dict[str, Any] | None:
    return await get(objects, WORK_API, "ResourceBinding", f"{workload}-deployment", "default")


async def work_in(objects: ObjectStore, cluster: str, workload: str) -> dict[str, Any] | None:
    return await get(objects, WORK_API, "Work", f"default-{workload}-deployment", f"gpufed-es-{cluster}")


def named_policy(name: str, workload: str, **spec: Any) -> dict[str, Any]:
    policy = propagation_policy(name, **spec)
    policy["spec"]["resourceSelectors"] = [{"apiVersion": "apps/v1", "kind": "Deployment", "name": workload}]
    return policy


def condition(obj: dict[str, Any] | None, ctype: str) -> dict[str, Any] | None:
    for cond in ((obj or {}).get("status") or {}).get("conditions") or ():
        if cond.get("type") == ctype:
            return dict(cond)
    return None


TWO_CLUSTERS = {"clusterAffinity": {"clusterNames": ["a", "b"]}}  # Duplicated: a copy in each


async def test_the_flag_reaches_every_work_and_only_deleting_the_workload_keeps_it(
    objects: ObjectStore, manager: ControllerManager
) -> None:
    await put_cluster(objects, "a", node_shape(1, gpus=8))
    await put_cluster(objects, "b", node_shape(1, gpus=8))
    await settled(manager)
    assert manager.context is not None
    last_seen: dict[str, dict[str, Any]] = {}
    deleted: dict[str, dict[str, Any]] = {}

    async def on_work(event: WatchEventType, obj: dict[str, Any], old: dict[str, Any] | None) -> None:
        namespace = str(obj["metadata"].get("namespace"))
        (deleted if event is WatchEventType.DELETED else last_seen)[namespace] = obj

    manager.context.works.add_handler(on_work)
    await create(objects, named_policy("keep", "web", placement=TWO_CLUSTERS, preserveResourcesOnDeletion=True))
    await create(objects, deployment("web", replicas=1))
    binding = await eventually(lambda: binding_of(objects, "web"), what="web's binding")
    assert binding["spec"]["preserveResourcesOnDeletion"] is True
    for cluster in ("a", "b"):

        def work_now(cluster: str = cluster) -> Awaitable[dict[str, Any] | None]:
            return work_in(objects, cluster, "web")

        work = await eventually(work_now, what=f"web's Work in {cluster}")
        assert work["spec"]["preserveResourcesOnDeletion"] is True

    # b leaves the placement: its Work first loses the flag and stays until b's agent has
    # applied that (so the agent deletes b's copy rather than releasing it), then goes.
    rt = objects.registry.require("policy.gpufed.io/v1alpha1", "PropagationPolicy")
    policy = await objects.get(rt, namespace="default", name="keep")
    policy["spec"]["placement"] = {"clusterAffinity": {"clusterNames": ["a"]}}
    await objects.update(rt, policy)

    async def cleared() -> dict[str, Any] | None:
        work = await work_in(objects, "b", "web")
        return work if work is not None and "preserveResourcesOnDeletion" not in work["spec"] else None

    await eventually(cleared, what="b's Work without the flag")
    await settled(manager)
    still_there = await cleared()
    assert still_there is not None, "deleted before b's agent applied the cleared flag"
    work = still_there
    work_rt = objects.registry.require("work.gpufed.io/v1alpha1", "Work")
    generation = work["metadata"]["generation"]
    applied = {"type": "Applied", "status": "True", "reason": "AppliedSuccessful", "message": "",
               "observedGeneration": generation, "lastTransitionTime": "2026-01-01T00:00:00Z"}
    await objects.update_status(work_rt, {**work, "status": {"conditions": [applied]}})
    await eventually(lambda: _gone(work_in(objects, "b", "web")), what="b's Work deleted")
    await settled(manager)
    assert "preserveResourcesOnDeletion" not in deleted["gpufed-es-b"]["spec"]
    assert last_seen["gpufed-es-b"]["metadata"]["generation"] > 1  # updated, then deleted
    kept = await work_in(objects, "a", "web")
    assert kept is not None and kept["spec"]["preserveResourcesOnDeletion"] is True

    # Deleting the workload deletes a's Work with the flag as it is: the agent keeps the copy.
    deployments = objects.registry.require("apps/v1", "Deployment")
    await objects.delete(deployments, namespace="default", name="web")
    await eventually(lambda: _gone(work_in(objects, "a", "web")), what="a's Work deleted")
    assert deleted["gpufed-es-a"]["spec"]["preserveResourcesOnDeletion"] is True


async def _gone(probe: Any) -> bool:
    return await probe is None


async def test_without_the_flag_works_carry_none(objects: ObjectStore, manager: ControllerManager) -> None:
    await put_cluster(objects, "a", node_shape(1, gpus=8))
    await settled(manager)
    await create(objects, named_policy("plain", "web"))
    await create(objects, deployment("web", replicas=1))
    work = await eventually(lambda: work_in(objects, "a", "web"), what="web's Work")
    binding = await binding_of(objects, "web")
    assert binding is not None and "preserveResourcesOnDeletion" not in binding["spec"]
    assert "preserveResourcesOnDeletion" not in work["spec"]
    assert "schedulePriority" not in binding["spec"]
    assert condition(binding, "SchedulePriorityResolved") is None


async def test_a_priority_class_sets_the_binding_priority(objects: ObjectStore, manager: ControllerManager) -> None:
    await put_cluster(objects, "a", node_shape(1, gpus=8))
    await settled(manager)
    await create(objects, priority_class("urgent", 1000))
    await settled(manager)
    await create(objects, named_policy(
        "first", "web", schedulePriority={"priorityClassSource": "KubePriorityClass", "priorityClassName": "urgent"},
    ))
    await create(objects, deployment("web", replicas=1))

    async def prioritised() -> dict[str, Any] | None:
        binding = await binding_of(objects, "web")
        return binding if condition(binding, "SchedulePriorityResolved") else None

    binding = await eventually(prioritised, what="web's binding with its priority")
    assert binding["spec"]["schedulePriority"] == {"priority": 1000}
    resolved = condition(binding, "SchedulePriorityResolved")
    assert resolved is not None and resolved["status"] == "True" and resolved["reason"] == "PriorityClassResolved"


async def test_an_unknown_priority_class_gives_zero_and_says_so_until_it_exists(
    objects: ObjectStore, manager: ControllerManager
) -> None:
    await put_cluster(objects, "a", node_shape(1, gpus=8))
    await settled(manager)
    await create(objects, named_policy(
        "first", "web", schedulePriority={"priorityClassSource": "KubePriorityClass", "priorityClassName": "later"},
    ))
    await create(objects, deployment("web", replicas=1))

    async def reported() -> dict[str, Any] | None:
        binding = await binding_of(objects, "web")
        found = condition(binding, "SchedulePriorityResolved")
        return binding if found and found["status"] == "False" else None

    binding = await eventually(reported, what="the unresolved priority condition")
    assert binding["spec"]["schedulePriority"] == {"priority": 0}
    assert condition(binding, "SchedulePriorityResolved")["reason"] == "PriorityClassNotFound"  # type: ignore[index]
    event_rt = objects.registry.require("v1", "Event")

    async def warned() -> list[dict[str, Any]] | None:
        events = await objects.list(event_rt, namespace="default")
        found = [e for e in events.items if e["reason"] == "SchedulePriorityUnresolved"]
        return found or None

    [event] = await eventually(warned, what="a SchedulePriorityUnresolved Event on the Deployment")
    assert event["type"] == "Warning" and event["involvedObject"]["name"] == "web" and "later" in event["message"]
    # The workload runs all the same.
    assert await eventually(lambda: work_in(objects, "a", "web"), what="web's Work")

    await create(objects, priority_class("later", 50))

    async def fixed() -> dict[str, Any] | None:
        again = await binding_of(objects, "web")
        found = condition(again, "SchedulePriorityResolved")
        return again if found and found["status"] == "True" else None

    binding = await eventually(fixed, what="the priority once the PriorityClass exists")
    assert binding["spec"]["schedulePriority"] == {"priority": 50}


async def test_with_room_for_one_the_higher_priority_binding_gets_it(
    objects: ObjectStore, manager: ControllerManager
) -> None:
    await put_cluster(objects, "a", node_shape(1, gpus=0), report_time=later(0))
    await create(objects, priority_class("batch", 10))
    await create(objects, priority_class("urgent", 1000))
    await settled(manager)

    def prioritised(name: str, workload: str, priority_class_name: str) -> dict[str, Any]:
        return named_policy(name, workload, schedulePriority={
            "priorityClassSource": "KubePriorityClass", "priorityClassName": priority_class_name,
        })

    # The low one comes first (and sorts first by name): without priorities it would win.
    await create(objects, prioritised("batch", "a-low", "batch"))
    await create(objects, deployment("a-low", replicas=1, gpus=4))

    async def waiting(workload: str) -> bool:
        scheduled = condition(await binding_of(objects, workload), "Scheduled")
        return bool(scheduled and scheduled["status"] == "False")

    await eventually(lambda: waiting("a-low"), what="a-low waiting for room")
    await create(objects, prioritised("urgent", "b-high", "urgent"))
    await create(objects, deployment("b-high", replicas=1, gpus=4))
    await eventually(lambda: waiting("b-high"), what="b-high waiting for room")
    await settled(manager)

    # Room for one 4-GPU replica appears.
    await put_cluster(objects, "a", node_shape(1, gpus=4), report_time=later(1))
    await settled(manager)
    high = await binding_of(objects, "b-high")
    low = await binding_of(objects, "a-low")
    assert high is not None and low is not None
    assert high["spec"].get("clusters") == [{"name": "a", "replicas": 1}]
    assert not low["spec"].get("clusters")
    assert condition(low, "Scheduled")["status"] == "False"  # type: ignore[index]


async def test_a_preserved_workloads_configmap_is_preserved_with_it(
    objects: ObjectStore, manager: ControllerManager
) -> None:
    await put_cluster(objects, "a", node_shape(1, gpus=8))
    await settled(manager)
    assert manager.context is not None
    deleted: dict[str, dict[str, Any]] = {}

    async def on_work(event: WatchEventType, obj: dict[str, Any], old: dict[str, Any] | None) -> None:
        if event is WatchEventType.DELETED:
            deleted[str(obj["metadata"]["name"])] = obj

    manager.context.works.add_handler(on_work)
    await create(objects, {"apiVersion": "v1", "kind": "ConfigMap",
                           "metadata": {"name": "settings", "namespace": "default"}, "data": {"k": "v"}})
    web = deployment("web", replicas=1)
    web["spec"]["template"]["spec"]["volumes"] = [{"name": "cfg", "configMap": {"name": "settings"}}]
    await create(objects, named_policy("keep", "web", propagateDeps=True, preserveResourcesOnDeletion=True))
    await create(objects, web)

    async def attached_work() -> dict[str, Any] | None:
        return await get(objects, WORK_API, "Work", "default-settings-configmap", "gpufed-es-a")

    work = await eventually(attached_work, what="the ConfigMap's Work")
    assert work["spec"]["preserveResourcesOnDeletion"] is True

    await objects.delete(objects.registry.require("apps/v1", "Deployment"), namespace="default", name="web")
    await eventually(lambda: _gone(attached_work()), what="the ConfigMap's Work deleted")

    async def seen_deleted() -> dict[str, Any] | None:
        # The store has it gone; the informer's DELETED event may come a moment later.
        return deleted.get("default-settings-configmap")

    gone = await eventually(seen_deleted, what="the Work's deletion in the informer")
    assert gone["spec"]["preserveResourcesOnDeletion"] is True
