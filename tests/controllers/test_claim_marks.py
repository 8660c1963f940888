"""Karmada's claim marks (``pkg/detector/claim.go``): a propagation policy gets a permanent id on
create (its mutating webhook), and the workload it claims and that workload's binding carry the id
in a label and the policy's name in annotations, so ``-l propagationpolicy.karmada.io/permanent-id=``
finds them; a PropagationPolicy that preempts a ClusterPropagationPolicy replaces its marks, and a
deleted policy's marks leave both (the binding stays). Member copies never carry them."""

from __future__ import annotations

from typing import Any

import pytest

from controlplane.apiserver.errors import WebhookDenied
from controlplane.apiserver.objects import ObjectStore
from controlplane.controllers.manager import ControllerManager
from controlplane.controllers.workloads import without_server_fields

from .fleet import deployment, get_object, node_shape, propagation_policy, put_cluster, settled

pytestmark = pytest.mark.waiting

PP_ID = "propagationpolicy.karmada.io/permanent-id"
CPP_ID = "clusterpropagationpolicy.karmada.io/permanent-id"
PP_NAME, PP_NAMESPACE = "propagationpolicy.karmada.io/name", "propagationpolicy.karmada.io/namespace"
CPP_NAME = "clusterpropagationpolicy.karmada.io/name"
KARMADA = "policy.karmada.io/v1alpha1"


def cluster_policy(name: str, **spec: Any) -> dict[str, Any]:
    selectors = [{"apiVersion": "apps/v1", "kind": "Deployment", "namespace": "default"}]
    return {
        "apiVersion": KARMADA,
        "kind": "ClusterPropagationPolicy",
        "metadata": {"name": name},
        "spec": {"resourceSelectors": selectors, **spec},
    }


async def create(objects: ObjectStore, obj: dict[str, Any]) -> dict[str, Any]:
    return await objects.create(objects.registry.require(obj["apiVersion"], obj["kind"]), obj)


def marks(obj: dict[str, Any] | None) -> tuple[dict[str, str], dict[str, str]]:
    """The claim labels and annotations of ``obj``."""
    assert obj is not None
    meta = obj["metadata"]
    return (
        {k: v for k, v in (meta.get("labels") or {}).items() if k in (PP_ID, CPP_ID)},
        {k: v for k, v in (meta.get("annotations") or {}).items() if k in (PP_NAME, PP_NAMESPACE, CPP_NAME)},
    )


async def workload_and_binding(objects: ObjectStore) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
    return (
        await get_object(objects, "apps/v1", "Deployment", "web"),
        await get_object(objects, "work.gpufed.io/v1alpha1", "ResourceBinding", "web-deployment"),
    )


async def test_a_policy_gets_a_permanent_id_on_create_and_keeps_it(objects: ObjectStore) -> None:
    pp = propagation_policy("spread")
    pp["metadata"]["labels"] = {"team": "ml", PP_ID: "mine"}
    created = await create(objects, pp)
    given = created["metadata"]["labels"][PP_ID]
    assert given != "mine" and len(given) == 36, given  # a UUID, whatever the create sent
    assert created["metadata"]["labels"]["team"] == "ml"
    created["spec"]["priority"] = 3
    updated = await objects.update(
        objects.registry.require(created["apiVersion"], "PropagationPolicy"), created
    )
    assert updated["metadata"]["labels"][PP_ID] == given
    cpp = await create(objects, cluster_policy("everywhere"))
    assert len(cpp["metadata"]["labels"][CPP_ID]) == 36
    listed = await objects.list(
        objects.registry.require(KARMADA, "PropagationPolicy"),
        namespace="default",
        label_selector=f"{PP_ID}={given}",
    )
    assert [p["metadata"]["name"] for p in listed.items] == ["spread"]


async def test_the_claimed_workload_and_its_binding_carry_the_policys_marks(
    objects: ObjectStore, manager: ControllerManager
) -> None:
    await put_cluster(objects, "east", node_shape(2, gpus=8))
    policy = await create(objects, propagation_policy("spread", placement={}))
    await create(objects, deployment("web", replicas=1))
    await settled(manager)
    policy_id = policy["metadata"]["labels"][PP_ID]
    wanted = ({PP_ID: policy_id}, {PP_NAME: "spread", PP_NAMESPACE: "default"})
    workload, binding = await workload_and_binding(objects)
    assert marks(workload) == wanted
    assert marks(binding) == wanted
    selected = await objects.list(
        objects.registry.require("apps/v1", "Deployment"),
        namespace="default",
        label_selector=f"{PP_ID}={policy_id}",
    )
    assert [d["metadata"]["name"] for d in selected.items] == ["web"]
    # The binding names the workload as claimed (a Deployment's marked annotations move its generation).
    assert workload is not None and binding is not None
    assert binding["spec"]["resource"]["generation"] == workload["metadata"]["generation"]
    # Hub-only: a member's copy carries none of them.
    assert marks(without_server_fields(workload)) == ({}, {})


async def test_a_preempting_policy_replaces_the_marks_and_a_deleted_one_takes_them_away(
    objects: ObjectStore, manager: ControllerManager
) -> None:
    await put_cluster(objects, "east", node_shape(2, gpus=8))
    cpp = await create(objects, cluster_policy("everywhere"))
    await create(objects, deployment("web", replicas=1))
    await settled(manager)
    workload, binding = await workload_and_binding(objects)
    by_cpp = ({CPP_ID: cpp["metadata"]["labels"][CPP_ID]}, {CPP_NAME: "everywhere"})
    assert marks(workload) == by_cpp and marks(binding) == by_cpp

    # A PropagationPolicy with preemption takes it over: the cluster policy's marks go.
    named = propagation_policy("spread", placement={}, preemption="Always", priority=1)
    named["spec"]["resourceSelectors"][0]["name"] = "web"
    pp = await create(objects, named)
    await settled(manager)
    by_pp = ({PP_ID: pp["metadata"]["labels"][PP_ID]}, {PP_NAME: "spread", PP_NAMESPACE: "default"})
    workload, binding = await workload_and_binding(objects)
    assert marks(workload) == by_pp and marks(binding) == by_pp

    # Both deleted: no mark left, and the binding stays (Karmada's PolicyRemoved).
    for kind, namespace, name in (
        ("PropagationPolicy", "default", "spread"),
        ("ClusterPropagationPolicy", None, "everywhere"),
    ):
        await objects.delete(objects.registry.require(KARMADA, kind), namespace=namespace, name=name)
    await settled(manager)
    workload, binding = await workload_and_binding(objects)
    assert binding is not None
    assert marks(workload) == ({}, {}) and marks(binding) == ({}, {})
    assert workload is not None and "gpufed.io/propagation" in workload["metadata"]["finalizers"]


async def test_a_release_moves_a_deployments_generation_and_only_its_works_stamp(
    objects: ObjectStore, manager: ControllerManager
) -> None:
    """The marks move a Deployment's generation (kube's Deployment strategy counts annotations), so
    its Works are rewritten for the stamp of the generation they stand for (which the status
    aggregation compares); their spec, and so their generation, stays: the members apply nothing."""
    work_rt = objects.registry.require("work.gpufed.io/v1alpha1", "Work")
    await put_cluster(objects, "east", node_shape(2, gpus=8))
    await create(objects, propagation_policy("spread", placement={}))
    await create(objects, deployment("web", replicas=1))
    await settled(manager)
    [before] = (await objects.list(work_rt)).items
    await objects.delete(
        objects.registry.require(KARMADA, "PropagationPolicy"), namespace="default", name="spread"
    )
    await settled(manager)
    workload = await get_object(objects, "apps/v1", "Deployment", "web")
    [after] = (await objects.list(work_rt)).items
    assert workload is not None
    stamp = "work.gpufed.io/resource-generation"
    assert after["metadata"]["annotations"][stamp] == str(workload["metadata"]["generation"])
    assert before["metadata"]["annotations"][stamp] != after["metadata"]["annotations"][stamp]
    assert (after["spec"], after["metadata"]["generation"]) == (
        before["spec"],
        before["metadata"]["generation"],
    )


@pytest.mark.parametrize("kind", ["PropagationPolicy", "ClusterPropagationPolicy"])
async def test_the_permanent_id_label_cannot_change_or_go(objects: ObjectStore, kind: str) -> None:
    """karmada-webhook's validating webhook (``validateUpdate``): the label is the system's, set on
    create; a policy stored before the hub gave ids has none and stays updatable."""
    body = propagation_policy("spread") if kind == "PropagationPolicy" else cluster_policy("spread")
    label = PP_ID if kind == "PropagationPolicy" else CPP_ID
    rt = objects.registry.require(body["apiVersion"], kind)
    created = await create(objects, body)
    for labels in ({label: "another"}, {}):
        changed = {**created, "metadata": {**created["metadata"], "labels": labels}}
        with pytest.raises(WebhookDenied) as refused:
            await objects.update(rt, changed)
        assert (refused.value.code, str(refused.value)) == (
            403,
            f'admission webhook "{kind.lower()}.karmada.io" denied the request: '
            f"label {label} is immutable, it can only be set by the system during creation",
        )
    namespace = created["metadata"].get("namespace")
    await objects.delete(rt, namespace=namespace, name="spread")
    prepare = rt.prepare_create
    object.__setattr__(rt, "prepare_create", None)  # as the hub was before it gave ids
    try:
        older = await create(objects, body)
    finally:
        object.__setattr__(rt, "prepare_create", prepare)
    assert label not in (older["metadata"].get("labels") or {})
    older["spec"]["priority"] = 2
    assert (await objects.update(rt, older))["spec"]["priority"] == 2
