"""Karmada's FederatedResourceQuota sync and status: each listed cluster the hub has gets a Work
carrying a v1 ResourceQuota with its share; a changed share rewrites it, an unlisted cluster loses
it, a cluster that joins later gets it, the quota's deletion removes them all; the status sums
what the members report on the Works."""

from __future__ import annotations

import copy
from typing import Any

from controlplane.apiserver.objects import ObjectStore
from controlplane.controllers.manager import ControllerManager

from .fleet import eventually, node_shape, put_cluster, settled

QUOTA_API = "policy.karmada.io/v1alpha1"
WORK_API = "work.gpufed.io/v1alpha1"
SAMPLE: dict[str, Any] = {
    "apiVersion": QUOTA_API, "kind": "FederatedResourceQuota", "metadata": {"name": "test", "namespace": "default"},
    "spec": {"overall": {"cpu": 100}, "staticAssignments": [
        {"clusterName": "member1", "hard": {"cpu": 20}},
        {"clusterName": "member2", "hard": {"cpu": 50}},
        {"clusterName": "member3", "hard": {"cpu": 30}},
    ]},
}
WORK = "default-test-resourcequota"


async def _works(objects: ObjectStore) -> dict[str, dict[str, Any]]:
    """cluster -> the hard limits its quota Work carries."""
    rt = objects.registry.require(WORK_API, "Work")
    out = {}
    for work in (await objects.list(rt)).items:
        if work["metadata"]["name"] == WORK:
            (manifest,) = work["spec"]["workload"]["manifests"]
            assert (manifest["kind"], manifest["metadata"]) == ("ResourceQuota", {"name": "test", "namespace": "default"})
            out[work["metadata"]["namespace"].removeprefix("gpufed-es-")] = manifest["spec"]["hard"]
    return out


async def _works_are(objects: ObjectStore, expected: dict[str, dict[str, Any]], what: str) -> None:
    async def matches() -> bool:
        return await _works(objects) == expected

    await eventually(matches, what=what)


async def test_listed_clusters_get_their_share_and_lose_it(objects: ObjectStore, manager: ControllerManager) -> None:
    for name in ("member1", "member2", "other"):
        await put_cluster(objects, name, node_shape(1))
    rt = objects.registry.require(QUOTA_API, "FederatedResourceQuota")
    await objects.create(rt, SAMPLE)
    # member3 is not a cluster of the hub: no Work for it; "other" is not listed: none either.
    await _works_are(objects, {"member1": {"cpu": "20"}, "member2": {"cpu": "50"}}, "a Work per listed cluster")
    work_rt = objects.registry.require(WORK_API, "Work")
    labels = (await objects.get(work_rt, namespace="gpufed-es-member1", name=WORK))["metadata"]["labels"]
    assert labels["federatedresourcequota.karmada.io/namespace"] == "default"
    assert labels["federatedresourcequota.karmada.io/name"] == "test"

    await put_cluster(objects, "member3", node_shape(1))
    await _works_are(objects, {"member1": {"cpu": "20"}, "member2": {"cpu": "50"}, "member3": {"cpu": "30"}},
                     "the joining cluster's Work")

    stored = await objects.get(rt, namespace="default", name="test")
    changed = copy.deepcopy(stored)
    changed["spec"]["staticAssignments"] = [{"clusterName": "member1", "hard": {"cpu": "25"}}]
    await objects.update(rt, changed)
    await _works_are(objects, {"member1": {"cpu": "25"}}, "the changed share, the unlisted clusters' Works gone")

    await objects.delete(rt, namespace="default", name="test")
    await _works_are(objects, {}, "every Work gone with the quota")


def _applied(work: dict[str, Any], used: str, *, applied: str = "True") -> dict[str, Any]:
    status = {
        "conditions": [{"type": "Applied", "status": applied, "reason": "AppliedSuccessful", "message": "",
                        "lastTransitionTime": "2026-01-01T00:00:00Z"}],
        "manifestStatuses": [{
            "identifier": {"ordinal": 0, "version": "v1", "kind": "ResourceQuota", "namespace": "default", "name": "test",
                           "resource": "resourcequotas"},
            "status": {"hard": {"cpu": work["spec"]["workload"]["manifests"][0]["spec"]["hard"]["cpu"]}, "used": {"cpu": used}},
        }],
    }
    return {**work, "status": status}


async def test_the_status_sums_what_members_report(objects: ObjectStore, manager: ControllerManager) -> None:
    for name in ("member1", "member2", "member3"):
        await put_cluster(objects, name, node_shape(1))
    rt, work_rt = objects.registry.require(QUOTA_API, "FederatedResourceQuota"), objects.registry.require(WORK_API, "Work")
    await objects.create(rt, SAMPLE)
    await _works_are(objects, {"member1": {"cpu": "20"}, "member2": {"cpu": "50"}, "member3": {"cpu": "30"}}, "the Works")

    async def report(cluster: str, used: str, applied: str = "True") -> None:
        work = await objects.get(work_rt, namespace=f"gpufed-es-{cluster}", name=WORK)
        await objects.update_status(work_rt, _applied(work, used, applied=applied))

    await report("member2", "1500m")
    await report("member1", "16")
    await report("member3", "4", applied="False")  # not applied: Karmada leaves it out

    async def status() -> dict[str, Any] | None:
        found = (await objects.get(rt, namespace="default", name="test")).get("status")
        return found if found and len(found.get("aggregatedStatus") or ()) == 2 else None

    assert await eventually(status, what="the aggregated status") == {
        "overall": {"cpu": "100"},
        "overallUsed": {"cpu": "17500m"},
        "aggregatedStatus": [
            {"clusterName": "member1", "hard": {"cpu": "20"}, "used": {"cpu": "16"}},
            {"clusterName": "member2", "hard": {"cpu": "50"}, "used": {"cpu": "1500m"}},
        ],
    }
    await settled(manager)
    await objects.delete(rt, namespace="default", name="test")
    await _works_are(objects, {}, "the Works gone")
