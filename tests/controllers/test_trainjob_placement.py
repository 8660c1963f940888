"""A Kubeflow Trainer TrainJob on the in-process hub: placed by what its runtime says (nodes, GPUs
per node, overridden by ``resourcesPerNode``), its namespaced TrainingRuntime sent with it, and
held with a message naming the runtime while the hub does not have it."""

from __future__ import annotations

from typing import Any

from controlplane.apiserver.objects import ObjectStore
from controlplane.controllers.manager import ControllerManager
from gpufed.commands.explain import render_explanation

from .fleet import A100, eventually, node_shape, put_cluster, settled
from .test_dependencies import NS, binding_of, create, get_or_none, manifest, works_in

API = "trainer.kubeflow.org/v1alpha1"


def runtime(kind: str, *, gpus: int, num_nodes: int) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "torch-distributed"}
    if kind == "TrainingRuntime":
        meta["namespace"] = NS
    node = {"name": "node", "template": {
        "metadata": {"labels": {"trainer.kubeflow.org/trainjob-ancestor-step": "trainer"}},
        "spec": {"template": {"spec": {"containers": [
            {"name": "node", "image": "pytorch/pytorch:2.5", "resources": {"limits": {"nvidia.com/gpu": gpus}}},
        ]}}}}}
    return {"apiVersion": API, "kind": kind, "metadata": meta, "spec": {
        "mlPolicy": {"numNodes": num_nodes, "torch": {"numProcPerNode": "auto"}},
        "podGroupPolicy": {"coscheduling": {"scheduleTimeoutSeconds": 120}},
        "template": {"spec": {"replicatedJobs": [node]}},
    }}


def trainjob(name: str, kind: str, trainer: dict[str, Any] | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"runtimeRef": {"name": "torch-distributed", "kind": kind}}
    if trainer:
        spec["trainer"] = trainer
    return {"apiVersion": API, "kind": "TrainJob", "metadata": {"name": name, "namespace": NS}, "spec": spec}


def policy(clusters: list[str]) -> dict[str, Any]:
    return {"apiVersion": "policy.gpufed.io/v1alpha1", "kind": "PropagationPolicy",
            "metadata": {"name": "training", "namespace": NS},
            "spec": {"resourceSelectors": [{"apiVersion": API, "kind": "TrainJob"}], "propagateDeps": True,
                     "placement": {"clusterAffinity": {"clusterNames": clusters}}}}


async def fleet(objects: ObjectStore, manager: ControllerManager) -> None:
    await put_cluster(objects, "small", node_shape(4, gpus=2, product=A100))
    await put_cluster(objects, "big", node_shape(2, gpus=8, product=A100))
    await settled(manager)


async def test_a_trainjob_lands_where_its_runtimes_nodes_fit_and_its_runtime_goes_with_it(
    objects: ObjectStore, manager: ControllerManager
) -> None:
    await fleet(objects, manager)
    await create(objects, runtime("TrainingRuntime", gpus=1, num_nodes=4))
    await create(objects, policy(["small", "big"]))
    # The TrainJob asks 2 nodes of 8 GPUs: only "big" has such nodes.
    await create(objects, trainjob("llama", "TrainingRuntime", {"numNodes": 2, "resourcesPerNode": {"limits": {"nvidia.com/gpu": 8}}}))

    works = await works_in(objects, "llama-trainjob", {"big"})
    bound = await binding_of(objects, "llama-trainjob")
    assert bound is not None
    assert (bound["spec"]["replicas"], bound["spec"]["gang"]) == (2, True)
    assert bound["spec"]["replicaRequirements"]["resourceRequest"] == {"nvidia.com/gpu": "8"}
    assert [(c["name"], c["replicas"]) for c in bound["spec"]["components"]] == [("node", 2)]
    assert manifest(works["big"])["spec"]["trainer"]["numNodes"] == 2  # the member gets the TrainJob as written
    sent = manifest((await works_in(objects, "torch-distributed-trainingruntime", {"big"}))["big"])
    assert (sent["kind"], sent["metadata"]["name"]) == ("TrainingRuntime", "torch-distributed")


async def test_a_trainjob_whose_runtime_is_missing_waits_naming_it_and_is_placed_once_it_exists(
    objects: ObjectStore, manager: ControllerManager
) -> None:
    await fleet(objects, manager)
    await create(objects, policy(["small", "big"]))
    await create(objects, trainjob("mistral", "ClusterTrainingRuntime"))

    async def held() -> dict[str, Any] | None:
        job = await get_or_none(objects, API, "TrainJob", "mistral")
        conditions = {c["type"]: c for c in ((job or {}).get("status") or {}).get("conditions") or ()}
        return conditions.get("Propagated")

    propagated = await eventually(held, what="the TrainJob's Propagated condition")
    assert (propagated["status"], propagated["reason"]) == ("False", "RuntimeNotFound")
    assert propagated["message"].startswith('ClusterTrainingRuntime.trainer.kubeflow.org "torch-distributed" not found')
    assert await binding_of(objects, "mistral-trainjob") is None

    # The runtime's 4 nodes of 2 GPUs: "small" (4 x 2) holds them whole.
    await create(objects, runtime("ClusterTrainingRuntime", gpus=2, num_nodes=4))
    await works_in(objects, "mistral-trainjob", {"small"})
    bound = await binding_of(objects, "mistral-trainjob")
    assert bound is not None and bound["spec"]["replicas"] == 4
    assert bound["spec"]["replicaRequirements"]["resourceRequest"] == {"nvidia.com/gpu": "2"}


async def test_a_training_runtime_is_looked_for_in_the_trainjobs_namespace_only(
    objects: ObjectStore, manager: ControllerManager
) -> None:
    await fleet(objects, manager)
    elsewhere = runtime("TrainingRuntime", gpus=1, num_nodes=2)
    elsewhere["metadata"]["namespace"] = "research"
    await create(objects, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "research"}})
    await create(objects, elsewhere)
    await create(objects, runtime("ClusterTrainingRuntime", gpus=1, num_nodes=2))  # same name, other kind
    await create(objects, policy(["small", "big"]))
    await create(objects, trainjob("phi", "TrainingRuntime"))

    async def held() -> dict[str, Any] | None:
        job = await get_or_none(objects, API, "TrainJob", "phi")
        return next((c for c in ((job or {}).get("status") or {}).get("conditions") or () if c["type"] == "Propagated"), None)

    propagated = await eventually(held, what="the TrainJob's Propagated condition")
    assert propagated["reason"] == "RuntimeNotFound"
    assert propagated["message"].startswith(f'TrainingRuntime.trainer.kubeflow.org "torch-distributed" not found in namespace {NS}')

    await create(objects, runtime("TrainingRuntime", gpus=8, num_nodes=2))
    await works_in(objects, "phi-trainjob", {"big"})  # its own namespace's runtime: 2 nodes of 8 GPUs


async def test_a_trainjob_is_never_given_an_alternative_gpu_shape_and_explain_says_why(
    objects: ObjectStore, manager: ControllerManager
) -> None:
    """Only "small" is allowed; its nodes hold 2 GPUs, the TrainJob's 2 nodes ask 4 each. The
    policy's 2-GPU alternative would fit them there, but no rewrite of a TrainJob's GPUs is one
    every trainer applies alike: the TrainJob waits, its Work never written with other GPUs."""
    await fleet(objects, manager)
    await create(objects, runtime("TrainingRuntime", gpus=4, num_nodes=2))
    shaped = policy(["small"])
    shaped["spec"]["gpuShapes"] = {"alternatives": [{"name": "two", "resources": {"nvidia.com/gpu": 2}}]}
    await create(objects, shaped)
    await create(objects, trainjob("gemma", "TrainingRuntime"))

    async def unschedulable() -> dict[str, Any] | None:
        bound = await binding_of(objects, "gemma-trainjob")
        scheduled = next((c for c in ((bound or {}).get("status") or {}).get("conditions") or ()
                          if c["type"] == "Scheduled"), None)
        return bound if scheduled is not None and scheduled["status"] == "False" else None

    bound = await eventually(unschedulable, what="the TrainJob's binding Scheduled=False")
    assert bound["spec"]["gpuShapes"]["alternatives"][0]["name"] == "two"  # the policy's, kept on the binding
    assert not bound["spec"].get("clusters")
    assert "scheduler.gpufed.io/gpu-shapes" not in (bound["metadata"].get("annotations") or {})
    workload = await get_or_none(objects, API, "TrainJob", "gemma")
    assert workload is not None
    text = render_explanation(workload, bound)
    assert "GPU shapes:  the policy's 1 alternative(s) are not used for a TrainJob" in text, text
    assert "merge them key by key" in text
