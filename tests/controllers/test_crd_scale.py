"""A custom kind whose CRD has a scale subresource is divided across clusters like a Deployment.

The CRD is established while the controllers run: its instance gets replicas from
``specReplicasPath`` and requirements from its pod template, a Divided policy splits them, each
member's Work carries its share at ``specReplicasPath``, and the members' ``statusReplicasPath``
values sum into the hub object's status. Scaling the hub object re-divides. When the CRD loses
its scale subresource the kind has no replicas again: the whole object goes to each cluster.
"""

from __future__ import annotations

import copy
from typing import Any

from controlplane.apis.constants import LABEL_BINDING, LABEL_WORK_NAMESPACE
from controlplane.apiserver import errors
from controlplane.apiserver.crd.controller import CrdController
from controlplane.apiserver.objects import ObjectStore
from controlplane.controllers.manager import ControllerManager

from .conftest import FAST
from .fleet import eventually, node_shape, propagation_policy, put_cluster

NS = "default"
GROUP = "ml.example.com"
WORK_API = "work.gpufed.io/v1alpha1"
CRD_API = "apiextensions.k8s.io/v1"
SCALE = {"specReplicasPath": ".spec.workers.count", "statusReplicasPath": ".status.workers.running"}
HALVES = {
    "replicaSchedulingType": "Divided",
    "replicaDivisionPreference": "Weighted",
    "weightPreference": {
        "staticWeightList": [
            {"targetCluster": {"clusterNames": ["east"]}, "weight": 1},
            {"targetCluster": {"clusterNames": ["west"]}, "weight": 1},
        ]
    },
}


def crd(*, scale: dict[str, Any] | None) -> dict[str, Any]:
    schema = {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}}
    subresources: dict[str, Any] = {"status": {}}
    if scale is not None:
        subresources["scale"] = scale
    return {
        "apiVersion": CRD_API,
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"trainers.{GROUP}"},
        "spec": {
            "group": GROUP,
            "scope": "Namespaced",
            "names": {"plural": "trainers", "kind": "Trainer"},
            "versions": [{"name": "v1", "served": True, "storage": True, "schema": schema, "subresources": subresources}],
        },
    }


def trainer(count: int) -> dict[str, Any]:
    container = {"name": "train", "image": "train:1", "resources": {"requests": {"nvidia.com/gpu": "2", "cpu": "4"}}}
    return {
        "apiVersion": f"{GROUP}/v1",
        "kind": "Trainer",
        "metadata": {"name": "llama", "namespace": NS},
        "spec": {"model": "llama", "workers": {"count": count}, "template": {"spec": {"containers": [container]}}},
    }


async def _works(objects: ObjectStore) -> dict[str, dict[str, Any]]:
    rt = objects.registry.require(WORK_API, "Work")
    listed = await objects.list(rt, label_selector=f"{LABEL_BINDING}=llama-trainer,{LABEL_WORK_NAMESPACE}={NS}")
    return {w["metadata"]["namespace"].removeprefix("gpufed-es-"): w for w in listed.items}


def _manifest(work: dict[str, Any]) -> dict[str, Any]:
    manifest: dict[str, Any] = work["spec"]["workload"]["manifests"][0]
    return manifest


async def _shares(objects: ObjectStore, wanted: dict[str, int]) -> dict[str, dict[str, Any]] | None:
    works = await _works(objects)
    shares = {name: _manifest(w)["spec"]["workers"].get("count") for name, w in works.items()}
    return works if shares == wanted else None


async def _report(objects: ObjectStore, work: dict[str, Any], running: int) -> None:
    """What the agent writes back: applied, with the member copy's status."""
    status = {
        "conditions": [{
            "type": "Applied", "status": "True", "reason": "AppliedSuccessful", "message": "applied",
            "lastTransitionTime": "2024-05-01T10:00:00Z", "observedGeneration": work["metadata"]["generation"],
        }],
        "manifestStatuses": [{
            "identifier": {"group": GROUP, "version": "v1", "kind": "Trainer", "namespace": NS, "name": "llama", "ordinal": 0},
            "status": {"workers": {"running": running}},
        }],
    }
    await objects.update_status(objects.registry.require(WORK_API, "Work"), {**work, "status": status})


async def test_a_scale_subresource_gives_a_custom_kind_divided_replicas_and_a_folded_status(
    objects: ObjectStore, crds: CrdController
) -> None:
    for name in ("east", "west"):
        await put_cluster(objects, name, node_shape(2, gpus=8))
    placement = {"clusterAffinity": {"clusterNames": ["east", "west"]}, "replicaScheduling": HALVES}
    policy_rt = objects.registry.require("policy.gpufed.io/v1alpha1", "PropagationPolicy")
    await objects.create(policy_rt, propagation_policy("trainers", kind="Trainer", api_version=f"{GROUP}/v1", placement=placement))
    crd_rt = objects.registry.require(CRD_API, "CustomResourceDefinition")
    async with ControllerManager(objects, settings=FAST):
        await objects.create(crd_rt, crd(scale=SCALE))

        async def served() -> bool:
            return objects.registry.for_kind(f"{GROUP}/v1", "Trainer") is not None

        await eventually(served, what="Trainer served")
        trainer_rt = objects.registry.require(f"{GROUP}/v1", "Trainer")
        await objects.create(trainer_rt, trainer(4))

        works = await eventually(lambda: _shares(objects, {"east": 2, "west": 2}), what="two Works with 2 workers each")
        binding = await objects.get(objects.registry.require(WORK_API, "ResourceBinding"), namespace=NS, name="llama-trainer")
        assert binding["spec"]["replicas"] == 4
        assert binding["spec"]["replicaRequirements"]["resourceRequest"]["nvidia.com/gpu"] == "2"
        assert _manifest(works["east"])["spec"]["model"] == "llama"  # the rest of the object as it is

        await _report(objects, works["east"], 2)
        await _report(objects, works["west"], 1)

        async def folded() -> dict[str, Any] | None:
            hub = await objects.get(trainer_rt, namespace=NS, name="llama")
            return hub if ((hub.get("status") or {}).get("workers") or {}).get("running") == 3 else None

        await eventually(folded, what="the members' 2 + 1 running workers on the hub")

        # Scaling the hub object (what /scale writes) re-divides it.
        hub = await objects.get(trainer_rt, namespace=NS, name="llama")
        scaled = copy.deepcopy(hub)
        scaled["spec"]["workers"]["count"] = 6
        await objects.update(trainer_rt, scaled)
        await eventually(lambda: _shares(objects, {"east": 3, "west": 3}), what="two Works with 3 workers each")

        # Without the scale subresource the kind has no replicas: each cluster gets the whole object.
        current = await objects.get(crd_rt, name=f"trainers.{GROUP}")
        await objects.update(crd_rt, {**crd(scale=None), "metadata": current["metadata"]})
        await eventually(lambda: _shares(objects, {"east": 6, "west": 6}), what="the whole Trainer in each Work")

        async def unreplicated() -> bool:
            try:
                got = await objects.get(objects.registry.require(WORK_API, "ResourceBinding"), namespace=NS, name="llama-trainer")
            except errors.NotFound:
                return False
            return bool(got["spec"].get("replicas", 0) == 0)

        await eventually(unreplicated, what="the binding without replicas")
