"""Local APIServices on a real hub, as kube's autoregister and crdregistration controllers keep
them: one per built-in group-version (kube's priorities, label ``onstart``, Available ``Local``),
one per served version of a CustomResourceDefinition (label ``true``), gone when the version stops
being served or the CRD is deleted; an admin's own APIService is left alone; kube's validation
and table through kubectl; the ``extension-apiserver-authentication`` ConfigMap. The tests share
their module's hub: each writes objects of its own names, and the one that deletes a built-in
APIService waits for it to come back."""

from __future__ import annotations

import json
from typing import Any

import yaml

from controlplane.hub import Hub

from ..auth.realhub import SHARED_HUB, Client, eventually
from ..test_real_clients import kubectl, needs_kubectl

pytestmark = [needs_kubectl, SHARED_HUB]

APISERVICES = "/apis/apiregistration.k8s.io/v1/apiservices"
CRDS = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"


def crd(*served: tuple[str, bool]) -> dict[str, Any]:
    versions = [{"name": name, "served": on, "storage": index == 0,
                 "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}}}
                for index, (name, on) in enumerate(served)]
    return {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": "gizmos.tools.example.com"},
            "spec": {"group": "tools.example.com", "scope": "Namespaced", "versions": versions,
                     "names": {"plural": "gizmos", "singular": "gizmo", "kind": "Gizmo"}}}


async def names(admin: Client) -> set[str]:
    code, listed = await admin("GET", APISERVICES)
    assert code == 200, listed
    return {item["metadata"]["name"] for item in listed["items"]}


async def test_built_in_group_versions_have_local_apiservices(hub: Hub, admin: Client) -> None:
    async def registered() -> bool:
        return {"v1.", "v1.apps", "v1.batch", "v1.apiregistration.k8s.io", "v1alpha1.cluster.gpufed.io"} <= await names(admin)

    await eventually(registered)
    code, apps = await admin("GET", f"{APISERVICES}/v1.apps")
    assert code == 200
    assert apps["metadata"]["labels"] == {"kube-aggregator.kubernetes.io/automanaged": "onstart"}
    assert apps["spec"] == {"group": "apps", "version": "v1", "groupPriorityMinimum": 17800, "versionPriority": 15}
    [condition] = apps["status"]["conditions"]
    assert {k: condition[k] for k in ("type", "status", "reason", "message")} == {
        "type": "Available", "status": "True", "reason": "Local", "message": "Local APIServices are always available"}
    code, ours = await admin("GET", f"{APISERVICES}/v1alpha1.cluster.gpufed.io")
    assert (ours["spec"]["groupPriorityMinimum"], ours["spec"]["versionPriority"]) == (1000, 100)

    code, out, err = await kubectl(hub.kubeconfig_path, "get", "apiservices", "v1.apps", "v1.")
    assert code == 0, err
    assert [line.split()[:3] for line in out.splitlines()] == [
        ["NAME", "SERVICE", "AVAILABLE"], ["v1.apps", "Local", "True"], ["v1.", "Local", "True"]]

    # A deleted one comes back, as kube's autoregister puts it back.
    assert (await admin("DELETE", f"{APISERVICES}/v1.batch"))[0] == 200

    async def back() -> bool:
        return "v1.batch" in await names(admin)

    await eventually(back)


async def test_crd_versions_come_and_go(hub: Hub, admin: Client) -> None:
    code, created = await admin("POST", CRDS, crd(("v1", True), ("v2", True)))
    assert code == 201, created

    async def both() -> bool:
        return {"v1.tools.example.com", "v2.tools.example.com"} <= await names(admin)

    await eventually(both)
    code, v2 = await admin("GET", f"{APISERVICES}/v2.tools.example.com")
    assert v2["metadata"]["labels"] == {"kube-aggregator.kubernetes.io/automanaged": "true"}
    assert (v2["spec"]["groupPriorityMinimum"], v2["spec"]["versionPriority"]) == (1000, 100)

    for _ in range(5):  # client-go's RetryOnConflict: the hub's CRD controller writes the CRD's status meanwhile
        code, current = await admin("GET", f"{CRDS}/gizmos.tools.example.com")
        assert code == 200, current
        current["spec"]["versions"][1]["served"] = False
        code, written = await admin("PUT", f"{CRDS}/gizmos.tools.example.com", current)
        if code != 409:
            break
    assert code == 200, written

    async def v2_gone() -> bool:
        listed = await names(admin)
        return "v2.tools.example.com" not in listed and "v1.tools.example.com" in listed

    await eventually(v2_gone)
    assert (await admin("DELETE", f"{CRDS}/gizmos.tools.example.com"))[0] == 200

    async def all_gone() -> bool:
        return not any(name.endswith(".tools.example.com") for name in await names(admin))

    await eventually(all_gone)


async def test_an_admins_apiservice_is_left_alone_and_validated(hub: Hub, admin: Client) -> None:
    mine = {"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService", "metadata": {"name": "v1.mine.example.com"},
            "spec": {"group": "mine.example.com", "version": "v1", "groupPriorityMinimum": 500, "versionPriority": 5}}
    code, created = await admin("POST", APISERVICES, mine)
    assert code == 201, created
    assert created["status"]["conditions"][0]["reason"] == "Local"

    bad = {**mine, "metadata": {"name": "v2.mine.example.com"}}
    code, status = await admin("POST", APISERVICES, bad)
    assert code == 422
    assert status["message"] == ('APIService.apiregistration.k8s.io "v2.mine.example.com" is invalid: metadata.name: '
                                 'Invalid value: "v2.mine.example.com": must be `spec.version+"."+spec.group`: '
                                 '"v1.mine.example.com"')
    code, out, err = await kubectl(hub.kubeconfig_path, "get", "apiservice", "v1.mine.example.com", "-o", "yaml")
    assert code == 0, err
    assert "labels" not in yaml.safe_load(out)["metadata"]  # never labelled, never deleted as no local group's
    assert "v1.mine.example.com" in await names(admin)


async def test_the_extension_apiserver_authentication_configmap(hub: Hub, admin: Client) -> None:
    path = "/api/v1/namespaces/kube-system/configmaps/extension-apiserver-authentication"

    async def written() -> bool:
        return (await admin("GET", path))[0] == 200

    await eventually(written)
    _, configmap = await admin("GET", path)
    data = configmap["data"]
    assert json.loads(data["requestheader-username-headers"]) == ["X-Remote-User"]
    assert json.loads(data["requestheader-group-headers"]) == ["X-Remote-Group"]
    assert json.loads(data["requestheader-extra-headers-prefix"]) == ["X-Remote-Extra-"]
    assert json.loads(data["requestheader-allowed-names"]) == ["front-proxy-client"]
    assert data["requestheader-client-ca-file"] == (hub.config.state_dir / "front-proxy" / "front-proxy-ca.crt").read_text()
    assert data["client-ca-file"] == (hub.config.state_dir / "pki" / "ca.crt").read_text()
    key = hub.config.state_dir / "front-proxy" / "front-proxy-client.key"
    assert key.stat().st_mode & 0o077 == 0
    # kube's bootstrap Role that lets an extension server's account read it.
    code, role = await admin(
        "GET", "/apis/rbac.authorization.k8s.io/v1/namespaces/kube-system/roles/extension-apiserver-authentication-reader")
    assert code == 200, role
    assert role["rules"] == [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list", "watch"],
                              "resourceNames": ["extension-apiserver-authentication"]}]
