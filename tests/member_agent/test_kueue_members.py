"""The agent in a member that runs Kueue: a queued job (the Work keeps its label
``kueue.x-k8s.io/queue-name``) is created suspended, and later applies leave its suspend flag as
the member's Kueue set it. Without the label the Work stays the source of truth for the flag.

The pure rule is table-driven; the applier runs against the simulator's API over HTTP, where the
test plays the member's Kueue by flipping the flag itself.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from kubernetes_asyncio.client import ApiClient, Configuration

from controlplane.apiserver import app as app_module
from controlplane.apiserver.objects import ObjectStore
from controlplane.storage import MemoryStore
from member_agent.applying import WorkApplier
from member_agent.kubeapi import KubeApi
from member_agent.ledger import Ledger
from member_agent.manifests import with_member_kueue_suspend
from simulator.resources import member_registry

pytestmark = pytest.mark.timeout(120)

NOW = "2026-01-01T00:00:00Z"
QUEUE = {"kueue.x-k8s.io/queue-name": "team-a"}


def job(labels: dict[str, str], *, suspend: bool | None) -> dict[str, Any]:
    spec: dict[str, Any] = {"parallelism": 1, "template": {"spec": {
        "restartPolicy": "Never", "containers": [{"name": "main", "image": "train:1"}]}}}
    if suspend is not None:
        spec["suspend"] = suspend
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "train", "namespace": "ml", "labels": labels},
            "spec": spec}


def pytorchjob(labels: dict[str, str], *, suspend: bool) -> dict[str, Any]:
    return {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob",
            "metadata": {"name": "train", "namespace": "ml", "labels": labels},
            "spec": {"runPolicy": {"suspend": suspend}, "pytorchReplicaSpecs": {}}}


@pytest.mark.parametrize(
    ("body", "live", "kept"),
    [
        # The member's Kueue admitted it: an update does not suspend it again ...
        pytest.param(job(QUEUE, suspend=True), job(QUEUE, suspend=False), False, id="admitted-by-member"),
        # ... nor starts one it holds.
        pytest.param(job(QUEUE, suspend=False), job(QUEUE, suspend=True), True, id="held-by-member"),
        pytest.param(pytorchjob(QUEUE, suspend=True), pytorchjob(QUEUE, suspend=False), False, id="run-policy"),
        # Not queued in the member: the Work's flag wins.
        pytest.param(job({}, suspend=True), job({}, suspend=False), True, id="not-queued"),
        # The member shows no flag: the Work's stands.
        pytest.param(job(QUEUE, suspend=True), job(QUEUE, suspend=None), True, id="no-live-flag"),
    ],
)
def test_the_member_keeps_its_suspend_flag(body: dict[str, Any], live: dict[str, Any], kept: bool) -> None:
    out = with_member_kueue_suspend(body, live)
    spec = out["spec"]
    assert spec.get("runPolicy", spec)["suspend"] is kept


def test_other_kinds_are_left_alone() -> None:
    body = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"labels": QUEUE}, "spec": {"replicas": 2}}
    assert with_member_kueue_suspend(body, {**body, "spec": {"replicas": 2, "suspend": False}}) is body


@pytest.fixture
async def member() -> AsyncIterator[tuple[str, ObjectStore]]:
    async with MemoryStore() as store:
        registry = member_registry()
        objects = ObjectStore(store, registry)
        await objects.bootstrap()
        runner = web.AppRunner(app_module.create_app(objects, registry), access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        try:
            yield f"http://127.0.0.1:{runner.addresses[0][1]}", objects
        finally:
            await runner.cleanup()


def work(manifest: dict[str, Any], generation: int) -> dict[str, Any]:
    return {
        "apiVersion": "work.gpufed.io/v1alpha1", "kind": "Work",
        "metadata": {"name": "ml-train-job", "namespace": "gpufed-es-a", "generation": generation},
        "spec": {"workload": {"manifests": [manifest]}},
    }


@pytest.mark.parametrize(("labels", "after_reapply"), [(QUEUE, False), ({}, True)], ids=["queued", "not-queued"])
async def test_a_reapplied_work_leaves_the_members_kueue_in_charge(
    member: tuple[str, ObjectStore], tmp_path: Path, labels: dict[str, str], after_reapply: bool
) -> None:
    url, objects = member
    jobs = objects.registry.require("batch/v1", "Job")
    api = KubeApi(ApiClient(configuration=Configuration(host=url)), timeout=10)
    try:
        applier = WorkApplier(member=api, ledger=Ledger(tmp_path))
        await applier.reconcile(work(job(labels, suspend=True), 1), now=NOW)
        created = await objects.get(jobs, namespace="ml", name="train")
        assert created["spec"]["suspend"] is True
        assert created["metadata"]["labels"].get("kueue.x-k8s.io/queue-name") == labels.get("kueue.x-k8s.io/queue-name")

        created["spec"]["suspend"] = False  # the member's Kueue admits it
        await objects.update(jobs, created)
        await applier.reconcile(work(job(labels, suspend=True), 2), now=NOW)
        assert (await objects.get(jobs, namespace="ml", name="train"))["spec"]["suspend"] is after_reapply
    finally:
        await api.close()
