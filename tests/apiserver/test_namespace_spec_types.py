"""A namespace whose ``spec`` (or ``spec.finalizers``) is not of kube's type is refused as kube
refuses it, a 400 ``cannot unmarshal`` on a create or an update and a 422 at ``patch`` on a patch:
never a 500 from the code that keeps a namespace's finalizers, never silently replaced."""

from __future__ import annotations

import json
from typing import Any

import pytest
from aiohttp.test_utils import TestClient

NAMESPACES = "/api/v1/namespaces"


def namespace(name: str, spec: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}, "spec": spec}


@pytest.mark.parametrize(("spec", "unmarshal"), [
    (5, "cannot unmarshal number into Go struct field Namespace.spec of type v1.NamespaceSpec"),
    ("x", "cannot unmarshal string into Go struct field Namespace.spec of type v1.NamespaceSpec"),
    ([1], "cannot unmarshal array into Go struct field Namespace.spec of type v1.NamespaceSpec"),
    ({"finalizers": 5}, "cannot unmarshal number into Go struct field NamespaceSpec.spec.finalizers"),
    ({"finalizers": [5]}, "cannot unmarshal number into Go struct field NamespaceSpec.spec.finalizers"),
])
async def test_a_namespace_spec_of_the_wrong_type_is_kubes_400(
    api: TestClient[Any, Any], spec: Any, unmarshal: str
) -> None:
    created = await api.post(NAMESPACES, json=namespace("held", {}))
    assert created.status == 201, await created.text()
    for verb, path, name in (("post", NAMESPACES, "new"), ("put", f"{NAMESPACES}/held", "held")):
        response = await getattr(api, verb)(path, json=namespace(name, spec))
        status = await response.json()
        assert (response.status, status["reason"]) == (400, "BadRequest"), (verb, status)
        assert status["message"].startswith(f'Namespace in version "v1" cannot be handled as a Namespace: json: {unmarshal}')
    for patch_type in ("merge-patch", "strategic-merge-patch"):
        patched = await api.patch(f"{NAMESPACES}/held", data=json.dumps({"spec": spec}),
                                  headers={"Content-Type": f"application/{patch_type}+json"})
        status = await patched.json()
        assert (patched.status, status["reason"]) == (422, "Invalid"), (patch_type, status)
        assert [cause["field"] for cause in status["details"]["causes"]] == ["patch"]
    stored = await (await api.get(f"{NAMESPACES}/held")).json()
    assert stored["spec"] == {"finalizers": ["kubernetes"]}
    assert (await api.get(f"{NAMESPACES}/new")).status == 404
