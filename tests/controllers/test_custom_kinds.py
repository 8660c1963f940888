"""The controllers follow the kinds CustomResourceDefinitions add to the hub while they run.

A CRD established after the controller manager started gets an informer: its instances are
matched by policies and bound. A manager started after the CRD (a new leader) watches it from
the start. Deleting the CRD deletes its instances (and their bindings) and stops the watch.
"""

from __future__ import annotations

import asyncio
import copy
from typing import Any

import pytest

from controlplane.apis.constants import LABEL_BINDING
from controlplane.apiserver import errors
from controlplane.apiserver.crd.controller import CrdController
from controlplane.apiserver.crd.types import custom_types
from controlplane.apiserver.crd.views import publish as publish_crd_views
from controlplane.apiserver.objects import ObjectStore
from controlplane.controllers.context import ControllerContext
from controlplane.controllers.manager import ControllerManager
from controlplane.controllers.workloads import keeps_propagated_condition, propagatable_types

from .conftest import FAST
from .fleet import eventually, node_shape, propagation_policy, put_cluster

pytestmark = pytest.mark.waiting

NS = "default"
GROUP = "ml.example.com"


def crd(*, versions: tuple[str, ...] = ("v1",)) -> dict[str, Any]:
    # A property named like a pod template's fields (replicas): the CRD must not read as malformed.
    spec = {"type": "object", "x-kubernetes-preserve-unknown-fields": True, "properties": {"replicas": {"type": "integer"}}}
    schema = {"openAPIV3Schema": {"type": "object", "properties": {"spec": spec}}}
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"trainers.{GROUP}"},
        "spec": {
            "group": GROUP,
            "scope": "Namespaced",
            "names": {"plural": "trainers", "kind": "Trainer"},
            "versions": [
                {"name": v, "served": True, "storage": v == versions[0], "schema": schema} for v in versions
            ],
        },
    }


def trainer(name: str) -> dict[str, Any]:
    return {"apiVersion": f"{GROUP}/v1", "kind": "Trainer", "metadata": {"name": name, "namespace": NS}, "spec": {"epochs": 3}}


async def _binding(objects: ObjectStore, name: str) -> dict[str, Any] | None:
    rt = objects.registry.require("work.gpufed.io/v1alpha1", "ResourceBinding")
    try:
        return await objects.get(rt, namespace=NS, name=f"{name}-trainer")
    except errors.NotFound:
        return None


async def _served(objects: ObjectStore) -> bool:
    return objects.registry.for_kind(f"{GROUP}/v1", "Trainer") is not None


async def test_a_crd_established_while_running_is_watched_and_propagated(
    objects: ObjectStore, crds: CrdController
) -> None:
    policy_rt = objects.registry.require("policy.gpufed.io/v1alpha1", "PropagationPolicy")
    crd_rt = objects.registry.require("apiextensions.k8s.io/v1", "CustomResourceDefinition")
    async with ControllerManager(objects, settings=FAST) as manager:
        ctx = manager.context
        assert ctx is not None
        assert all(rt.group != GROUP for rt in ctx.workload_types)
        await objects.create(policy_rt, propagation_policy("trainers", kind="Trainer", api_version=f"{GROUP}/v1"))
        await objects.create(crd_rt, crd())
        await eventually(lambda: _served(objects), what="Trainer served")
        trainer_rt = objects.registry.require(f"{GROUP}/v1", "Trainer")
        await objects.create(trainer_rt, trainer("bert"))

        binding = await eventually(lambda: _binding(objects, "bert"), what="the Trainer's binding")
        assert binding["spec"]["resource"]["kind"] == "Trainer"
        assert binding["spec"]["resource"]["apiVersion"] == f"{GROUP}/v1"
        assert binding["spec"]["replicas"] == 0  # no interpreter: the whole object goes to each cluster
        assert any(rt.group == GROUP for rt in ctx.workload_types)

        # Deleting the CRD deletes its instance (the deletion controller lets it go, with its
        # binding), then the CRD; its kind is no longer watched.
        await objects.delete(crd_rt, name=f"trainers.{GROUP}")

        async def crd_gone() -> bool:
            try:
                await objects.get(crd_rt, name=f"trainers.{GROUP}")
            except errors.NotFound:
                return True
            return False

        await eventually(crd_gone, what="the CRD deleted with its instances")
        assert await _binding(objects, "bert") is None

        async def unwatched() -> bool:
            return all(rt.group != GROUP for rt in ctx.workload_types) and ctx.workload_informer(
                f"{GROUP}/v1", "Trainer"
            ) is None

        await eventually(unwatched, what="the Trainer informer stopped")


async def test_a_manager_started_after_the_crd_watches_it(objects: ObjectStore, crds: CrdController) -> None:
    crd_rt = objects.registry.require("apiextensions.k8s.io/v1", "CustomResourceDefinition")
    policy_rt = objects.registry.require("policy.gpufed.io/v1alpha1", "PropagationPolicy")
    await objects.create(crd_rt, crd(versions=("v1", "v1beta1")))
    await eventually(lambda: _served(objects), what="Trainer served")
    await objects.create(objects.registry.require(f"{GROUP}/v1", "Trainer"), trainer("gpt"))
    await objects.create(policy_rt, propagation_policy("trainers", kind="Trainer", api_version=f"{GROUP}/v1"))
    # Two served versions, one set of objects: watched once, in the storage version.
    assert [rt.version for rt in propagatable_types(objects.registry) if rt.group == GROUP] == ["v1"]
    async with ControllerManager(objects, settings=FAST) as manager:
        ctx = manager.context
        assert ctx is not None
        assert ctx.workload_informer(f"{GROUP}/v1beta1", "Trainer") is ctx.workload_informer(f"{GROUP}/v1", "Trainer")
        binding = await eventually(lambda: _binding(objects, "gpt"), what="the Trainer's binding")
        assert binding["spec"]["policy"]["name"] == "trainers"


async def test_an_instance_goes_whole_to_each_cluster_with_its_overrides(
    objects: ObjectStore, crds: CrdController
) -> None:
    """No interpreter: Duplicated whole to each chosen cluster; an OverridePolicy's plaintext
    overrider changes the copy of one cluster only."""
    crd_rt = objects.registry.require("apiextensions.k8s.io/v1", "CustomResourceDefinition")
    await put_cluster(objects, "onprem", node_shape(2, gpus=1))
    await put_cluster(objects, "cloud", node_shape(2, gpus=1), provider="aws")
    placement = {
        "clusterAffinity": {"clusterNames": ["onprem", "cloud"]},
        "replicaScheduling": {"replicaSchedulingType": "Duplicated"},
    }
    override = {
        "apiVersion": "policy.gpufed.io/v1alpha1",
        "kind": "OverridePolicy",
        "metadata": {"name": "more-epochs-in-the-cloud", "namespace": NS},
        "spec": {
            "resourceSelectors": [{"apiVersion": f"{GROUP}/v1", "kind": "Trainer"}],
            "overrideRules": [{
                "targetCluster": {"clusterNames": ["cloud"]},
                "overriders": {"plaintext": [{"path": "/spec/epochs", "operator": "replace", "value": 9}]},
            }],
        },
    }
    async with ControllerManager(objects, settings=FAST):
        await objects.create(crd_rt, crd())
        await eventually(lambda: _served(objects), what="Trainer served")
        await objects.create(
            objects.registry.require("policy.gpufed.io/v1alpha1", "PropagationPolicy"),
            propagation_policy("trainers", kind="Trainer", api_version=f"{GROUP}/v1", placement=placement),
        )
        await objects.create(objects.registry.require("policy.gpufed.io/v1alpha1", "OverridePolicy"), override)
        await objects.create(objects.registry.require(f"{GROUP}/v1", "Trainer"), trainer("bert"))
        work_rt = objects.registry.require("work.gpufed.io/v1alpha1", "Work")

        async def both() -> dict[str, dict[str, Any]] | None:
            listed = await objects.list(work_rt, label_selector=f"{LABEL_BINDING}=bert-trainer")
            works = {w["metadata"]["namespace"].removeprefix("gpufed-es-"): w for w in listed.items}
            manifests = {name: w["spec"]["workload"]["manifests"][0] for name, w in works.items()}
            done = set(manifests) == {"onprem", "cloud"} and manifests["cloud"]["spec"]["epochs"] == 9
            return manifests if done else None

        manifests = await eventually(both, what="a Work per cluster, the cloud's overridden")
    assert manifests["onprem"]["spec"] == {"epochs": 3}
    assert manifests["cloud"]["spec"] == {"epochs": 9}
    assert {m["kind"] for m in manifests.values()} == {"Trainer"}
    assert "status" not in manifests["onprem"]


async def test_a_cluster_propagation_policy_sends_the_crd_to_the_clusters(
    objects: ObjectStore, crds: CrdController
) -> None:
    """The first cluster-scoped kind that propagates: a ClusterPropagationPolicy selecting the
    CRD by name (as Karmada users do) gives it a binding in gpufed-system and a Work per
    cluster; deleting the CRD at the hub deletes those Works before it goes."""
    crd_rt = objects.registry.require("apiextensions.k8s.io/v1", "CustomResourceDefinition")
    work_rt = objects.registry.require("work.gpufed.io/v1alpha1", "Work")
    await put_cluster(objects, "onprem", node_shape(2, gpus=1))
    await put_cluster(objects, "cloud", node_shape(2, gpus=1), provider="aws")
    policy = {
        "apiVersion": "policy.karmada.io/v1alpha1",
        "kind": "ClusterPropagationPolicy",
        "metadata": {"name": "trainer-crd"},
        "spec": {
            "resourceSelectors": [{
                "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition", "name": f"trainers.{GROUP}",
            }],
            "placement": {"clusterAffinity": {"clusterNames": ["onprem", "cloud"]}},
        },
    }
    async with ControllerManager(objects, settings=FAST):
        await objects.create(objects.registry.require("policy.karmada.io/v1alpha1", "ClusterPropagationPolicy"), policy)
        await objects.create(crd_rt, crd())
        binding_name = f"trainers.{GROUP}-customresourcedefinition"

        async def works() -> dict[str, dict[str, Any]] | None:
            listed = await objects.list(work_rt, label_selector=f"{LABEL_BINDING}={binding_name}")
            found = {w["metadata"]["namespace"].removeprefix("gpufed-es-"): w for w in listed.items}
            return found if set(found) == {"onprem", "cloud"} else None

        found = await eventually(works, what="the CRD's Works in both clusters")
        binding_rt = objects.registry.require("work.gpufed.io/v1alpha1", "ResourceBinding")
        binding = await objects.get(binding_rt, namespace="gpufed-system", name=binding_name)
        assert binding["spec"]["resource"]["kind"] == "CustomResourceDefinition"
        assert not binding["spec"]["resource"].get("namespace")
        for work in found.values():
            manifest = work["spec"]["workload"]["manifests"][0]
            assert manifest["kind"] == "CustomResourceDefinition"
            assert manifest["metadata"] == {"name": f"trainers.{GROUP}"}
            assert manifest["spec"]["names"]["kind"] == "Trainer"
            assert "status" not in manifest

        await objects.delete(crd_rt, name=f"trainers.{GROUP}")

        async def gone() -> bool:
            listed = await objects.list(work_rt, label_selector=f"{LABEL_BINDING}={binding_name}")
            try:
                await objects.get(crd_rt, name=f"trainers.{GROUP}")
            except errors.NotFound:
                return not listed.items
            return False

        await eventually(gone, what="the CRD and its Works deleted")


async def test_a_crd_published_for_a_kind_served_built_in_is_not_propagated(
    objects: ObjectStore, crds: CrdController
) -> None:
    """A policy selecting the CRD the hub publishes for Kueue's ClusterQueue sends nothing: a
    member's own Kueue CRD would be overwritten by it. A CRD of one's own, selected by the same
    policy after it, goes; so does Kueue's own CRD once applied over the published one."""
    crd_rt = objects.registry.require("apiextensions.k8s.io/v1", "CustomResourceDefinition")
    await put_cluster(objects, "onprem", node_shape(2, gpus=1))
    selectors = [{"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition", "name": name}
                 for name in ("clusterqueues.kueue.x-k8s.io", f"trainers.{GROUP}")]
    policy = {
        "apiVersion": "policy.karmada.io/v1alpha1", "kind": "ClusterPropagationPolicy", "metadata": {"name": "crds"},
        "spec": {"resourceSelectors": selectors, "placement": {"clusterAffinity": {"clusterNames": ["onprem"]}}},
    }
    binding_rt = objects.registry.require("work.gpufed.io/v1alpha1", "ResourceBinding")

    async def bound() -> set[str]:
        listed = await objects.list(binding_rt, namespace="gpufed-system")
        return {b["metadata"]["name"] for b in listed.items}

    async def trainer_bound() -> bool:
        return f"trainers.{GROUP}-customresourcedefinition" in await bound()

    async with ControllerManager(objects, settings=FAST):
        await objects.create(objects.registry.require("policy.karmada.io/v1alpha1", "ClusterPropagationPolicy"), policy)
        # Published (as a hub replica starting does) once the policy selects it, then a CRD of one's own.
        await publish_crd_views(objects, crd_rt, objects.registry)
        await objects.create(crd_rt, crd())
        await eventually(trainer_bound, what="the CRD's binding")
        assert "clusterqueues.kueue.x-k8s.io-customresourcedefinition" not in await bound()
        # Not looked at either: no Event (a refusal's) names it.
        events = await objects.list(objects.registry.require("v1", "Event"))
        assert not [e for e in events.items if e["involvedObject"].get("name") == "clusterqueues.kueue.x-k8s.io"]
        view = await objects.get(crd_rt, name="clusterqueues.kueue.x-k8s.io")
        assert "finalizers" not in view["metadata"]
        # Kueue's own CRD applied over it (an install manifest's) is the user's: it goes, as
        # written, without the hub's mark, so a member's Kueue gets its real CRD.
        upstream = copy.deepcopy(view)
        del upstream["status"]
        upstream["metadata"] = {"name": view["metadata"]["name"], "resourceVersion": view["metadata"]["resourceVersion"]}
        upstream["spec"]["versions"] = [
            {**v, "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True,
                                                 "description": "Kueue's"}}}
            for v in view["spec"]["versions"]
        ]
        await objects.update(crd_rt, upstream)
        work_rt = objects.registry.require("work.gpufed.io/v1alpha1", "Work")
        binding_name = "clusterqueues.kueue.x-k8s.io-customresourcedefinition"

        async def sent() -> dict[str, Any] | None:
            listed = await objects.list(work_rt, label_selector=f"{LABEL_BINDING}={binding_name}")
            return listed.items[0]["spec"]["workload"]["manifests"][0] if listed.items else None

        manifest = await eventually(sent, what="the user's Kueue CRD sent")
        assert manifest["metadata"] == {"name": "clusterqueues.kueue.x-k8s.io"}
        assert manifest["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["description"] == "Kueue's"



@pytest.mark.parametrize(
    ("status", "root_keeps_unknown", "keeps"),
    [
        ({"type": "object", "properties": {"replicas": {"type": "integer"}}}, False, False),
        ({"type": "object", "properties": {"conditions": {"type": "array"}}}, False, True),
        # Conditions of a type and a status only: the reason, message and time would be refused.
        ({"type": "object", "properties": {"conditions": {"type": "array", "items": {
            "type": "object", "properties": {"type": {"type": "string"}, "status": {"type": "string"}}}}}}, False, False),
        ({"type": "object", "properties": {"conditions": {"type": "array", "items": {"type": "object", "properties": {
            field: {"type": "string"} for field in ("type", "status", "reason", "message", "lastTransitionTime")}}}}},
         False, True),
        ({"type": "object", "properties": {"conditions": {"type": "array", "items": {
            "type": "object", "x-kubernetes-preserve-unknown-fields": True}}}}, False, True),
        ({"type": "object", "x-kubernetes-preserve-unknown-fields": True}, False, True),
        (None, True, True),
        (None, False, False),
    ],
)
def test_the_propagated_condition_is_written_where_the_status_schema_keeps_it(
    status: dict[str, Any] | None, root_keeps_unknown: bool, keeps: bool
) -> None:
    """A custom kind (here a PyTorchJob CRD, which has the built-in interpreter) whose status would
    drop, or under a strict write refuse, ``conditions`` gets none: kube's ``PyTorchJob in version
    "v1" cannot be handled as a PyTorchJob: strict decoding error: unknown field "status.conditions"``."""
    schema: dict[str, Any] = {"type": "object", "properties": {"spec": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}}}
    if status is not None:
        schema["properties"]["status"] = status
    if root_keeps_unknown:
        schema["x-kubernetes-preserve-unknown-fields"] = True
    version = {"name": "v1", "served": True, "storage": True, "schema": {"openAPIV3Schema": schema}, "subresources": {"status": {}}}
    crd_body = {
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition", "metadata": {"name": "pytorchjobs.kubeflow.org"},
        "spec": {"group": "kubeflow.org", "scope": "Namespaced", "names": {"plural": "pytorchjobs", "kind": "PyTorchJob"},
                 "versions": [version]},
    }
    [rt] = custom_types(crd_body)
    assert keeps_propagated_condition(rt) is keeps


async def test_starting_controllers_follow_a_crd_served_meanwhile(objects: ObjectStore, crds: CrdController) -> None:
    """The manager waits for its informers to list; a CRD established meanwhile adds one (it no
    longer ends the wait with "dictionary changed size during iteration"), and a custom kind's
    informer, whose list may fail on its conversion webhook, holds the start back for no one."""
    ctx = ControllerContext(objects, settings=FAST)
    ctx.follow_registry()
    *listed, last = ctx.informers
    for informer in listed:
        informer.synced.set()
    waiting = asyncio.create_task(ctx.wait_synced())
    await asyncio.sleep(0)
    await objects.create(objects.registry.require("apiextensions.k8s.io/v1", "CustomResourceDefinition"), crd())
    await eventually(lambda: _served(objects), what="Trainer served")
    added, _ = ctx.follow_registry()
    assert [rt.kind for rt in added] == ["Trainer"]
    assert not waiting.done()
    last.synced.set()
    await asyncio.wait_for(waiting, 5)  # the Trainer informer has not listed (nothing runs them here)
    assert not ctx.workload_informer(f"{GROUP}/v1", "Trainer").synced.is_set()  # type: ignore[union-attr]


async def _serve_v2_and_v1(objects: ObjectStore) -> None:
    """Trainers (no scale subresource: propagated whole), stored as v2 and served as v1 too."""
    await objects.create(objects.registry.require("apiextensions.k8s.io/v1", "CustomResourceDefinition"), crd(versions=("v2", "v1")))
    await eventually(lambda: _served(objects), what="Trainer served")


async def _bert_bound(objects: ObjectStore, *, policy_version: str) -> dict[str, Any]:
    """Trainer ``bert`` (created as v1) claimed by a policy naming ``policy_version``: its binding."""
    policy_rt = objects.registry.require("policy.gpufed.io/v1alpha1", "PropagationPolicy")
    await objects.create(policy_rt, propagation_policy("trainers", kind="Trainer", api_version=f"{GROUP}/{policy_version}"))
    await objects.create(objects.registry.require(f"{GROUP}/v1", "Trainer"), trainer("bert"))
    return await eventually(lambda: _binding(objects, "bert"), what="the Trainer's binding")


async def test_a_selector_naming_a_version_other_than_the_storage_one_claims_a_plain_custom_kind(
    objects: ObjectStore, crds: CrdController
) -> None:
    """Trainers (no scale subresource: propagated whole) stored as v2 and served as v1 too: a
    policy naming v1 only claims one created as v1, bound in the storage version."""
    await _serve_v2_and_v1(objects)
    async with ControllerManager(objects, settings=FAST):
        binding = await _bert_bound(objects, policy_version="v1")
        assert binding["spec"]["resource"]["apiVersion"] == f"{GROUP}/v2"
        assert binding["spec"]["policy"]["name"] == "trainers"


async def test_a_rebalancer_naming_another_served_version_of_a_custom_kind_finds_its_binding(
    objects: ObjectStore, crds: CrdController
) -> None:
    """Trainers stored as v2 and served as v1 too are bound as v2: a WorkloadRebalancer naming v1
    places the Trainer afresh; one naming a version the CRD does not serve finds no binding."""
    rebalancer_rt = objects.registry.require("apps.karmada.io/v1alpha1", "WorkloadRebalancer")
    await _serve_v2_and_v1(objects)
    async with ControllerManager(objects, settings=FAST):
        await _bert_bound(objects, policy_version="v2")
        workloads = [
            {"apiVersion": f"{GROUP}/{version}", "kind": "Trainer", "namespace": NS, "name": "bert"} for version in ("v1", "v3")
        ]
        await objects.create(rebalancer_rt, {
            "apiVersion": "apps.karmada.io/v1alpha1", "kind": "WorkloadRebalancer",
            "metadata": {"name": "now"}, "spec": {"workloads": workloads},
        })

        async def finished() -> dict[str, Any] | None:
            status = (await objects.get(rebalancer_rt, name="now")).get("status") or {}
            return status if status.get("finishTime") else None

        status = await eventually(finished, what="the rebalancer's results")
        results = {w["workload"]["apiVersion"]: (w["result"], w.get("reason")) for w in status["observedWorkloads"]}
        assert results == {
            f"{GROUP}/v1": ("Successful", None),
            f"{GROUP}/v3": ("Failed", "ReferencedBindingNotFound"),
        }
        binding = await _binding(objects, "bert")
        assert binding is not None and binding["spec"].get("rescheduleTriggeredAt")
