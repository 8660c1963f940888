"""The imperative ``kubectl create`` commands against the real API server app.

kubectl sends these bodies as protobuf; each command must succeed, and ``kubectl get -o
json`` must show the fields the command set.
"""

from __future__ import annotations

import base64
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from controlplane.apiserver.app import create_app
from controlplane.apiserver.objects import ObjectStore
from controlplane.apiserver.resources import Registry
from controlplane.hub import hub_registry
from controlplane.storage import MemoryStore

from .conftest import run_kubectl, write_kubeconfig

pytestmark = pytest.mark.usefixtures("needs_kubectl")


@pytest.fixture
async def kubeconfig(
    objects: ObjectStore, api_registry: Registry, tmp_path: Path,
    served: Callable[[web.Application], Awaitable[str]],
) -> Path:
    return write_kubeconfig(tmp_path / "kubeconfig", await served(create_app(objects, api_registry)))


@pytest.fixture
async def hub_kubeconfig(
    tmp_path: Path, served: Callable[[web.Application], Awaitable[str]],
) -> AsyncIterator[Path]:
    """kubectl's configuration for an app serving every kind the hub serves (quotas, cronjobs, ingresses, ...)."""
    async with MemoryStore() as memory:
        objects = ObjectStore(memory, hub_registry())
        await objects.bootstrap()
        yield write_kubeconfig(tmp_path / "kubeconfig", await served(create_app(objects, objects.registry)))


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


async def test_imperative_creates_of_quota_cronjob_ingress_pdb_and_priorityclass(hub_kubeconfig: Path) -> None:
    kubeconfig = hub_kubeconfig
    await kubectl_ok(kubeconfig, "create", "namespace", "ml")

    out = await kubectl_ok(kubeconfig, "create", "quota", "q", "-n", "ml", "--hard=pods=2,limits.cpu=4")
    assert out.strip() == "resourcequota/q created"
    quota = await get_json(kubeconfig, "resourcequota", "q", "-n", "ml")
    assert quota["spec"]["hard"] == {"pods": "2", "limits.cpu": "4"}

    out = await kubectl_ok(kubeconfig, "create", "cronjob", "cj", "-n", "ml", "--image=busybox:1.36",
                           "--schedule=*/1 * * * *", "--", "echo", "tick")
    assert out.strip() == "cronjob.batch/cj created"
    cronjob = await get_json(kubeconfig, "cronjob", "cj", "-n", "ml")
    assert cronjob["spec"]["schedule"] == "*/1 * * * *"
    template = cronjob["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    assert template["restartPolicy"] == "OnFailure"
    [container] = template["containers"]
    assert (container["image"], container["command"]) == ("busybox:1.36", ["echo", "tick"])

    # A job instantiated from the cronjob reads it back and sends a Job owned by it.
    out = await kubectl_ok(kubeconfig, "create", "job", "cj-now", "-n", "ml", "--from=cronjob/cj")
    assert out.strip() == "job.batch/cj-now created"
    job = await get_json(kubeconfig, "job", "cj-now", "-n", "ml")
    [owner] = job["metadata"]["ownerReferences"]
    assert (owner["kind"], owner["name"], owner["uid"]) == ("CronJob", "cj", cronjob["metadata"]["uid"])
    assert job["metadata"]["annotations"]["cronjob.kubernetes.io/instantiate"] == "manual"
    [container] = job["spec"]["template"]["spec"]["containers"]
    assert (container["image"], container["command"]) == ("busybox:1.36", ["echo", "tick"])

    out = await kubectl_ok(kubeconfig, "create", "ingress", "ing", "-n", "ml", "--rule=foo.com/bar=svc:80",
                           "--rule=bar.com/*=other:http,tls=cert")
    assert out.strip() == "ingress.networking.k8s.io/ing created"
    ingress = await get_json(kubeconfig, "ingress", "ing", "-n", "ml")
    first, second = ingress["spec"]["rules"]
    [path] = first["http"]["paths"]
    assert (first["host"], path["path"], path["pathType"]) == ("foo.com", "/bar", "Exact")
    assert path["backend"]["service"] == {"name": "svc", "port": {"number": 80}}
    [path] = second["http"]["paths"]
    assert (second["host"], path["path"], path["pathType"]) == ("bar.com", "/", "Prefix")
    assert path["backend"]["service"] == {"name": "other", "port": {"name": "http"}}
    assert ingress["spec"]["tls"] == [{"hosts": ["bar.com"], "secretName": "cert"}]

    out = await kubectl_ok(kubeconfig, "create", "poddisruptionbudget", "pdb", "-n", "ml", "--selector=app=x",
                           "--min-available=1")
    assert out.strip() == "poddisruptionbudget.policy/pdb created"
    pdb = await get_json(kubeconfig, "poddisruptionbudget", "pdb", "-n", "ml")
    assert pdb["spec"]["minAvailable"] == 1
    assert pdb["spec"]["selector"] == {"matchLabels": {"app": "x"}}
    await kubectl_ok(kubeconfig, "create", "pdb", "pdb-pct", "-n", "ml", "--selector=app=y",
                     "--max-unavailable=50%")
    assert (await get_json(kubeconfig, "pdb", "pdb-pct", "-n", "ml"))["spec"]["maxUnavailable"] == "50%"

    out = await kubectl_ok(kubeconfig, "create", "priorityclass", "pc", "--value=100", "--description=batch",
                           "--preemption-policy=Never")
    assert out.strip() == "priorityclass.scheduling.k8s.io/pc created"
    priority = await get_json(kubeconfig, "priorityclass", "pc")
    assert (priority["value"], priority["description"], priority["preemptionPolicy"]) == (100, "batch", "Never")
    await kubectl_ok(kubeconfig, "create", "priorityclass", "pc-zero", "--value=0")
    assert (await get_json(kubeconfig, "priorityclass", "pc-zero"))["value"] == 0, "kube shows a value of 0"

    listed = await kubectl_ok(kubeconfig, "get", "quota,cronjob,job,ingress,pdb", "-n", "ml", "-o", "name")
    assert set(listed.split()) >= {
        "resourcequota/q", "cronjob.batch/cj", "job.batch/cj-now", "ingress.networking.k8s.io/ing",
        "poddisruptionbudget.policy/pdb", "poddisruptionbudget.policy/pdb-pct",
    }
