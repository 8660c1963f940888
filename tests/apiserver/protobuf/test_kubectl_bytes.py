"""What the real kubectl sends for its imperative create commands, decoded.

A small recording server takes kubectl's POSTs, keeps the raw protobuf bodies and
answers with the decoded object as JSON (so kubectl also shows it accepts JSON answers to
protobuf requests). Each body must decode to the expected object, and to the same object
kubectl itself prints for ``--dry-run=client -o json`` once its empty values are pruned.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from controlplane.apiserver import errors
from controlplane.apiserver.protobuf import MEDIA_TYPE, decode_object

from .conftest import run_kubectl, write_kubeconfig

BLOB = b"\x00\x01\xfe\xffGPU"
DOCKER_CONFIG = '{"auths":{"r.io":{"username":"u","password":"p","auth":"dTpw"}}}'


@dataclass(frozen=True)
class Recorded:
    path: str
    content_type: str
    accept: str
    body: bytes


def recording_app(recorded: list[Recorded]) -> web.Application:
    async def version(_request: web.Request) -> web.Response:
        return web.json_response({"major": "1", "minor": "32", "gitVersion": "v1.32.0"})

    async def create(request: web.Request) -> web.Response:
        body = await request.read()
        recorded.append(
            Recorded(request.path, request.headers.get("Content-Type", ""), request.headers.get("Accept", ""), body)
        )
        try:
            obj = decode_object(body)
        except errors.ApiError as exc:
            return web.json_response(exc.to_status(), status=exc.code)
        return web.json_response(obj, status=201)

    app = web.Application()
    app.router.add_get("/version", version)
    app.router.add_post("/{tail:.*}", create)
    return app


def pruned(value: Any) -> Any:
    """``value`` without nulls, zeros, false and empty objects or lists, as omitempty leaves it.

    Go writes a plain (non-pointer) field even when it is zero and the decoder drops it again;
    kubectl's JSON keeps the zeros of fields without omitempty (a PodDisruptionBudget's status
    counts), so they are pruned here too.
    """
    if isinstance(value, dict):
        out = {key: pruned(item) for key, item in value.items()}
        return {key: item for key, item in out.items() if item not in (None, {}, [], 0)}  # 0 == False
    if isinstance(value, list):
        return [pruned(item) for item in value]
    return value


def with_flags(args: list[str], *flags: str) -> list[str]:
    """``args`` with ``flags`` added before a ``--`` that starts a container command."""
    cut = args.index("--") if "--" in args else len(args)
    return [*args[:cut], *flags, *args[cut:]]


def _labels(app: str) -> dict[str, Any]:
    return {"labels": {"app": app}}


CASES: list[tuple[str, list[str], str, dict[str, Any]]] = [
    (
        "namespace",
        ["create", "namespace", "ml"],
        "/api/v1/namespaces",
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ml"}},
    ),
    (
        "configmap from literals",
        ["create", "configmap", "cfg", "--from-literal=a=b", "--from-literal=c=d"],
        "/api/v1/namespaces/default/configmaps",
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cfg"}, "data": {"a": "b", "c": "d"}},
    ),
    (
        "configmap from a binary file",
        ["create", "configmap", "bin", "--from-file=blob={blob}"],
        "/api/v1/namespaces/default/configmaps",
        {
            "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "bin"},
            "binaryData": {"blob": base64.b64encode(BLOB).decode()},
        },
    ),
    (
        "generic secret",
        ["create", "secret", "generic", "s1", "--from-literal=pw=hunter2", "--type=Opaque"],
        "/api/v1/namespaces/default/secrets",
        {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s1"}, "data": {"pw": "aHVudGVyMg=="},
         "type": "Opaque"},
    ),
    (
        "docker-registry secret",
        ["create", "secret", "docker-registry", "reg", "--docker-server=r.io", "--docker-username=u",
         "--docker-password=p"],
        "/api/v1/namespaces/default/secrets",
        {
            "apiVersion": "v1", "kind": "Secret", "metadata": {"name": "reg"},
            "data": {".dockerconfigjson": base64.b64encode(DOCKER_CONFIG.encode()).decode()},
            "type": "kubernetes.io/dockerconfigjson",
        },
    ),
    (
        "service account",
        ["create", "serviceaccount", "bot"],
        "/api/v1/namespaces/default/serviceaccounts",
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "bot"}},
    ),
    (
        "clusterip service",
        ["create", "service", "clusterip", "svc1", "--tcp=80:8080"],
        "/api/v1/namespaces/default/services",
        {
            "apiVersion": "v1", "kind": "Service", "metadata": {"name": "svc1", **_labels("svc1")},
            "spec": {
                "ports": [{"name": "80-8080", "protocol": "TCP", "port": 80, "targetPort": 8080}],
                "selector": {"app": "svc1"},
                "type": "ClusterIP",
            },
        },
    ),
    (
        "nodeport service",
        ["create", "service", "nodeport", "np", "--tcp=80:http", "--node-port=30080"],
        "/api/v1/namespaces/default/services",
        {
            "apiVersion": "v1", "kind": "Service", "metadata": {"name": "np", **_labels("np")},
            "spec": {
                "ports": [{"name": "80-http", "protocol": "TCP", "port": 80, "targetPort": "http",
                           "nodePort": 30080}],
                "selector": {"app": "np"},
                "type": "NodePort",
            },
        },
    ),
    (
        "deployment",
        ["create", "deployment", "web", "--image=nginx:1.27", "--replicas=3", "--port=80"],
        "/apis/apps/v1/namespaces/default/deployments",
        {
            "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", **_labels("web")},
            "spec": {
                "replicas": 3,
                "selector": {"matchLabels": {"app": "web"}},
                "template": {
                    "metadata": _labels("web"),
                    "spec": {"containers": [{"name": "nginx", "image": "nginx:1.27", "ports": [{"containerPort": 80}]}]},
                },
            },
        },
    ),
    (
        "job",
        ["create", "job", "j1", "--image=busybox", "--", "echo", "hi"],
        "/apis/batch/v1/namespaces/default/jobs",
        {
            "apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j1"},
            "spec": {
                "template": {
                    "spec": {
                        "containers": [{"name": "j1", "image": "busybox", "command": ["echo", "hi"]}],
                        "restartPolicy": "Never",
                    }
                }
            },
        },
    ),
    (
        "quota",
        ["create", "quota", "q1", "--hard=pods=2,requests.cpu=500m", "--scopes=BestEffort"],
        "/api/v1/namespaces/default/resourcequotas",
        {
            "apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "q1"},
            "spec": {"hard": {"pods": "2", "requests.cpu": "500m"}, "scopes": ["BestEffort"]},
        },
    ),
    (
        "cronjob",
        ["create", "cronjob", "cj1", "--image=busybox", "--schedule=*/5 * * * *", "--restart=Never", "--", "date"],
        "/apis/batch/v1/namespaces/default/cronjobs",
        {
            "apiVersion": "batch/v1", "kind": "CronJob", "metadata": {"name": "cj1"},
            "spec": {
                "schedule": "*/5 * * * *",
                "jobTemplate": {
                    "metadata": {"name": "cj1"},
                    "spec": {
                        "template": {
                            "spec": {
                                "containers": [{"name": "cj1", "image": "busybox", "command": ["date"]}],
                                "restartPolicy": "Never",
                            }
                        }
                    },
                },
            },
        },
    ),
    (
        "ingress",
        ["create", "ingress", "ing1", "--class=nginx", "--rule=foo.com/bar*=svc:http,tls=cert",
         "--default-backend=def:80", "--annotation=a=b"],
        "/apis/networking.k8s.io/v1/namespaces/default/ingresses",
        {
            "apiVersion": "networking.k8s.io/v1", "kind": "Ingress",
            "metadata": {"name": "ing1", "annotations": {"a": "b"}},
            "spec": {
                "ingressClassName": "nginx",
                "defaultBackend": {"service": {"name": "def", "port": {"number": 80}}},
                "tls": [{"hosts": ["foo.com"], "secretName": "cert"}],
                "rules": [
                    {
                        "host": "foo.com",
                        "http": {
                            "paths": [
                                {
                                    "path": "/bar", "pathType": "Prefix",
                                    "backend": {"service": {"name": "svc", "port": {"name": "http"}}},
                                }
                            ]
                        },
                    }
                ],
            },
        },
    ),
    (
        "poddisruptionbudget",
        ["create", "poddisruptionbudget", "pdb1", "--selector=app=x", "--max-unavailable=25%"],
        "/apis/policy/v1/namespaces/default/poddisruptionbudgets",
        {
            "apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "pdb1"},
            "spec": {"selector": {"matchLabels": {"app": "x"}}, "maxUnavailable": "25%"},
        },
    ),
    (
        "poddisruptionbudget with a minimum",
        ["create", "poddisruptionbudget", "pdb2", "--selector=app=y", "--min-available=1"],
        "/apis/policy/v1/namespaces/default/poddisruptionbudgets",
        {
            "apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "pdb2"},
            "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "y"}}},
        },
    ),
    (
        "priorityclass",
        ["create", "priorityclass", "pc1", "--value=1000", "--global-default", "--description=high",
         "--preemption-policy=Never"],
        "/apis/scheduling.k8s.io/v1/priorityclasses",
        {
            "apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "pc1"},
            "value": 1000, "globalDefault": True, "description": "high", "preemptionPolicy": "Never",
        },
    ),
]


@pytest.mark.usefixtures("needs_kubectl")
@pytest.mark.parametrize(("args", "path", "expected"), [(a, p, e) for _, a, p, e in CASES],
                         ids=[case for case, _, _, _ in CASES])
async def test_kubectl_create_bodies_decode(
    args: list[str], path: str, expected: dict[str, Any], tmp_path: Path,
    served: Callable[[web.Application], Awaitable[str]],
) -> None:
    blob = tmp_path / "blob.bin"
    blob.write_bytes(BLOB)
    args = [arg.replace("{blob}", str(blob)) for arg in args]
    recorded: list[Recorded] = []
    kubeconfig = write_kubeconfig(tmp_path / "kubeconfig", await served(recording_app(recorded)))

    code, out, err = await run_kubectl(kubeconfig, *args)
    assert code == 0, err
    assert out.strip().endswith("created")
    [request] = recorded
    assert request.path == path
    assert request.content_type == MEDIA_TYPE
    assert "application/json" in request.accept
    assert decode_object(request.body) == expected

    # kubectl's own JSON rendering of the same object agrees.
    code, out, err = await run_kubectl(kubeconfig, *with_flags(args, "--dry-run=client", "-o", "json"))
    assert code == 0, err
    assert pruned(json.loads(out)) == expected
