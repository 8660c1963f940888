"""A Work carrying a kind the member does not serve: a clear Work condition, and no retry storm.

The member is the simulator's API (a member without JobSet's CRD, ``member_registry(without=…)``)
served over HTTP with an outer middleware that records every request, so the tests count the
requests the agent really sends. The discovery cache's clock is a plain counter the test moves.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from controlplane.apis.work_v1alpha1 import WorkReason
from member_agent.applying import WorkApplier
from member_agent.discovery import FIRST_BACKOFF
from member_agent.kubeapi import KubeApi
from member_agent.ledger import Ledger
from simulator.resources import member_registry
from tests.member_agent.memberapi import Clock, ServedMember, member_client, served_member

pytestmark = pytest.mark.timeout(120)

NOW = "2026-01-01T00:00:00Z"
JOBSET_DISCOVERY = "/apis/jobset.x-k8s.io/v1alpha2"


class Member(ServedMember):
    def to(self, path: str) -> int:
        return sum(1 for _, p, _ in self.requests if p == path or p.startswith(path + "/"))


@pytest.fixture
async def member() -> AsyncIterator[Member]:
    async with served_member(member_registry(without=frozenset({"jobsets"}))) as served:
        yield Member(url=served.url, objects=served.objects, requests=served.requests)


@pytest.fixture
async def api(member: Member) -> AsyncIterator[KubeApi]:
    async with member_client(member.url) as client:
        yield client


def work() -> dict[str, Any]:
    jobset = {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {"name": "train", "namespace": "ml"},
        "spec": {"replicatedJobs": [{"name": "w", "replicas": 1, "template": {"spec": {"template": {"spec": {
            "restartPolicy": "Never", "containers": [{"name": "main", "image": "train:1"}]}}}}}]},
    }
    configmap = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cfg", "namespace": "ml"}, "data": {"k": "v"}}
    return {
        "apiVersion": "work.gpufed.io/v1alpha1",
        "kind": "Work",
        "metadata": {"name": "ml-train-jobset", "namespace": "gpufed-es-a", "generation": 1},
        "spec": {"workload": {"manifests": [jobset, configmap]}},
    }


def applied(status: dict[str, Any]) -> dict[str, Any]:
    return next(c for c in status["conditions"] if c["type"] == "Applied")


async def test_an_unserved_kind_is_a_work_condition_and_the_rest_still_applies(
    member: Member, api: KubeApi, tmp_path: Path
) -> None:
    applier = WorkApplier(member=api, ledger=Ledger(tmp_path))
    status = await applier.reconcile(work(), now=NOW)

    condition = applied(status)
    assert (condition["status"], condition["reason"]) == ("False", WorkReason.KIND_NOT_SERVED)
    assert "does not serve JobSet in jobset.x-k8s.io/v1alpha2" in condition["message"]
    assert condition["message"].startswith("JobSet train in namespace ml: ")
    configmaps = member.objects.registry.require("v1", "ConfigMap")
    assert (await member.objects.get(configmaps, namespace="ml", name="cfg"))["data"] == {"k": "v"}


async def test_status_passes_do_not_ask_the_member_again_during_the_back_off(
    member: Member, api: KubeApi, tmp_path: Path
) -> None:
    clock = Clock()
    api.discovery.clock = clock
    applier = WorkApplier(member=api, ledger=Ledger(tmp_path))
    item = work()
    await applier.reconcile(item, now=NOW)
    assert member.to(JOBSET_DISCOVERY) == 1

    statuses = [await applier.refresh_status(item, now=NOW) for _ in range(50)]
    assert member.to(JOBSET_DISCOVERY) == 1  # 50 status passes, no request for the unserved kind
    assert all(applied(s)["reason"] == WorkReason.KIND_NOT_SERVED for s in statuses)

    clock.now += FIRST_BACKOFF + 0.1  # the back-off ran out: one look, then twice as long
    for _ in range(10):
        await applier.refresh_status(item, now=NOW)
    assert member.to(JOBSET_DISCOVERY) == 2
    clock.now += FIRST_BACKOFF + 0.1  # not yet past the doubled back-off
    await applier.refresh_status(item, now=NOW)
    assert member.to(JOBSET_DISCOVERY) == 2

    await applier.reconcile(item, now=NOW)  # an apply (new generation, resync) looks again
    assert member.to(JOBSET_DISCOVERY) == 3
