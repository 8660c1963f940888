"""Karmada's ``config.karmada.io/v1alpha1`` kinds are typed as their CRDs type them: the served
schema declares every field of a ResourceInterpreterCustomization and a
ResourceInterpreterWebhookConfiguration (``kubectl explain`` reaches ``spec.customizations``), so a
misspelt field is what a Karmada control plane makes of it: refused under ``fieldValidation=Strict``
(``strict decoding error: unknown field "spec.customizations.replicaResourse"``), dropped with a
warning under ``Warn``, refused by server-side apply (``field not declared in schema``); the
customizations and webhook configurations the project applies go through Strict unchanged."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml
from aiohttp.test_utils import TestClient

from controlplane.apiserver.openapi.structural import structural_schema

from .test_operator_crd_fields import _open_paths, assert_refused_under_strict

Client = TestClient[Any, Any]
APPLY = {"Content-Type": "application/apply-patch+yaml"}
ROOT = Path(__file__).resolve().parents[2]
BASE = "/apis/config.karmada.io/v1alpha1"
PLURALS = {"ResourceInterpreterCustomization": "resourceinterpretercustomizations",
           "ResourceInterpreterWebhookConfiguration": "resourceinterpreterwebhookconfigurations"}


def customization() -> dict[str, Any]:
    return {
        "apiVersion": "config.karmada.io/v1alpha1", "kind": "ResourceInterpreterCustomization",
        "metadata": {"name": "widgets"},
        "spec": {
            "target": {"apiVersion": "example.com/v1", "kind": "Widget"},
            "customizations": {
                "replicaResource": {"luaScript": "function GetReplicas(obj)\n  return obj.spec.replicas, {}\nend\n"},
                "healthInterpretation": {"luaScript": "function InterpretHealth(obj)\n  return true\nend\n"},
            },
        },
    }


def webhook_configuration() -> dict[str, Any]:
    return {
        "apiVersion": "config.karmada.io/v1alpha1", "kind": "ResourceInterpreterWebhookConfiguration",
        "metadata": {"name": "examples"},
        "webhooks": [{
            "name": "workloads.example.com",
            "clientConfig": {"service": {"namespace": "karmada-system", "name": "interpreter", "path": "/interpret",
                                         "port": 443}},
            "rules": [{"operations": ["InterpretReplica", "ReviseReplica"], "apiGroups": ["workload.example.io"],
                       "apiVersions": ["v1alpha1"], "kinds": ["Workload"]}],
            "interpreterContextVersions": ["v1alpha1"],
            "timeoutSeconds": 3,
        }],
    }


def _url(obj: dict[str, Any]) -> str:
    return f"{BASE}/{PLURALS[obj['kind']]}"


#: (object, where the typo goes, the misspelt field's path): at the top, in ``spec``, in a hook, in a list.
TYPOS = [
    (customization, ("spex",), "spex"),
    (customization, ("spec", "targett"), "spec.targett"),
    (customization, ("spec", "customizations", "replicaResourse"), "spec.customizations.replicaResourse"),
    (customization, ("spec", "customizations", "healthInterpretation", "luaScrypt"),
     "spec.customizations.healthInterpretation.luaScrypt"),
    (webhook_configuration, ("webhookz",), "webhookz"),
    (webhook_configuration, ("webhooks", 0, "timeoutSecond"), "webhooks[0].timeoutSecond"),
    (webhook_configuration, ("webhooks", 0, "clientConfig", "service", "prot"), "webhooks[0].clientConfig.service.prot"),
    (webhook_configuration, ("webhooks", 0, "rules", 0, "operation"), "webhooks[0].rules[0].operation"),
]
TYPO_IDS = [path for _, _, path in TYPOS]


def _with_typo(make: Any, where: tuple[str | int, ...]) -> dict[str, Any]:
    obj = make()
    node = obj
    for key in where[:-1]:
        node = node[key]
    node[where[-1]] = 3
    return dict(obj)


@pytest.mark.parametrize(("make", "where", "path"), TYPOS, ids=TYPO_IDS)
async def test_a_misspelt_field_is_refused_under_strict(hub: Client, make: Any, where: tuple[str | int, ...], path: str) -> None:
    obj = _with_typo(make, where)
    await assert_refused_under_strict(hub, _url(obj), obj, path)


@pytest.mark.parametrize(("make", "where", "path"), TYPOS, ids=TYPO_IDS)
async def test_a_misspelt_field_is_dropped_with_a_warning_under_warn(
    hub: Client, make: Any, where: tuple[str | int, ...], path: str,
) -> None:
    obj = _with_typo(make, where)
    answer = await hub.post(f"{_url(obj)}?fieldValidation=Warn", json=obj)
    assert answer.status == 201, await answer.text()
    assert answer.headers.getall("Warning") == [f'299 - "unknown field \\"{path}\\""']
    stored = await (await hub.get(f"{_url(obj)}/{obj['metadata']['name']}")).json()
    written = make()
    assert {k: stored.get(k) for k in ("spec", "webhooks", "spex", "webhookz")} == {
        k: written.get(k) for k in ("spec", "webhooks", "spex", "webhookz")}


@pytest.mark.parametrize(("make", "where", "path"), TYPOS, ids=TYPO_IDS)
async def test_server_side_apply_refuses_a_misspelt_field(
    hub: Client, make: Any, where: tuple[str | int, ...], path: str,
) -> None:
    obj = _with_typo(make, where)
    answer = await hub.patch(f"{_url(obj)}/{obj['metadata']['name']}?fieldManager=ci", data=yaml.safe_dump(obj), headers=APPLY)
    assert answer.status == 422, await answer.text()
    assert f".{path}: field not declared in schema" in (await answer.json())["message"]
    assert (await hub.get(f"{_url(obj)}/{obj['metadata']['name']}")).status == 404


async def test_a_field_of_the_wrong_type_is_refused(hub: Client) -> None:
    """The CRD's types hold: a script that is not a string, a port that is not a number."""
    obj = customization()
    obj["spec"]["customizations"]["replicaResource"]["luaScript"] = 7
    answer = await hub.post(_url(obj), json=obj)
    assert answer.status == 422, await answer.text()
    assert 'spec.customizations.replicaResource.luaScript: Invalid value: "integer": ' \
        'spec.customizations.replicaResource.luaScript in body must be of type string: "integer"' \
        in (await answer.json())["message"]
    hooks = webhook_configuration()
    hooks["webhooks"][0]["clientConfig"]["service"]["port"] = "https"
    answer = await hub.post(_url(hooks), json=hooks)
    assert answer.status == 422, await answer.text()
    assert "webhooks[0].clientConfig.service.port in body must be of type integer" in (await answer.json())["message"]


async def test_kubectl_explain_reaches_the_hooks(hub: Client) -> None:
    schemas = (await (await hub.get("/openapi/v3/apis/config.karmada.io/v1alpha1")).json())["components"]["schemas"]
    spec = schemas["io.karmada.config.v1alpha1.ResourceInterpreterCustomizationSpec"]
    assert spec["required"] == ["customizations", "target"]
    hooks = spec["properties"]["customizations"]["properties"]
    assert {"replicaResource", "componentResource", "statusAggregation", "retention"} <= set(hooks)
    assert hooks["replicaResource"]["required"] == ["luaScript"]
    webhook = schemas["io.karmada.config.v1alpha1.ResourceInterpreterWebhook"]
    assert webhook["required"] == ["clientConfig", "interpreterContextVersions", "name"]


@pytest.mark.parametrize("kind", sorted(PLURALS))
def test_nothing_is_kept_open(kind: str) -> None:
    schema = structural_schema("config.karmada.io", "v1alpha1", kind)
    assert schema is not None
    assert list(_open_paths(schema)) == []


#: The project's own customizations (examples/) and ones as Karmada's documentation writes them.
SAMPLES = [
    *(doc for path in sorted((ROOT / "examples/interpreter-customizations").glob("*.yaml"))
      for doc in yaml.safe_load_all(path.read_text()) if doc),
    customization(), webhook_configuration(),
]


def test_the_samples_hold_both_kinds() -> None:
    assert {s["kind"] for s in SAMPLES} == set(PLURALS)
    assert len(SAMPLES) >= 4


@pytest.mark.parametrize("sample", SAMPLES, ids=[f"{s['kind']}/{s['metadata']['name']}" for s in SAMPLES])
async def test_the_samples_apply_unchanged_under_strict(hub: Client, sample: dict[str, Any]) -> None:
    url = f"{_url(sample)}/{sample['metadata']['name']}?fieldManager=ci&fieldValidation=Strict"
    answer = await hub.patch(url, data=yaml.safe_dump(sample), headers=APPLY)
    assert answer.status == 201, await answer.text()
    assert answer.headers.getall("Warning", []) == []
    again = copy.deepcopy(sample)
    again["metadata"]["name"] = "again"
    if "spec" in again:  # one customization per target and hook
        again["spec"]["target"]["kind"] += "Again"
    created = await hub.post(f"{_url(sample)}?fieldValidation=Strict", json=again)
    assert created.status == 201, await created.text()
    body = await created.json()
    assert {k: body.get(k) for k in ("spec", "webhooks")} == {k: again.get(k) for k in ("spec", "webhooks")}


async def test_the_hubs_status_is_kept(hub: Client) -> None:
    """The hub's addition to Karmada's kind: ``status.conditions`` is declared, so the status
    subresource takes it under Strict; a misspelt status field is refused there."""
    obj = customization()
    assert (await hub.post(_url(obj), json=obj)).status == 201
    stored = await (await hub.get(f"{_url(obj)}/widgets")).json()
    condition = {"type": "Ready", "status": "True", "reason": "Loaded", "message": "the scripts are in force",
                 "lastTransitionTime": "2026-01-01T00:00:00Z"}
    written = await hub.put(f"{_url(obj)}/widgets/status?fieldValidation=Strict",
                            json={**stored, "status": {"conditions": [condition]}})
    assert written.status == 200, await written.text()
    assert (await written.json())["status"] == {"conditions": [condition]}
    refused = await hub.put(f"{_url(obj)}/widgets/status?fieldValidation=Strict",
                            json={**(await written.json()), "status": {"conditions": [condition], "loaded": True}})
    assert refused.status == 400, await refused.text()
    assert 'unknown field "status.loaded"' in (await refused.json())["message"]


#: (object, the field left out, kube's message for it): the CRDs' requirements.
REQUIRED = [
    (webhook_configuration, ("webhooks",), "webhooks: Required value"),
    (webhook_configuration, ("webhooks", 0, "interpreterContextVersions"), "webhooks[0].interpreterContextVersions: Required value"),
    (webhook_configuration, ("webhooks", 0, "clientConfig", "service", "namespace"),
     "webhooks[0].clientConfig.service.namespace: Required value"),
    (customization, ("spec",), "spec: Required value"),
    (customization, ("spec", "target", "kind"), "spec.target.kind: Required value"),
]


@pytest.mark.parametrize(("make", "where", "message"), REQUIRED, ids=[m for _, _, m in REQUIRED])
async def test_a_field_the_crd_requires_is_required(hub: Client, make: Any, where: tuple[str | int, ...], message: str) -> None:
    obj = make()
    node = obj
    for key in where[:-1]:
        node = node[key]
    del node[where[-1]]
    answer = await hub.post(_url(obj), json=obj)
    assert answer.status == 422, await answer.text()
    assert f'{obj["kind"]}.config.karmada.io "{obj["metadata"]["name"]}" is invalid: {message}' in (await answer.json())["message"]
