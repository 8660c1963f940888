"""Pods the member's scheduler leaves unplaced for storage it lacks -- a claim that does not exist,
or one unbound because its StorageClass is missing -- are reported as pods that cannot start (with
the claim and why), not as unschedulable ones the hub would move for want of room; the agent reads
such a claim (and its class) from the member once per claim and caches it.

The member is the simulator's API served over HTTP on 127.0.0.1, recording every request."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any

import pytest

from controlplane.apis.work_v1alpha1 import WorkStatus
from member_agent import capacity
from member_agent.applying import ManifestResult, work_status
from member_agent.claims import ClaimStates
from member_agent.kubeapi import KubeApi
from member_agent.manifests import Identifier
from member_agent.podstates import claims_to_check, storage_wait_summary, unschedulable_summary
from simulator.resources import member_registry
from simulator.volumes import unbound_claim_message
from tests.member_agent.memberapi import Clock, ServedMember, member_client, served_member

pytestmark = pytest.mark.timeout(120)

DEPLOYMENT = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "train", "namespace": "ml"},
              "spec": {"replicas": 2}, "status": {"replicas": 2}}
NO_CLAIM = (
    '0/3 nodes are available: persistentvolumeclaim "data" not found. '
    "preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling."
)
UNBOUND = unbound_claim_message(3)
NO_ROOM = "0/3 nodes are available: 3 Insufficient nvidia.com/gpu."
NOW = "2026-01-01T00:00:00Z"
FAST_MISSING = {"name": "data", "storageClassName": "fast", "message": 'storageclass.storage.k8s.io "fast" not found'}


def _pod(name: str, message: str, *, claim: str | None = "data") -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [{"name": "main", "image": "train:1"}]}
    if claim is not None:
        spec["volumes"] = [{"name": "scratch", "emptyDir": {}},
                           {"name": "data", "persistentVolumeClaim": {"claimName": claim}}]
    return {
        "metadata": {"name": name, "namespace": "ml", "labels": {"pod-template-hash": "5cf"},
                     "ownerReferences": [{"kind": "ReplicaSet", "name": "train-5cf", "controller": True}]},
        "spec": spec,
        "status": {"phase": "Pending", "conditions": [
            {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": message}]},
    }


def _known(troubles: Mapping[tuple[str, str], Mapping[str, Any]]) -> Callable[[str, str], Mapping[str, Any] | None]:
    return lambda namespace, name: troubles.get((namespace, name))


def test_the_agents_pod_cache_keeps_the_claims_of_unplaced_pods_only() -> None:
    waiting = capacity.trim_pod(_pod("train-5cf-a", UNBOUND))
    assert waiting["spec"]["volumes"] == [{"persistentVolumeClaim": {"claimName": "data"}}]
    placed = _pod("train-5cf-b", UNBOUND)
    placed["spec"]["nodeName"] = "n1"
    assert "volumes" not in capacity.trim_pod(placed)["spec"]
    assert claims_to_check([waiting, capacity.trim_pod(_pod("train-5cf-c", NO_ROOM, claim="other"))]) == {("ml", "data")}


@pytest.mark.parametrize(
    ("messages", "troubles", "waiting", "unschedulable"),
    [
        pytest.param([NO_CLAIM, NO_CLAIM], {}, {"pods": 2, "reason": "Unschedulable", "message": NO_CLAIM}, None,
                     id="missing-claim"),
        pytest.param([UNBOUND, UNBOUND], {("ml", "data"): FAST_MISSING},
                     {"pods": 2, "reason": "Unschedulable", "message": UNBOUND, "claim": FAST_MISSING}, None,
                     id="missing-class"),
        # Nothing known keeps the claim unbound (the class exists, provisioning is slow): the pods
        # stay unschedulable, as before.
        pytest.param([UNBOUND], {}, None, {"pods": 1, "message": UNBOUND}, id="unbound-for-another-reason"),
        pytest.param([NO_ROOM, NO_CLAIM], {}, {"pods": 1, "reason": "Unschedulable", "message": NO_CLAIM},
                     {"pods": 1, "message": NO_ROOM}, id="one-of-each"),
    ],
)
def test_pods_waiting_for_storage_the_member_lacks_are_not_counted_as_unschedulable(
    messages: list[str], troubles: dict[tuple[str, str], Any], waiting: Any, unschedulable: Any
) -> None:
    """Neither in the Work status nor in the capacity report's ``unschedulableWorkloads``: the two
    count the same pods, so the hub never moves a workload for pods that wait for storage."""
    pods = [capacity.trim_pod(_pod(f"train-5cf-{i}", m)) for i, m in enumerate(messages)]
    claims = _known(troubles)
    assert storage_wait_summary(DEPLOYMENT, pods, claims=claims) == waiting
    assert unschedulable_summary(DEPLOYMENT, pods, claims=claims) == unschedulable
    listed = capacity.summarize([], pods, now=NOW, claims=claims).get("unschedulableWorkloads")
    if unschedulable is None:
        assert listed is None
    else:
        assert listed == [{"namespace": "ml", "kind": "Deployment", "name": "train", "pods": unschedulable["pods"]}]


def test_the_work_status_names_the_claim_and_its_missing_class() -> None:
    ident = Identifier("apps", "v1", "Deployment", "ml", "train", 0)
    work = {"metadata": {"name": "w", "namespace": "gpufed-es-east", "generation": 1}}
    result = ManifestResult(identifier=ident, applied=True, live=DEPLOYMENT)
    pods = [capacity.trim_pod(_pod("train-5cf-a", UNBOUND))]
    status = work_status(work, [result], pods, now="2026-01-01T00:00:00Z", claims=_known({("ml", "data"): FAST_MISSING}))
    WorkStatus.model_validate(status)  # the hub's Work model holds what the agent writes
    [entry] = status["manifestStatuses"]
    assert entry["notStarting"] == {"pods": 1, "reason": "Unschedulable", "message": UNBOUND, "claim": FAST_MISSING}
    assert "unschedulable" not in entry


class Member(ServedMember):
    async def create(self, api_version: str, kind: str, body: dict[str, Any]) -> None:
        await self.objects.create(self.objects.registry.require(api_version, kind), body)


@pytest.fixture
async def member() -> AsyncIterator[Member]:
    async with served_member(member_registry()) as served:
        yield Member(url=served.url, objects=served.objects, requests=served.requests)


@pytest.fixture
async def api(member: Member) -> AsyncIterator[KubeApi]:
    async with member_client(member.url) as client:
        yield client


def _claim(name: str, storage_class: str | None) -> dict[str, Any]:
    spec: dict[str, Any] = {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}
    if storage_class is not None:
        spec["storageClassName"] = storage_class
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": name, "namespace": "ml"}, "spec": spec}


async def test_the_agent_reads_a_claims_missing_class_from_the_member_once_per_claim(member: Member, api: KubeApi) -> None:
    await member.create("v1", "Namespace", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ml"}})
    await member.create("v1", "PersistentVolumeClaim", _claim("data", "fast"))
    await member.create("v1", "PersistentVolumeClaim", _claim("other", "standard"))
    await member.create("storage.k8s.io/v1", "StorageClass", {
        "apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": "standard"},
        "provisioner": "example.com/disk",
    })
    clock = Clock()
    claims = ClaimStates(api, ttl=30.0, clock=clock)
    wanted = {("ml", "data"), ("ml", "other"), ("ml", "gone")}
    await claims.refresh(wanted)
    assert claims("ml", "data") == FAST_MISSING
    assert claims("ml", "other") is None  # its class exists: nothing the hub can send
    assert claims("ml", "gone") is None  # no claim: the scheduler's message names it itself
    asked = len(member.requests)
    assert asked == 5  # three claims, and the classes of the two that exist
    # The capacity report, summed in a worker thread, reads what is known when it is taken.
    known = claims.snapshot()
    waiting = [capacity.trim_pod(_pod("train-5cf-a", UNBOUND))]
    assert "unschedulableWorkloads" not in capacity.summarize([], waiting, now=NOW, claims=known)

    # Every status pass within the ttl asks the member nothing more, however many pods wait.
    for _ in range(10):
        await claims.refresh(wanted)
    assert len(member.requests) == asked

    # Once the class is there, the next read after the ttl says nothing is missing.
    await member.create("storage.k8s.io/v1", "StorageClass", {
        "apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": "fast"},
        "provisioner": "example.com/disk",
    })
    clock.now += 31
    await claims.refresh({("ml", "data")})
    assert claims("ml", "data") is None
    assert claims("ml", "other") is None and claims.reads == 4  # expired claims not asked about are forgotten
    assert known("ml", "data") == FAST_MISSING  # a snapshot stays as it was taken
    assert capacity.summarize([], waiting, now=NOW, claims=claims.snapshot())["unschedulableWorkloads"] == [
        {"namespace": "ml", "kind": "Deployment", "name": "train", "pods": 1}
    ]


async def test_the_claim_cache_is_bounded(member: Member, api: KubeApi) -> None:
    claims = ClaimStates(api, limit=3)
    await claims.refresh({("ml", f"c{i}") for i in range(50)})
    assert claims.reads == 3
