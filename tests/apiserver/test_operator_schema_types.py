"""The operators' kinds the hub builds in (Kubeflow's training jobs, KubeRay's, JobSet,
LeaderWorkerSet, Kubeflow Trainer's TrainJob and runtimes) are checked as their CRDs check them on a real cluster, by the schema the hub
serves for them: a value of another JSON type than its field's is refused (422, FieldValueTypeInvalid,
``... in body must be of type integer: "string"``), before the training operator's (or the
trainer's) webhook is asked; a null of a field that is not nullable is pruned; an int-or-string (a quantity) takes
either, and fields the schema does not declare are dropped with a warning, as the CRDs prune them. Over HTTP, on the hub's registry."""

from __future__ import annotations

from typing import Any

import pytest
from aiohttp.test_utils import TestClient

from .test_schema_types_and_nulls import refused_with, type_invalid

Client = TestClient[Any, Any]

PYTORCH = "/apis/kubeflow.org/v1/namespaces/default/pytorchjobs"
RAYJOBS = "/apis/ray.io/v1/namespaces/default/rayjobs"
JOBSETS = "/apis/jobset.x-k8s.io/v1alpha2/namespaces/default/jobsets"
LWS = "/apis/leaderworkerset.x-k8s.io/v1/namespaces/default/leaderworkersets"
TRAINJOBS = "/apis/trainer.kubeflow.org/v1alpha1/namespaces/default/trainjobs"
CLUSTER_RUNTIMES = "/apis/trainer.kubeflow.org/v1alpha1/clustertrainingruntimes"
RAYCLUSTERS = "/apis/ray.io/v1/namespaces/default/rayclusters"
#: The collections whose CRDs have CEL rules: after an error that blocks them (a wrong type, a
#: missing or unsupported value, one too long or too many), kube runs none and says so.
RULED = frozenset({RAYJOBS, RAYCLUSTERS, JOBSETS, TRAINJOBS, CLUSTER_RUNTIMES})
RULES_NOT_CHECKED = {
    "reason": "FieldValueInvalid",
    "message": "Invalid value: null: some validation rules were not checked because the object was invalid; "
               "correct the existing errors to complete validation",
    "field": "<nil>",
}


def not_checked(collection: str, cause: dict[str, str]) -> list[dict[str, str]]:
    """What kube adds after ``cause`` for a kind of ``collection``: that its rules were not run,
    when it has rules and ``cause`` blocks them."""
    return [RULES_NOT_CHECKED] if collection in RULED and cause["reason"] != "FieldValueInvalid" else []


def pod(**resources: Any) -> dict[str, Any]:
    container: dict[str, Any] = {"name": "pytorch", "image": "train:1"}
    if resources:
        container["resources"] = {"limits": resources}
    return {"spec": {"containers": [container]}}


def pytorch_job(*, master: Any = 1, worker: Any = 2, **spec: Any) -> dict[str, Any]:
    roles = {"Master": {"replicas": master, "template": pod()}, "Worker": {"replicas": worker, "template": pod()}}
    return {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "metadata": {"name": "train", "namespace": "default"},
            "spec": {"pytorchReplicaSpecs": roles, **spec}}


def ray_job(**spec: Any) -> dict[str, Any]:
    return {"apiVersion": "ray.io/v1", "kind": "RayJob", "metadata": {"name": "ray", "namespace": "default"},
            "spec": {"entrypoint": "python run.py", **spec}}


def jobset(replicas: Any) -> dict[str, Any]:
    template = {"spec": {"template": {"spec": {"containers": [{"name": "w", "image": "w:1"}], "restartPolicy": "Never"}}}}
    return {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet", "metadata": {"name": "js", "namespace": "default"},
            "spec": {"replicatedJobs": [{"name": "workers", "replicas": replicas, "template": template}]}}


def trainjob(spec: Any) -> dict[str, Any]:
    return {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob",
            "metadata": {"name": "tj", "namespace": "default"}, "spec": spec}


def cluster_runtime(**ml_policy: Any) -> dict[str, Any]:
    return {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "ClusterTrainingRuntime",
            "metadata": {"name": "torch"}, "spec": {"mlPolicy": ml_policy}}


def lws(**spec: Any) -> dict[str, Any]:
    template = {"workerTemplate": {"spec": {"containers": [{"name": "w", "image": "w:1"}]}}, "size": 2}
    return {"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet",
            "metadata": {"name": "lws", "namespace": "default"}, "spec": {"leaderWorkerTemplate": template, **spec}}


@pytest.mark.parametrize(
    ("collection", "obj", "cause"),
    [
        (PYTORCH, pytorch_job(worker="3"), type_invalid("spec.pytorchReplicaSpecs.Worker.replicas", "string", "integer")),
        (PYTORCH, pytorch_job(runPolicy={"backoffLimit": "2"}),
         type_invalid("spec.runPolicy.backoffLimit", "string", "integer")),
        (RAYJOBS, ray_job(shutdownAfterJobFinishes="true"),
         type_invalid("spec.shutdownAfterJobFinishes", "string", "boolean")),
        (JOBSETS, jobset("2"), type_invalid("spec.replicatedJobs[0].replicas", "string", "integer")),
        (LWS, lws(replicas=1.5), type_invalid("spec.replicas", "number", "integer")),
        (LWS, lws(rolloutStrategy={"rollingUpdateConfiguration": {"maxSurge": True}}),
         type_invalid("spec.rolloutStrategy.rollingUpdateConfiguration.maxSurge", "boolean", "integer,string")),
        # A TrainJob's refusals come before the trainer's webhook, which reads its runtimeRef.
        (TRAINJOBS, trainjob(1.5e308), type_invalid("spec", "number", "object")),
        (TRAINJOBS, trainjob("x"), type_invalid("spec", "string", "object")),
        (TRAINJOBS, trainjob({"runtimeRef": {"name": 5}}), type_invalid("spec.runtimeRef.name", "integer", "string")),
        (TRAINJOBS, trainjob({"runtimeRef": {"name": "torch"}, "trainer": {"numNodes": "2"}}),
         type_invalid("spec.trainer.numNodes", "string", "integer")),
        (CLUSTER_RUNTIMES, cluster_runtime(numNodes=[2]), type_invalid("spec.mlPolicy.numNodes", "array", "integer")),
    ],
    ids=["training-replicas", "training-run-policy", "rayjob", "jobset", "lws", "lws-int-or-string",
         "trainjob-spec-number", "trainjob-spec-string", "trainjob-runtime-name", "trainjob-nodes", "runtime-nodes"],
)
async def test_a_value_of_another_json_type_is_refused_as_the_crd_refuses_it(
    hub: Client, collection: str, obj: dict[str, Any], cause: dict[str, str]
) -> None:
    await refused_with(hub, collection, obj, cause, *not_checked(collection, cause))


async def test_the_schema_refuses_before_the_operators_webhook(hub: Client) -> None:
    # The webhook would deny a Master whose replicas are not 1 (403); kube checks the schema first.
    response = await hub.post(PYTORCH, json=pytorch_job(master="1"))
    status = await response.json()
    assert response.status == 422, status
    assert status["details"]["causes"] == [type_invalid("spec.pytorchReplicaSpecs.Master.replicas", "string", "integer")]
    # Of the right type, the webhook's refusal is what comes back.
    denied = await hub.post(PYTORCH, json=pytorch_job(master=2))
    assert denied.status == 403, await denied.text()


async def test_a_body_the_operators_webhook_cannot_read_is_refused_as_kube_refuses_it(hub: Client) -> None:
    # The webhook is called only on what kube decodes and its CRD's schema takes.
    await refused_with(hub, PYTORCH, {**pytorch_job(), "spec": "x"}, type_invalid("spec", "string", "object"))
    job = pytorch_job()
    job["metadata"]["name"] = [1, "a"]
    response = await hub.post(PYTORCH, json=job)
    status = await response.json()
    assert response.status == 400, status
    assert status["message"] == ('PyTorchJob in version "v1" cannot be handled as a PyTorchJob: json: cannot unmarshal '
                                 'array into Go struct field ObjectMeta.metadata.name of type string')


async def test_a_pod_templates_fields_are_checked_too(hub: Client) -> None:
    job = pytorch_job()
    job["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]["stdin"] = "yes"
    response = await hub.post(PYTORCH, json=job)
    assert response.status == 422, await response.text()
    field = "spec.pytorchReplicaSpecs.Worker.template.spec.containers[0].stdin"
    assert (await response.json())["details"]["causes"] == [type_invalid(field, "string", "boolean")]


async def test_nulls_are_pruned_quantities_kept_and_undeclared_fields_dropped(hub: Client) -> None:
    job = pytorch_job(worker=None, runPolicy={"backoffLimit": None, "suspend": True}, nextRelease={"knob": 1})
    worker = job["spec"]["pytorchReplicaSpecs"]["Worker"]
    worker["template"] = pod(**{"nvidia.com/gpu": 8, "cpu": "500m"})
    worker["template"]["metadata"] = {"creationTimestamp": None}
    response = await hub.post(PYTORCH, json=job)
    assert response.status == 201, await response.text()
    assert response.headers.getall("Warning") == ['299 - "unknown field \\"spec.nextRelease\\""']
    stored = await (await hub.get(f"{PYTORCH}/train")).json()
    spec = stored["spec"]
    assert "replicas" not in spec["pytorchReplicaSpecs"]["Worker"]
    assert spec["runPolicy"] == {"suspend": True}
    assert "nextRelease" not in spec
    limits = spec["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]["resources"]["limits"]
    assert limits == {"nvidia.com/gpu": 8, "cpu": "500m"}


async def test_a_rayjob_jobset_and_lws_of_the_right_types_are_stored(hub: Client) -> None:
    for collection, obj in ((RAYJOBS, ray_job(shutdownAfterJobFinishes=True, ttlSecondsAfterFinished=None)),
                            (JOBSETS, jobset(2)),
                            (LWS, lws(replicas=2, rolloutStrategy={"rollingUpdateConfiguration": {"maxSurge": "50%"}}))):
        response = await hub.post(collection, json=obj)
        assert response.status == 201, await response.text()
    stored = await (await hub.get(f"{RAYJOBS}/ray")).json()
    # The null is pruned, then the CRD's default (``+kubebuilder:default:=0``) fills the field, as kube's.
    assert stored["spec"]["ttlSecondsAfterFinished"] == 0


async def test_an_update_and_a_status_write_are_checked(hub: Client) -> None:
    created = await hub.post(JOBSETS, json=jobset(1))
    assert created.status == 201, await created.text()
    stored = await created.json()
    stored["spec"]["replicatedJobs"][0]["replicas"] = "3"
    updated = await hub.put(f"{JOBSETS}/js", json=stored)
    assert updated.status == 422, await updated.text()
    assert (await updated.json())["details"]["causes"] == [
        type_invalid("spec.replicatedJobs[0].replicas", "string", "integer"), RULES_NOT_CHECKED
    ]
    stored = await (await hub.get(f"{JOBSETS}/js")).json()
    stored["status"] = {"restarts": "1"}
    written = await hub.put(f"{JOBSETS}/js/status", json=stored)
    assert written.status == 422, await written.text()
    assert (await written.json())["details"]["causes"] == [
        type_invalid("status.restarts", "string", "integer"), RULES_NOT_CHECKED
    ]


async def test_an_integer_written_with_a_zero_fraction_is_that_integer(hub: Client) -> None:
    # kube decodes a custom resource's 3.0 as a float64 its schema takes for an integer, and stores it as 3.
    job = pytorch_job(worker=3.0)
    job["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]["ports"] = [{"containerPort": 29500.0}]
    response = await hub.post(PYTORCH, json=job)
    assert response.status == 201, await response.text()
    stored = (await (await hub.get(f"{PYTORCH}/train")).json())["spec"]["pytorchReplicaSpecs"]["Worker"]
    assert stored["replicas"] == 3 and type(stored["replicas"]) is int
    port = stored["template"]["spec"]["containers"][0]["ports"][0]["containerPort"]  # kube's definitions' integer
    assert port == 29500 and type(port) is int
    # An update and a status write alike.
    assert (await hub.post(JOBSETS, json=jobset(1))).status == 201
    current = await (await hub.get(f"{JOBSETS}/js")).json()
    current["spec"]["replicatedJobs"][0]["replicas"] = 2.0
    updated = await hub.put(f"{JOBSETS}/js", json=current)
    assert updated.status == 200, await updated.text()
    current = await updated.json()
    counts = {"ready": 2.0, "succeeded": 0, "failed": 0, "active": 2, "suspended": 0}
    current["status"] = {"restarts": 1.0, "replicatedJobsStatus": [{"name": "workers", **counts}]}
    written = await hub.put(f"{JOBSETS}/js/status", json=current)
    assert written.status == 200, await written.text()
    stored = await (await hub.get(f"{JOBSETS}/js")).json()
    replicas, status = stored["spec"]["replicatedJobs"][0]["replicas"], stored["status"]
    assert (replicas, type(replicas)) == (2, int)
    assert status == {"restarts": 1, "replicatedJobsStatus": [{"name": "workers", **counts, "ready": 2}]}
    assert [type(status["restarts"]), type(status["replicatedJobsStatus"][0]["ready"])] == [int, int]


async def test_a_fraction_or_a_float_past_the_safe_integers_is_no_integer(hub: Client) -> None:
    # kube-openapi takes a float64 for an integer only within JavaScript's safe integers (2^53 - 1).
    await refused_with(hub, LWS, lws(replicas=2.0**60), type_invalid("spec.replicas", "number", "integer"))
    await refused_with(hub, LWS, lws(replicas=2.5), type_invalid("spec.replicas", "number", "integer"))
