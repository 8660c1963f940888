"""A v1beta2 Workload is checked by v1beta2's own CRD rules, on its v1beta2 form (the refusal names
v1beta2's fields), and a v1beta1 one by v1beta1's; written in one version it reads the same in the
other and back (Kueue's CRD YAML at 01ed66fd, ``tests/data/kueue_crd_fields.txt``)."""

from __future__ import annotations

from typing import Any

import pytest
from aiohttp.test_utils import TestClient

from tests.apiserver.test_kueue_crd_rules import GROUP, POD_PRIORITY_REF, refused, valid

Client = TestClient[Any, Any]
Obj = dict[str, Any]


def _url(version: str) -> str:
    return f"/apis/{GROUP}/{version}/namespaces/default/workloads"


async def _status_write(hub: Client, version: str, status: Obj) -> tuple[int, list[str]]:
    """Create a Workload at ``version`` and write ``status``: the answer's code and causes."""
    created = await hub.post(_url(version), json=valid("Workload", version))
    assert created.status == 201, await created.text()
    answer = await hub.put(f"{_url(version)}/x/status", json={**await created.json(), "status": status})
    body = await answer.json()
    causes = [f"{c['field']}: {c['message']}" for c in (body.get("details") or {}).get("causes", [])]
    return answer.status, causes


@pytest.mark.parametrize(
    ("spec", "cause"),
    [
        (
            {"priorityClassRef": {"group": "kueue.x-k8s.io", "kind": "WorkloadPriorityClass"}},
            "spec.priorityClassRef.name: Required value",
        ),
        (
            {"priorityClassRef": {**POD_PRIORITY_REF, "name": "Low"}},
            'spec.priorityClassRef.name: Invalid value: "Low": spec.priorityClassRef.name in body should match '
            "'^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$'",
        ),
        (
            {"podSets": [{"template": {}, "topologyRequest": {"required": "r" * 64}}]},
            "spec.podSets[0].topologyRequest.required: Too long: may not be more than 63 bytes",
        ),
        (
            {"podSets": [{"template": {}, "topologyRequest": {"podIndexLabel": "l" * 318}}]},
            "spec.podSets[0].topologyRequest.podIndexLabel: Too long: may not be more than 317 bytes",
        ),
    ],
)
async def test_a_v1beta2_spec_is_refused_at_v1beta2s_paths(hub: Client, spec: Obj, cause: str) -> None:
    obj = valid("Workload", "v1beta2")
    obj["spec"].update(spec)
    assert await refused(hub, obj) == [cause]


@pytest.mark.parametrize(
    ("status", "cause"),
    [
        (
            {"resourceRequests": [{"resources": {"cpu": "1"}}]},
            "status.resourceRequests[0].name: Required value",
        ),
        (
            {"nominatedClusterNames": ["w" * 257]},
            "status.nominatedClusterNames[0]: Too long: may not be more than 256 bytes",
        ),
        (
            {
                "admissionChecks": [
                    {
                        "name": "",
                        "state": "Pending",
                        "message": "",
                        "lastTransitionTime": "2026-01-01T00:00:00Z",
                    }
                ]
            },
            'status.admissionChecks[0].name: Invalid value: "": status.admissionChecks[0].name in body should be at least 1 chars long',
        ),
        (
            {"reclaimablePods": [{"name": "Main", "count": 1}]},
            'status.reclaimablePods[0].name: Invalid value: "Main": status.reclaimablePods[0].name in body should match '
            "'^[a-z0-9]([-a-z0-9]*[a-z0-9])?$'",
        ),
    ],
)
async def test_a_v1beta2_status_is_refused_by_v1beta2s_bounds(hub: Client, status: Obj, cause: str) -> None:
    assert await _status_write(hub, "v1beta2", status) == (422, [cause])


async def test_v1beta1_keeps_its_own_status_rules(hub: Client) -> None:
    """v1beta1's CRD names a resource request ``main`` when unset and bounds no nominated cluster's
    name: what v1beta2 refuses, above, it takes."""
    status = {"resourceRequests": [{"resources": {"cpu": "1"}}], "nominatedClusterNames": ["w" * 257]}
    assert await _status_write(hub, "v1beta1", status) == (200, [])
    stored = await (await hub.get(f"{_url('v1beta1')}/x")).json()
    assert stored["status"]["resourceRequests"] == [{"name": "main", "resources": {"cpu": "1"}}]


async def test_v1beta1_keeps_its_own_rules_and_words(hub: Client) -> None:
    """A v1beta1 Workload is refused by v1beta1's rule, at v1beta1's field, and takes a spec
    v1beta2's rules would refuse (a topology request v1beta1's CRD does not bound)."""
    obj = valid("Workload", "v1beta1")
    obj["spec"]["priorityClassName"] = "low"
    assert await refused(hub, obj) == [
        'spec: Invalid value: "object": priority should not be nil when priorityClassName is set'
    ]
    obj = valid("Workload", "v1beta1", name="y")
    obj["spec"]["podSets"][0]["topologyRequest"] = {"required": "r" * 64}
    assert (await hub.post(_url("v1beta1"), json=obj)).status == 201


async def test_a_workload_written_at_v1beta2_reads_alike_at_v1beta1_and_back(hub: Client) -> None:
    """Its priority class reference is v1beta1's class name and source; the CRD's defaults of
    v1beta2 (``active``, a pod set's ``name`` and ``count``) are stored and read in both."""
    obj = valid("Workload", "v1beta2")
    obj["spec"] = {
        "queueName": "q",
        "priorityClassRef": POD_PRIORITY_REF,
        "priority": 7,
        "podSets": [
            {"template": {"spec": {"containers": [{"name": "c"}]}}, "topologyRequest": {"required": "rack"}}
        ],
    }
    created = await hub.post(_url("v1beta2"), json=obj)
    assert created.status == 201, await created.text()
    written = (await created.json())["spec"]
    assert written["active"] is True
    assert (written["podSets"][0]["name"], written["podSets"][0]["count"]) == ("main", 1)
    old = (await (await hub.get(f"{_url('v1beta1')}/x")).json())["spec"]
    assert "priorityClassRef" not in old
    assert (old["priorityClassSource"], old["priorityClassName"], old["priority"]) == (
        "scheduling.k8s.io/priorityclass",
        "low",
        7,
    )
    assert old["podSets"] == written["podSets"]
    assert (await (await hub.get(f"{_url('v1beta2')}/x")).json())["spec"] == written


async def test_a_v1beta2_patch_is_refused_by_v1beta2s_transition_rules(hub: Client) -> None:
    """A merge patch at v1beta2 of a Workload holding quota: the rule (``oldSelf``) is v1beta2's,
    in its words; the same patch at v1beta1 is refused in v1beta1's."""
    reserved = {
        "conditions": [
            {
                "type": "QuotaReserved",
                "status": "True",
                "reason": "QuotaReserved",
                "message": "",
                "lastTransitionTime": "2026-01-01T00:00:00Z",
            }
        ],
        "admission": {
            "clusterQueue": "cq",
            "podSetAssignments": [{"name": "main", "flavors": {"cpu": "f"}, "count": 2}],
        },
    }
    assert await _status_write(hub, "v1beta2", reserved) == (200, [])
    merge = {"Content-Type": "application/merge-patch+json"}
    messages = {}
    for version in ("v1beta2", "v1beta1"):
        answer = await hub.patch(f"{_url(version)}/x", json={"spec": {"queueName": "other"}}, headers=merge)
        body = await answer.json()
        assert answer.status == 422, body
        messages[version] = [f"{c['field']}: {c['message']}" for c in body["details"]["causes"]]
    assert messages == {
        "v1beta2": ['<nil>: Invalid value: "object": queueName is immutable while workload quota reserved'],
        "v1beta1": ['<nil>: Invalid value: "object": field is immutable'],
    }
