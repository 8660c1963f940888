"""Kubeflow Trainer's kinds on the hub's API (``trainer.kubeflow.org/v1alpha1``): TrainJob (with
its ``status`` subresource and the CRD's defaults), TrainingRuntime and the cluster-scoped
ClusterTrainingRuntime, and the trainer's validating webhook: a TrainJob naming a runtime that is
not stored, or a kind the trainer has no runtime for, is refused with a 403 in the trainer's words.

The runtime and TrainJobs are shaped as kubeflow/trainer's ``manifests/base/runtimes/
torch_distributed.yaml`` and ``examples/yaml/basic/02-multi-node.yaml``, ``03-with-runtime.yaml``
(their scripts shortened)."""

from __future__ import annotations

import copy
from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiohttp.test_utils import TestClient

from controlplane.apiserver.objects import ObjectStore
from controlplane.apiserver.trainjobs import trainjob_runtime_admission

from .hubapi import hub_api

API = "/apis/trainer.kubeflow.org/v1alpha1"
TRAINJOBS = f"{API}/namespaces/default/trainjobs"


def node_template(image: str, **container: Any) -> dict[str, Any]:
    return {"spec": {"replicatedJobs": [{"name": "node", "template": {
        "metadata": {"labels": {"trainer.kubeflow.org/trainjob-ancestor-step": "trainer"}},
        "spec": {"template": {"spec": {"containers": [{"name": "node", "image": image, **container}]}}},
    }}]}}


TORCH_DISTRIBUTED = {
    "apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "ClusterTrainingRuntime",
    "metadata": {"name": "torch-distributed"},
    "spec": {"mlPolicy": {"numNodes": 1, "torch": {"numProcPerNode": "auto"}},
             "template": node_template("pytorch/pytorch:2.7.1-cuda12.6-cudnn9-runtime",
                                       command=["/bin/bash", "-c", "echo Torch Distributed Runtime"])},
}
CUSTOM_RUNTIME = {
    "apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainingRuntime",
    "metadata": {"name": "custom-runtime", "namespace": "default", "labels": {"trainer.kubeflow.org/framework": "torch"}},
    "spec": {"mlPolicy": {"numNodes": 1, "torch": {"numProcPerNode": "auto"}},
             "template": node_template("python:3.11-slim", resources={
                 "requests": {"cpu": "500m", "memory": "512Mi"}, "limits": {"cpu": "1000m", "memory": "1Gi"}})},
}


def trainjob(name: str, runtime: dict[str, Any], *, nodes: int = 3) -> dict[str, Any]:
    return {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob",
            "metadata": {"name": name, "namespace": "default", "labels": {"app": "trainer-example"}},
            "spec": {"runtimeRef": runtime,
                     "trainer": {"numNodes": nodes, "image": "alpine:latest", "command": ["sh", "-c", "echo training"]}}}


MULTI_NODE = trainjob("multi-node-example", {"apiGroup": "trainer.kubeflow.org", "kind": "ClusterTrainingRuntime",
                                             "name": "torch-distributed"})
WITH_RUNTIME = trainjob("custom-runtime-job", {"apiGroup": "trainer.kubeflow.org", "kind": "TrainingRuntime",
                                               "name": "custom-runtime"}, nodes=1)


@pytest.fixture
async def api() -> AsyncIterator[TestClient[Any, Any]]:
    def wire(objects: ObjectStore) -> None:
        objects.admit_writes(trainjob_runtime_admission(objects))  # as the hub does

    async with hub_api(wire) as client:
        yield client


async def created(api: TestClient[Any, Any], url: str, body: dict[str, Any]) -> dict[str, Any]:
    response = await api.post(url, json=body)
    answer: dict[str, Any] = await response.json()
    assert response.status == 201, answer
    return answer


def denied(message: str) -> dict[str, Any]:
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "reason": "Forbidden", "code": 403,
            "message": f'admission webhook "validator.trainjob.trainer.kubeflow.org" denied the request: {message}'}


async def test_the_upstream_runtimes_and_trainjobs_are_stored(api: TestClient[Any, Any]) -> None:
    await created(api, f"{API}/clustertrainingruntimes", TORCH_DISTRIBUTED)
    await created(api, f"{API}/namespaces/default/trainingruntimes", CUSTOM_RUNTIME)
    multi = await created(api, TRAINJOBS, MULTI_NODE)
    assert multi["spec"]["trainer"] == MULTI_NODE["spec"]["trainer"]
    assert multi["spec"]["suspend"] is False
    assert multi["spec"]["managedBy"] == "trainer.kubeflow.org/trainjob-controller"
    await created(api, TRAINJOBS, WITH_RUNTIME)
    runtime = await (await api.get(f"{API}/clustertrainingruntimes/torch-distributed")).json()
    # As written, with the CRD's defaults of the JobSet spec it embeds (a replicated job's group and count).
    expected = copy.deepcopy(TORCH_DISTRIBUTED["spec"])
    for replicated in expected["template"]["spec"]["replicatedJobs"]:
        replicated.setdefault("groupName", "default")
        replicated.setdefault("replicas", 1)
    assert runtime["spec"] == expected


async def test_the_runtime_reference_gets_the_crd_defaults(api: TestClient[Any, Any]) -> None:
    await created(api, f"{API}/clustertrainingruntimes", TORCH_DISTRIBUTED)
    job = await created(api, TRAINJOBS, trainjob("short", {"name": "torch-distributed"}))
    assert job["spec"]["runtimeRef"] == {"name": "torch-distributed", "apiGroup": "trainer.kubeflow.org",
                                         "kind": "ClusterTrainingRuntime"}


@pytest.mark.parametrize(("ref", "message"), [
    ({"name": "nonexistent-runtime"},
     'spec.RuntimeRef: Invalid value: {"name":"nonexistent-runtime","apiGroup":"trainer.kubeflow.org",'
     '"kind":"ClusterTrainingRuntime"}: ClusterTrainingRuntime.trainer.kubeflow.org "nonexistent-runtime" not found: '
     "specified clusterTrainingRuntime must be created before the TrainJob is created"),
    ({"name": "torch-distributed", "kind": "TrainingRuntime"},
     'spec.runtimeRef: Invalid value: {"name":"torch-distributed","apiGroup":"trainer.kubeflow.org",'
     '"kind":"TrainingRuntime"}: TrainingRuntime.trainer.kubeflow.org "torch-distributed" not found: '
     "specified trainingRuntime must be created before the TrainJob is created"),
    ({"name": "torch-distributed", "kind": "Runtime"}, "unsupported runtime: Runtime.trainer.kubeflow.org"),
    ({"name": "torch-distributed", "apiGroup": "example.com"}, "unsupported runtime: ClusterTrainingRuntime.example.com"),
])
async def test_a_trainjob_whose_runtime_the_trainer_cannot_find_is_refused(
    api: TestClient[Any, Any], ref: dict[str, Any], message: str
) -> None:
    await created(api, f"{API}/clustertrainingruntimes", TORCH_DISTRIBUTED)  # cluster-wide: not a TrainingRuntime
    response = await api.post(TRAINJOBS, json=trainjob("train", ref))
    assert (response.status, await response.json()) == (403, denied(message))
    assert (await api.get(f"{TRAINJOBS}/train")).status == 404


async def test_a_namespaced_runtime_is_found_only_in_its_namespace(api: TestClient[Any, Any]) -> None:
    await created(api, f"{API}/namespaces/default/trainingruntimes", CUSTOM_RUNTIME)
    assert (await api.post("/api/v1/namespaces", json={"metadata": {"name": "team-b"}})).status == 201
    elsewhere = copy.deepcopy(WITH_RUNTIME)
    elsewhere["metadata"]["namespace"] = "team-b"
    response = await api.post(f"{API}/namespaces/team-b/trainjobs", json=elsewhere)
    assert response.status == 403
    assert "specified trainingRuntime must be created" in (await response.json())["message"]


async def test_the_status_is_written_through_its_subresource(api: TestClient[Any, Any]) -> None:
    await created(api, f"{API}/clustertrainingruntimes", TORCH_DISTRIBUTED)
    job = await created(api, TRAINJOBS, {**MULTI_NODE, "status": {"conditions": [{"type": "Complete"}]}})
    assert "status" not in job  # a create drops the status
    job["status"] = {"jobsStatus": [{"name": "node", "active": 3, "ready": 3, "succeeded": 0, "failed": 0, "suspended": 0}]}
    job["spec"]["trainer"]["numNodes"] = 9
    written = await api.put(f"{TRAINJOBS}/multi-node-example/status", json=job)
    assert written.status == 200, await written.text()
    stored = await (await api.get(f"{TRAINJOBS}/multi-node-example")).json()
    assert stored["status"] == job["status"]
    assert stored["spec"]["trainer"]["numNodes"] == 3


async def test_discovery_and_openapi_list_the_trainer_kinds(api: TestClient[Any, Any]) -> None:
    resources = {r["name"]: r for r in (await (await api.get(API)).json())["resources"]}
    assert {"trainjobs", "trainjobs/status", "trainingruntimes", "clustertrainingruntimes"} <= set(resources)
    assert (resources["trainjobs"]["namespaced"], resources["clustertrainingruntimes"]["namespaced"]) == (True, False)
    document = await (await api.get("/openapi/v3/apis/trainer.kubeflow.org/v1alpha1")).json()
    schemas = document["components"]["schemas"]
    assert "trainer" in schemas["org.kubeflow.trainer.v1alpha1.TrainJobSpec"]["properties"]
    assert "numNodes" in schemas["org.kubeflow.trainer.v1alpha1.Trainer"]["properties"]
    runtime_spec = schemas["org.kubeflow.trainer.v1alpha1.TrainingRuntimeSpec"]["properties"]["template"]
    assert runtime_spec["properties"]["spec"]["allOf"][0]["$ref"].endswith("io.x-k8s.jobset.v1alpha2.JobSetSpec")


@pytest.mark.parametrize(("change", "error"), [
    ({"trainer": {"numNodes": 5}}, 'spec.trainer: Invalid value: "object": field is immutable'),
    ({"runtimeRef": {"name": "other"}}, 'spec.runtimeRef: Invalid value: "object": field is immutable'),
    ({"managedBy": "kueue.x-k8s.io/multikueue"}, 'spec.managedBy: Invalid value: "string": field is immutable'),
    ({"managedBy": "someone"},
     '[spec.managedBy: Invalid value: "string": ManagedBy must be trainer.kubeflow.org/trainjob-controller or '
     'kueue.x-k8s.io/multikueue if set, spec.managedBy: Invalid value: "string": field is immutable]'),
])
async def test_the_crd_keeps_what_its_rules_make_immutable(
    api: TestClient[Any, Any], change: dict[str, Any], error: str
) -> None:
    await created(api, f"{API}/clustertrainingruntimes", TORCH_DISTRIBUTED)
    await created(api, TRAINJOBS, MULTI_NODE)
    response = await api.patch(f"{TRAINJOBS}/multi-node-example", json={"spec": change},
                               headers={"Content-Type": "application/merge-patch+json"})
    answer = await response.json()
    assert (response.status, answer["reason"]) == (422, "Invalid"), answer
    assert answer["message"] == f'TrainJob.trainer.kubeflow.org "multi-node-example" is invalid: {error}'


async def test_a_trainjob_may_be_given_a_trainer_it_had_none_of(api: TestClient[Any, Any]) -> None:
    await created(api, f"{API}/clustertrainingruntimes", TORCH_DISTRIBUTED)
    bare = copy.deepcopy(MULTI_NODE)
    del bare["spec"]["trainer"]
    await created(api, TRAINJOBS, bare)
    response = await api.patch(f"{TRAINJOBS}/multi-node-example", json={"spec": {"trainer": {"numNodes": 2}}},
                               headers={"Content-Type": "application/merge-patch+json"})
    assert response.status == 200, await response.text()


async def test_a_trainjob_managed_by_an_unknown_controller_is_invalid(api: TestClient[Any, Any]) -> None:
    await created(api, f"{API}/clustertrainingruntimes", TORCH_DISTRIBUTED)
    body = copy.deepcopy(MULTI_NODE)
    body["spec"]["managedBy"] = "someone"
    response = await api.post(TRAINJOBS, json=body)
    answer = await response.json()
    assert (response.status, answer["message"]) == (422, (
        'TrainJob.trainer.kubeflow.org "multi-node-example" is invalid: spec.managedBy: Invalid value: "string": '
        "ManagedBy must be trainer.kubeflow.org/trainjob-controller or kueue.x-k8s.io/multikueue if set"))
