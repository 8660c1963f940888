"""The imperative ``kubectl create`` commands against the real API server app.

kubectl sends these bodies as protobuf; each command must succeed, and ``kubectl get -o
json`` must show the fields the command set.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from controlplane.apiserver.app import create_app
from controlplane.apiserver.objects import ObjectStore
from controlplane.apiserver.resources import Registry

from .conftest import run_kubectl, write_kubeconfig

pytestmark = pytest.mark.usefixtures("needs_kubectl")


@pytest.fixture
async def kubeconfig(
    objects: ObjectStore, api_registry: Registry, tmp_path: Path,
    served: Callable[[web.Application], Awaitable[str]],
) -> Path:
    return write_kubeconfig(tmp_path / "kubeconfig", await served(create_app(objects, api_registry)))


async def kubectl_ok(kubeconfig: Path, *args: str) -> str:
    code, out, err = await run_kubectl(kubeconfig, *args)
    assert code == 0, f"kubectl {' '.join(args)}: {err}"
    return out


async def get_json(kubeconfig: Path, *args: str) -> dict[str, Any]:
    obj: dict[str, Any] = json.loads(await kubectl_ok(kubeconfig, "get", *args, "-o", "json"))
    return obj


async def test_imperative_creates_succeed_and_read_back(kubeconfig: Path) -> None:
    assert (await kubectl_ok(kubeconfig, "create", "namespace", "ml")).strip() == "namespace/ml created"
    namespace = await get_json(kubeconfig, "namespace", "ml")
    assert namespace["kind"] == "Namespace"
    assert namespace["metadata"]["name"] == "ml"

    out = await kubectl_ok(kubeconfig, "create", "configmap", "cfg", "-n", "ml", "--from-literal=a=b",
                           "--from-literal=c=d")
    assert out.strip() == "configmap/cfg created"
    configmap = await get_json(kubeconfig, "configmap", "cfg", "-n", "ml")
    assert configmap["data"] == {"a": "b", "c": "d"}
    assert configmap["metadata"]["namespace"] == "ml"

    out = await kubectl_ok(kubeconfig, "create", "secret", "generic", "creds", "-n", "ml",
                           "--from-literal=token=s3cr3t")
    assert out.strip() == "secret/creds created"
    secret = await get_json(kubeconfig, "secret", "creds", "-n", "ml")
    assert base64.b64decode(secret["data"]["token"]) == b"s3cr3t"
    await kubectl_ok(kubeconfig, "create", "secret", "docker-registry", "pull", "-n", "ml",
                     "--docker-server=registry.example.com", "--docker-username=u", "--docker-password=p")
    pull = await get_json(kubeconfig, "secret", "pull", "-n", "ml")
    assert pull["type"] == "kubernetes.io/dockerconfigjson"
    auths = json.loads(base64.b64decode(pull["data"][".dockerconfigjson"]))["auths"]
    assert auths["registry.example.com"]["username"] == "u"

    out = await kubectl_ok(kubeconfig, "create", "serviceaccount", "trainer", "-n", "ml")
    assert out.strip() == "serviceaccount/trainer created"
    assert (await get_json(kubeconfig, "serviceaccount", "trainer", "-n", "ml"))["metadata"]["name"] == "trainer"

    out = await kubectl_ok(kubeconfig, "create", "service", "clusterip", "web", "-n", "ml", "--tcp=80:8080")
    assert out.strip() == "service/web created"
    service = await get_json(kubeconfig, "service", "web", "-n", "ml")
    assert service["spec"]["type"] == "ClusterIP"
    assert service["spec"]["selector"] == {"app": "web"}
    [port] = service["spec"]["ports"]
    assert (port["port"], port["targetPort"], port["protocol"]) == (80, 8080, "TCP")

    out = await kubectl_ok(kubeconfig, "create", "deployment", "web", "-n", "ml", "--image=nginx:1.27",
                           "--replicas=3", "--port=80")
    assert out.strip() == "deployment.apps/web created"
    deployment = await get_json(kubeconfig, "deployment", "web", "-n", "ml")
    assert deployment["spec"]["replicas"] == 3
    assert deployment["spec"]["selector"] == {"matchLabels": {"app": "web"}}
    [container] = deployment["spec"]["template"]["spec"]["containers"]
    assert (container["name"], container["image"]) == ("nginx", "nginx:1.27")
    assert [p["containerPort"] for p in container["ports"]] == [80]

    out = await kubectl_ok(kubeconfig, "create", "job", "train", "-n", "ml", "--image=busybox:1.36",
                           "--", "sh", "-c", "echo hi")
    assert out.strip() == "job.batch/train created"
    job = await get_json(kubeconfig, "job", "train", "-n", "ml")
    template = job["spec"]["template"]["spec"]
    assert template["restartPolicy"] == "Never"
    [container] = template["containers"]
    assert (container["image"], container["command"]) == ("busybox:1.36", ["sh", "-c", "echo hi"])

    listed = await kubectl_ok(kubeconfig, "get", "deploy,job,svc,cm,secret,sa", "-n", "ml", "-o", "name")
    assert set(listed.split()) >= {
        "deployment.apps/web", "job.batch/train", "service/web", "configmap/cfg", "secret/creds",
        "serviceaccount/trainer",
    }


async def test_create_twice_is_already_exists(kubeconfig: Path) -> None:
    await kubectl_ok(kubeconfig, "create", "configmap", "once", "--from-literal=a=b")
    code, _, err = await run_kubectl(kubeconfig, "create", "configmap", "once", "--from-literal=a=b")
    assert code != 0
    assert 'configmaps "once" already exists' in err


async def test_server_side_dry_run_stores_nothing(kubeconfig: Path) -> None:
    out = await kubectl_ok(kubeconfig, "create", "deployment", "dry", "--image=nginx", "--dry-run=server")
    assert out.strip() == "deployment.apps/dry created (server dry run)"
    code, _, err = await run_kubectl(kubeconfig, "get", "deployment", "dry")
    assert code != 0
    assert "NotFound" in err or "not found" in err


async def test_a_namespace_that_does_not_exist(kubeconfig: Path) -> None:
    code, _, err = await run_kubectl(kubeconfig, "create", "configmap", "x", "-n", "nope", "--from-literal=a=b")
    assert code != 0
    assert 'namespaces "nope" not found' in err
