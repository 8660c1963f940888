"""Kueue's Workload webhook (kubernetes-sigs/kueue ``pkg/webhooks/workload_webhook.go``), checked
once the CRD's schema and rules took the write, on the object and on its status, at both
versions: ``pods`` requests, ``minCount`` on one pod set only, reclaimable and assigned pod sets
that exist, a check's pod set updates, and what an update keeps while quota is reserved."""

from __future__ import annotations

from typing import Any

import pytest
from aiohttp.test_utils import TestClient

from tests.apiserver.test_kueue_crd_rules import GROUP, refused, valid, webhook_causes

Client = TestClient[Any, Any]
Obj = dict[str, Any]
VERSIONS = pytest.mark.parametrize("version", ["v1beta1", "v1beta2"])
#: Kueue's Workload webhook: its refusals are its 403s (``admission webhook "vworkload.kb.io"
#: denied the request: ...``), of the object and of its status, as controller-runtime answers them.
WEBHOOK = "vworkload.kb.io"


def _url(version: str) -> str:
    return f"/apis/{GROUP}/{version}/namespaces/default/workloads"


def _pod_set(name: str, count: int, **fields: Any) -> Obj:
    container = {"name": "c", "image": "x", "resources": {"requests": {"cpu": "1"}}}
    return {"name": name, "count": count, "template": {"spec": {"containers": [container]}}, **fields}


def _workload(version: str, *pod_sets: Obj) -> Obj:
    obj = valid("Workload", version)
    obj["spec"]["podSets"] = list(pod_sets)
    return obj


async def _created(hub: Client, obj: Obj) -> Obj:
    answer = await hub.post(_url(obj["apiVersion"].split("/")[1]), json=obj)
    assert answer.status == 201, await answer.text()
    created: Obj = await answer.json()
    return created


async def _status_causes(hub: Client, obj: Obj, status: Obj) -> list[str]:
    version = obj["apiVersion"].split("/")[1]
    answer = await hub.put(
        f"{_url(version)}/{obj['metadata']['name']}/status", json={**obj, "status": status}
    )
    body = await answer.json()
    if answer.status == 200:
        return []
    return webhook_causes(body, WEBHOOK)


RESERVED = {
    "type": "QuotaReserved",
    "status": "True",
    "reason": "QuotaReserved",
    "message": "m",
    "lastTransitionTime": "2026-01-01T00:00:00Z",
}


def _ready_check(*pod_set_updates: Obj) -> Obj:
    """An admission check's state, Ready, with ``pod_set_updates``."""
    return {
        "name": "prov",
        "state": "Ready",
        "message": "",
        "lastTransitionTime": "2026-01-01T00:00:00Z",
        "podSetUpdates": list(pod_set_updates),
    }


def _admission(name: str = "main", cq: str = "cq") -> Obj:
    return {
        "clusterQueue": cq,
        "podSetAssignments": [
            {"name": name, "count": 2, "flavors": {"cpu": "f"}, "resourceUsage": {"cpu": "2"}}
        ],
    }


@VERSIONS
async def test_pods_requests_and_two_min_counts_are_refused_in_kueues_words(
    hub: Client, version: str
) -> None:
    pods = _pod_set("main", 2, minCount=1)
    pods["template"]["spec"]["containers"][0]["resources"]["requests"]["pods"] = "1"
    pods["template"]["spec"]["initContainers"] = [
        {"name": "i", "image": "x", "resources": {"requests": {"pods": "1"}}}
    ]
    obj = _workload(version, pods, _pod_set("other", 2, minCount=1))
    requests = 'resources.requests[pods]: Invalid value: "pods": the key is reserved for internal kueue use'
    assert await refused(hub, obj, webhook=WEBHOOK) == [
        f"spec.podSets[0].template.spec.initContainers[0].{requests}",
        f"spec.podSets[0].template.spec.containers[0].{requests}",
        "spec.podSets: Invalid value: 2: at most one podSet can use minCount",
    ]


@VERSIONS
async def test_reclaimable_pods_and_check_updates_name_pod_sets_of_the_workload(
    hub: Client, version: str
) -> None:
    obj = await _created(hub, _workload(version, _pod_set("main", 2)))
    reclaimable = [{"name": "main", "count": 3}, {"name": "zz", "count": 1}]
    assert await _status_causes(hub, obj, {"reclaimablePods": reclaimable}) == [
        "status.reclaimablePods[main].count: Invalid value: 3: should be less or equal to 2",
        'status.reclaimablePods[zz].name: Unsupported value: "zz": supported values: "main"',
    ]
    check = _ready_check({"name": "nope", "nodeSelector": {"a/b/c": "x"}})
    causes = await _status_causes(hub, obj, {"admissionChecks": [check]})
    assert (
        causes[0]
        == 'status.admissionChecks[0].podSetUpdates[0].name: Unsupported value: "nope": supported values: "main"'
    )
    assert causes[1].startswith(
        'status.admissionChecks[0].podSetUpdates[0].nodeSelector: Invalid value: "a/b/c": '
    )
    assert await _status_causes(hub, obj, {"reclaimablePods": [{"name": "main", "count": 2}]}) == []


@VERSIONS
async def test_a_workload_holding_quota_keeps_its_pod_sets_admission_and_reclaimable_pods(
    hub: Client, version: str
) -> None:
    obj = await _created(hub, _workload(version, _pod_set("main", 2)))
    assert await _status_causes(hub, obj, {"admission": _admission("gone"), "conditions": [RESERVED]}) == [
        'status.admission.podSetAssignments[0].name: Not found: "gone"'
    ]
    status = {
        "admission": _admission(),
        "conditions": [RESERVED],
        "reclaimablePods": [{"name": "main", "count": 1}],
    }
    assert await _status_causes(hub, obj, status) == []
    reserved = await (await hub.get(f"{_url(version)}/x")).json()

    grown = {**reserved, "spec": {**reserved["spec"], "podSets": [_pod_set("main", 3)]}}
    answer = await hub.put(f"{_url(version)}/x", json=grown)
    [cause_text] = webhook_causes(await answer.json(), WEBHOOK)
    assert cause_text.startswith("spec.podSets: Invalid value: ") and cause_text.endswith(
        ": field is immutable"
    )

    moved = {**reserved["status"], "admission": _admission(cq="other")}
    [cause_text] = await _status_causes(hub, reserved, moved)
    assert cause_text.startswith("status.admission: Invalid value: ") and cause_text.endswith(
        ": field is immutable"
    )
    assert await _status_causes(
        hub, reserved, {**reserved["status"], "reclaimablePods": [{"name": "main", "count": 0}]}
    ) == ["status.reclaimablePods[main].count: Invalid value: 0: cannot be less then 1"]
    assert await _status_causes(hub, reserved, {**reserved["status"], "reclaimablePods": []}) == [
        "status.reclaimablePods[main]: Required value: cannot be removed"
    ]
    # Released (admission and reservation gone together), the Workload may change again.
    released = {"conditions": [{**RESERVED, "status": "False", "reason": "Pending"}]}
    assert await _status_causes(hub, reserved, released) == []
    current = await (await hub.get(f"{_url(version)}/x")).json()
    answer = await hub.put(
        f"{_url(version)}/x", json={**current, "spec": {**current["spec"], "podSets": [_pod_set("main", 3)]}}
    )
    assert answer.status == 200, await answer.text()


@VERSIONS
async def test_quantities_compare_by_value_as_kubes_semantic_equality(hub: Client, version: str) -> None:
    """``Semantic.DeepEqual``: ``1000m`` is ``1`` in a pod set's requests and an admission's usage,
    so a labels-only update of a Workload holding quota is taken."""
    obj = await _created(hub, _workload(version, _pod_set("main", 2)))
    status = {"admission": _admission(), "conditions": [RESERVED]}
    assert await _status_causes(hub, obj, status) == []
    reserved = await (await hub.get(f"{_url(version)}/x")).json()
    respelled = _pod_set("main", 2)
    respelled["template"]["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "1000m"
    relabelled = {
        **reserved,
        "metadata": {**reserved["metadata"], "labels": {"team": "a"}},
        "spec": {**reserved["spec"], "podSets": [respelled]},
    }
    answer = await hub.put(f"{_url(version)}/x", json=relabelled)
    assert answer.status == 200, await answer.text()
    current = await answer.json()
    usage = _admission()
    usage["podSetAssignments"][0]["resourceUsage"] = {"cpu": "2000m"}
    assert await _status_causes(hub, current, {**current["status"], "admission": usage}) == []
    current = await (await hub.get(f"{_url(version)}/x")).json()
    # A changed value is still refused.
    respelled["template"]["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "1001m"
    answer = await hub.put(
        f"{_url(version)}/x", json={**current, "spec": {**current["spec"], "podSets": [respelled]}}
    )
    [cause_text] = webhook_causes(await answer.json(), WEBHOOK)
    assert cause_text.endswith(": field is immutable")


@VERSIONS
async def test_resource_usage_divides_by_the_assignments_count(hub: Client, version: str) -> None:
    obj = await _created(hub, _workload(version, _pod_set("main", 2)))
    admission = _admission()
    admission["podSetAssignments"][0]["resourceUsage"] = {"memory": "3", "cpu": "3m", "nvidia.com/gpu": "4"}
    assert await _status_causes(hub, obj, {"admission": admission, "conditions": [RESERVED]}) == [
        'status.admission.podSetAssignments[0].resourceUsage[cpu]: Invalid value: "3m": is not a multiple of 2',
        'status.admission.podSetAssignments[0].resourceUsage[memory]: Invalid value: "3": is not a multiple of 2',
    ]
    # Without quota reserved the admission is not checked.
    assert await _status_causes(hub, obj, {"admission": admission}) == []


@VERSIONS
async def test_a_ready_checks_pod_set_updates_are_kept(hub: Client, version: str) -> None:
    obj = await _created(hub, _workload(version, _pod_set("main", 2)))
    check = _ready_check({"name": "main", "labels": {"a": "b"}})
    assert await _status_causes(hub, obj, {"admissionChecks": [check]}) == []
    ready = await (await hub.get(f"{_url(version)}/x")).json()
    changed = {**check, "podSetUpdates": [{"name": "main", "labels": {"a": "c"}}]}
    [cause_text] = await _status_causes(hub, ready, {"admissionChecks": [changed]})
    assert cause_text.startswith("status.admissionChecks[0].podSetUpdates: Invalid value: ")
    assert cause_text.endswith(": field is immutable")
    # Back to Pending, the updates may change.
    assert await _status_causes(hub, ready, {"admissionChecks": [{**changed, "state": "Pending"}]}) == []
    # Their annotations are kube's (``ValidateAnnotations``), as their labels.
    annotated = {
        **check,
        "state": "Pending",
        "podSetUpdates": [{"name": "main", "annotations": {"a b": "x"}}],
    }
    pending = await (await hub.get(f"{_url(version)}/x")).json()
    [cause_text] = await _status_causes(hub, pending, {"admissionChecks": [annotated]})
    assert cause_text.startswith(
        'status.admissionChecks[0].podSetUpdates[0].annotations: Invalid value: "a b": '
    )
