"""Kueue's visibility API on a real hub (real etcd, HTTPS, the admission controller running):
the pending workloads of a ClusterQueue and of a LocalQueue in the admission order, Kueue's
limit/offset, its 404s and 400, discovery as Kueue's server lists it, and RBAC on the
``pendingworkloads`` subresources (a namespaced Role reads its namespace's only)."""

from __future__ import annotations

import json
from typing import Any

import aiohttp
import pytest

from controlplane.apiserver import errors
from controlplane.apiserver.visibility import options
from controlplane.hub import Hub

from ..test_real_clients import kubectl, needs_kubectl
from .rbac.test_rbac_hub import binding, user_token
from .realhub import Client, eventually

KUEUE = "/apis/kueue.x-k8s.io/v1beta1"
VISIBILITY = "/apis/visibility.kueue.x-k8s.io"
GPU = "nvidia.com/gpu"
RBAC = "/apis/rbac.authorization.k8s.io/v1"


def kueue(kind: str, name: str, namespace: str | None = None, **body: Any) -> dict[str, Any]:
    meta = {"name": name, **({"namespace": namespace} if namespace else {})}
    return {"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": kind, "metadata": meta, **body}


def workload(name: str, namespace: str, priority: int) -> dict[str, Any]:
    template = {"spec": {"containers": [{"name": "c", "resources": {"requests": {GPU: "1"}}}]}}
    return kueue("Workload", name, namespace, spec={
        "queueName": "lq", "priority": priority, "podSets": [{"name": "main", "count": 1, "template": template}]})


async def create(admin: Client, path: str, obj: dict[str, Any]) -> None:
    status, body = await admin("POST", path, obj)
    assert status == 201, body


async def queue_up(admin: Client) -> None:
    """One ClusterQueue with room for one GPU behind a LocalQueue ``lq`` in team-a and team-b; the
    urgent Workload takes the GPU, five more wait."""
    for namespace in ("team-a", "team-b"):
        await create(admin, "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
        await create(admin, f"{KUEUE}/namespaces/{namespace}/localqueues",
                     kueue("LocalQueue", "lq", namespace, spec={"clusterQueue": "fleet"}))
    await create(admin, f"{KUEUE}/resourceflavors", kueue("ResourceFlavor", "onprem"))
    await create(admin, f"{KUEUE}/clusterqueues", kueue("ClusterQueue", "fleet", spec={
        "namespaceSelector": {}, "resourceGroups": [{"coveredResources": [GPU], "flavors": [
            {"name": "onprem", "resources": [{"name": GPU, "nominalQuota": 1}]}]}]}))
    await create(admin, f"{KUEUE}/namespaces/team-a/workloads", workload("urgent", "team-a", 100))

    async def admitted() -> bool:
        _, wl = await admin("GET", f"{KUEUE}/namespaces/team-a/workloads/urgent")
        return bool((wl.get("status") or {}).get("admission"))

    await eventually(admitted)
    # Created in this order: at equal priority a-high is older than b-high (or, in the same
    # second, first by namespace), as is b-mid than b-next (or first by name).
    for name, namespace, priority in (("a-low", "team-a", 1), ("a-high", "team-a", 10), ("b-high", "team-b", 10),
                                      ("b-mid", "team-b", 5), ("b-next", "team-b", 5)):
        await create(admin, f"{KUEUE}/namespaces/{namespace}/workloads", workload(name, namespace, priority))


def positions(summary: dict[str, Any]) -> list[tuple[str, str, int, int, int]]:
    return [(i["metadata"]["namespace"], i["metadata"]["name"], i["priority"], i["positionInClusterQueue"],
             i["positionInLocalQueue"]) for i in summary["items"]]


IN_LINE = [
    ("team-a", "a-high", 10, 0, 0), ("team-b", "b-high", 10, 1, 0), ("team-b", "b-mid", 5, 2, 1),
    ("team-b", "b-next", 5, 3, 2), ("team-a", "a-low", 1, 4, 1),
]


async def test_pending_workloads_in_admission_order_with_kueues_paging_and_errors(admin: Client) -> None:
    await queue_up(admin)
    status, summary = await admin("GET", f"{VISIBILITY}/v1beta2/clusterqueues/fleet/pendingworkloads")
    assert status == 200, summary
    assert (summary["kind"], summary["apiVersion"]) == ("PendingWorkloadsSummary", "visibility.kueue.x-k8s.io/v1beta2")
    assert positions(summary) == IN_LINE  # the admitted one is not pending
    assert summary["items"][0]["localQueueName"] == "lq"
    assert set(summary["items"][0]["metadata"]) == {"name", "namespace", "creationTimestamp"}

    _, page = await admin("GET", f"{VISIBILITY}/v1beta1/clusterqueues/fleet/pendingworkloads?limit=2&offset=2")
    assert (page["apiVersion"], positions(page)) == ("visibility.kueue.x-k8s.io/v1beta1", IN_LINE[2:4])
    _, local = await admin("GET", f"{VISIBILITY}/v1beta2/namespaces/team-b/localqueues/lq/pendingworkloads")
    assert positions(local) == [p for p in IN_LINE if p[0] == "team-b"]
    _, local = await admin("GET", f"{VISIBILITY}/v1beta2/namespaces/team-b/localqueues/lq/pendingworkloads?limit=1&offset=1")
    assert positions(local) == [IN_LINE[2]]
    _, none = await admin("GET", f"{VISIBILITY}/v1beta2/clusterqueues/fleet/pendingworkloads?limit=-1")
    assert none["items"] == []

    status, missing = await admin("GET", f"{VISIBILITY}/v1beta2/clusterqueues/nope/pendingworkloads")
    assert (status, missing["reason"], missing["message"]) == (
        404, "NotFound", 'clusterqueue.visibility.kueue.x-k8s.io "nope" not found')
    assert missing["details"] == {"name": "nope", "group": "visibility.kueue.x-k8s.io", "kind": "clusterqueue"}
    status, missing = await admin("GET", f"{VISIBILITY}/v1beta2/namespaces/team-a/localqueues/nope/pendingworkloads")
    assert (status, missing["message"]) == (404, 'localqueue.visibility.kueue.x-k8s.io "nope" not found')
    status, bad = await admin("GET", f"{VISIBILITY}/v1beta2/clusterqueues/fleet/pendingworkloads?limit=ten")
    assert (status, bad["reason"], bad["message"]) == (400, "BadRequest", 'strconv.ParseInt: parsing "ten": invalid syntax')
    status, _ = await admin("DELETE", f"{VISIBILITY}/v1beta2/clusterqueues/fleet/pendingworkloads")
    assert status == 405

    # kube's library takes a summary (Items, but ObjectMeta) for a list and for no list: both 406.
    for kind, message in (
        ("PartialObjectMetadata", "you requested PartialObjectMetadata, but the requested object is a list "
                                  "(*v1beta2.PendingWorkloadsSummary)"),
        ("PartialObjectMetadataList", "you requested PartialObjectMetadataList, but the requested object is not "
                                      "a list (*v1beta2.PendingWorkloadsSummary)"),
    ):
        async with admin.session.get(
            f"{admin.hub.url}{VISIBILITY}/v1beta2/clusterqueues/fleet/pendingworkloads",
            headers={"Authorization": f"Bearer {admin.token}", "Accept": f"application/json;as={kind};g=meta.k8s.io;v=v1"},
        ) as refused:
            assert (refused.status, (await refused.json())["message"]) == (406, message)


async def test_a_pods_ready_timeout_sends_a_workload_behind_those_created_before_its_eviction(admin: Client) -> None:
    """Kueue's default ``requeuingStrategy.timestamp: Eviction``: the visibility API and the
    admission cycle count a Workload evicted by the PodsReady timeout from its eviction."""
    await queue_up(admin)
    path = f"{KUEUE}/namespaces/team-a/workloads/a-high"

    async def evicted_by_timeout() -> bool:
        _, wl = await admin("GET", path)
        others = [c for c in (wl.get("status") or {}).get("conditions") or [] if c["type"] != "Evicted"]
        wl.setdefault("status", {})["conditions"] = [*others, {
            "type": "Evicted", "status": "True", "reason": "PodsReadyTimeout", "message": "Exceeded the PodsReady timeout",
            "lastTransitionTime": "2099-01-01T00:00:00Z"}]  # after every other Workload's creation
        status, _ = await admin("PUT", f"{path}/status", wl)
        return status == 200

    await eventually(evicted_by_timeout)
    _, summary = await admin("GET", f"{VISIBILITY}/v1beta2/clusterqueues/fleet/pendingworkloads")
    assert [p[1] for p in positions(summary)] == ["b-high", "a-high", "b-mid", "b-next", "a-low"]

    # The GPU frees: the head of the line gets it, not the older Workload that timed out.
    status, _ = await admin("DELETE", f"{KUEUE}/namespaces/team-a/workloads/urgent")
    assert status == 200

    async def b_high_admitted() -> bool:
        _, wl = await admin("GET", f"{KUEUE}/namespaces/team-b/workloads/b-high")
        return bool((wl.get("status") or {}).get("admission"))

    await eventually(b_high_admitted)
    _, a_high = await admin("GET", path)
    assert not (a_high.get("status") or {}).get("admission")


async def test_discovery_lists_the_group_as_kueues_server_does(admin: Client) -> None:
    _, groups = await admin("GET", "/apis")
    group = next(g for g in groups["groups"] if g["name"] == "visibility.kueue.x-k8s.io")
    assert [v["version"] for v in group["versions"]] == ["v1beta2", "v1beta1"]
    assert group["preferredVersion"]["version"] == "v1beta2"
    _, listed = await admin("GET", f"{VISIBILITY}/v1beta1")
    assert [(r["name"], r["namespaced"], r["kind"], r["verbs"]) for r in listed["resources"]] == [
        ("clusterqueues", False, "PendingWorkloadsSummary", []),
        ("clusterqueues/pendingworkloads", False, "PendingWorkloadsSummary", ["get"]),
        ("localqueues", True, "PendingWorkloadsSummary", []),
        ("localqueues/pendingworkloads", True, "PendingWorkloadsSummary", ["get"]),
    ]
    assert listed["resources"][0]["singularName"] == "clusterqueue"
    status, _ = await admin("GET", f"{VISIBILITY}/v1beta2/clusterqueues")
    assert status == 404  # carries the subresource only, as Kueue's
    # The hub's OpenAPI has the two reads and their answer's schema, as Kueue's server publishes them.
    _, document = await admin("GET", "/openapi/v3/apis/visibility.kueue.x-k8s.io/v1beta2")
    assert sorted(document["paths"]) == [
        f"{VISIBILITY}/v1beta2/clusterqueues/{{name}}/pendingworkloads",
        f"{VISIBILITY}/v1beta2/namespaces/{{namespace}}/localqueues/{{name}}/pendingworkloads",
    ]
    assert "io.k8s.kueue.visibility.v1beta2.PendingWorkloadsSummary" in document["components"]["schemas"]


async def test_a_namespaced_role_reads_its_local_queue_and_nothing_else(
    hub: Hub, session: aiohttp.ClientSession, admin: Client
) -> None:
    await queue_up(admin)
    role = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
            "metadata": {"name": "queue-watcher", "namespace": "team-b"},
            "rules": [{"apiGroups": ["visibility.kueue.x-k8s.io"], "resources": ["localqueues/pendingworkloads"],
                       "verbs": ["get"]}]}
    await create(admin, f"{RBAC}/namespaces/team-b/roles", role)
    await create(admin, f"{RBAC}/namespaces/team-b/rolebindings", binding(
        "queue-watcher", "team-b", "Role", "queue-watcher", [{"kind": "User", "name": "bob"}]))
    bob = Client(session, hub, await user_token(hub, "bob"))
    mine = f"{VISIBILITY}/v1beta2/namespaces/team-b/localqueues/lq/pendingworkloads"

    async def allowed() -> bool:
        return (await bob("GET", mine))[0] == 200

    await eventually(allowed)
    _, local = await bob("GET", mine)
    assert positions(local) == [p for p in IN_LINE if p[0] == "team-b"]
    status, denied = await bob("GET", f"{VISIBILITY}/v1beta2/namespaces/team-a/localqueues/lq/pendingworkloads")
    assert (status, denied["reason"]) == (403, "Forbidden")
    assert ('User "bob" cannot get resource "localqueues/pendingworkloads" in API group "visibility.kueue.x-k8s.io" '
            'in the namespace "team-a"') in denied["message"]
    status, denied = await bob("GET", f"{VISIBILITY}/v1beta2/clusterqueues/fleet/pendingworkloads")
    assert (status, denied["reason"]) == (403, "Forbidden")

    # The default view role, bound in team-a only, grants team-a's LocalQueue but no ClusterQueue.
    await create(admin, f"{RBAC}/namespaces/team-a/rolebindings", binding(
        "carol-view", "team-a", "ClusterRole", "view", [{"kind": "User", "name": "carol"}]))
    carol = Client(session, hub, await user_token(hub, "carol"))

    async def viewing() -> bool:
        return (await carol("GET", f"{VISIBILITY}/v1beta1/namespaces/team-a/localqueues/lq/pendingworkloads"))[0] == 200

    await eventually(viewing)
    assert (await carol("GET", f"{VISIBILITY}/v1beta2/clusterqueues/fleet/pendingworkloads"))[0] == 403


@needs_kubectl
async def test_kubectl_reads_pending_workloads_and_still_finds_kueues_clusterqueues(hub: Hub, admin: Client) -> None:
    await queue_up(admin)
    code, out, err = await kubectl(
        hub.kubeconfig_path, "get", "--raw", f"{VISIBILITY}/v1beta2/namespaces/team-a/localqueues/lq/pendingworkloads?limit=10&offset=0")
    assert code == 0, err
    assert positions(json.loads(out)) == [p for p in IN_LINE if p[0] == "team-a"]
    # The visibility group's clusterqueues carry no verbs: kubectl still finds Kueue's kind.
    code, out, err = await kubectl(hub.kubeconfig_path, "get", "clusterqueues")
    assert code == 0, err
    header, row = out.splitlines()[:2]
    assert (header.split()[:2], row.split()[0]) == (["NAME", "COHORT"], "fleet")  # Kueue's columns


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ({}, (1000, 0)),
        ({"limit": "0", "offset": "0"}, (1000, 0)),  # Kueue's defaulting: a zero limit is the default
        ({"limit": " +5 ", "offset": "-2"}, (5, -2)),  # bounded to 0 when the page is cut
        ({"limit": "9223372036854775807"}, (2**63 - 1, 0)),
    ],
)
def test_limit_and_offset_read_as_kueues_parameter_codec(query: dict[str, str], expected: tuple[int, int]) -> None:
    assert options(query) == expected


@pytest.mark.parametrize(
    ("query", "message"),
    [
        ({"limit": "1.5"}, 'strconv.ParseInt: parsing "1.5": invalid syntax'),
        ({"offset": ""}, 'strconv.ParseInt: parsing "": invalid syntax'),
        ({"limit": "9223372036854775808"}, 'strconv.ParseInt: parsing "9223372036854775808": value out of range'),
    ],
)
def test_a_parameter_that_is_no_integer_is_a_bad_request(query: dict[str, str], message: str) -> None:
    with pytest.raises(errors.BadRequest) as refused:
        options(query)
    assert refused.value.message == message
