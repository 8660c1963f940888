"""A workload whose kind a member does not serve is not placed there: the hub places a RayJob on
the member whose Cluster lists KubeRay's ``ray.io/v1`` RayJob, not on the cheaper one that lacks
the CRD (Karmada's APIEnablement filter), and says why in the binding's explanation. A member that
comes to list the kind takes a Duplicated workload's copy; a gang stays whole where it runs, and
its explanation no longer quotes the filter."""

from __future__ import annotations

from typing import Any

import pytest

from controlplane.apiserver.objects import ObjectStore
from controlplane.controllers.manager import ControllerManager
from controlplane.scheduler.controller import controller, writing
from controlplane.scheduler.core.deciding import schedule
from controlplane.scheduler.core.framework import BindingRequest
from controlplane.scheduler.core.outcome import ScheduleResult

from .fleet import deployment, eventually, node_shape, propagation_policy, put_cluster, settled
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


async def test_a_duplicated_gang_stays_whole_and_says_why_once_a_member_lists_the_kind(
    objects: ObjectStore, manager: ControllerManager, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A gang (a RayJob) runs whole in one cluster even when its placement is Duplicated: once the
    other member comes to list the kind, the running gang stays where it is, and its binding's
    explanation for that member no longer quotes APIEnablement. The Cluster's change is decided once:
    the explanation written is that decision's, not a second one made with the same inputs."""
    decisions: list[str] = []

    def counted(request: BindingRequest, *args: Any, **kwargs: Any) -> ScheduleResult:
        decisions.append(request.key)
        return schedule(request, *args, **kwargs)

    monkeypatch.setattr(controller, "schedule", counted)
    monkeypatch.setattr(writing, "schedule", counted)
    await put_cluster(objects, "onprem", node_shape(8, gpus=8), api_enablements=[CORE])
    await put_cluster(objects, "cloud", node_shape(8, gpus=8), provider="aws", api_enablements=[CORE, RAY])
    workload = CASES["RayJob"][0]
    duplicated = {"replicaScheduling": {"replicaSchedulingType": "Duplicated"}}
    await apply(
        objects,
        propagation_policy(
            "operators", kind="RayJob", api_version=workload["apiVersion"], placement=duplicated
        ),
    )
    await apply(objects, workload)

    async def onprem_entry(placed: dict[str, Any] | None) -> dict[str, Any] | None:
        binding = await get_or_none(objects, BINDING_API, "ResourceBinding", "default", "train-rayjob")
        if binding is None or [c["name"] for c in (binding.get("spec") or {}).get("clusters") or ()] != [
            "cloud"
        ]:
            return None
        entry = {e["cluster"]: e for e in (binding.get("status") or {}).get("explanation") or ()}.get(
            "onprem"
        )
        return entry if entry and (placed is None or entry != placed) else None

    before = await eventually(lambda: onprem_entry(None), what="the RayJob in cloud, onprem explained")
    assert before["reasons"] == ["APIEnablement: cluster(s) did not have the API resource"]
    decisions.clear()
    await put_cluster(objects, "onprem", node_shape(8, gpus=8), api_enablements=[CORE, RAY])
    await settled(manager)  # the Cluster's change judged: no retry stands in for it
    assert decisions == ["default/train-rayjob"]
    binding = await get_or_none(objects, BINDING_API, "ResourceBinding", "default", "train-rayjob")
    assert binding is not None
    assert [c["name"] for c in binding["spec"]["clusters"]] == ["cloud"]  # a running gang stays whole
    after = {e["cluster"]: e for e in binding["status"]["explanation"]}["onprem"]
    assert not after["chosen"]
    assert after["reasons"] == ["gang runs whole in cloud and stays there"], after
