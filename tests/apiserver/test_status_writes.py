"""Writes of the status subresource (controlplane/apiserver/objects/writing.py): only ``.status``
is taken from the request and validated, as kube's status strategies do — a bad status is a 422
naming its path from the object's root; the stored spec
is neither re-validated nor changed; and the caller's object is left as it was."""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import AsyncIterator
from typing import Any

import pytest

from controlplane.apiserver import codec, errors
from controlplane.apiserver.kinds.core import core_resources
from controlplane.apiserver.kinds.workloads import workload_resources
from controlplane.apiserver.objects import ObjectStore
from controlplane.apiserver.resources import Registry
from controlplane.apiserver.validation import FieldValidation
from controlplane.hub import hub_registry
from controlplane.storage import MemoryStore

NAMESPACE = "gpufed-es-gpu-a"
MANIFEST = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "namespace": "default"}}


def work(manifests: list[Any]) -> dict[str, Any]:
    return {
        "apiVersion": "work.gpufed.io/v1alpha1",
        "kind": "Work",
        "metadata": {"name": "default-web", "namespace": NAMESPACE},
        "spec": {"workload": {"manifests": manifests}},
    }


APPLIED = {
    "conditions": [{"type": "Applied", "status": "True", "reason": "AppliedSuccessful", "message": "applied",
                    "lastTransitionTime": "2026-01-01T00:00:00Z"}],
}


@pytest.fixture
async def objects() -> AsyncIterator[ObjectStore]:
    async with MemoryStore() as memory:
        store = ObjectStore(memory, hub_registry())
        await store.bootstrap()
        namespaces = store.registry.require("v1", "Namespace")
        await store.create(namespaces, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}})
        yield store


async def test_a_status_write_takes_the_status_alone_and_leaves_the_callers_object(objects: ObjectStore) -> None:
    rt = objects.registry.require("work.gpufed.io/v1alpha1", "Work")
    created = await objects.create(rt, work([MANIFEST]))
    request = {**created, "spec": {"workload": {"manifests": []}}, "status": APPLIED}
    sent = copy.deepcopy(request)
    written = await objects.update_status(rt, request)
    assert request == sent, "the caller's object is not changed"
    assert written["spec"] == created["spec"] and written["status"] == APPLIED
    stored = await objects.get(rt, namespace=NAMESPACE, name="default-web")
    assert stored["spec"] == created["spec"] and stored["status"] == APPLIED
    assert int(stored["metadata"]["resourceVersion"]) > int(created["metadata"]["resourceVersion"])
    written["status"]["conditions"][0]["message"] = "changed by the caller afterwards"
    assert (await objects.get(rt, namespace=NAMESPACE, name="default-web"))["status"] == APPLIED


@pytest.mark.parametrize(
    ("status", "field_validation", "error", "path"),
    [
        pytest.param({"conditions": "applied"}, FieldValidation.STRICT, errors.Invalid, "status.conditions",
                     id="wrong-type"),
        pytest.param({"manifestStatuses": [{"health": "Healthy"}]}, FieldValidation.STRICT, errors.Invalid,
                     "status.manifestStatuses[0].identifier", id="missing-field"),
    ],
)
async def test_a_bad_status_is_refused_with_its_path(
    objects: ObjectStore, status: dict[str, Any], field_validation: FieldValidation, error: type[Exception], path: str
) -> None:
    rt = objects.registry.require("work.gpufed.io/v1alpha1", "Work")
    created = await objects.create(rt, work([MANIFEST]))
    with pytest.raises(error) as raised:
        await objects.update_status(rt, {**created, "status": status}, field_validation=field_validation)
    assert path in str(raised.value) + " ".join(
        str(cause.field) for cause in getattr(raised.value, "causes", None) or []
    ), raised.value
    assert "status" not in await objects.get(rt, namespace=NAMESPACE, name="default-web")


async def test_a_status_keeps_fields_it_does_not_declare(objects: ObjectStore) -> None:
    """Status models are open (agents and newer members may add fields): even under Strict."""
    rt = objects.registry.require("work.gpufed.io/v1alpha1", "Work")
    created = await objects.create(rt, work([MANIFEST]))
    warnings: list[str] = []
    status = {**APPLIED, "extra": {"byAgent": 1}}
    written = await objects.update_status(
        rt, {**created, "status": status}, field_validation=FieldValidation.STRICT, warnings=warnings
    )
    assert written["status"] == status and warnings == []


async def test_a_status_write_does_not_revalidate_the_stored_spec(objects: ObjectStore) -> None:
    """A spec stored before a rule tightened (here: a manifest without metadata) keeps taking status
    writes, as in kube; a write of the spec itself is refused."""
    rt = objects.registry.require("work.gpufed.io/v1alpha1", "Work")
    stored = work([{"apiVersion": "v1", "kind": "ConfigMap"}])
    stored["metadata"]["uid"] = "u-1"
    kv = await objects.store.create(rt.key(namespace=NAMESPACE, name="default-web"), codec.encode(stored))
    current = codec.decode(kv)
    written = await objects.update_status(rt, {**current, "status": APPLIED})
    assert written["status"] == APPLIED
    with pytest.raises(errors.Invalid, match="manifest"):
        await objects.update(rt, {**written, "metadata": {**written["metadata"], "labels": {"a": "b"}}})


async def test_a_built_in_kinds_status_write_runs_no_spec_validator() -> None:
    """kube's status strategies (ValidateDeploymentStatusUpdate...) check metadata and status; the
    kind's validator, which checks everything else, runs on spec writes only. Its cost was paid
    twice per workload (the Propagated condition and the replica counts)."""
    calls: list[str] = []
    deployments = next(rt for rt in workload_resources() if rt.kind == "Deployment")
    assert deployments.validate is not None
    validate = deployments.validate

    def spy(new: dict[str, Any], old: dict[str, Any] | None) -> list[Any]:
        calls.append("spec" if old is None or new.get("spec") != old.get("spec") else "unchanged")
        return validate(new, old)

    registry = Registry(
        [rt for rt in core_resources() if rt.kind == "Namespace"], [dataclasses.replace(deployments, validate=spy)]
    )
    async with MemoryStore() as memory:
        objects = ObjectStore(memory, registry)
        namespaces = registry.require("v1", "Namespace")
        await objects.create(namespaces, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "default"}})
        deployments = registry.require("apps/v1", "Deployment")
        template = {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "c", "image": "i:1"}]}}
        created = await objects.create(deployments, {
            **MANIFEST, "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "web"}}, "template": template},
        })
        assert calls == ["spec"]
        written = await objects.update_status(deployments, {**created, "status": {"replicas": 2, "readyReplicas": 1}})
        assert written["status"]["readyReplicas"] == 1 and calls == ["spec"]
        bad = {**written, "spec": {**written["spec"], "replicas": -1}}
        with pytest.raises(errors.Invalid, match="replicas"):
            await objects.update(deployments, bad)
        assert calls == ["spec", "spec"]
