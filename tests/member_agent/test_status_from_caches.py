"""A Work status pass reads the agent's watch caches, and asks the member only for what they lack.

The member is the simulator's API machinery served over HTTP on 127.0.0.1 with an outer
middleware that records every request it answers, so the tests count real requests. The
watches are real informers (list+watch, label-selected as the agent selects them).
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from controlplane.apis import constants as c
from controlplane.apiserver.kinds.core import core_resources
from controlplane.apiserver.kinds.workloads import workload_resources
from controlplane.apiserver.objects import ObjectStore
from controlplane.apiserver.resources import Registry
from member_agent.applying import ManifestResult, WorkApplier, status_fields, work_status
from member_agent.informing import Informer
from member_agent.kubeapi import KubeApi
from member_agent.ledger import Ledger
from member_agent.manifests import Identifier, identifier_of, owned_by
from tests.member_agent.memberapi import member_client, served_member

pytestmark = [pytest.mark.timeout(120), pytest.mark.waiting]

WORK_NS = "gpufed-es-sim-a"
NOW = "2026-01-01T00:00:00Z"


@dataclass
class CountingMember:
    """An in-process member API that records ``(method, path, query)`` of every request."""

    url: str
    objects: ObjectStore
    requests: list[tuple[str, str, str]] = field(default_factory=list)

    def gets_of_objects(self) -> list[str]:
        """GETs of single objects (not lists, watches or discovery)."""
        return [
            path
            for method, path, query in self.requests
            if method == "GET" and "watch=" not in query and "/namespaces/" in path and path.count("/") >= 6
        ]

    async def create(self, api_version: str, kind: str, body: dict[str, Any]) -> dict[str, Any]:
        return await self.objects.create(self.objects.registry.require(api_version, kind), body)


@pytest.fixture
async def member() -> AsyncIterator[CountingMember]:
    async with served_member(Registry(core_resources(), workload_resources())) as served:
        yield CountingMember(url=served.url, objects=served.objects, requests=served.requests)


@pytest.fixture
async def api(member: CountingMember) -> AsyncIterator[KubeApi]:
    async with member_client(member.url) as client:
        yield client


def deployment(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": "ml"},
        "spec": {
            "replicas": 2,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": "main", "image": "infer:1"}]},
            },
        },
    }


def configmap(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": "ml"}, "data": {"k": "v"}}


def work(name: str, manifests: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "apiVersion": "work.gpufed.io/v1alpha1",
        "kind": "Work",
        "metadata": {"name": name, "namespace": WORK_NS, "generation": 1},
        "spec": {"workload": {"manifests": manifests}},
    }


class Watches:
    """Label-selected informers on the kinds the Works hold, as the agent keeps them."""

    def __init__(self, api: KubeApi) -> None:
        selector = {"labelSelector": f"{c.LABEL_WORK_NAMESPACE}={WORK_NS}"}
        self.informers = {
            ("apps/v1", "Deployment"): Informer(
                api, "/apis/apps/v1/deployments", name="deployments",
                transform=functools.partial(status_fields, api_version="apps/v1", kind="Deployment"), query=selector,
            ),
            ("v1", "ConfigMap"): Informer(
                api, "/api/v1/configmaps", name="configmaps",
                transform=functools.partial(status_fields, api_version="v1", kind="ConfigMap"), query=selector,
            ),
        }

    def cached(self, ident: Identifier) -> Mapping[str, Any] | None:
        informer = self.informers.get((ident.api_version, ident.kind))
        if informer is None or not informer.synced.is_set():
            return None
        return informer.objects.get(f"{ident.namespace}/{ident.name}" if ident.namespace else ident.name)

    def holding(self) -> int:
        return sum(len(i.objects) for i in self.informers.values())


async def until(probe: Callable[[], bool], *, what: str, within: float = 30.0) -> None:
    deadline = asyncio.get_running_loop().time() + within
    while not probe():
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.05)


@pytest.mark.parametrize(("works", "per_work"), [(1, 2), (4, 2), (3, 4)])
async def test_a_status_pass_over_watched_objects_sends_no_request(
    member: CountingMember, api: KubeApi, tmp_path: Path, works: int, per_work: int
) -> None:
    watches = Watches(api)
    tasks = [asyncio.create_task(informer.run()) for informer in watches.informers.values()]
    try:
        ledger = Ledger(tmp_path)
        cached = WorkApplier(member=api, ledger=ledger, cached=watches.cached)
        uncached = WorkApplier(member=api, ledger=ledger)
        items = [
            work(f"w{i}", [deployment(f"d{i}-{j}") if j % 2 == 0 else configmap(f"c{i}-{j}") for j in range(per_work)])
            for i in range(works)
        ]
        for item in items:
            await cached.reconcile(item, now=NOW)
        await until(lambda: watches.holding() == works * per_work, what="the watches to hold every object")

        del member.requests[:]
        from_caches = [await cached.refresh_status(item, now=NOW) for item in items]
        assert member.requests == []

        from_member = [await uncached.refresh_status(item, now=NOW) for item in items]
        assert len(member.gets_of_objects()) == works * per_work
        assert from_caches == from_member
        assert all(
            {cond["type"]: cond["status"] for cond in status["conditions"]}["Applied"] == "True"
            for status in from_caches
        )
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


async def test_what_the_caches_lack_is_fetched_and_a_conflict_still_found(
    member: CountingMember, api: KubeApi, tmp_path: Path
) -> None:
    watches = Watches(api)
    tasks = [asyncio.create_task(informer.run()) for informer in watches.informers.values()]
    try:
        # Not labelled as gpufed's: no watch holds it, only a GET can tell it exists.
        await member.create("v1", "Namespace", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ml"}})
        await member.create("v1", "ConfigMap", configmap("theirs"))
        applier = WorkApplier(member=api, ledger=Ledger(tmp_path), cached=watches.cached)
        item = work("mixed", [deployment("ours"), configmap("theirs"), configmap("missing")])
        applied = await applier.reconcile(work("mixed", [deployment("ours")]), now=NOW)
        assert applied["conditions"][0]["status"] == "True"
        await until(lambda: watches.holding() == 1, what="the watch to hold the Deployment")

        del member.requests[:]
        status = await applier.refresh_status(item, now=NOW)
        assert sorted(member.gets_of_objects()) == [
            "/api/v1/namespaces/ml/configmaps/missing",
            "/api/v1/namespaces/ml/configmaps/theirs",
        ]
        conditions = {cond["type"]: cond for cond in status["conditions"]}
        assert conditions["Applied"]["reason"] == "ApplyConflict" and "theirs" in conditions["Applied"]["message"]
        assert "missing" in conditions["Applied"]["message"]
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


@pytest.mark.parametrize(
    "live",
    [
        {
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "d", "namespace": "ml", "uid": "u1", "generation": 3, "resourceVersion": "9",
                         "labels": {c.LABEL_WORK_NAME: "w", c.LABEL_WORK_NAMESPACE: WORK_NS, "app": "d"},
                         "managedFields": [{"manager": "gpufed-agent"}]},
            "spec": {"replicas": 3, "template": {"spec": {"containers": [{"name": "x"}]}}},
            "status": {"observedGeneration": 3, "replicas": 3, "updatedReplicas": 3, "availableReplicas": 2},
        },
        {
            "apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": "d", "namespace": "ml", "uid": "u2", "generation": 1, "labels": {c.LABEL_WORK_NAME: "w",
                                                                              c.LABEL_WORK_NAMESPACE: WORK_NS}},
            "spec": {"completions": 4},
            "status": {"conditions": [{"type": "Failed", "status": "True"}]},
        },
        {
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "d", "namespace": "ml", "labels": {c.LABEL_WORK_NAME: "other",
                                                                   c.LABEL_WORK_NAMESPACE: WORK_NS}},
            "data": {"big": "x" * 1000},
        },
        # A ClusterIP Service is healthy once applied; only a LoadBalancer waits for its ingress:
        # the rule reads spec.type, so the cache must keep it.
        {
            "apiVersion": "v1", "kind": "Service",
            "metadata": {"name": "d", "namespace": "ml", "labels": {c.LABEL_WORK_NAME: "w",
                                                                   c.LABEL_WORK_NAMESPACE: WORK_NS}},
            "spec": {"type": "ClusterIP", "clusterIP": "10.96.0.12", "ports": [{"port": 80, "protocol": "TCP"}]},
            "status": {"loadBalancer": {}},
        },
        {
            "apiVersion": "v1", "kind": "Service",
            "metadata": {"name": "d", "namespace": "ml", "labels": {c.LABEL_WORK_NAME: "w",
                                                                   c.LABEL_WORK_NAMESPACE: WORK_NS}},
            "spec": {"type": "LoadBalancer", "clusterIP": "10.96.0.13", "ports": [{"port": 80, "protocol": "TCP"}]},
            "status": {"loadBalancer": {}},
        },
    ],
    ids=["deployment", "failed-job", "configmap-of-another-work", "clusterip-service", "pending-load-balancer"],
)
def test_the_cached_fields_give_the_same_work_status_as_the_whole_object(live: dict[str, Any]) -> None:
    item = work("w", [live])
    ident = identifier_of(live, 0)
    list_item = {k: v for k, v in live.items() if k not in ("apiVersion", "kind")}
    trimmed = status_fields(list_item, api_version=live["apiVersion"], kind=live["kind"])

    def status_from(obj: dict[str, Any]) -> dict[str, Any]:
        conflict = not owned_by(obj, work_namespace=WORK_NS, work_name="w")
        result = ManifestResult(identifier=ident, applied=not conflict, conflict=conflict, live=obj)
        return work_status(item, [result], [], now=NOW)

    assert status_from(trimmed) == status_from(live)
    assert len(repr(trimmed)) < len(repr(live))
