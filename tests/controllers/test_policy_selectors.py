"""Policies whose resource selectors name a kind the hub does not serve carry a
``ResourceSelectorsServed=False`` condition (reason UnservedKind, naming the kind) and a Warning
Event; a CRD established later flips it to True (and a Normal Event), deleting the CRD flips it
back. The four policy kinds, read through either policy group (one stored set)."""

from __future__ import annotations

from typing import Any

import pytest

from controlplane.apiserver import errors
from controlplane.apiserver.crd.controller import CrdController
from controlplane.apiserver.objects import ObjectStore
from controlplane.controllers.manager import ControllerManager

from .conftest import FAST
from .fleet import eventually

pytestmark = pytest.mark.waiting

GROUP = "ml.example.com"
KARMADA = "policy.karmada.io/v1alpha1"
GPUFED = "policy.gpufed.io/v1alpha1"
CRD_API = "apiextensions.k8s.io/v1"


def crd() -> dict[str, Any]:
    schema = {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}}
    return {
        "apiVersion": CRD_API,
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"trainers.{GROUP}"},
        "spec": {
            "group": GROUP, "scope": "Namespaced", "names": {"plural": "trainers", "kind": "Trainer"},
            "versions": [{"name": "v1", "served": True, "storage": True, "schema": schema}],
        },
    }


def policy(kind: str, *selectors: tuple[str, str]) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "trainers"}
    if not kind.startswith("Cluster"):
        meta["namespace"] = "default"
    spec: dict[str, Any] = {"resourceSelectors": [{"apiVersion": a, "kind": k} for a, k in selectors]}
    if kind.endswith("OverridePolicy"):
        spec["overrideRules"] = [{"overriders": {"labelsOverrider": [{"operator": "add", "value": {"tier": "gpu"}}]}}]
    else:
        spec["placement"] = {"clusterAffinity": {"clusterNames": ["east"]}}
    return {"apiVersion": KARMADA, "kind": kind, "metadata": meta, "spec": spec}


async def _condition(objects: ObjectStore, kind: str, api_version: str = KARMADA) -> dict[str, Any] | None:
    rt = objects.registry.require(api_version, kind)
    obj = await objects.get(rt, namespace=None if kind.startswith("Cluster") else "default", name="trainers")
    for cond in (obj.get("status") or {}).get("conditions") or ():
        if cond["type"] == "ResourceSelectorsServed":
            return dict(cond)
    return None


async def _events_are(objects: ObjectStore, kind: str, wanted: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """The policy's Events (type, reason) once they are ``wanted`` (they follow the status write)."""

    async def recorded() -> list[tuple[str, str]] | None:
        found = await _events(objects, kind)
        return found if found == wanted else None

    return await eventually(recorded, what=f"the policy's Events {wanted}")


async def _events(objects: ObjectStore, kind: str) -> list[tuple[str, str]]:
    listed = await objects.list(objects.registry.require("v1", "Event"), namespace="default")
    return sorted(
        (e["type"], e["reason"]) for e in listed.items
        if e["involvedObject"]["kind"] == kind and e["involvedObject"]["name"] == "trainers"
    )


@pytest.mark.parametrize("kind", ["PropagationPolicy", "ClusterPropagationPolicy", "OverridePolicy", "ClusterOverridePolicy"])
async def test_an_unserved_kind_is_a_condition_that_follows_the_crd(
    objects: ObjectStore, crds: CrdController, kind: str
) -> None:
    async with ControllerManager(objects, settings=FAST):
        await objects.create(
            objects.registry.require(KARMADA, kind), policy(kind, ("apps/v1", "Deployment"), (f"{GROUP}/v1", "Trainer"))
        )

        async def is_(status: str) -> dict[str, Any] | None:
            cond = await _condition(objects, kind)
            return cond if cond is not None and cond["status"] == status else None

        unserved = await eventually(lambda: is_("False"), what="ResourceSelectorsServed=False")
        assert unserved["reason"] == "UnservedKind"
        assert "spec.resourceSelectors[1] Trainer (ml.example.com/v1) is not served by the hub" in unserved["message"]
        assert "Deployment" not in unserved["message"]
        assert await _condition(objects, kind, GPUFED) == unserved  # one stored set, both groups
        await _events_are(objects, kind, [("Warning", "ResourceSelectorsNotServed")])

        crd_rt = objects.registry.require(CRD_API, "CustomResourceDefinition")
        await objects.create(crd_rt, crd())
        served = await eventually(lambda: is_("True"), what="ResourceSelectorsServed=True once the CRD is served")
        assert served["reason"] == "KindsServed"
        await _events_are(objects, kind, [("Normal", "ResourceSelectorsServed"), ("Warning", "ResourceSelectorsNotServed")])

        await objects.delete(crd_rt, name=f"trainers.{GROUP}")
        await eventually(lambda: is_("False"), what="ResourceSelectorsServed=False once the CRD is gone")


async def test_served_and_unpropagatable_kinds(objects: ObjectStore) -> None:
    rt = objects.registry.require(KARMADA, "ClusterPropagationPolicy")
    async with ControllerManager(objects, settings=FAST):
        await objects.create(rt, policy("ClusterPropagationPolicy", ("apps/v1", "Deployment"), ("v1", "ConfigMap")))
        served = await eventually(lambda: _condition(objects, "ClusterPropagationPolicy"), what="the condition")
        assert (served["status"], served["reason"]) == ("True", "KindsServed")
        assert await _events(objects, "ClusterPropagationPolicy") == []  # nothing to warn about

        # A status write that drops the condition (another client's) has it written again.
        await objects.update_status(rt, {**await objects.get(rt, name="trainers"), "status": {}})
        await eventually(lambda: _condition(objects, "ClusterPropagationPolicy"), what="the condition written again")

        current = await objects.get(rt, name="trainers")
        changed = policy("ClusterPropagationPolicy", ("v1", "PersistentVolume"))
        await objects.update(rt, {**changed, "metadata": current["metadata"]})

        async def unpropagatable() -> dict[str, Any] | None:
            cond = await _condition(objects, "ClusterPropagationPolicy")
            return cond if cond is not None and cond["status"] == "False" else None

        cond = await eventually(unpropagatable, what="ResourceSelectorsServed=False")
        assert cond["reason"] == "UnpropagatableKind"
        assert "PersistentVolume (v1) is cluster-scoped" in cond["message"]
        with pytest.raises(errors.NotFound):
            await objects.get(objects.registry.require(GPUFED, "PropagationPolicy"), namespace="default", name="trainers")


async def test_an_empty_kind_is_a_condition(objects: ObjectStore) -> None:
    """A selector with an empty kind (Karmada's CRD takes it) runs through the controllers: the
    policy's condition names it as selecting nothing."""
    async with ControllerManager(objects, settings=FAST):
        await objects.create(objects.registry.require(KARMADA, "PropagationPolicy"),
                             policy("PropagationPolicy", ("apps/v1", "Deployment"), ("apps/v1", "")))

        async def unserved() -> dict[str, Any] | None:
            cond = await _condition(objects, "PropagationPolicy")
            return cond if cond is not None and cond["status"] == "False" else None

        cond = await eventually(unserved, what="ResourceSelectorsServed=False")
        assert cond["reason"] == "UnservedKind"
        assert "spec.resourceSelectors[1] names no kind (an empty apiVersion or kind)" in cond["message"]
        await _events_are(objects, "PropagationPolicy", [("Warning", "ResourceSelectorsNotServed")])
