"""A workload whose kind a member does not serve is not placed there: the hub places a RayJob on
the member whose Cluster lists KubeRay's ``ray.io/v1`` RayJob, not on the cheaper one that lacks
the CRD (Karmada's APIEnablement filter), and says why in the binding's explanation."""

from __future__ import annotations

from typing import Any

from controlplane.apiserver.objects import ObjectStore
from controlplane.controllers.manager import ControllerManager

from .fleet import deployment, eventually, node_shape, propagation_policy, put_cluster
from .test_federation_loop import BINDING_API, apply, get_or_none
from .test_operator_statuses import CASES

CORE = {"groupVersion": "v1", "resources": [{"name": "pods", "kind": "Pod"}]}
RAY = {
    "groupVersion": "ray.io/v1",
    "resources": [{"name": "rayclusters", "kind": "RayCluster"}, {"name": "rayjobs", "kind": "RayJob"}],
}


async def test_a_rayjob_goes_to_the_member_with_kuberay_only(
    objects: ObjectStore, manager: ControllerManager
) -> None:
    # On-prem is tier 0 and would be filled first; it lacks KubeRay's CRDs.
    await put_cluster(objects, "onprem", node_shape(8, gpus=8), api_enablements=[CORE])
    await put_cluster(objects, "cloud", node_shape(8, gpus=8), provider="aws", api_enablements=[CORE, RAY])
    workload = CASES["RayJob"][0]
    await apply(objects, propagation_policy("operators", kind="RayJob", api_version=workload["apiVersion"]))
    await apply(objects, workload)

    async def scheduled() -> dict[str, Any] | None:
        binding = await get_or_none(objects, BINDING_API, "ResourceBinding", "default", "train-rayjob")
        return binding if binding and (binding.get("spec") or {}).get("clusters") else None

    binding = await eventually(scheduled, what="the RayJob's binding scheduled")
    assert [c["name"] for c in binding["spec"]["clusters"]] == ["cloud"]
    explained = {e["cluster"]: e for e in binding["status"]["explanation"]}
    assert explained["onprem"]["reasons"] == ["APIEnablement: cluster(s) did not have the API resource"]


APPS = {"groupVersion": "apps/v1", "resources": [{"name": "deployments", "kind": "Deployment"}]}


async def test_a_duplicated_workload_reaches_a_member_once_its_list_names_the_kind(
    objects: ObjectStore, manager: ControllerManager
) -> None:
    await put_cluster(objects, "onprem", node_shape(8, gpus=8), api_enablements=[CORE])
    await put_cluster(objects, "cloud", node_shape(8, gpus=8), provider="aws", api_enablements=[CORE, APPS])
    duplicated = {"replicaScheduling": {"replicaSchedulingType": "Duplicated"}}
    await apply(objects, propagation_policy("everywhere", placement=duplicated))
    await apply(objects, deployment("infer", replicas=1))

    async def placed_in(names: list[str]) -> bool:
        binding = await get_or_none(objects, BINDING_API, "ResourceBinding", "default", "infer-deployment")
        return sorted(c["name"] for c in ((binding or {}).get("spec") or {}).get("clusters") or ()) == names

    await eventually(lambda: placed_in(["cloud"]), what="the Deployment in cloud only")
    # The member's API comes to serve the kind: its agent's next list names it, and the binding follows.
    await put_cluster(objects, "onprem", node_shape(8, gpus=8), api_enablements=[CORE, APPS])
    await eventually(lambda: placed_in(["cloud", "onprem"]), what="the Deployment in onprem too")
