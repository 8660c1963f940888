"""A hollow member as the agent's client sees it: nodes, workloads whose pods start at once, watches."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from controlplane.apis.bookmarks import BOOKMARK_PERIOD
from member_agent import capacity
from member_agent.informing import Informer
from member_agent.kubeapi import AlreadyExists, ApiError, Conflict, Gone, KindNotServed, NotFound
from simulator.hollow.api import HollowKubeApi
from simulator.hollow.member import SERVED, HollowMember
from simulator.hollow.nodes import hollow_profile
from simulator.scheduling.reading import node_state

pytestmark = pytest.mark.waiting

DEPLOYMENTS = "/apis/apps/v1/namespaces/ml/deployments"


def member(nodes: int = 10, *, history: int = 512, bookmark_period: float = BOOKMARK_PERIOD) -> HollowMember:
    profile = hollow_profile("h-0", nodes=nodes, gpus_per_node=8, product="NVIDIA-A100-SXM4-80GB")
    return HollowMember(profile, seed=1, history=history, bookmark_period=bookmark_period)


def deployment(name: str, replicas: int, gpus: int) -> dict[str, Any]:
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name, "labels": {"team": "a"}},
            "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}}, "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": "main", "image": "x",
                                         "resources": {"limits": {"nvidia.com/gpu": str(gpus)}}}]}}}}


async def apply(api: HollowKubeApi, body: dict[str, Any]) -> dict[str, Any]:
    name = body["metadata"]["name"]
    return await api.apply(f"{DEPLOYMENTS}/{name}", body, field_manager="test", force=True)


async def pods(api: HollowKubeApi) -> list[dict[str, Any]]:
    items, _ = await api.list_all("/api/v1/pods")
    return items


async def test_nodes_are_listed_from_one_template_with_their_gpus() -> None:
    api = HollowKubeApi(member(nodes=25))
    nodes, rv = await api.list_all("/api/v1/nodes")
    assert [n["metadata"]["name"] for n in nodes] == [f"h-0-gpu-{i}" for i in range(25)]
    assert {n["status"]["allocatable"]["nvidia.com/gpu"] for n in nodes} == {"8"}
    assert nodes[7]["metadata"]["labels"]["kubernetes.io/hostname"] == "h-0-gpu-7"
    assert (await api.get("/api/v1/nodes/h-0-gpu-24"))["metadata"]["name"] == "h-0-gpu-24"
    with pytest.raises(NotFound):
        await api.get("/api/v1/nodes/h-0-gpu-25")
    assert int(rv) >= 1
    assert (await api.get_text("/readyz")) == (200, "ok")
    assert await api.version()


def test_the_allocator_reads_each_node_as_it_would_from_the_nodes_manifest() -> None:
    cluster = member(nodes=12)
    manifests = cluster.nodes
    for index in range(manifests.count):
        read = node_state(manifests.manifest(index, resource_version="1"), manifests.inventory)
        assert cluster.allocator.nodes[read.name] == read
    first, second = cluster.allocator.nodes["h-0-gpu-1"], cluster.allocator.nodes["h-0-gpu-11"]
    # What placements change is each node's own, not shared with the template or other nodes.
    assert first.requested is not second.requested
    assert all(first.free_devices[r] is not second.free_devices[r] for r in first.free_devices)


async def test_the_agents_node_cache_shares_what_the_nodes_have_in_common() -> None:
    api = HollowKubeApi(member(nodes=5))
    informer = Informer(api, "/api/v1/nodes", name="nodes", transform=capacity.NodeTrimmer())
    task = asyncio.create_task(informer.run())
    try:
        await asyncio.wait_for(informer.synced.wait(), 10)
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    first, other = informer.objects["h-0-gpu-1"], informer.objects["h-0-gpu-3"]
    assert first["metadata"]["name"] == "h-0-gpu-1"
    assert first["status"] is other["status"] and first["spec"] is other["spec"]
    assert first["metadata"]["labels"] is other["metadata"]["labels"]


async def test_a_deployment_runs_at_once_placed_by_the_device_allocator() -> None:
    api = HollowKubeApi(member(nodes=10))
    await api.create("/api/v1/namespaces", {"metadata": {"name": "ml"}})
    with pytest.raises(AlreadyExists):
        await api.create("/api/v1/namespaces", {"metadata": {"name": "ml"}})
    live = await apply(api, deployment("train", 3, 8))
    assert live["status"]["readyReplicas"] == 3
    running = await pods(api)
    assert len(running) == 3
    assert all(p["status"]["phase"] == "Running" for p in running)
    assert len({p["spec"]["nodeName"] for p in running}) == 3  # 8 GPUs each: one node each
    assert capacity.owner_workload(capacity.trim_pod(running[0])) == {"kind": "Deployment", "name": "train"}

    bigger = await apply(api, deployment("train", 12, 8))
    assert bigger["status"]["readyReplicas"] == 10
    assert bigger["metadata"]["generation"] == 2
    pending = [p for p in await pods(api) if p["status"]["phase"] == "Pending"]
    assert len(pending) == 2
    assert "Insufficient nvidia.com/gpu" in pending[0]["status"]["conditions"][0]["message"]

    await apply(api, deployment("train", 9, 8))
    assert all(p["status"]["phase"] == "Running" for p in await pods(api))
    await api.delete(f"{DEPLOYMENTS}/train")
    assert await pods(api) == []
    with pytest.raises(NotFound):
        await api.get(f"{DEPLOYMENTS}/train")


async def test_a_replace_with_a_stale_resource_version_conflicts() -> None:
    api = HollowKubeApi(member(nodes=2))
    await api.create("/api/v1/namespaces", {"metadata": {"name": "ml"}})
    live = await apply(api, deployment("d", 1, 1))
    await apply(api, deployment("d", 2, 1))
    with pytest.raises(Conflict):
        await api.replace(f"{DEPLOYMENTS}/d", live)


async def test_a_replace_of_a_missing_object_creates_it_where_kubes_strategy_does() -> None:
    """As kube's store: a PUT of a missing Service creates it (its strategy's
    ``AllowCreateOnUpdate``), whatever resourceVersion it names; a ConfigMap's is a 404."""
    hollow = member(nodes=1)
    api = HollowKubeApi(hollow)
    await api.create("/api/v1/namespaces", {"metadata": {"name": "ml"}})
    service = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s", "resourceVersion": "7"},
               "spec": {"ports": [{"port": 80}]}}
    created = await api.replace("/api/v1/namespaces/ml/services/s", service)
    assert created["metadata"]["uid"] and created["metadata"]["resourceVersion"] != "7"
    assert (await api.get("/api/v1/namespaces/ml/services/s"))["metadata"]["uid"] == created["metadata"]["uid"]
    with pytest.raises(NotFound):
        await api.replace("/api/v1/namespaces/ml/configmaps/c", {"metadata": {"name": "c"}, "data": {}})


async def test_an_update_without_resource_version_is_refused_where_kubes_strategy_refuses_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A Lease's strategy refuses an unconditional update (kube's 422); a ConfigMap's takes it."""
    monkeypatch.setitem(SERVED, "coordination.k8s.io/v1", (("leases", "Lease", True),))
    api = HollowKubeApi(member(nodes=1))
    await api.create("/api/v1/namespaces", {"metadata": {"name": "ml"}})
    leases = "/apis/coordination.k8s.io/v1/namespaces/ml/leases"
    await api.create(leases, {"metadata": {"name": "l"}, "spec": {"holderIdentity": "a"}})
    with pytest.raises(ApiError) as refused:
        await api.replace(f"{leases}/l", {"metadata": {"name": "l"}, "spec": {"holderIdentity": "b"}})
    assert refused.value.code == 422
    assert 'leases.coordination.k8s.io "l" is invalid: metadata.resourceVersion' in str(refused.value)
    await api.create("/api/v1/namespaces/ml/configmaps", {"metadata": {"name": "c"}, "data": {"a": "1"}})
    updated = await api.replace("/api/v1/namespaces/ml/configmaps/c", {"metadata": {"name": "c"}, "data": {"a": "2"}})
    assert updated["data"] == {"a": "2"}


async def test_unserved_kinds_are_told_apart_by_discovery() -> None:
    api = HollowKubeApi(member(nodes=1))
    info = await api.resource_info("apps/v1", "Deployment")
    assert (info.plural, info.namespaced) == ("deployments", True)
    with pytest.raises(KindNotServed):
        await api.resource_info("kubeflow.org/v1", "PyTorchJob")


#: Collections a hollow member does not serve: a kind of a group it serves, a group it does not.
UNSERVED = ["/api/v1/persistentvolumes", "/apis/batch/v1/namespaces/ml/cronjobs", "/apis/kubeflow.org/v1/pytorchjobs"]
NO_RESOURCE = "the server could not find the requested resource"


@pytest.mark.parametrize("path", UNSERVED)
async def test_a_list_of_a_kind_the_member_does_not_serve_is_not_found(path: str) -> None:
    api = HollowKubeApi(member(nodes=1))
    with pytest.raises(NotFound) as listed:
        await api.list_all(path)
    assert (listed.value.code, listed.value.reason, listed.value.message) == (404, "NotFound", NO_RESOURCE)
    with pytest.raises(NotFound, match=NO_RESOURCE):
        await api.create(path, {"metadata": {"name": "x"}})


@pytest.mark.parametrize("path", UNSERVED)
async def test_a_watch_of_a_kind_the_member_does_not_serve_is_not_found(path: str) -> None:
    """kube's 404 Status, not a stream that stays open and empty until its timeout."""
    hollow = member(nodes=1)
    api = HollowKubeApi(hollow)
    with pytest.raises(NotFound) as watched:
        await asyncio.wait_for(anext(api.watch(path, resource_version="", timeout_seconds=60)), 10)
    assert (watched.value.code, watched.value.reason, watched.value.message) == (404, "NotFound", NO_RESOURCE)
    assert hollow.watches.open_watches == 0


async def test_the_agents_informer_follows_pods_and_an_expired_version_answers_410() -> None:
    hollow = member(nodes=4, history=4)
    api = HollowKubeApi(hollow)
    await api.create("/api/v1/namespaces", {"metadata": {"name": "ml"}})
    changed = asyncio.Event()
    informer = Informer(api, "/api/v1/pods", name="pods", transform=capacity.trim_pod,
                        on_change=lambda _key: changed.set())
    task = asyncio.create_task(informer.run())
    try:
        await asyncio.wait_for(informer.synced.wait(), 10)
        await apply(api, deployment("a", 2, 4))

        async def holds(n: int) -> None:
            while len(informer.objects) != n:
                changed.clear()
                await changed.wait()

        await asyncio.wait_for(holds(2), 10)
        assert all(p["status"]["phase"] == "Running" for p in informer.objects.values())

        async def watch_from_the_start() -> None:
            async for _ in api.watch("/api/v1/pods", resource_version="2", timeout_seconds=5):
                pass

        with pytest.raises(Gone):  # the history keeps 4 events
            await watch_from_the_start()
        await api.delete(f"{DEPLOYMENTS}/a")
        await asyncio.wait_for(holds(0), 10)
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def test_a_watch_that_falls_behind_is_closed_with_410() -> None:
    hollow = member(nodes=4)
    hollow.watches.queue_limit = 2
    api = HollowKubeApi(hollow)
    await api.create("/api/v1/namespaces", {"metadata": {"name": "ml"}})
    stream = api.watch("/api/v1/pods", resource_version=str(hollow.watches.revision), timeout_seconds=5)
    first = asyncio.ensure_future(anext(stream))
    await asyncio.sleep(0)  # the watch is open, its reader waits for the first event
    await apply(api, deployment("a", 4, 1))  # four pods at once: more than the watch may hold back
    assert (await first)["type"] == "ADDED"
    with pytest.raises(Gone):
        async for _ in stream:
            pass
    assert hollow.watches.open_watches == 0


async def test_a_workload_whose_pods_cannot_be_read_is_refused_as_invalid() -> None:
    api = HollowKubeApi(member(nodes=1))
    await api.create("/api/v1/namespaces", {"metadata": {"name": "ml"}})
    body = deployment("bad", 1, 1)
    body["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] = "lots"
    with pytest.raises(ApiError) as refused:
        await apply(api, body)
    assert refused.value.code == 422 and "spec.template" in refused.value.message
    assert await pods(api) == []


async def churn(api: HollowKubeApi) -> None:
    """Move the member's history on by more events than ``history=4`` keeps (none of them a Node's)."""
    await api.create("/api/v1/namespaces", {"metadata": {"name": "ml"}})
    await apply(api, deployment("a", 3, 1))


async def test_a_watch_that_asked_for_bookmarks_resumes_from_them_after_history_moved_on() -> None:
    hollow = member(nodes=2, history=4, bookmark_period=0.05)
    api = HollowKubeApi(hollow)
    start = str(hollow.watches.revision)
    stream = api.watch("/api/v1/nodes", resource_version=start, timeout_seconds=60)
    first = asyncio.ensure_future(anext(stream))
    await asyncio.sleep(0)  # the watch is open: it follows the member from ``start``
    await churn(api)
    current = str(hollow.watches.revision)
    event = await asyncio.wait_for(first, 10)
    while event["object"]["metadata"]["resourceVersion"] != current:  # one may have come amid the churn
        assert event["type"] == "BOOKMARK"  # no Node changed
        event = await asyncio.wait_for(anext(stream), 10)
    assert event == {"type": "BOOKMARK",
                     "object": {"apiVersion": "v1", "kind": "Node", "metadata": {"resourceVersion": current}}}

    with pytest.raises(Gone):  # the version the watch started from is gone from the history
        await anext(api.watch("/api/v1/nodes", resource_version=start, timeout_seconds=60))
    resumed = api.watch("/api/v1/nodes", resource_version=current, timeout_seconds=60)
    waiting = asyncio.ensure_future(anext(resumed))
    await asyncio.sleep(0)
    assert not waiting.done()  # open, and nothing to tell until the member moves on
    await api.create("/api/v1/namespaces", {"metadata": {"name": "other"}})
    moved = str(hollow.watches.revision)
    assert (await asyncio.wait_for(waiting, 10))["object"]["metadata"]["resourceVersion"] == moved


@pytest.mark.parametrize("asked", [None, "false"])
async def test_a_watch_that_did_not_ask_for_bookmarks_gets_none(asked: str | None) -> None:
    hollow = member(nodes=2, history=4, bookmark_period=0.05)
    api = HollowKubeApi(hollow)
    # Long enough for bookmarks: a watch gets none in the last 2 seconds before its timeout.
    query = {"watch": "true", "resourceVersion": str(hollow.watches.revision), "timeoutSeconds": 3}
    if asked is not None:
        query["allowWatchBookmarks"] = asked
    # The transport's own watch always asks for bookmarks, as the agent does: this is the raw stream.
    stream = api._events("/api/v1/nodes", query, timeout_seconds=3)
    events = asyncio.ensure_future(_collect(stream))
    await asyncio.sleep(0)
    await churn(api)
    assert await asyncio.wait_for(events, 10) == []  # the stream ended at its timeout, without one


async def _collect(stream: Any) -> list[dict[str, Any]]:
    return [event async for event in stream]


async def test_the_agents_node_informer_resumes_from_the_bookmark_before_its_timeout_without_relisting() -> None:
    """Nodes never change, so without bookmarks the informer's version stays at its list's while pods
    move the history past it, and each resume after a timeout is a 410 and a relist of every node."""
    hollow = member(nodes=5, history=4)  # kube's one-minute period: only the bookmark before the timeout
    api, writer = HollowKubeApi(hollow), HollowKubeApi(hollow)
    informer = Informer(api, "/api/v1/nodes", name="nodes", transform=capacity.NodeTrimmer(), watch_timeout_seconds=3)
    task = asyncio.create_task(informer.run())
    try:
        await asyncio.wait_for(informer.synced.wait(), 10)
        await churn(writer)

        async def resumed() -> None:  # the list, the first watch and the one after its timeout: open
            while api.requests < 3 or hollow.watches.open_watches != 1:  # noqa: ASYNC110 (nothing signals a watch)
                await asyncio.sleep(0.05)

        await asyncio.wait_for(resumed(), 20)
        assert informer.relists == 1
        assert informer.resource_version == str(hollow.watches.revision)
        assert len(informer.objects) == 5
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


CONFIGMAPS = "/api/v1/namespaces/ml/configmaps"


@pytest.mark.parametrize(("path", "query"), [
    (CONFIGMAPS, {"fieldSelector": "metadata.name=a"}),
    ("/api/v1/watch/namespaces/ml/configmaps/a", {}),  # kube's deprecated path of one object
    ("/api/v1/watch/namespaces/ml/configmaps/a", {"fieldSelector": "metadata.name==a"}),
])
async def test_a_watch_of_one_named_object_gets_that_objects_events_only(path: str, query: dict[str, str]) -> None:
    hollow = member(nodes=1)
    api = HollowKubeApi(hollow)
    await api.create("/api/v1/namespaces", {"metadata": {"name": "ml"}})
    stream = api.watch(path, resource_version=str(hollow.watches.revision), query=query, timeout_seconds=60)
    for name in ("b", "a", "c"):
        await api.create(CONFIGMAPS, {"metadata": {"name": name}, "data": {"k": name}})
    for name in ("b", "a"):
        await api.delete(f"{CONFIGMAPS}/{name}")
    events = [await asyncio.wait_for(anext(stream), 10) for _ in range(2)]
    assert [(e["type"], e["object"]["metadata"]["name"]) for e in events] == [("ADDED", "a"), ("DELETED", "a")]
    await stream.aclose()  # type: ignore[attr-defined]
    listed = await api.get(CONFIGMAPS, query={"fieldSelector": "metadata.name!=b"})
    assert [i["metadata"]["name"] for i in listed["items"]] == ["c"]


@pytest.mark.parametrize(("path", "selector", "message"), [
    ("/api/v1/watch/namespaces/ml/configmaps/a", "metadata.name=b", "fieldSelector metadata.name doesn't match requested name"),
    ("/api/v1/watch/namespaces/ml/configmaps/a", "metadata.name!=a", "fieldSelector metadata.name doesn't match requested name"),
    # A kind without field labels of its own (kube's message), and a Pod's (which has them).
    (CONFIGMAPS, "data.k=a", '"data.k" is not a known field selector: only "metadata.name", "metadata.namespace"'),
    ("/api/v1/pods", "spec.containers=a", "field label not supported: spec.containers"),
    ("/api/v1/nodes", "metadata.namespace=a", "field label not supported: metadata.namespace"),
    (CONFIGMAPS, "metadata.name", "invalid selector: 'metadata.name'; can't understand 'metadata.name'"),
])
async def test_a_watch_with_a_field_selector_it_cannot_serve_is_kubes_400(path: str, selector: str, message: str) -> None:
    api = HollowKubeApi(member(nodes=1))
    with pytest.raises(ApiError) as caught:
        await anext(api.watch(path, resource_version="", query={"fieldSelector": selector}, timeout_seconds=60))
    assert (caught.value.code, caught.value.reason, caught.value.message) == (400, "BadRequest", message)


async def test_label_and_field_selectors_are_parsed_as_the_hub_parses_them() -> None:
    """Set-based label requirements and escaped field values select as on the hub; a label
    selector that does not parse is kube's 400 in its words, for a list and a watch alike."""
    hollow = member(nodes=1)
    api = HollowKubeApi(hollow)
    await api.create("/api/v1/namespaces", {"metadata": {"name": "ml"}})
    since = str(hollow.watches.revision)
    for name, tier in (("a", "x"), ("b", "y"), ("c", "z")):
        await api.create(CONFIGMAPS, {"metadata": {"name": name, "labels": {"tier": tier}}})

    async def names(query: dict[str, str]) -> list[str]:
        return [i["metadata"]["name"] for i in (await api.get(CONFIGMAPS, query=query))["items"]]

    assert await names({"labelSelector": "tier in (x,z)"}) == ["a", "c"]
    assert await names({"labelSelector": "tier notin (x),tier"}) == ["b", "c"]
    assert await names({"fieldSelector": r"metadata.name!=\a"}) == ["b", "c"]
    stream = api.watch(CONFIGMAPS, resource_version=since, query={"labelSelector": "tier notin (x,y)"},
                       timeout_seconds=60)
    first = await asyncio.wait_for(anext(stream), 10)
    assert first["object"]["metadata"]["name"] == "c"
    await stream.aclose()  # type: ignore[attr-defined]
    message = 'unable to parse requirement: found end of input in selector "tier in (x"'
    with pytest.raises(ApiError) as listing:
        await api.get(CONFIGMAPS, query={"labelSelector": "tier in (x"})
    with pytest.raises(ApiError) as watching:
        await anext(api.watch(CONFIGMAPS, resource_version="", query={"labelSelector": "tier in (x"},
                              timeout_seconds=60))
    for caught in (listing, watching):
        assert (caught.value.code, caught.value.reason, caught.value.message) == (400, "BadRequest", message)


async def test_pods_are_selected_by_kubes_pod_field_labels() -> None:
    """A kubelet lists and watches its own pods (``spec.nodeName=<node>``), controllers the running ones."""
    hollow = member(nodes=10)
    api = HollowKubeApi(hollow)
    await api.create("/api/v1/namespaces", {"metadata": {"name": "ml"}})
    since = str(hollow.watches.revision)
    await apply(api, deployment("train", 12, 8))
    placed = [p for p in await pods(api) if p["spec"].get("nodeName")]
    node = placed[0]["spec"]["nodeName"]
    on_node = await api.get("/api/v1/pods", query={"fieldSelector": f"spec.nodeName={node}"})
    assert [p["metadata"]["name"] for p in on_node["items"]] == [placed[0]["metadata"]["name"]]

    async def names(selector: str) -> set[str]:
        listed = await api.get("/api/v1/namespaces/ml/pods", query={"fieldSelector": selector})
        return {p["metadata"]["name"] for p in listed["items"]}

    running, pending = await names("status.phase=Running"), await names("status.phase==Pending")
    assert (len(running), len(pending)) == (10, 2)
    assert await names("spec.nodeName=") == pending  # an unscheduled pod's nodeName is ""
    assert await names("status.phase!=Running,metadata.namespace=ml") == pending
    assert await names("spec.hostNetwork=false") == running | pending  # unset is "false", as kube
    stream = api.watch("/api/v1/pods", resource_version=since, timeout_seconds=60,
                       query={"fieldSelector": f"spec.nodeName={node}"})
    first = await asyncio.wait_for(anext(stream), 10)
    assert (first["type"], first["object"]["spec"]["nodeName"]) == ("ADDED", node)
    await stream.aclose()  # type: ignore[attr-defined]
