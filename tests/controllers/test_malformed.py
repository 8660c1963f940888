"""A malformed stored object becomes a condition and an Event on it, never a retry loop.

The objects are written straight to storage, as an object the API would refuse can still be
there (stored before validation existed, restored, written to etcd directly).
"""

from __future__ import annotations

import asyncio
import copy
import json
import logging
from collections import Counter
from collections.abc import AsyncIterator
from typing import Any

import pytest

from controlplane.apiserver.crd.controller import CrdController
from controlplane.apiserver.errors import Invalid
from controlplane.apiserver.objects import ObjectStore
from controlplane.controllers.detecting import Detector
from controlplane.controllers.manager import ControllerManager
from controlplane.controllers.workloads import WorkloadRef
from controlplane.interpreter.shape import malformed

from .conftest import FAST
from .fleet import deployment, eventually, node_shape, propagation_policy, put_cluster, settled
from .test_custom_kinds import GROUP, _served, crd, trainer
from .test_dra_placement import claim_template

pytestmark = pytest.mark.waiting

NS = "default"


@pytest.mark.parametrize(
    ("mutate", "path"),
    [
        (lambda d: d["spec"].update(template=True), "spec.template"),
        (lambda d: d["spec"]["template"].update(spec=[]), "spec.template.spec"),
        (lambda d: d["spec"]["template"]["spec"].update(containers={"name": "x"}), "spec.template.spec.containers"),
        (lambda d: d["spec"]["template"]["spec"]["containers"].append(7), "spec.template.spec.containers[1]"),
        (lambda d: d["spec"]["template"]["spec"]["containers"][0].update(resources="lots"),
         "spec.template.spec.containers[0].resources"),
        (lambda d: d["spec"].update(replicas="three"), "spec.replicas"),
        (lambda d: d["metadata"]["labels"].update(app=["x"]), "metadata.labels.app"),
        (lambda d: d["metadata"].update(annotations=3), "metadata.annotations"),
        (lambda d: d["spec"]["template"]["spec"].update(volumes=[{"name": "v", "configMap": True}]),
         "spec.template.spec.volumes[0].configMap"),
        # managedFields are bookkeeping no interpreter reads: not walked
        (lambda d: d["metadata"].update(managedFields=[{"fieldsV1": {"labels": 3}}]), None),
        (lambda d: d.update(spec=None), None),  # absent and null read the same
        (lambda d: d["spec"].update(replicas="3"), None),
        (lambda d: None, None),
    ],
)
def test_malformed_names_the_first_field_of_the_wrong_type(mutate: Any, path: str | None) -> None:
    workload = deployment("web", replicas=2)
    mutate(workload)
    found = malformed(workload)
    assert (found.path if found else None) == path


def test_configmap_data_must_hold_strings() -> None:
    found = malformed({"apiVersion": "v1", "kind": "ConfigMap", "data": {"ok": "1", "nested": [["x"]]}})
    assert found is not None
    assert found.message == "data.nested: Invalid value: must be a string, got an array"
    assert malformed({"apiVersion": "v1", "kind": "ConfigMap", "data": {"ok": "1"}}) is None


async def _store_raw(objects: ObjectStore, obj: dict[str, Any]) -> None:
    """Write ``obj`` as the API server would have stored it, past the API's validation."""
    rt = objects.registry.for_kind(obj["apiVersion"], obj["kind"])
    assert rt is not None
    meta = obj["metadata"]
    meta.setdefault("uid", f"uid-{meta['name']}")
    meta.setdefault("creationTimestamp", "2026-01-01T00:00:00Z")
    meta.setdefault("generation", 1)
    await objects.store.create(rt.key(namespace=meta.get("namespace"), name=meta["name"]), json.dumps(obj).encode())


@pytest.fixture
async def counted(
    objects: ObjectStore, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[tuple[ControllerManager, Counter[WorkloadRef]]]:
    """A running manager whose detector counts its attempts per workload."""
    attempts: Counter[WorkloadRef] = Counter()
    reconcile = Detector.reconcile

    async def counting(self: Detector, ref: WorkloadRef) -> float | None:
        attempts[ref] += 1
        return await reconcile(self, ref)

    monkeypatch.setattr(Detector, "reconcile", counting)
    async with ControllerManager(objects, settings=FAST) as running:
        yield running, attempts


async def _events(objects: ObjectStore, name: str) -> list[dict[str, Any]]:
    rt = objects.registry.for_kind("v1", "Event")
    assert rt is not None
    listed = await objects.list(rt, namespace=NS)
    return [e for e in listed.items if e["involvedObject"]["name"] == name]


async def _invalid_condition(objects: ObjectStore, api_version: str, kind: str, name: str) -> dict[str, Any] | None:
    """The workload's ``Propagated`` condition of reason ``InvalidObject``, if it has one."""
    rt = objects.registry.for_kind(api_version, kind)
    assert rt is not None
    current = await objects.get(rt, namespace=NS, name=name)
    for cond in (current.get("status") or {}).get("conditions") or []:
        if cond["type"] == "Propagated" and cond["reason"] == "InvalidObject":
            return dict(cond)
    return None


async def test_a_malformed_workload_gets_a_condition_and_an_event_and_is_not_retried(
    objects: ObjectStore, counted: tuple[ControllerManager, Counter[WorkloadRef]], caplog: pytest.LogCaptureFixture
) -> None:
    manager, attempts = counted
    caplog.set_level(logging.INFO)
    policies = objects.registry.for_kind("policy.gpufed.io/v1alpha1", "PropagationPolicy")
    assert policies is not None
    await objects.create(policies, propagation_policy("deployments"))
    await objects.create(policies, propagation_policy("configmaps", kind="ConfigMap", api_version="v1"))
    bad = deployment("bad", replicas=2)
    bad["spec"]["template"] = True
    await _store_raw(objects, bad)
    await _store_raw(objects, {
        "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "nested", "namespace": NS},
        "data": {"a": [["b"]]},
    })
    deployments = objects.registry.for_kind("apps/v1", "Deployment")
    assert deployments is not None

    condition = await eventually(lambda: _invalid_condition(objects, "apps/v1", "Deployment", "bad"),
                                 what="Propagated=False InvalidObject on the Deployment")
    assert condition["status"] == "False"
    assert "spec.template: Invalid value: must be an object, got a boolean" in condition["message"]
    events = await eventually(lambda: _events(objects, "bad"), what="a Warning Event on the Deployment")
    assert [(e["type"], e["reason"]) for e in events] == [("Warning", "InvalidObject")]
    configmap_events = await eventually(lambda: _events(objects, "nested"), what="an Event on the ConfigMap")
    assert "data.a: Invalid value: must be a string, got an array" in configmap_events[0]["message"]

    await settled(manager)
    await asyncio.sleep(1.0)  # a retry loop would show up here
    ref = WorkloadRef("apps/v1", "Deployment", NS, "bad")
    print(f"detector attempts for the malformed Deployment: {attempts[ref]}")
    # One pass for its creation and one for the status the detector wrote; no retries.
    assert attempts[ref] <= 3, attempts
    assert len(await _events(objects, "bad")) == 1
    assert not [r for r in caplog.records if r.exc_info], "a traceback was logged"
    binding_rt = manager.context.binding_rt
    assert (await objects.list(binding_rt, namespace=NS)).items == []

    # Fixed, it propagates.
    current = await objects.get(deployments, namespace=NS, name="bad")
    fixed = copy.deepcopy(current)
    fixed["spec"]["template"] = deployment("bad", replicas=2)["spec"]["template"]
    await objects.update(deployments, fixed)

    async def bound() -> bool:
        return bool((await objects.list(binding_rt, namespace=NS)).items)

    await eventually(bound, what="a binding once the Deployment is fixed")


async def _overwrite_raw(objects: ObjectStore, obj: dict[str, Any]) -> None:
    """Replace a stored object past the API's validation (a compare-and-swap on its revision)."""
    rt = objects.registry.for_kind(obj["apiVersion"], obj["kind"])
    assert rt is not None
    meta = obj["metadata"]
    key = rt.key(namespace=meta.get("namespace"), name=meta["name"])
    current = await objects.store.get(key)
    await objects.store.update(key, json.dumps(obj).encode(), expected_revision=current.mod_revision)


async def test_a_placed_workload_made_malformed_keeps_its_works_and_is_reported(
    objects: ObjectStore, counted: tuple[ControllerManager, Counter[WorkloadRef]], caplog: pytest.LogCaptureFixture
) -> None:
    manager, attempts = counted
    caplog.set_level(logging.INFO)
    await put_cluster(objects, "onprem", node_shape(4, gpus=4))
    policies = objects.registry.for_kind("policy.gpufed.io/v1alpha1", "PropagationPolicy")
    deployments = objects.registry.for_kind("apps/v1", "Deployment")
    works_rt = objects.registry.for_kind("work.gpufed.io/v1alpha1", "Work")
    assert policies is not None and deployments is not None and works_rt is not None
    await objects.create(policies, propagation_policy("deployments"))
    await objects.create(deployments, deployment("web", replicas=2))

    async def works() -> list[dict[str, Any]]:
        return (await objects.list(works_rt)).items

    placed = await eventually(works, what="the Deployment's Work")
    await settled(manager)

    current = await objects.get(deployments, namespace=NS, name="web")
    broken = copy.deepcopy(current)
    broken["spec"]["template"]["spec"]["containers"] = "main"
    broken["metadata"]["generation"] += 1
    await _overwrite_raw(objects, broken)

    async def reported() -> list[dict[str, Any]]:
        return [e for e in await _events(objects, "web") if e["reason"] == "InvalidObject"]

    await eventually(reported, what="an InvalidObject Event")
    await settled(manager)
    await asyncio.sleep(1.0)
    assert [w["spec"] for w in await works()] == [w["spec"] for w in placed], "the Works changed"
    current = await objects.get(deployments, namespace=NS, name="web")
    conditions = {c["type"]: c for c in current["status"]["conditions"]}
    assert conditions["Propagated"]["reason"] == "InvalidObject"
    assert "spec.template.spec.containers: Invalid value: must be an array" in conditions["Propagated"]["message"]
    assert not [r for r in caplog.records if r.exc_info], "a traceback was logged"
    ref = WorkloadRef("apps/v1", "Deployment", NS, "web")
    print(f"detector attempts for the placed Deployment: {attempts[ref]}")
    assert attempts[ref] <= 8, attempts


async def test_a_stored_workload_kube_would_refuse_is_reported_once_and_can_still_be_written(
    objects: ObjectStore, counted: tuple[ControllerManager, Counter[WorkloadRef]], caplog: pytest.LogCaptureFixture
) -> None:
    """``replicas: -2``, stored before the API validated Deployments: not propagated, named
    once in a condition and an Event; its metadata can change and its fix propagates."""
    manager, attempts = counted
    caplog.set_level(logging.INFO)
    policies = objects.registry.for_kind("policy.gpufed.io/v1alpha1", "PropagationPolicy")
    deployments = objects.registry.for_kind("apps/v1", "Deployment")
    assert policies is not None and deployments is not None
    await objects.create(policies, propagation_policy("deployments"))
    bad = deployment("negative", replicas=2)
    bad["spec"]["replicas"] = -2
    await _store_raw(objects, bad)

    async def reported() -> list[dict[str, Any]]:
        return [e for e in await _events(objects, "negative") if e["reason"] == "InvalidObject"]

    events = await eventually(reported, what="an InvalidObject Event")
    assert "spec.replicas: Invalid value: -2: must be greater than or equal to 0" in events[0]["message"]
    await settled(manager)
    await asyncio.sleep(1.0)  # a retry loop would show up here
    ref = WorkloadRef("apps/v1", "Deployment", NS, "negative")
    assert attempts[ref] <= 3, attempts
    assert len(await reported()) == 1
    assert not [r for r in caplog.records if r.exc_info], "a traceback was logged"
    binding_rt = manager.context.binding_rt
    assert (await objects.list(binding_rt, namespace=NS)).items == []

    # The API still takes writes that do not add a problem (a label), and refuses a new one.
    current = await objects.get(deployments, namespace=NS, name="negative")
    current["metadata"].setdefault("labels", {})["team"] = "a"
    current = await objects.update(deployments, current)
    worse = copy.deepcopy(current)
    worse["spec"]["template"]["spec"]["containers"] = []
    with pytest.raises(Invalid, match=r"spec\.template\.spec\.containers: Required value"):
        await objects.update(deployments, worse)

    current["spec"]["replicas"] = 2
    await objects.update(deployments, current)

    async def bound() -> bool:
        return bool((await objects.list(binding_rt, namespace=NS)).items)

    await eventually(bound, what="a binding once the Deployment is fixed")


async def test_a_workload_whose_roles_cannot_be_read_for_shared_claims_is_reported_not_retried(
    objects: ObjectStore, counted: tuple[ControllerManager, Counter[WorkloadRef]], caplog: pytest.LogCaptureFixture
) -> None:
    """A pod naming a ResourceClaim makes the detector read the workload's roles for the claims
    they share; a role list it cannot read is the object's InvalidObject, as any unreadable shape."""
    manager, attempts = counted
    policies = objects.registry.for_kind("policy.gpufed.io/v1alpha1", "PropagationPolicy")
    assert policies is not None
    await objects.create(policies, propagation_policy("rayclusters", kind="RayCluster", api_version="ray.io/v1"))
    head = {"spec": {"containers": [{"name": "head", "image": "rayproject/ray"}],
                     "resourceClaims": [{"name": "gpus", "resourceClaimName": "shared-gpus"}]}}
    await _store_raw(objects, {
        "apiVersion": "ray.io/v1", "kind": "RayCluster", "metadata": {"name": "rays", "namespace": NS},
        "spec": {"headGroupSpec": {"template": head}, "workerGroupSpecs": 3},
    })
    condition = await eventually(lambda: _invalid_condition(objects, "ray.io/v1", "RayCluster", "rays"),
                                 what="Propagated=False InvalidObject on the RayCluster")
    assert "cannot be read (TypeError" in condition["message"]
    await settled(manager)
    assert attempts[WorkloadRef("ray.io/v1", "RayCluster", NS, "rays")] <= 3
    assert not [r for r in caplog.records if r.exc_info], "a traceback was logged"


async def test_a_custom_kinds_pod_spec_the_claim_reading_cannot_read_is_reported_not_retried(
    objects: ObjectStore, crds: CrdController, counted: tuple[ControllerManager, Counter[WorkloadRef]],
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A custom kind is left to its own schema (no shape check reads it), and one that keeps unknown
    fields takes a pod spec whose container's ``resources`` is a string from any user. Reading its
    DRA claim template's GPUs into that container failed outside the guard that reports
    InvalidObject, so the detector retried it with a traceback, forever."""
    manager, attempts = counted
    crd_rt = objects.registry.require("apiextensions.k8s.io/v1", "CustomResourceDefinition")
    policies = objects.registry.require("policy.gpufed.io/v1alpha1", "PropagationPolicy")
    templates = objects.registry.require("resource.k8s.io/v1", "ResourceClaimTemplate")
    await objects.create(crd_rt, crd())
    await eventually(lambda: _served(objects), what="Trainer served")
    await objects.create(templates, claim_template("gpus", count=2))
    await objects.create(policies, propagation_policy("trainers", kind="Trainer", api_version=f"{GROUP}/v1"))
    pod = {"containers": [{"name": "main", "image": "trainer", "resources": "lots"}],
           "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "gpus"}]}
    await objects.create(objects.registry.require(f"{GROUP}/v1", "Trainer"), {
        **trainer("bert"), "spec": {"template": {"spec": pod}},
    })
    events = objects.registry.require("v1", "Event")

    async def reported() -> list[str]:  # a custom kind keeps no status: the Event is the report
        listed = await objects.list(events, namespace=NS)
        return [e["message"] for e in listed.items
                if e["reason"] == "InvalidObject" and e["involvedObject"]["name"] == "bert"]

    messages = await eventually(reported, what="an InvalidObject Event on the Trainer")
    assert "cannot be read (AttributeError" in messages[0]
    await settled(manager)
    assert attempts[WorkloadRef(f"{GROUP}/v1", "Trainer", NS, "bert")] <= 3
    assert len(await reported()) == 1
    assert not [r for r in caplog.records if r.exc_info], "a traceback was logged"
