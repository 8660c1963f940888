"""CustomResourceDefinitions served in process: two API server replicas over one store both
serve a CRD written through either, kube's conditions are written once, names that clash with
a served kind are refused, and the kind's OpenAPI comes from its schema."""

from __future__ import annotations

import asyncio
import copy
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer

from controlplane.apiserver import codec
from controlplane.apiserver.app import create_app
from controlplane.apiserver.crd.controller import served_as
from controlplane.apiserver.crd.registry import DynamicRegistry, NamesDecision, name_decisions
from controlplane.apiserver.crd.types import crd_resource_type, deprecation_warning
from controlplane.apiserver.kinds.coordination import coordination_resources
from controlplane.apiserver.kinds.core import core_resources
from controlplane.apiserver.kinds.workloads import workload_resources
from controlplane.apiserver.objects import ObjectStore
from controlplane.storage import MemoryStore

CRDS = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
CRD: dict[str, Any] = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": "trainers.ml.example.com"},
    "spec": {
        "group": "ml.example.com",
        "scope": "Namespaced",
        "names": {"plural": "trainers", "kind": "Trainer", "shortNames": ["tr"]},
        "versions": [{
            "name": "v1", "served": True, "storage": True,
            "subresources": {"status": {}},
            "schema": {"openAPIV3Schema": {
                "type": "object",
                "properties": {"spec": {"type": "object", "properties": {
                    "model": {"type": "string", "description": "The model to train."},
                }}},
            }},
        }],
    },
}
Client = TestClient[Any, Any]


@pytest.fixture
async def replicas() -> AsyncIterator[tuple[Client, Client]]:
    """Two API servers (each with its own registry and CRD controller) over one store, which
    already holds a malformed CRD written around the API (it must not stop the others)."""
    async with MemoryStore() as memory:
        malformed = {**copy.deepcopy(CRD), "metadata": {"name": "broken.ml.example.com"}}
        malformed["spec"]["names"] = {"plural": "brokens", "kind": "Broken"}
        malformed["spec"]["versions"] = [{"name": "v1", "storage": True}]
        await memory.create(crd_resource_type().key(namespace=None, name="broken.ml.example.com"), codec.encode(malformed))
        clients = []
        for _ in range(2):
            registry = DynamicRegistry(core_resources(), workload_resources(), coordination_resources(), [crd_resource_type()])
            objects = ObjectStore(memory, registry)
            clients.append(TestClient(TestServer(create_app(objects, registry))))
        for client in clients:
            await client.start_server()
        try:
            yield clients[0], clients[1]
        finally:
            for client in clients:
                await client.close()


async def _until(check: Callable[[], Awaitable[Any]]) -> Any:
    """Poll ``check`` until it returns something truthy; fail after 10 s."""
    async with asyncio.timeout(10):
        while True:
            if result := await check():
                return result
            await asyncio.sleep(0.02)


async def _conditions(client: Client, name: str) -> dict[str, dict[str, Any]]:
    body = await (await client.get(f"{CRDS}/{name}")).json()
    return {c["type"]: c for c in (body.get("status") or {}).get("conditions") or []}


async def test_a_crd_written_through_one_replica_is_served_by_both(replicas: tuple[Client, Client]) -> None:
    first, second = replicas
    created = await first.post(CRDS, json=CRD)
    assert created.status == 201, await created.text()
    assert (await created.json())["metadata"]["finalizers"] == ["customresourcecleanup.apiextensions.k8s.io"]

    async def served_by_second() -> bool:
        return (await second.get("/apis/ml.example.com/v1")).status == 200

    await _until(served_by_second)
    listing = await (await second.get("/apis/ml.example.com/v1")).json()
    assert [(r["name"], r.get("shortNames")) for r in listing["resources"]] == [("trainers", ["tr"]), ("trainers/status", None)]
    conditions = await _until(lambda: _established(second))
    assert conditions["NamesAccepted"]["reason"] == "NoConflicts"
    assert conditions["Established"]["message"] == "the initial names have been accepted"

    obj = {"apiVersion": "ml.example.com/v1", "kind": "Trainer", "metadata": {"name": "a"}, "spec": {"model": "m"}}
    written = await second.post("/apis/ml.example.com/v1/namespaces/default/trainers", json=obj)
    assert written.status == 201, await written.text()
    read = await (await first.get("/apis/ml.example.com/v1/namespaces/default/trainers/a")).json()
    assert read["spec"] == {"model": "m"}

    document = await (await first.get("/openapi/v3/apis/ml.example.com/v1")).json()
    schema = document["components"]["schemas"]["com.example.ml.v1.Trainer"]
    assert schema["properties"]["spec"]["properties"]["model"]["description"] == "The model to train."
    assert schema["x-kubernetes-group-version-kind"] == [{"group": "ml.example.com", "version": "v1", "kind": "Trainer"}]


async def _established(client: Client) -> dict[str, dict[str, Any]] | None:
    conditions = await _conditions(client, "trainers.ml.example.com")
    ready = conditions.get("Established", {}).get("status") == "True"
    return conditions if ready else None


async def test_names_already_served_are_not_accepted(replicas: tuple[Client, Client]) -> None:
    first, _ = replicas
    assert (await first.post(CRDS, json=CRD)).status == 201
    await _until(lambda: _established(first))
    # A built-in kind's plural, and a short name an older CRD holds.
    leases = copy.deepcopy(CRD)
    leases["metadata"] = {"name": "leases.coordination.k8s.io", "annotations": {"api-approved.kubernetes.io": "unapproved"}}
    leases["spec"]["group"] = "coordination.k8s.io"
    leases["spec"]["names"] = {"plural": "leases", "kind": "Lease2"}
    models = copy.deepcopy(CRD)
    models["metadata"]["name"] = "models.ml.example.com"
    models["spec"]["names"] = {"plural": "models", "kind": "Model", "shortNames": ["tr"]}
    for crd in (leases, models):
        assert (await first.post(CRDS, json=crd)).status == 201

    for name, reason, message in (
        ("leases.coordination.k8s.io", "PluralConflict", '"leases" is already in use'),
        ("models.ml.example.com", "ShortNamesConflict", '"tr" is already in use'),
    ):
        async def refused(name: str = name) -> dict[str, dict[str, Any]] | None:
            conditions = await _conditions(first, name)
            return conditions if "NamesAccepted" in conditions else None

        conditions = await _until(refused)
        assert conditions["NamesAccepted"]["status"] == "False"
        assert (conditions["NamesAccepted"]["reason"], conditions["NamesAccepted"]["message"]) == (reason, message)
        assert (conditions["Established"]["status"], conditions["Established"]["reason"]) == ("False", "NotAccepted")
    kinds = {r["kind"] for r in (await (await first.get("/apis/ml.example.com/v1")).json())["resources"]}
    assert kinds == {"Trainer"}
    assert (await first.get("/apis/coordination.k8s.io/v1/namespaces/default/leases")).status == 200


async def test_an_established_crd_asking_for_a_taken_name_keeps_its_own(replicas: tuple[Client, Client]) -> None:
    """kube's naming controller: the CRD asking for another's short name is refused that name and
    stays established, served by the names it has; the CRD holding the name keeps it."""
    first, second = replicas
    assert (await first.post(CRDS, json=CRD)).status == 201
    await _until(lambda: _established(first))
    models = copy.deepcopy(CRD)
    models["metadata"]["name"] = "models.ml.example.com"
    models["spec"]["names"] = {"plural": "models", "kind": "Model", "shortNames": ["md"]}
    assert (await first.post(CRDS, json=models)).status == 201

    async def models_established() -> bool:
        return (await _conditions(first, "models.ml.example.com")).get("Established", {}).get("status") == "True"

    await _until(models_established)
    patch = {"spec": {"names": {"shortNames": ["tr", "md"]}}}
    answer = await first.patch(f"{CRDS}/trainers.ml.example.com", json=patch,
                               headers={"Content-Type": "application/merge-patch+json"})
    assert answer.status == 200, await answer.text()

    async def refused() -> dict[str, Any] | None:
        body = await (await second.get(f"{CRDS}/trainers.ml.example.com")).json()
        conditions = {c["type"]: c for c in body["status"]["conditions"]}
        return body["status"] if conditions["NamesAccepted"]["status"] == "False" else None

    status = await _until(refused)
    conditions = {c["type"]: (c["status"], c["reason"], c["message"]) for c in status["conditions"]}
    assert conditions == {
        "NamesAccepted": ("False", "ShortNamesConflict", '"md" is already in use'),
        "Established": ("True", "InitialNamesAccepted", "the initial names have been accepted"),
    }
    assert status["acceptedNames"]["shortNames"] == ["tr"]
    assert (await _conditions(second, "models.ml.example.com"))["NamesAccepted"]["status"] == "True"
    for client in (first, second):
        listing = await (await client.get("/apis/ml.example.com/v1")).json()
        short = {r["name"]: r.get("shortNames") for r in listing["resources"] if "/" not in r["name"]}
        assert short == {"trainers": ["tr"], "models": ["md"]}
        assert (await client.get("/apis/ml.example.com/v1/namespaces/default/trainers")).status == 200


def test_names_are_decided_one_by_one_and_the_last_refused_is_the_reason() -> None:
    """kube's calculateNamesAndConditions: the free names are accepted, and the reason is the last
    name found taken (a kind in use: its list kind too)."""
    held = copy.deepcopy(CRD)
    held["spec"]["names"] = {"plural": "trainers", "singular": "trainer", "kind": "Trainer", "listKind": "TrainerList"}
    held["status"] = {"acceptedNames": held["spec"]["names"]}
    asking = copy.deepcopy(CRD)
    asking["metadata"]["name"] = "gadgets.ml.example.com"
    asking["spec"]["names"] = {"plural": "gadgets", "singular": "trainer", "kind": "Trainer", "listKind": "TrainerList",
                               "categories": ["all"]}
    decisions = name_decisions([held, asking], ())
    assert decisions["trainers.ml.example.com"] == NamesDecision(held["spec"]["names"], None)
    assert decisions["gadgets.ml.example.com"] == NamesDecision(
        {"plural": "gadgets", "kind": "", "categories": ["all"]}, ("ListKindConflict", '"TrainerList" is already in use'),
    )


def test_an_established_crd_refused_a_new_short_name_is_served_without_it() -> None:
    """Its accepted names whole: a short name the spec adds and another CRD holds is not served
    (discovery listed it on both kinds)."""
    established = [{"type": "NamesAccepted", "status": "True"}, {"type": "Established", "status": "True"}]
    holder = copy.deepcopy(CRD)
    holder["metadata"]["name"] = "gadgets.ml.example.com"
    holder["spec"]["names"] = {"plural": "gadgets", "singular": "gadget", "kind": "Gadget", "listKind": "GadgetList",
                               "shortNames": ["gd"]}
    holder["status"] = {"conditions": established, "acceptedNames": holder["spec"]["names"]}
    asking = copy.deepcopy(CRD)
    names = {"plural": "trainers", "singular": "trainer", "kind": "Trainer", "listKind": "TrainerList"}
    asking["spec"]["names"] = {**names, "shortNames": ["gd"]}
    asking["status"] = {"conditions": established, "acceptedNames": names}
    decision = name_decisions([holder, asking], ())["trainers.ml.example.com"]
    assert decision.conflict == ("ShortNamesConflict", '"gd" is already in use')
    served = served_as(asking, decision)
    assert served is not None
    assert served["spec"]["names"] == names


async def test_a_deprecated_version_warns_on_every_request(replicas: tuple[Client, Client]) -> None:
    """kube's crdHandler adds a deprecated version's warning to every request in it (a read, a
    list, a watch, a write): its ``deprecationWarning``, or kube's default naming the version to use."""
    first, _ = replicas
    crd = copy.deepcopy(CRD)
    beta = {**copy.deepcopy(crd["spec"]["versions"][0]), "name": "v1beta1", "storage": False, "deprecated": True}
    alpha = {**beta, "name": "v1alpha1", "deprecationWarning": 'v1alpha1 is gone in 2.0; "v1" is here'}
    crd["spec"]["versions"] += [beta, alpha]
    assert (await first.post(CRDS, json=crd)).status == 201
    await _until(lambda: _established(first))
    base = "/apis/ml.example.com/{}/namespaces/default/trainers"
    obj = {"apiVersion": "ml.example.com/v1alpha1", "kind": "Trainer", "metadata": {"name": "a"}}
    created = await first.post(base.format("v1alpha1"), json=obj)
    assert created.status == 201, await created.text()
    assert created.headers.getall("Warning") == ['299 - "v1alpha1 is gone in 2.0; \\"v1\\" is here"']
    beta_warning = '299 - "ml.example.com/v1beta1 Trainer is deprecated; use ml.example.com/v1 Trainer"'
    for url, params in (
        (base.format("v1beta1"), {}),
        (base.format("v1beta1") + "/a", {}),
        (base.format("v1beta1") + "/missing", {}),
        (base.format("v1beta1"), {"watch": "1", "timeoutSeconds": "1"}),
    ):
        answer = await first.get(url, params=params)
        assert answer.headers.getall("Warning", []) == [beta_warning], url
        await answer.read()
    assert "Warning" not in (await first.get(base.format("v1"))).headers


def test_kubes_default_deprecation_warning_names_the_newest_version_not_deprecated() -> None:
    spec = {"group": "ml.example.com", "names": {"kind": "Trainer"}, "versions": [
        {"name": "v1alpha1", "served": True, "deprecated": True},
        {"name": "v1beta2", "served": True},
        {"name": "v1beta1", "served": True},
        {"name": "v2", "served": False},
        {"name": "v1", "served": True, "deprecated": True},
    ]}
    warnings = [deprecation_warning(spec, v) for v in spec["versions"]]
    assert warnings == [
        "ml.example.com/v1alpha1 Trainer is deprecated; use ml.example.com/v1beta2 Trainer", "", "", "",
        "ml.example.com/v1 Trainer is deprecated",
    ]


async def test_a_deprecation_warning_is_checked_as_kube_checks_it(replicas: tuple[Client, Client]) -> None:
    first, _ = replicas
    causes = []
    for version in ({"deprecationWarning": "old"}, {"deprecated": True, "deprecationWarning": "é" * 129 + "\x07"}):
        crd = copy.deepcopy(CRD)
        crd["spec"]["versions"][0].update(version)
        answer = await first.post(CRDS, json=crd)
        assert answer.status == 422, await answer.text()
        causes += [(c["field"], c["message"].rsplit('": ', 1)[1]) for c in (await answer.json())["details"]["causes"]]
    assert causes == [
        ("spec.versions[0].deprecationWarning", "can only be set for deprecated versions"),
        ("spec.versions[0].deprecationWarning", "must be <= 256 characters long"),
        ("spec.versions[0].deprecationWarning",
         "must only contain printable UTF-8 characters; non-printable character found at index 258"),
    ]


async def test_a_crd_in_a_protected_group_needs_kubes_approval_annotation(replicas: tuple[Client, Client]) -> None:
    """kube's validateAPIApproval and API approval controller, for ``*.k8s.io`` and ``*.kubernetes.io``."""
    first, _ = replicas
    crd = copy.deepcopy(CRD)
    crd["metadata"]["name"] = "trainers.ml.k8s.io"
    crd["spec"]["group"] = "ml.k8s.io"
    pr = "see https://github.com/kubernetes/enhancements/pull/1111"
    for given, cause in (
        ({}, ("Required value: protected groups must have approval annotation \"api-approved.kubernetes.io\", " + pr)),
        ({"api-approved.kubernetes.io": "yes"}, (
            'Invalid value: "yes": protected groups must have approval annotation "api-approved.kubernetes.io" with '
            f'either a URL or a reason starting with "unapproved", {pr}')),
    ):
        crd["metadata"]["annotations"] = given
        answer = await first.post(CRDS, json=crd)
        assert answer.status == 422, await answer.text()
        causes = [(c["field"], c["message"]) for c in (await answer.json())["details"]["causes"]]
        assert causes == [("metadata.annotations[api-approved.kubernetes.io]", cause)]
    crd["metadata"]["annotations"] = {"api-approved.kubernetes.io": "https://github.com/kubernetes/kubernetes/pull/1"}
    assert (await first.post(CRDS, json=crd)).status == 201

    async def approved() -> dict[str, Any] | None:
        return (await _conditions(first, "trainers.ml.k8s.io")).get("KubernetesAPIApprovalPolicyConformant")

    condition = await _until(approved)
    assert (condition["status"], condition["reason"], condition["message"]) == (
        "True", "ApprovedAnnotation", "approved in https://github.com/kubernetes/kubernetes/pull/1",
    )


async def test_an_invalid_crd_is_refused_with_kubes_causes(replicas: tuple[Client, Client]) -> None:
    first, _ = replicas
    bad = copy.deepcopy(CRD)
    bad["spec"]["versions"][0]["storage"] = False
    bad["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]["size"] = {}
    answer = await first.post(CRDS, json=bad)
    assert answer.status == 422
    causes = {(c["field"], c["message"]) for c in (await answer.json())["details"]["causes"]}
    assert ("spec.versions", "Invalid value: 0: must have exactly one version marked as storage version") in causes
    assert (
        "spec.versions[0].schema.openAPIV3Schema.properties[spec].properties[size].type",
        "Required value: must not be empty for specified object fields",
    ) in causes


async def test_deleting_a_crd_waits_for_its_objects_finalizers_then_goes(replicas: tuple[Client, Client]) -> None:
    first, second = replicas
    assert (await first.post(CRDS, json=CRD)).status == 201
    await _until(lambda: _established(second))
    objects = "/apis/ml.example.com/v1/namespaces/default/trainers"
    held = {"apiVersion": "ml.example.com/v1", "kind": "Trainer", "metadata": {"name": "held", "finalizers": ["example.com/hold"]}}
    free = {"apiVersion": "ml.example.com/v1", "kind": "Trainer", "metadata": {"name": "free"}}
    for obj in (held, free):
        assert (await second.post(objects, json=obj)).status == 201

    assert (await first.delete(f"{CRDS}/trainers.ml.example.com")).status == 200

    async def terminating() -> dict[str, dict[str, Any]] | None:
        conditions = await _conditions(first, "trainers.ml.example.com")
        return conditions if "Terminating" in conditions else None

    conditions = await _until(terminating)
    assert conditions["Terminating"]["reason"] == "InstanceDeletionInProgress"

    async def only_held_left() -> bool:
        listed = await (await first.get(objects)).json()
        names = [item["metadata"]["name"] for item in listed["items"]]
        return names == ["held"] and bool(listed["items"][0]["metadata"].get("deletionTimestamp"))

    await _until(only_held_left)
    # The CRD stays while an object's own finalizer holds it ...
    assert (await first.get(f"{CRDS}/trainers.ml.example.com")).status == 200
    # ... and no object of its kind is created meanwhile, on either replica (kube's crdHandler).
    for client in (first, second):
        async def refused_create(client: Client = client) -> Any:
            answer = await client.post(objects, json={**free, "metadata": {"name": "late"}})
            return answer if answer.status == 405 else None  # a replica sees the deletion in its own time

        refused = await _until(refused_create)
        assert await refused.json() == {
            "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": "create not allowed while custom resource definition is terminating",
            "reason": "MethodNotAllowed", "details": {"group": "ml.example.com", "kind": "trainers"}, "code": 405,
        }
    released = await first.patch(
        f"{objects}/held", json={"metadata": {"finalizers": None}}, headers={"Content-Type": "application/merge-patch+json"}
    )
    assert released.status == 200, await released.text()

    # ... and goes once its objects are gone; neither replica serves the kind any more.
    async def gone() -> bool:
        crd = await first.get(f"{CRDS}/trainers.ml.example.com")
        served = [await c.get("/apis/ml.example.com/v1") for c in (first, second)]
        return crd.status == 404 and all(answer.status == 404 for answer in served)

    await _until(gone)


async def test_served_versions_share_objects_stored_as_the_storage_version(replicas: tuple[Client, Client]) -> None:
    first, second = replicas
    crd = copy.deepcopy(CRD)
    beta = copy.deepcopy(crd["spec"]["versions"][0])
    beta.update(name="v1beta1", storage=False)
    beta["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]["size"] = {"type": "integer", "default": 3}
    crd["spec"]["versions"].append(beta)
    assert (await first.post(CRDS, json=crd)).status == 201
    await _until(lambda: _established(second))
    group = await (await second.get("/apis/ml.example.com")).json()
    assert [v["version"] for v in group["versions"]] == ["v1", "v1beta1"]
    assert group["preferredVersion"]["version"] == "v1"

    v1 = "/apis/ml.example.com/v1/namespaces/default/trainers"
    v1beta1 = "/apis/ml.example.com/v1beta1/namespaces/default/trainers"
    obj = {"apiVersion": "ml.example.com/v1beta1", "kind": "Trainer", "metadata": {"name": "a"}, "spec": {"model": "m"}}
    created = await second.post(v1beta1, json=obj)
    assert created.status == 201, await created.text()
    # Written through v1beta1: its schema's default applies, and the answer is in v1beta1.
    assert (await created.json())["apiVersion"] == "ml.example.com/v1beta1"
    assert (await created.json())["spec"] == {"model": "m", "size": 3}
    # Read through v1 it is a v1 object (conversion None: the same fields).
    read = await (await first.get(f"{v1}/a")).json()
    assert (read["apiVersion"], read["spec"]) == ("ml.example.com/v1", {"model": "m", "size": 3})
    listed = await (await first.get(v1beta1)).json()
    assert [item["apiVersion"] for item in listed["items"]] == ["ml.example.com/v1beta1"]
    # A patch through v1beta1 of the stored (v1) object works and answers in v1beta1.
    patched = await second.patch(
        f"{v1beta1}/a", json={"spec": {"model": "n"}}, headers={"Content-Type": "application/merge-patch+json"}
    )
    assert patched.status == 200, await patched.text()
    assert ((await patched.json())["apiVersion"], (await patched.json())["spec"]["model"]) == ("ml.example.com/v1beta1", "n")
    assert (await (await first.get(f"{v1}/a")).json())["spec"]["model"] == "n"
    # A body of the storage version sent to v1beta1's URL is not converted: kube's 400.
    stored_form = {**obj, "apiVersion": "ml.example.com/v1", "metadata": {"name": "b"}}
    refused = await second.post(v1beta1, json=stored_form)
    assert (refused.status, (await refused.json())["message"]) == (400, (
        "the API version in the data (ml.example.com/v1) does not match the expected API version (ml.example.com/v1beta1)"
    ))
    # A watch through v1beta1 sees v1beta1 objects.
    watch = await second.get(v1beta1, params={"watch": "1", "resourceVersion": "0", "timeoutSeconds": "5"})
    line = await watch.content.readline()
    watch.close()
    event = json.loads(line)
    assert (event["type"], event["object"]["apiVersion"]) == ("ADDED", "ml.example.com/v1beta1")


async def test_the_storage_version_is_stored_by_the_write_itself(replicas: tuple[Client, Client]) -> None:
    """kube's CRD strategy: a create's and an update's answer list the storage version in
    ``status.storedVersions`` (not a later status write); a status write keeps the list it is given."""
    first, _ = replicas
    crd = copy.deepcopy(CRD)
    crd["spec"]["versions"].append({**copy.deepcopy(crd["spec"]["versions"][0]), "name": "v2", "storage": False})
    crd["status"] = {"storedVersions": ["v2"]}
    created = await first.post(CRDS, json=crd)
    assert created.status == 201, await created.text()
    assert (await created.json())["status"]["storedVersions"] == ["v1"]
    await _until(lambda: _established(first))
    current = await (await first.get(f"{CRDS}/{CRD['metadata']['name']}")).json()
    for version in current["spec"]["versions"]:
        version["storage"] = version["name"] == "v2"
    updated = await first.put(f"{CRDS}/{CRD['metadata']['name']}", json=current)
    assert updated.status == 200, await updated.text()
    assert (await updated.json())["status"]["storedVersions"] == ["v1", "v2"]
    body = await updated.json()
    body["status"]["storedVersions"] = ["v1"]
    written = await first.put(f"{CRDS}/{CRD['metadata']['name']}/status", json=body)
    assert written.status == 200, await written.text()
    assert (await written.json())["status"]["storedVersions"] == ["v1"]


async def test_a_watch_ends_when_its_crd_is_deleted(replicas: tuple[Client, Client]) -> None:
    first, second = replicas
    assert (await first.post(CRDS, json=CRD)).status == 201
    await _until(lambda: _established(second))
    watch = await second.get("/apis/ml.example.com/v1/trainers", params={"watch": "1", "timeoutSeconds": "60"})
    assert watch.status == 200
    assert (await first.delete(f"{CRDS}/trainers.ml.example.com")).status == 200
    # The stream ends (well before its 60 s timeout) once the kind is gone.
    async with asyncio.timeout(10):
        assert await watch.content.read() == b""


async def test_a_versions_selectable_fields_are_its_field_selectors(replicas: tuple[Client, Client]) -> None:
    """kube's ``selectableFields``: a list selects on the value at each path (named without the
    leading dot; an absent field is ``""``); another field is ``field label not supported``."""
    first, _ = replicas
    crd = copy.deepcopy(CRD)
    crd["spec"]["versions"][0]["selectableFields"] = [{"jsonPath": ".spec.model"}, {"jsonPath": ".spec.none"}]
    refused = await first.post(CRDS, json=crd)
    assert refused.status == 422
    assert (await refused.json())["details"]["causes"] == [{
        "reason": "FieldValueInvalid", "field": "spec.selectableFields[1].jsonPath",
        "message": 'Invalid value: ".spec.none": is an invalid path: does not refer to a valid field',
    }]
    crd["spec"]["versions"][0]["selectableFields"] = [{"jsonPath": ".spec.model"}]
    assert (await first.post(CRDS, json=crd)).status == 201
    await _until(lambda: _established(first))
    trainers = "/apis/ml.example.com/v1/namespaces/default/trainers"
    for name, spec in (("a", {"model": "m"}), ("b", {"model": "n"}), ("c", {})):
        obj = {"apiVersion": "ml.example.com/v1", "kind": "Trainer", "metadata": {"name": name}, "spec": spec}
        assert (await first.post(trainers, json=obj)).status == 201

    async def selected(selector: str) -> list[str]:
        answer = await first.get(trainers, params={"fieldSelector": selector})
        assert answer.status == 200, await answer.text()
        return [item["metadata"]["name"] for item in (await answer.json())["items"]]

    assert await selected("spec.model=m") == ["a"]
    assert await selected("spec.model!=m") == ["b", "c"]
    assert await selected("spec.model=") == ["c"]
    refused = await first.get(trainers, params={"fieldSelector": "spec.other=x"})
    assert refused.status == 400
    assert (await refused.json())["message"] == "field label not supported: spec.other"


async def test_a_custom_resource_body_that_does_not_decode_names_the_crds_kind(replicas: tuple[Client, Client]) -> None:
    first, _ = replicas
    assert (await first.post(CRDS, json=CRD)).status == 201
    await _until(lambda: _established(first))
    path = "/apis/ml.example.com/v1/namespaces/default/trainers"

    async def served() -> bool:
        return (await first.get(path)).status == 200

    await _until(served)
    answer = await first.post(path, data=b"x", headers={"Content-Type": "application/json"})
    status = await answer.json()
    assert (answer.status, status["reason"], status["message"]) == (400, "BadRequest", (
        "the object provided is unrecognized (must be of type Trainer): couldn't get version/kind; json parse "
        "error: invalid character 'x' looking for beginning of value (78)"
    ))
