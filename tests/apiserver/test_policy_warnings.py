"""Policy warnings reach the client: create, update and patch of a policy kind answer with the
``Warning: 299`` headers ``policies.validation`` finds (accepted, but ignored or deprecated), and
the real kubectl prints them as "Warning: ..."."""

from __future__ import annotations

import asyncio
import shutil
import socket
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from controlplane.apiserver.app import create_app
from controlplane.apiserver.kinds.core import core_resources
from controlplane.apiserver.kinds.gpufed import gpufed_resources
from controlplane.apiserver.kinds.workloads import workload_resources
from controlplane.apiserver.objects import ObjectStore
from controlplane.apiserver.resources import Registry
from controlplane.storage import MemoryStore

KUBECTL = shutil.which("kubectl") or "/usr/bin/kubectl"
needs_kubectl = pytest.mark.skipif(not Path(KUBECTL).exists(), reason="kubectl is not installed")
KUBECTL_TIMEOUT = 60.0

POLICIES = "/apis/policy.gpufed.io/v1alpha1/namespaces/default/propagationpolicies"
KARMADA_OVERRIDES = "/apis/policy.karmada.io/v1alpha1/namespaces/default/overridepolicies"
LABELS_IGNORED = "spec.resourceSelectors[0].labelSelector is ignored because spec.resourceSelectors[0].name is set"
ASSOCIATION = "spec.association is deprecated; use spec.propagateDeps"
DEPRECATED_OVERRIDE = "spec.targetCluster and spec.overriders are deprecated; use spec.overrideRules"
MERGE_PATCH = {"Content-Type": "application/merge-patch+json"}


def propagation_policy(name: str = "p", *, label_selector: bool = False, association: bool = False) -> dict[str, Any]:
    selector: dict[str, Any] = {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"}
    if label_selector:
        selector["labelSelector"] = {"matchLabels": {"app": "web"}}
    spec: dict[str, Any] = {"resourceSelectors": [selector]}
    if association:
        spec["association"] = True
    return {
        "apiVersion": "policy.gpufed.io/v1alpha1",
        "kind": "PropagationPolicy",
        "metadata": {"name": name, "namespace": "default"},
        "spec": spec,
    }


def header(warning: str) -> str:
    return '299 - "' + warning.replace("\\", "\\\\").replace('"', '\\"') + '"'


@pytest.fixture
async def hub_objects() -> AsyncIterator[ObjectStore]:
    async with MemoryStore() as memory:
        objects = ObjectStore(memory, Registry(core_resources(), workload_resources(), gpufed_resources()))
        await objects.bootstrap()
        yield objects


@pytest.fixture
async def hub(hub_objects: ObjectStore) -> AsyncIterator[TestClient[Any, Any]]:
    async with TestClient(TestServer(create_app(hub_objects, hub_objects.registry))) as client:
        yield client


@pytest.mark.parametrize(
    ("policy", "expected"),
    [
        pytest.param(propagation_policy(), [], id="clean"),
        pytest.param(propagation_policy(label_selector=True), [LABELS_IGNORED], id="ignored-label-selector"),
        pytest.param(
            propagation_policy(label_selector=True, association=True), [LABELS_IGNORED, ASSOCIATION], id="two"
        ),
    ],
)
async def test_create_returns_the_policy_warnings(
    hub: TestClient[Any, Any], policy: dict[str, Any], expected: list[str]
) -> None:
    created = await hub.post(POLICIES, json=policy)
    assert created.status == 201, await created.text()
    assert created.headers.getall("Warning", []) == [header(w) for w in expected]


async def test_update_and_patch_return_the_warnings_of_the_object_written(hub: TestClient[Any, Any]) -> None:
    created = await hub.post(POLICIES, json=propagation_policy())
    assert created.headers.getall("Warning", []) == []
    body = await created.json()
    body["spec"]["association"] = True
    updated = await hub.put(f"{POLICIES}/p", json=body)
    assert updated.status == 200, await updated.text()
    assert updated.headers.getall("Warning", []) == [header(ASSOCIATION)]
    patched = await hub.patch(
        f"{POLICIES}/p",
        json={"spec": {"resourceSelectors": [{"apiVersion": "apps/v1", "kind": "Deployment", "name": "web",
                                              "labelSelector": {"matchLabels": {"app": "web"}}}]}},
        headers=MERGE_PATCH,
    )
    assert patched.status == 200, await patched.text()
    assert patched.headers.getall("Warning", []) == [header(LABELS_IGNORED), header(ASSOCIATION)]


async def test_karmada_group_policies_warn_too(hub: TestClient[Any, Any]) -> None:
    override = {
        "apiVersion": "policy.karmada.io/v1alpha1",
        "kind": "OverridePolicy",
        "metadata": {"name": "o", "namespace": "default"},
        "spec": {
            "resourceSelectors": [{"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"}],
            "targetCluster": {"clusterNames": ["onprem"]},
            "overriders": {"imageOverrider": [{"component": "Registry", "operator": "replace", "value": "r.example"}]},
        },
    }
    created = await hub.post(KARMADA_OVERRIDES, json=override)
    assert created.status == 201, await created.text()
    assert created.headers.getall("Warning", []) == [header(DEPRECATED_OVERRIDE)]


async def test_other_kinds_get_no_policy_warnings(hub: TestClient[Any, Any]) -> None:
    created = await hub.post(
        "/api/v1/namespaces/default/configmaps", json={"metadata": {"name": "c"}, "data": {"association": "true"}}
    )
    assert created.status == 201, await created.text()
    assert created.headers.getall("Warning", []) == []


# --- kubectl ---------------------------------------------------------------------------------


@pytest.fixture
async def kubeconfig(hub_objects: ObjectStore, tmp_path: Path) -> AsyncIterator[Path]:
    """A kubeconfig for the hub's API server on 127.0.0.1 (plain HTTP) at a free port."""
    runner = web.AppRunner(create_app(hub_objects, hub_objects.registry))
    await runner.setup()
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    await web.SockSite(runner, sock).start()
    path = tmp_path / "kubeconfig"
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "hub", "cluster": {"server": f"http://127.0.0.1:{port}"}}],
                "users": [{"name": "me", "user": {}}],
                "contexts": [{"name": "hub", "context": {"cluster": "hub", "user": "me", "namespace": "default"}}],
                "current-context": "hub",
            }
        )
    )
    try:
        yield path
    finally:
        await runner.cleanup()


async def kubectl(kubeconfig: Path, *args: str) -> tuple[int, str, str]:
    process = await asyncio.create_subprocess_exec(
        KUBECTL, "--kubeconfig", str(kubeconfig), *args,
        stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        env={"PATH": "/usr/bin:/bin", "HOME": str(kubeconfig.parent)},
    )
    try:
        async with asyncio.timeout(KUBECTL_TIMEOUT):
            out, err = await process.communicate()
    except TimeoutError:
        process.kill()
        await process.wait()
        raise
    assert process.returncode is not None
    return process.returncode, out.decode(), err.decode()


@needs_kubectl
@pytest.mark.timeout(120)
async def test_kubectl_prints_the_policy_warnings(kubeconfig: Path, tmp_path: Path) -> None:
    manifest = tmp_path / "policy.yaml"
    manifest.write_text(yaml.safe_dump(propagation_policy(label_selector=True)))
    code, out, err = await kubectl(kubeconfig, "apply", "-f", str(manifest))
    assert code == 0, err
    assert f"Warning: {LABELS_IGNORED}" in err
    assert "propagationpolicy.policy.gpufed.io/p created" in out

    manifest.write_text(yaml.safe_dump(propagation_policy()))
    code, out, err = await kubectl(kubeconfig, "apply", "-f", str(manifest))
    assert code == 0, err
    assert "Warning:" not in err
