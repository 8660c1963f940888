"""A v1beta2 Workload is checked by v1beta2's own CRD rules, on its v1beta2 form (the refusal names
v1beta2's fields), and a v1beta1 one by v1beta1's; written in one version it reads the same in the
other and back (Kueue's CRD YAML at 01ed66fd, ``tests/data/kueue_crd_fields.txt``)."""

from __future__ import annotations

import io
import json
from typing import Any

import pytest
from aiohttp.test_utils import TestClient

from controlplane.apis import kueue_topology_assignment
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


APPLY = {"Content-Type": "application/apply-patch+yaml"}
#: A v1beta2 Workload's admission with the topology assignment of Example 4 of Kueue's CRD (its
#: ``topologyAssignment`` description): six nodes, one pod each, in two slices by rack; as kubectl
#: sends it on a server-side apply of the status.
SLICED = """\
apiVersion: kueue.x-k8s.io/v1beta2
kind: Workload
metadata:
  name: x
  namespace: default
status:
  admission:
    clusterQueue: cq
    podSetAssignments:
    - name: main
      count: 6
      flavors:
        cpu: f
      topologyAssignment:
        levels:
        - kubernetes.io/hostname
        slices:
        - domainCount: 4
          valuesPerLevel:
          - individual:
              prefix: block-1-rack-1-node-
              roots: ["1", "2", "3", "4"]
          podCounts:
            universal: 1
        - domainCount: 2
          valuesPerLevel:
          - individual:
              prefix: block-1-rack-2-node-
              roots: ["1", "2"]
          podCounts:
            universal: 1
"""
NODES = [
    f"block-1-rack-{rack}-node-{node}" for rack, node in ((1, 1), (1, 2), (1, 3), (1, 4), (2, 1), (2, 2))
]


def _topology(workload: Obj) -> Obj:
    topology: Obj = workload["status"]["admission"]["podSetAssignments"][0]["topologyAssignment"]
    return topology


async def test_a_sliced_topology_assignment_applies_at_v1beta2_and_reads_as_domains_at_v1beta1(
    hub: Client,
) -> None:
    """v1beta2's slices are the v1beta1 form's domains, one by one, in order; read back at v1beta2 they
    are Kueue's own encoding of those domains (one slice, their common prefix taken out: Example 3 of
    the CRD's description)."""
    created = await hub.post(_url("v1beta2"), json=valid("Workload", "v1beta2"))
    assert created.status == 201, await created.text()
    answer = await hub.patch(f"{_url('v1beta2')}/x/status?fieldManager=kueue", data=SLICED, headers=APPLY)
    assert answer.status == 200, await answer.text()
    assert _topology(await (await hub.get(f"{_url('v1beta1')}/x")).json()) == {
        "levels": ["kubernetes.io/hostname"],
        "domains": [{"values": [node], "count": 1} for node in NODES],
    }
    one_slice = {
        "levels": ["kubernetes.io/hostname"],
        "slices": [
            {
                "domainCount": 6,
                "valuesPerLevel": [
                    {
                        "individual": {
                            "prefix": "block-1-rack-",
                            "roots": [n.removeprefix("block-1-rack-") for n in NODES],
                        }
                    }
                ],
                "podCounts": {"universal": 1},
            }
        ],
    }
    assert _topology(await answer.json()) == one_slice
    assert _topology(await (await hub.get(f"{_url('v1beta2')}/x")).json()) == one_slice


async def test_a_v1beta1_topology_assignment_reads_as_slices_at_v1beta2_and_back(hub: Client) -> None:
    """Example 1 of the CRD's description, written at v1beta1 as domains, reads at v1beta2 as its
    Example 2 (the block's one value ``universal``, the racks' common prefix taken out, the pod counts
    ``individual``); written back at v1beta2 as read, it reads at v1beta1 as written."""
    domains = [{"values": ["block-1", "rack-1"], "count": 4}, {"values": ["block-1", "rack-2"], "count": 2}]
    levels = ["cloud.provider.com/topology-block", "cloud.provider.com/topology-rack"]
    status = {
        "admission": {
            "clusterQueue": "cq",
            "podSetAssignments": [
                {"name": "main", "count": 6, "topologyAssignment": {"levels": levels, "domains": domains}}
            ],
        }
    }
    assert await _status_write(hub, "v1beta1", status) == (200, [])
    served = await (await hub.get(f"{_url('v1beta2')}/x")).json()
    assert _topology(served) == {
        "levels": levels,
        "slices": [
            {
                "domainCount": 2,
                "valuesPerLevel": [
                    {"universal": "block-1"},
                    {"individual": {"prefix": "rack-", "roots": ["1", "2"]}},
                ],
                "podCounts": {"individual": [4, 2]},
            }
        ],
    }
    answer = await hub.put(f"{_url('v1beta2')}/x/status", json=served)
    assert answer.status == 200, await answer.text()
    assert _topology(await (await hub.get(f"{_url('v1beta1')}/x")).json()) == {
        "levels": levels,
        "domains": domains,
    }


def _one_slice(count: int, *per_level: Obj) -> Obj:
    assignment = {
        "name": "main",
        "count": 2,
        "topologyAssignment": {
            "levels": ["kubernetes.io/hostname"],
            "slices": [
                {"domainCount": count, "valuesPerLevel": list(per_level), "podCounts": {"universal": 1}}
            ],
        },
    }
    return {"admission": {"clusterQueue": "cq", "podSetAssignments": [assignment]}}


def _too_big(total: int) -> str:
    return (
        f"status.admission.podSetAssignments[0].topologyAssignment.slices: Invalid value: {total}: as v1beta1's "
        f"domains (the form the hub stores) the Workload's topology assignments would take about {total} "
        "bytes, more than the 1048576 bytes (1 MiB) a Workload may hold; assign the pods to fewer domains"
    )


async def test_slices_whose_domains_would_be_over_1_mib_are_refused_unexpanded(
    hub: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The hub stores v1beta1's form, which lists every domain: slices of a few bytes may stand for
    a billion domains. They are measured from the slices, never listed: each domain would be
    ``{"values":["a"],"count":1}`` and a comma, 27 bytes."""

    def expanded(assignment: Obj) -> Any:
        raise AssertionError("the slices were read domain by domain")

    monkeypatch.setattr(kueue_topology_assignment, "_domains", expanded)
    assert await _status_write(hub, "v1beta2", _one_slice(10**9, {"universal": "a"})) == (
        422,
        [_too_big(27 * 10**9)],
    )


async def test_slices_of_1_mib_of_domains_are_stored_and_one_byte_more_is_refused(hub: Client) -> None:
    """32768 domains ``{"values":["node-a"],"count":1}`` and a comma, 32 bytes each, are 1 MiB: stored;
    a value one character longer is over."""
    roots = ["a"] * 32768
    assert await _status_write(
        hub, "v1beta2", _one_slice(32768, {"individual": {"prefix": "node-", "roots": roots}})
    ) == (
        200,
        [],
    )
    stored = await (await hub.get(f"{_url('v1beta1')}/x")).json()
    assert len(_topology(stored)["domains"]) == 32768
    await hub.delete(f"{_url('v1beta2')}/x")
    longer = {"individual": {"prefix": "node-", "roots": ["a"] * 32767 + ["ab"]}}
    assert await _status_write(hub, "v1beta2", _one_slice(32768, longer)) == (422, [_too_big(1048577)])


async def test_v1beta2_ratchets_unchanged_values_v1beta1_took(hub: Client) -> None:
    """A status v1beta1's bounds took (a pod set assignment "Main", a 70-character domain value)
    is refused by v1beta2's, but ratchets as a custom resource's does (CRDValidationRatcheting): a
    write at v1beta2 that leaves those values as they are is taken; one that changes such a value
    is refused. (A reclaimable pod set must be one of the Workload's, whose names v1beta1's
    pattern bounds too: Kueue's webhook.)"""
    topology = {"levels": ["h"], "domains": [{"values": ["v" * 70], "count": 1}]}
    status = {
        "admission": {
            "clusterQueue": "cq",
            "podSetAssignments": [{"name": "Main", "topologyAssignment": topology}],
        },
    }
    assert await _status_write(hub, "v1beta1", status) == (200, [])
    served = await (await hub.get(f"{_url('v1beta2')}/x")).json()
    served["metadata"]["labels"] = {"team": "a"}
    relabeled = await hub.put(f"{_url('v1beta2')}/x", json=served)
    assert relabeled.status == 200, await relabeled.text()
    served = await relabeled.json()
    served["status"]["admission"]["podSetAssignments"][0]["name"] = "Other_Name"
    answer = await hub.put(f"{_url('v1beta2')}/x/status", json=served)
    assert answer.status == 422
    assert [c["field"] for c in (await answer.json())["details"]["causes"]] == [
        "status.admission.podSetAssignments[0].name"
    ]


async def test_a_value_of_another_type_does_not_ratchet(hub: Client) -> None:
    """Ratcheting compares as kube's DeepEqual does: ``true`` where ``1`` is stored is a change,
    refused as the wrong type, not an unchanged value let through (Python's ``True == 1``)."""
    assert (await _status_write(hub, "v1beta2", {"reclaimablePods": [{"name": "main", "count": 1}]}))[
        0
    ] == 200
    served = await (await hub.get(f"{_url('v1beta2')}/x")).json()
    served["status"]["reclaimablePods"][0]["count"] = True
    answer = await hub.put(f"{_url('v1beta2')}/x/status", json=served)
    assert answer.status == 422, await answer.text()
    stored = await (await hub.get(f"{_url('v1beta1')}/x")).json()
    assert stored["status"]["reclaimablePods"] == [{"name": "main", "count": 1}]


async def test_a_v1beta1_domain_without_a_value_for_each_level_is_refused_at_it(hub: Client) -> None:
    """Kueue's conversion of such a domain to v1beta2 fails (an internal error upstream); the hub
    refuses the write with the domain's path."""
    topology = {
        "levels": ["zone", "rack"],
        "domains": [{"values": ["z1", "r1"], "count": 1}, {"values": ["z1"], "count": 1}],
    }
    status = {
        "admission": {
            "clusterQueue": "cq",
            "podSetAssignments": [{"name": "main", "count": 2, "topologyAssignment": topology}],
        }
    }
    assert await _status_write(hub, "v1beta1", status) == (
        422,
        [
            "status.admission.podSetAssignments[0].topologyAssignment.domains[1].values: Invalid value: "
            '[]string{"z1"}: must have a value for each of the assignment\'s 2 levels'
        ],
    )


JSON = {"Content-Type": "application/json"}
#: Nodes ``node-00000`` ... : 40000 domains ``{"values":["node-00000"],"count":1}`` and a comma, 36
#: bytes each: 1440000 bytes, over the 1 MiB a v1beta2 write may set.
BIG_NODES = [f"node-{i:05d}" for i in range(40000)]


async def test_a_workload_stored_through_v1beta1_with_over_1_mib_of_domains_is_written_at_v1beta2(
    hub: Client,
) -> None:
    """Written at v1beta1, whose domains the bound does not apply to; at v1beta2 a label change and a
    status write that keep the assignment are taken (ratcheted) and the domains are kept; a status
    write that changes it is refused at its slices."""
    topology = {
        "levels": ["kubernetes.io/hostname"],
        "domains": [{"values": [node], "count": 1} for node in BIG_NODES],
    }
    status = {
        "admission": {
            "clusterQueue": "cq",
            "podSetAssignments": [{"name": "main", "count": 40000, "topologyAssignment": topology}],
        }
    }
    created = await hub.post(_url("v1beta1"), json=valid("Workload", "v1beta1"))
    assert created.status == 201, await created.text()
    body = json.dumps({**await created.json(), "status": status}).encode()
    assert len(body) > 1_400_000
    written = await hub.put(f"{_url('v1beta1')}/x/status", data=io.BytesIO(body), headers=JSON)
    assert written.status == 200, await written.text()
    served = await (await hub.get(f"{_url('v1beta2')}/x")).json()
    served["metadata"]["labels"] = {"team": "a"}
    relabeled = await hub.put(f"{_url('v1beta2')}/x", json=served)
    assert relabeled.status == 200, await relabeled.text()
    served = await relabeled.json()
    served["status"]["conditions"] = [
        {
            "type": "Finished",
            "status": "False",
            "reason": "Running",
            "message": "",
            "lastTransitionTime": "2026-01-01T00:00:00Z",
        }
    ]
    rewritten = await hub.put(f"{_url('v1beta2')}/x/status", json=served)
    assert rewritten.status == 200, await rewritten.text()
    stored = await (await hub.get(f"{_url('v1beta1')}/x")).json()
    assert stored["metadata"]["labels"] == {"team": "a"}
    assert _topology(stored) == topology
    changed = await rewritten.json()
    _topology(changed)["slices"][0]["valuesPerLevel"][0]["individual"]["roots"][0] = "x0000"
    answer = await hub.put(f"{_url('v1beta2')}/x/status", json=changed)
    assert answer.status == 422, await answer.text()
    assert [c["field"] for c in (await answer.json())["details"]["causes"]] == [
        "status.admission.podSetAssignments[0].topologyAssignment.slices"
    ]
    assert _topology(await (await hub.get(f"{_url('v1beta1')}/x")).json()) == topology
