"""The API server on a real socket, driven by the real kubectl (/usr/bin/kubectl), the sync
``kubernetes`` DynamicClient and ``kubernetes_asyncio``: what users and agents run."""

from __future__ import annotations

import asyncio
import json
import shutil
import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import yaml
from aiohttp import web

from controlplane.apiserver.app import create_app
from controlplane.apiserver.objects import ObjectStore
from controlplane.apiserver.patches import PatchType
from controlplane.apiserver.resources import Registry
from controlplane.hub import hub_registry
from tests.controllers.fleet import namespace_controller, namespace_gone

from .kinds import deployment

KUBECTL = shutil.which("kubectl") or "/usr/bin/kubectl"
needs_kubectl = pytest.mark.skipif(not Path(KUBECTL).exists(), reason="kubectl is not installed")
KUBECTL_TIMEOUT = 60.0


@pytest.fixture
async def server_url(objects: ObjectStore, api_registry: Registry) -> AsyncIterator[str]:
    """The app on 127.0.0.1 (plain HTTP) at a free port."""
    runner = web.AppRunner(create_app(objects, api_registry))
    await runner.setup()
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    await web.SockSite(runner, sock).start()
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        await runner.cleanup()


@pytest.fixture
def kubeconfig(server_url: str, tmp_path: Path) -> Path:
    path = tmp_path / "kubeconfig"
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "hub", "cluster": {"server": server_url}}],
                "users": [{"name": "me", "user": {}}],
                "contexts": [{"name": "hub", "context": {"cluster": "hub", "user": "me", "namespace": "default"}}],
                "current-context": "hub",
            }
        )
    )
    return path


async def _started(kubeconfig: Path, *args: str, stdin: bool = False) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        KUBECTL, "--kubeconfig", str(kubeconfig), *args,
        stdin=asyncio.subprocess.PIPE if stdin else asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        env={"PATH": "/usr/bin:/bin", "HOME": str(kubeconfig.parent)},
    )


@asynccontextmanager
async def kubectl_streaming(kubeconfig: Path, *args: str) -> AsyncIterator[asyncio.StreamReader]:
    """kubectl running with ``args`` (a watch): its output as it comes; killed when the block ends,
    which must be within :data:`KUBECTL_TIMEOUT`."""
    process = await _started(kubeconfig, *args)
    assert process.stdout is not None
    try:
        async with asyncio.timeout(KUBECTL_TIMEOUT):
            yield process.stdout
    finally:
        process.kill()
        await process.wait()


async def kubectl(kubeconfig: Path, *args: str, stdin: str | None = None) -> tuple[int, str, str]:
    process = await _started(kubeconfig, *args, stdin=stdin is not None)
    try:
        async with asyncio.timeout(KUBECTL_TIMEOUT):
            out, err = await process.communicate(stdin.encode() if stdin is not None else None)
    except TimeoutError:
        process.kill()
        await process.wait()
        raise
    assert process.returncode is not None
    return process.returncode, out.decode(), err.decode()


async def kubectl_apply(kubeconfig: Path, manifest: str) -> str:
    """``kubectl apply -f -`` of ``manifest`` succeeds; its output."""
    code, out, err = await kubectl(kubeconfig, "apply", "-f", "-", stdin=manifest)
    assert code == 0, err
    return out


async def kubectl_apply_refused(kubeconfig: Path, manifest: str) -> str:
    """``kubectl apply -f -`` of ``manifest`` fails; its error output."""
    code, _, err = await kubectl(kubeconfig, "apply", "-f", "-", stdin=manifest)
    assert code != 0
    return err


def two_container_deployment(name: str, *, image_a: str, image_b: str) -> dict[str, Any]:
    obj = deployment(name, replicas=2)
    obj["spec"]["template"]["spec"]["containers"] = [
        {"name": "a", "image": image_a},
        {"name": "b", "image": image_b, "env": [{"name": "MODE", "value": "x"}]},
    ]
    return obj


@needs_kubectl
async def test_kubectl_apply_get_delete(kubeconfig: Path, objects: ObjectStore, tmp_path: Path) -> None:
    deploy = objects.registry.require("apps/v1", "Deployment")
    manifest = tmp_path / "web.yaml"
    manifest.write_text(yaml.safe_dump(two_container_deployment("web", image_a="nginx:1", image_b="busybox:1")))
    code, out, err = await kubectl(kubeconfig, "apply", "-f", str(manifest))
    assert code == 0, err
    assert out.strip() == "deployment.apps/web created"

    # Another writer adds fields the file does not have.
    await objects.patch(
        deploy, namespace="default", name="web", patch_type=PatchType.MERGE,
        patch={"metadata": {"labels": {"team": "ml"}}}, field_manager="someone-else",
    )
    live = await objects.get(deploy, namespace="default", name="web")
    live["spec"]["template"]["spec"]["containers"][1]["resources"] = {"limits": {"nvidia.com/gpu": "1"}}
    await objects.update(deploy, live, field_manager="someone-else")

    manifest.write_text(yaml.safe_dump(two_container_deployment("web", image_a="nginx:2", image_b="busybox:1")))
    code, out, err = await kubectl(kubeconfig, "apply", "-f", str(manifest))
    assert code == 0, err
    assert out.strip() == "deployment.apps/web configured"
    after = await objects.get(deploy, namespace="default", name="web")
    containers = {c["name"]: c for c in after["spec"]["template"]["spec"]["containers"]}
    assert containers["a"]["image"] == "nginx:2"
    assert containers["b"] == {
        "name": "b", "image": "busybox:1", "env": [{"name": "MODE", "value": "x"}],
        "resources": {"limits": {"nvidia.com/gpu": "1"}},
        # kube's defaults for a container
        "imagePullPolicy": "IfNotPresent",
        "terminationMessagePath": "/dev/termination-log",
        "terminationMessagePolicy": "File",
    }
    assert after["metadata"]["labels"] == {"team": "ml"}
    assert after["metadata"]["generation"] == 3

    code, out, err = await kubectl(kubeconfig, "get", "deploy")
    assert code == 0, err
    header, row = out.splitlines()
    assert header.split() == ["NAME", "READY", "UP-TO-DATE", "AVAILABLE", "AGE"]
    assert row.split()[:4] == ["web", "0/2", "0", "0"]
    code, out, _ = await kubectl(kubeconfig, "get", "deploy", "-o", "wide")
    assert out.splitlines()[0].split()[5:] == ["CONTAINERS", "IMAGES", "SELECTOR"]

    code, out, err = await kubectl(kubeconfig, "delete", "-f", str(manifest))
    assert code == 0, err
    assert out.strip() == 'deployment.apps "web" deleted'
    assert (await objects.list(deploy)).items == []


@needs_kubectl
async def test_kubectl_delete_of_a_namespace_and_its_content_deletes_each(
    kubeconfig: Path, objects: ObjectStore, tmp_path: Path
) -> None:
    """As against kube, ``kubectl delete -f`` of a file that holds a namespace first and then its
    content answers for every object: the namespace's delete only marks it ``Terminating``, and
    its content goes after (the namespace controller's, started here once kubectl is done)."""
    manifest = tmp_path / "all.yaml"
    manifest.write_text(yaml.safe_dump_all([
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-z"}},
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "settings", "namespace": "team-z"}},
    ]))
    code, out, err = await kubectl(kubeconfig, "create", "-f", str(manifest))
    assert code == 0, err
    code, out, err = await kubectl(kubeconfig, "delete", "-f", str(manifest), "--wait=false")
    assert code == 0, err
    assert out.splitlines() == ['namespace "team-z" deleted', 'configmap "settings" deleted']
    async with namespace_controller(objects):
        await namespace_gone(objects, "team-z")


@needs_kubectl
async def test_kubectl_server_side_apply(kubeconfig: Path, objects: ObjectStore, tmp_path: Path) -> None:
    manifest = tmp_path / "ssa.yaml"
    manifest.write_text(yaml.safe_dump(two_container_deployment("ssa", image_a="nginx:1", image_b="busybox:1")))
    code, out, err = await kubectl(kubeconfig, "apply", "--server-side", "-f", str(manifest))
    assert code == 0, err
    assert out.strip() == "deployment.apps/ssa serverside-applied"
    live = await objects.get(objects.registry.require("apps/v1", "Deployment"), namespace="default", name="ssa")
    assert [entry["manager"] for entry in live["metadata"]["managedFields"]] == ["kubectl"]
    assert [entry["operation"] for entry in live["metadata"]["managedFields"]] == ["Apply"]

    # A field owned by another manager conflicts until forced.
    code, out, err = await kubectl(
        kubeconfig, "scale", "deploy", "ssa", "--replicas=5",
    )
    assert code == 0, err
    code, _, err = await kubectl(kubeconfig, "apply", "--server-side", "-f", str(manifest))
    assert code != 0
    assert "Apply failed with 1 conflict" in err and ".spec.replicas" in err
    code, _, err = await kubectl(kubeconfig, "apply", "--server-side", "--force-conflicts", "-f", str(manifest))
    assert code == 0, err


@needs_kubectl
async def test_kubectl_reports_server_validation(kubeconfig: Path, tmp_path: Path) -> None:
    manifest = tmp_path / "widget.yaml"
    manifest.write_text(
        "apiVersion: test.gpufed.io/v1\nkind: Widget\nmetadata: {name: w}\nspec: {size: 1, sise: 2}\n"
    )
    code, _, err = await kubectl(kubeconfig, "apply", "-f", str(manifest))
    assert code != 0
    assert 'strict decoding error: unknown field "spec.sise"' in err
    manifest.write_text("apiVersion: test.gpufed.io/v1\nkind: Widget\nmetadata: {name: w}\nspec: {size: -1}\n")
    code, _, err = await kubectl(kubeconfig, "create", "-f", str(manifest))
    assert code != 0
    assert 'The Widget "w" is invalid' in err and "spec.size" in err
    manifest.write_text("apiVersion: test.gpufed.io/v1\nkind: Widget\nmetadata: {name: w}\nspec: {size: 3}\n")
    code, out, err = await kubectl(kubeconfig, "apply", "-f", str(manifest))
    assert code == 0, err
    code, out, err = await kubectl(kubeconfig, "get", "widgets", "-o", "json")
    assert code == 0, err
    assert [item["spec"]["size"] for item in json.loads(out)["items"]] == [3]


@needs_kubectl
async def test_kubectl_get_watch_prints_changes(kubeconfig: Path, objects: ObjectStore) -> None:
    deploy = objects.registry.require("apps/v1", "Deployment")
    await objects.create(deploy, deployment("w1"))
    async with kubectl_streaming(kubeconfig, "get", "deploy", "--watch", "--request-timeout=3s") as out:
        header = await out.readline()
        first = await out.readline()
        await objects.create(deploy, deployment("w2", replicas=4))
        second = await out.readline()
    assert header.decode().split()[:2] == ["NAME", "READY"]
    assert first.decode().split()[:2] == ["w1", "0/1"]
    assert second.decode().split()[:2] == ["w2", "0/4"]


GET_ALL = """
apiVersion: v1
kind: Service
metadata: {name: gateway, namespace: default}
spec:
  selector: {app: gateway}
  ports: [{port: 443}]
---
apiVersion: batch/v1
kind: CronJob
metadata: {name: sweeper, namespace: default}
spec:
  schedule: "0 * * * *"
  jobTemplate:
    spec:
      template:
        spec:
          restartPolicy: OnFailure
          containers: [{name: sweep, image: sweeper:1}]
---
apiVersion: v1
kind: ConfigMap
metadata: {name: settings, namespace: default}
data: {a: "1"}
"""


@needs_kubectl
@pytest.mark.parametrize("api_registry", [pytest.param(hub_registry(), id="hub")])
async def test_kubectl_get_all_lists_the_kinds_of_the_all_category(kubeconfig: Path) -> None:
    """``kubectl get all`` expands the ``all`` category from the hub's discovery, as on kube."""
    code, _, err = await kubectl(kubeconfig, "apply", "-f", "-", stdin=GET_ALL)
    assert code == 0, err
    code, out, err = await kubectl(kubeconfig, "get", "all", "-o", "name")
    assert code == 0, err
    listed = set(out.split())
    assert {"service/gateway", "cronjob.batch/sweeper"} <= listed
    assert not any(name.startswith("configmap/") for name in listed)  # not in the category, as on kube


def _sync_dynamic_client(url: str, cache: Path) -> dict[str, Any]:
    from kubernetes import client, dynamic

    configuration = client.Configuration()
    configuration.host = url
    with client.ApiClient(configuration) as api_client:
        dyn = dynamic.DynamicClient(api_client, cache_file=str(cache))  # type: ignore[no-untyped-call]
        deployments = dyn.resources.get(api_version="apps/v1", kind="Deployment")
        deployments.create(body=deployment("dyn", replicas=1), namespace="default")
        patched = deployments.patch(
            name="dyn", namespace="default", body={"spec": {"replicas": 3}},
            content_type="application/merge-patch+json",
        )
        listed = deployments.get(namespace="default")
        events = [
            (event["type"], event["object"].metadata.name)
            for event in deployments.watch(namespace="default", timeout=1)
        ]
        return {
            "replicas": patched.spec.replicas,
            "names": [item.metadata.name for item in listed.items],
            "events": events,
        }


async def test_sync_kubernetes_dynamic_client(server_url: str, tmp_path: Path) -> None:
    result = await asyncio.to_thread(_sync_dynamic_client, server_url, tmp_path / "discovery.json")
    assert result == {"replicas": 3, "names": ["dyn"], "events": [("ADDED", "dyn")]}


async def test_kubernetes_asyncio_client(server_url: str) -> None:
    from kubernetes_asyncio import client, watch

    configuration = client.Configuration(host=server_url)
    async with client.ApiClient(configuration) as api_client:
        apps = client.AppsV1Api(api_client)
        # The client sends a plain dict body as it is.
        await apps.create_namespaced_deployment("default", deployment("aio", replicas=1))  # type: ignore[arg-type]
        patched = await apps.patch_namespaced_deployment(
            "aio", "default", [{"op": "replace", "path": "/spec/replicas", "value": 2}]
        )
        assert patched.spec.replicas == 2
        listed = await apps.list_namespaced_deployment("default")
        assert [d.metadata.name for d in listed.items] == ["aio"]

        async def scale_later() -> None:
            await asyncio.sleep(0.2)
            await apps.patch_namespaced_deployment_scale("aio", "default", {"spec": {"replicas": 5}})

        seen = []
        async with asyncio.TaskGroup() as tasks, watch.Watch() as stream:
            tasks.create_task(scale_later())
            async for event in stream.stream(
                apps.list_namespaced_deployment, "default", resource_version=listed.metadata.resource_version,
                timeout_seconds=5,
            ):
                seen.append((event["type"], event["object"].spec.replicas))
                break  # the first change after the list is the scale
        assert seen == [("MODIFIED", 5)]
        status = await apps.delete_namespaced_deployment("aio", "default")
        assert status.status == "Success"
        with pytest.raises(client.ApiException) as caught:
            await apps.read_namespaced_deployment("aio", "default")
        assert caught.value.status == 404


_TYPED_FIXTURES = [
    ("/apis/batch/v1/namespaces/default/jobs", {
        "apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "train"},
        "spec": {"template": {"spec": {"restartPolicy": "Never", "containers": [
            {"name": "main", "image": "pytorch:2", "resources": {"limits": {"nvidia.com/gpu": 2}}},
        ]}}},
    }),
    ("/api/v1/namespaces/default/configmaps", {"metadata": {"name": "cfg"}, "data": {"a": "1"}}),
    ("/api/v1/namespaces/default/secrets", {"metadata": {"name": "s"}, "stringData": {"k": "v"}}),
    ("/api/v1/namespaces/default/services", {"metadata": {"name": "svc"}, "spec": {"ports": [{"port": 80}]}}),
    ("/api/v1/namespaces/default/persistentvolumeclaims", {
        "metadata": {"name": "data"},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": 1073741824}}},
    }),
    ("/api/v1/namespaces/default/pods", {
        "metadata": {"name": "p"}, "spec": {"containers": [{"name": "main", "image": "nginx"}]},
    }),
]


def _typed_clients(url: str) -> dict[str, Any]:
    """The official client's typed APIs: every model must parse what the hub returns."""
    from kubernetes import client

    configuration = client.Configuration()
    configuration.host = url
    with client.ApiClient(configuration) as api_client:
        apps, batch, core = client.AppsV1Api(api_client), client.BatchV1Api(api_client), client.CoreV1Api(api_client)
        read = apps.read_namespaced_deployment("llm-serving", "default")
        listed = apps.list_deployment_for_all_namespaces()
        job = batch.read_namespaced_job("train", "default")
        jobs = batch.list_job_for_all_namespaces()
        container = read.spec.template.spec.containers[0]
        pod = core.read_namespaced_pod("p", "default")
        return {
            "gpu limit": container.resources.limits["nvidia.com/gpu"],
            "status ready": read.status.ready_replicas,
            "status is set": read.status is not None,
            "strategy": read.spec.strategy.type,
            "listed": [d.metadata.name for d in listed.items],
            "job backoff": job.spec.backoff_limit,
            "job gpu": job.spec.template.spec.containers[0].resources.limits["nvidia.com/gpu"],
            "jobs": [j.metadata.name for j in jobs.items],
            "configmaps": [c.metadata.name for c in core.list_namespaced_config_map("default").items],
            "secret type": core.read_namespaced_secret("s", "default").type,
            "service target port": core.read_namespaced_service("svc", "default").spec.ports[0].target_port,
            "pvc": core.read_namespaced_persistent_volume_claim("data", "default").spec.resources.requests,
            "pods": [p.metadata.name for p in core.list_pod_for_all_namespaces().items],
            "pod": (pod.spec.containers[0].image_pull_policy, pod.status.phase, pod.status.qos_class),
        }


async def test_official_client_typed_models_parse_the_hub(server_url: str) -> None:
    """The README's GPU Deployment (``nvidia.com/gpu: 1`` as a number, as kubectl sends it from
    YAML) reads back as kube's canonical ``"1"`` with ``status: {}``; typed reads and lists of
    built-in kinds parse."""
    readme = Path(__file__).parents[2] / "policies" / "examples" / "on-prem-first-cloud-burst.yaml"
    manifest = next(d for d in yaml.safe_load_all(readme.read_text()) if d and d.get("kind") == "Deployment")
    assert manifest["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] == 1
    manifest["metadata"]["namespace"] = "default"
    async with aiohttp.ClientSession(server_url) as session:
        for path, body in [("/apis/apps/v1/namespaces/default/deployments", manifest), *_TYPED_FIXTURES]:
            async with session.post(path, json=body) as response:
                assert response.status == 201, await response.text()
    result = await asyncio.to_thread(_typed_clients, server_url)
    assert result == {
        "gpu limit": "1",
        "status ready": None,
        "status is set": True,
        "strategy": "RollingUpdate",
        "listed": ["llm-serving"],
        "job backoff": 6,
        "job gpu": "2",
        "jobs": ["train"],
        "configmaps": ["cfg"],
        "secret type": "Opaque",
        "service target port": 80,
        "pvc": {"storage": "1073741824"},
        "pods": ["p"],
        "pod": ("Always", "Pending", "BestEffort"),
    }


def _discovery_calls(url: str) -> dict[str, Any]:
    """The official client's discovery APIs, which ask with a closing slash (``/api/``, ``/apis/``,
    ``/apis/apps/``, ``/apis/apps/v1/``)."""
    from kubernetes import client

    configuration = client.Configuration()
    configuration.host = url
    with client.ApiClient(configuration) as api_client:
        return {
            "core": client.CoreApi(api_client).get_api_versions().versions,
            "groups": "apps" in [g.name for g in client.ApisApi(api_client).get_api_versions().groups],
            "apps": client.AppsApi(api_client).get_api_group().preferred_version.group_version,
            "resources": "deployments" in [r.name for r in client.AppsV1Api(api_client).get_api_resources().resources],
        }


async def test_official_client_discovery_with_a_closing_slash(server_url: str) -> None:
    """``/api/`` and ``/apis/`` answered 404 (kube-apiserver serves both spellings)."""
    result = await asyncio.to_thread(_discovery_calls, server_url)
    assert result == {"core": ["v1"], "groups": True, "apps": "apps/v1", "resources": True}
