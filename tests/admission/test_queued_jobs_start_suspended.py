"""Kueue's job webhooks' default on the hub's API: a job of a kind Kueue suspends (batch/v1 Job,
JobSet, the Kubeflow jobs, RayJob, RayCluster) created with a queue name is stored suspended (so
it starts only once admitted, with the admitted flavor's node labels); one without a queue name,
or of a kind without a suspend flag, is stored as sent. A real hub (embedded etcd, HTTPS), one for
the module: each test's objects have names of their own."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio

from controlplane.hub import Hub
from controlplane.hubconfig import HubConfig

#: The tests run on their module's event loop, where its hub runs.
pytestmark = pytest.mark.asyncio(loop_scope="module")


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def hub(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Hub]:
    async with Hub(HubConfig(state_dir=tmp_path_factory.mktemp("hub"), port=0)) as running:
        yield running


def job(name: str, labels: dict[str, str]) -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name, "namespace": "default", "labels": labels},
        "spec": {"template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "main", "image": "train:1"}]}}},
    }


@pytest.mark.parametrize(("labels", "suspended"), [
    ({"kueue.x-k8s.io/queue-name": "team-a"}, True),
    ({"app": "train"}, False),
])
async def test_a_job_created_with_a_queue_name_is_stored_suspended(
    hub: Hub, labels: dict[str, str], suspended: bool
) -> None:
    objects = hub.objects
    assert objects is not None
    jobs = objects.registry.require("batch/v1", "Job")
    name = f"train-{'queued' if suspended else 'plain'}"
    created = await objects.create(jobs, job(name, labels))
    assert created["spec"]["suspend"] is suspended
    stored = await objects.get(jobs, namespace="default", name=name)
    assert stored["spec"]["suspend"] is suspended


POD = {"spec": {"restartPolicy": "Never", "containers": [{"name": "main", "image": "train:1"}]}}


def named(container: str) -> dict[str, Any]:
    """POD with the container a training operator's webhook requires of its kind."""
    return {"spec": {**POD["spec"], "containers": [{"name": container, "image": "train:1"}]}}

QUEUED = {"kueue.x-k8s.io/queue-name": "team-a"}


@pytest.mark.parametrize(("obj", "path"), [
    ({"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
      "spec": {"replicatedJobs": [{"name": "workers", "template": {"spec": {"template": POD}}}]}}, ("spec", "suspend")),
    ({"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob",
      "spec": {"pytorchReplicaSpecs": {"Master": {"replicas": 1, "template": named("pytorch")}}}}, ("spec", "runPolicy", "suspend")),
    ({"apiVersion": "kubeflow.org/v1", "kind": "TFJob",
      "spec": {"tfReplicaSpecs": {"Worker": {"replicas": 2, "template": named("tensorflow")}}}}, ("spec", "runPolicy", "suspend")),
    ({"apiVersion": "ray.io/v1", "kind": "RayCluster", "spec": {"headGroupSpec": {"rayStartParams": {}, "template": POD}}},
     ("spec", "suspend")),
])
async def test_every_job_kind_kueue_suspends_is_stored_suspended_with_a_queue_name(
    hub: Hub, obj: dict[str, Any], path: tuple[str, ...],
) -> None:
    objects = hub.objects
    assert objects is not None
    rt = objects.registry.require(obj["apiVersion"], obj["kind"])
    for name, labels, suspended in (("queued", QUEUED, True), ("plain", {"app": "train"}, None)):
        created = await objects.create(rt, {**obj, "metadata": {"name": name, "namespace": "default", "labels": labels}})
        value: Any = created
        for key in path:
            value = (value or {}).get(key)
        assert value is suspended, (name, created["spec"])


async def test_a_deployment_has_no_suspend_flag_to_set(hub: Hub) -> None:
    objects = hub.objects
    assert objects is not None
    rt = objects.registry.require("apps/v1", "Deployment")
    created = await objects.create(rt, {
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "serve", "namespace": "default", "labels": QUEUED},
        "spec": {"selector": {"matchLabels": {"app": "serve"}},
                 "template": {"metadata": {"labels": {"app": "serve"}}, "spec": {"containers": [{"name": "main", "image": "serve:1"}]}}},
    })
    assert "suspend" not in created["spec"]
