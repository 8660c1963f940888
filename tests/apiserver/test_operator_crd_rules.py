"""The operators' kinds keep their CRDs' value rules (``tests/data/operator_crd_fields.txt``), as
kube's structural schema validation and defaulting keep a custom resource's: a field the CRD
requires is ``Required value`` when left out, a value outside an enum ``Unsupported value: "X":
supported values: ...``, a number or a length past a bound kube's ``should be greater than or
equal to`` / ``Too long`` / ``Too many``; and a field the CRD defaults is filled where an object
leaves it out, on create, on update and on a read of an object stored without it. Over HTTP, on
the hub's registry and an etcd store."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from aiohttp.test_utils import TestClient

from controlplane.apiserver import codec
from controlplane.apiserver.objects import ObjectStore

from .test_kueue_defaults import applying_again_writes_nothing, ok, served  # noqa: F401 (fixtures)
from .test_operator_schema_types import (
    CLUSTER_RUNTIMES,
    JOBSETS,
    LWS,
    PYTORCH,
    RAYCLUSTERS,
    RAYJOBS,
    TRAINJOBS,
    jobset,
    lws,
    not_checked,
    pod,
    pytorch_job,
    ray_job,
    trainjob,
)
from .test_schema_types_and_nulls import refused_with

Obj = dict[str, Any]
Served = tuple[TestClient[Any, Any], ObjectStore]


def required(field: str) -> dict[str, str]:
    return {"reason": "FieldValueRequired", "message": "Required value", "field": field}


def unsupported(field: str, value: str, *supported: str) -> dict[str, str]:
    shown = ", ".join(f'"{v}"' for v in supported)
    return {
        "reason": "FieldValueNotSupported",
        "message": f'Unsupported value: "{value}": supported values: {shown}',
        "field": field,
    }


def invalid(field: str, value: Any, detail: str) -> dict[str, str]:
    return {
        "reason": "FieldValueInvalid",
        "message": f"Invalid value: {value}: {field} in body {detail}",
        "field": field,
    }


def raycluster(**worker: Any) -> Obj:
    group = {"groupName": "gpu", "rayStartParams": {}, "template": pod(), **worker}
    return {
        "apiVersion": "ray.io/v1",
        "kind": "RayCluster",
        "metadata": {"name": "rc", "namespace": "default"},
        "spec": {"headGroupSpec": {"rayStartParams": {}, "template": pod()}, "workerGroupSpecs": [group]},
    }


def without(obj: Obj, *path: str | int) -> Obj:
    """A copy of ``obj`` without the field at ``path``."""
    out = copy.deepcopy(obj)
    node: Any = out
    for step in path[:-1]:
        node = node[step]
    del node[path[-1]]
    return out


def with_value(obj: Obj, value: Any, *path: str | int) -> Obj:
    out = copy.deepcopy(obj)
    node: Any = out
    for step in path[:-1]:
        node = node.setdefault(step, {}) if isinstance(step, str) else node[step]
    node[path[-1]] = value
    return out


async def runtime_stored(client: TestClient[Any, Any]) -> None:
    runtime = {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "ClusterTrainingRuntime",
        "metadata": {"name": "torch"},
        "spec": {"mlPolicy": {"numNodes": 1, "torch": {}}},
    }
    await ok(await client.post(CLUSTER_RUNTIMES, json=runtime), 201)


REFUSALS = [
    (LWS, without(lws(), "spec", "leaderWorkerTemplate"), required("spec.leaderWorkerTemplate")),
    (
        LWS,
        without(lws(), "spec", "leaderWorkerTemplate", "workerTemplate"),
        required("spec.leaderWorkerTemplate.workerTemplate"),
    ),
    (
        LWS,
        lws(startupPolicy="LeaderStarted"),
        unsupported("spec.startupPolicy", "LeaderStarted", "LeaderCreated", "LeaderReady"),
    ),
    (LWS, lws(networkConfig={}), required("spec.networkConfig.subdomainPolicy")),
    (
        JOBSETS,
        without(jobset(1), "spec", "replicatedJobs", 0, "template"),
        required("spec.replicatedJobs[0].template"),
    ),
    (
        JOBSETS,
        with_value(jobset(1), "Sometimes", "spec", "failurePolicy", "restartStrategy"),
        unsupported("spec.failurePolicy.restartStrategy", "Sometimes", "Recreate", "BlockingRecreate"),
    ),
    (JOBSETS, with_value(jobset(1), {}, "spec", "successPolicy"), required("spec.successPolicy.operator")),
    (
        JOBSETS,
        with_value(jobset(1), -1, "spec", "ttlSecondsAfterFinished"),
        invalid("spec.ttlSecondsAfterFinished", -1, "should be greater than or equal to 0"),
    ),
    (PYTORCH, without(pytorch_job(), "spec", "pytorchReplicaSpecs"), required("spec.pytorchReplicaSpecs")),
    (RAYCLUSTERS, without(raycluster(), "spec", "headGroupSpec"), required("spec.headGroupSpec")),
    (
        RAYCLUSTERS,
        without(raycluster(), "spec", "workerGroupSpecs", 0, "groupName"),
        required("spec.workerGroupSpecs[0].groupName"),
    ),
    (
        RAYCLUSTERS,
        with_value(raycluster(), {"upscalingMode": "Eager"}, "spec", "autoscalerOptions"),
        unsupported("spec.autoscalerOptions.upscalingMode", "Eager", "Default", "Aggressive", "Conservative"),
    ),
    (TRAINJOBS, trainjob({}), required("spec.runtimeRef")),
    (
        TRAINJOBS,
        trainjob({"runtimeRef": {"name": "torch"}, "activeDeadlineSeconds": 0}),
        invalid("spec.activeDeadlineSeconds", 0, "should be greater than or equal to 1"),
    ),
    (
        TRAINJOBS,
        trainjob({"runtimeRef": {"name": "torch"}, "trainer": {"image": "x" * 501}}),
        {
            "reason": "FieldValueTooLong",
            "message": "Too long: may not be more than 500 bytes",
            "field": "spec.trainer.image",
        },
    ),
    (
        TRAINJOBS,
        trainjob(
            {"runtimeRef": {"name": "torch"}, "runtimePatches": [{"manager": f"m{i}"} for i in range(17)]}
        ),
        {
            "reason": "FieldValueTooMany",
            "message": "Too many: 17: must have at most 16 items",
            "field": "spec.runtimePatches",
        },
    ),
]


@pytest.mark.parametrize(
    ("collection", "obj", "cause"),
    REFUSALS,
    ids=[f"{obj['kind']}:{cause['field']}" for _, obj, cause in REFUSALS],
)
async def test_what_the_crd_refuses_is_refused_in_its_words(
    served: Served,  # noqa: F811
    collection: str,
    obj: Obj,
    cause: dict[str, str],
) -> None:
    client, _ = served
    await refused_with(client, collection, obj, cause, *not_checked(collection, cause))


async def test_the_crds_defaults_are_filled_on_create(served: Served) -> None:  # noqa: F811
    client, _ = served
    js = without(with_value(jobset(1), {}, "spec", "failurePolicy"), "spec", "replicatedJobs", 0, "replicas")
    stored = (await ok(await client.post(JOBSETS, json=js), 201))["spec"]
    assert (stored["replicatedJobs"][0]["groupName"], stored["replicatedJobs"][0]["replicas"]) == (
        "default",
        1,
    )
    assert stored["failurePolicy"] == {"restartStrategy": "Recreate"}
    stored = (
        await ok(await client.post(LWS, json=lws(rolloutStrategy={"rollingUpdateConfiguration": {}})), 201)
    )["spec"]
    template = stored["leaderWorkerTemplate"]
    assert (stored["replicas"], stored["startupPolicy"], template["size"], template["restartPolicy"]) == (
        1,
        "LeaderCreated",
        2,
        "RecreateGroupOnPodRestart",
    )
    assert stored["rolloutStrategy"] == {
        "type": "RollingUpdate",
        "rollingUpdateConfiguration": {"partition": 0, "maxUnavailable": 1, "maxSurge": 0},
    }
    # A worker group's minReplicas and maxReplicas are required and defaulted: defaulted first, as kube's.
    stored = (await ok(await client.post(RAYCLUSTERS, json=raycluster()), 201))["spec"]
    group = stored["workerGroupSpecs"][0]
    assert {k: group[k] for k in ("replicas", "minReplicas", "maxReplicas", "numOfHosts")} == {
        "replicas": 0,
        "minReplicas": 0,
        "maxReplicas": 2147483647,
        "numOfHosts": 1,
    }
    stored = (await ok(await client.post(RAYJOBS, json=ray_job()), 201))["spec"]
    assert (stored["backoffLimit"], stored["submissionMode"], stored["ttlSecondsAfterFinished"]) == (
        0,
        "K8sJobMode",
        0,
    )
    stored = (await ok(await client.post(PYTORCH, json=pytorch_job(runPolicy={})), 201))["spec"]
    assert stored["runPolicy"] == {"suspend": False}
    await runtime_stored(client)
    runtime = (await ok(await client.get(f"{CLUSTER_RUNTIMES}/torch")))["spec"]
    assert runtime["mlPolicy"]["torch"] == {"numProcPerNode": "auto"}
    stored = (await ok(await client.post(TRAINJOBS, json=trainjob({"runtimeRef": {"name": "torch"}})), 201))[
        "spec"
    ]
    assert stored == {
        "runtimeRef": {"name": "torch", "apiGroup": "trainer.kubeflow.org", "kind": "ClusterTrainingRuntime"},
        "suspend": False,
        "managedBy": "trainer.kubeflow.org/trainjob-controller",
    }


async def test_what_is_set_is_kept_and_an_update_is_defaulted_again(served: Served) -> None:  # noqa: F811
    client, _ = served
    given = lws(startupPolicy="LeaderReady", replicas=3)
    stored = await ok(await client.post(LWS, json=given), 201)
    assert (stored["spec"]["startupPolicy"], stored["spec"]["replicas"]) == ("LeaderReady", 3)
    updated = await ok(
        await client.put(
            f"{LWS}/lws", json=without(without(stored, "spec", "startupPolicy"), "spec", "replicas")
        )
    )
    assert (updated["spec"]["startupPolicy"], updated["spec"]["replicas"]) == ("LeaderCreated", 1)


async def test_an_object_stored_without_the_defaults_is_served_with_them(served: Served) -> None:  # noqa: F811
    client, objects = served
    rt = objects.registry.require("jobset.x-k8s.io/v1alpha2", "JobSet")
    old = jobset(2)
    old["metadata"].update(uid="u-1", creationTimestamp="2026-01-01T00:00:00Z", generation=1)
    await objects.store.create(rt.key(namespace="default", name="js"), codec.encode(old))
    read = await ok(await client.get(f"{JOBSETS}/js"))
    assert (
        read["spec"]["replicatedJobs"][0]["groupName"],
        read["spec"]["replicatedJobs"][0]["replicas"],
    ) == ("default", 2)
    listed = await ok(await client.get(JOBSETS))
    assert [item["spec"]["replicatedJobs"][0]["groupName"] for item in listed["items"]] == ["default"]


async def test_applying_the_same_object_again_writes_nothing(served: Served) -> None:  # noqa: F811
    client, _ = served
    await applying_again_writes_nothing(client, f"{JOBSETS}/js", jobset(1))
    await applying_again_writes_nothing(client, f"{RAYCLUSTERS}/rc", raycluster())


async def test_a_status_write_is_held_to_the_crds_status_rules(served: Served) -> None:  # noqa: F811
    client, _ = served
    stored = await ok(await client.post(JOBSETS, json=jobset(1)), 201)
    stored["status"] = {"replicatedJobsStatus": [{"name": "workers", "ready": 1}]}
    refused = await client.put(f"{JOBSETS}/js/status", json=stored)
    body = await refused.json()
    assert refused.status == 422, body
    assert [c["field"] for c in body["details"]["causes"]] == [
        *(f"status.replicatedJobsStatus[0].{count}" for count in ("active", "failed", "succeeded", "suspended")),
        "<nil>",  # JobSet's CRD has CEL rules: after a missing value, kube says it ran none of them
    ]
    await runtime_stored(client)
    job = await ok(await client.post(TRAINJOBS, json=trainjob({"runtimeRef": {"name": "torch"}})), 201)
    job["status"] = {"trainerStatus": {"progressPercentage": 101, "lastUpdatedTime": "2026-01-01T00:00:00Z"}}
    refused = await client.put(f"{TRAINJOBS}/tj/status", json=job)
    body = await refused.json()
    assert refused.status == 422, body
    assert body["details"]["causes"] == [
        invalid("status.trainerStatus.progressPercentage", 101, "should be less than or equal to 100")
    ]
