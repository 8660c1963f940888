"""ValidatingWebhookConfiguration and MutatingWebhookConfiguration (admissionregistration.k8s.io/v1) on
the hub, as kube-apiserver serves them: v1's defaults, kube's validation and its messages, the
table, and ``kubectl get``/``explain``. Before, an operator's manifests carrying one failed on the
hub with ``no matches for kind``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from aiohttp.test_utils import TestClient

from controlplane.apis.kube import admissionregistration as admreg

from .test_kube_validation import hub, hub_kubeconfig  # noqa: F401 (fixtures)
from .test_real_clients import kubectl, needs_kubectl

Client = TestClient[Any, Any]
TABLE = "application/json;as=Table;v=v1;g=meta.k8s.io"
VALIDATING = "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations"
MUTATING = "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations"


def webhook(name: str = "check.acme.io", **extra: Any) -> dict[str, Any]:
    return {
        "name": name,
        "clientConfig": {"url": "https://policy.acme.io/validate"},
        "rules": [{"operations": ["CREATE"], "apiGroups": ["apps"], "apiVersions": ["v1"], "resources": ["deployments"]}],
        "sideEffects": "None",
        "admissionReviewVersions": ["v1"],
        **extra,
    }


def configuration(kind: str = "ValidatingWebhookConfiguration", *hooks: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "admissionregistration.k8s.io/v1", "kind": kind, "metadata": {"name": "acme"},
        "webhooks": list(hooks) or [webhook()],
    }


async def test_a_validating_configuration_gets_v1s_defaults_and_its_table(hub: Client) -> None:  # noqa: F811
    created = await hub.post(VALIDATING, json=configuration())
    assert created.status == 201, await created.text()
    (hook,) = (await created.json())["webhooks"]
    assert hook["failurePolicy"] == "Fail"
    assert hook["matchPolicy"] == "Equivalent"
    assert hook["namespaceSelector"] == {} and hook["objectSelector"] == {}
    assert hook["timeoutSeconds"] == 10
    assert hook["rules"][0]["scope"] == "*"
    assert "reinvocationPolicy" not in hook
    table = await (await hub.get(VALIDATING, headers={"Accept": TABLE})).json()
    assert [c["name"] for c in table["columnDefinitions"]] == ["Name", "Webhooks", "Age"]
    assert table["rows"][0]["cells"][:2] == ["acme", 1]


async def test_a_mutating_configuration_defaults_its_reinvocation_and_service_port(hub: Client) -> None:  # noqa: F811
    hook = webhook(clientConfig={"service": {"name": "policy", "namespace": "acme"}})
    created = await hub.post(MUTATING, json=configuration("MutatingWebhookConfiguration", hook))
    assert created.status == 201, await created.text()
    (stored,) = (await created.json())["webhooks"]
    assert stored["reinvocationPolicy"] == "Never"
    assert stored["clientConfig"]["service"] == {"name": "policy", "namespace": "acme", "port": 443}


async def test_kubes_validation_of_a_configuration_over_http(hub: Client) -> None:  # noqa: F811
    bad = configuration(
        "ValidatingWebhookConfiguration",
        webhook("short.io", timeoutSeconds=31, sideEffects="Some"),
        webhook("dup.acme.io", clientConfig={"url": "http://user@policy.acme.io/x?y=1#z"}),
        webhook("dup.acme.io", admissionReviewVersions=["v2"], clientConfig={}),
    )
    refused = await hub.post(VALIDATING, json=bad)
    assert refused.status == 422
    body = await refused.json()
    causes = {(c["field"], c["message"]) for c in body["details"]["causes"]}
    assert body["message"].startswith('ValidatingWebhookConfiguration.admissionregistration.k8s.io "acme" is invalid: ')
    assert causes >= {
        ("webhooks[0].name", 'Invalid value: "short.io": should be a domain with at least three segments separated by dots'),
        ("webhooks[0].timeoutSeconds", "Invalid value: 31: the timeout value must be between 1 and 30 seconds"),
        ("webhooks[0].sideEffects", 'Unsupported value: "Some": supported values: "None", "NoneOnDryRun"'),
        ("webhooks[1].clientConfig.url",
         'Invalid value: "http": \'https\' is the only allowed URL scheme; desired format: https://host[/path]'),
        ("webhooks[1].clientConfig.url", 'Invalid value: "user": user information is not permitted in the URL'),
        ("webhooks[1].clientConfig.url", 'Invalid value: "z": fragments are not permitted in the URL'),
        ("webhooks[1].clientConfig.url", 'Invalid value: "y=1": query parameters are not permitted in the URL'),
        ("webhooks[2].name", 'Duplicate value: "dup.acme.io"'),
        ("webhooks[2].admissionReviewVersions",
         'Invalid value: []string{"v2"}: must include at least one of v1, v1beta1'),
        ("webhooks[2].clientConfig", "Required value: exactly one of url or service is required"),
    }


@pytest.mark.parametrize(("hook", "expected"), [
    ({"sideEffects": None}, ("webhooks[0].sideEffects", "Required value: must specify one of None, NoneOnDryRun")),
    ({"admissionReviewVersions": []},
     ("webhooks[0].admissionReviewVersions", "Required value: must specify one of v1, v1beta1")),
    ({"timeoutSeconds": 0}, ("webhooks[0].timeoutSeconds",
                             "Invalid value: 0: the timeout value must be between 1 and 30 seconds")),
    ({"failurePolicy": "Maybe"},
     ("webhooks[0].failurePolicy", 'Unsupported value: "Maybe": supported values: "Fail", "Ignore"')),
    ({"rules": [{"operations": ["*", "CREATE"], "apiGroups": ["*"], "apiVersions": ["v1"], "resources": ["*"]}]},
     ("webhooks[0].rules[0].operations", 'Invalid value: []admissionregistration.OperationType{"*", "CREATE"}: '
                                         "if '*' is present, must not specify other operations")),
    ({"rules": [{"operations": ["PATCH"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["pods"]}]},
     ("webhooks[0].rules[0].operations[0]", 'Unsupported value: "PATCH": supported values: '
                                            '"*", "CONNECT", "CREATE", "DELETE", "UPDATE"')),
    ({"rules": [{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["*/*", "pods"]}]},
     ("webhooks[0].rules[0].resources", 'Invalid value: []string{"*/*", "pods"}: '
                                        "if '*/*' is present, must not specify other resources")),
    ({"rules": [{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["*", "pods"]}]},
     ("webhooks[0].rules[0].resources", 'Invalid value: []string{"*", "pods"}: '
                                        "if '*' is present, must not specify other resources without subresources")),
    ({"rules": [{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"],
                 "resources": ["pods/*", "pods/status"]}]},
     ("webhooks[0].rules[0].resources[1]", "Invalid value: \"pods/status\": if 'pods/*' is present, "
                                           "must not specify pods/status")),
    ({"rules": [{"operations": ["CREATE"], "apiGroups": [], "apiVersions": ["v1"], "resources": ["pods"],
                 "scope": "Global"}]},
     ("webhooks[0].rules[0].scope", 'Unsupported value: "Global": supported values: "*", "Cluster", "Namespaced"')),
    ({"clientConfig": {"service": {"namespace": "acme", "port": 0, "path": "x"}}},
     ("webhooks[0].clientConfig.service.name", "Required value: service name is required")),
    ({"clientConfig": {"service": {"name": "p", "namespace": "acme", "port": 70000}}},
     ("webhooks[0].clientConfig.service.port",
      "Invalid value: 70000: port is not valid: must be between 1 and 65535, inclusive")),
    ({"clientConfig": {"service": {"name": "p", "namespace": "acme", "path": "x"}}},
     ("webhooks[0].clientConfig.service.path", "Invalid value: \"x\": must start with a '/'")),
])
def test_kubes_validation_of_one_webhook(hook: dict[str, Any], expected: tuple[str, str]) -> None:
    obj = configuration("ValidatingWebhookConfiguration", {k: v for k, v in webhook(**hook).items() if v is not None})
    admreg.validating_webhook_configuration(obj)
    found = {(e.field, e.message) for e in admreg.validate_validating_webhook_configuration(obj, None)}
    assert expected in found, found


def test_a_webhook_with_an_empty_rule_group_is_missing_its_groups() -> None:
    obj = configuration("ValidatingWebhookConfiguration", webhook(rules=[
        {"operations": ["CREATE"], "apiGroups": [], "apiVersions": ["v1"], "resources": ["pods"]}
    ]))
    errors = admreg.validate_validating_webhook_configuration(obj, None)
    assert [(e.field, e.message) for e in errors] == [("webhooks[0].rules[0].apiGroups", "Required value")]


def test_an_update_keeps_a_stored_configurations_duplicate_names() -> None:
    """kube requires unique names on update only when the stored object had them."""
    old = configuration("ValidatingWebhookConfiguration", webhook("a.acme.io"), webhook("a.acme.io"))
    assert admreg.validate_validating_webhook_configuration(old, old) == []
    unique = configuration("ValidatingWebhookConfiguration", webhook("a.acme.io"))
    assert [e.field for e in admreg.validate_validating_webhook_configuration(old, unique)] == ["webhooks[1].name"]


@needs_kubectl
async def test_kubectl_applies_gets_and_explains_webhook_configurations(hub_kubeconfig: Path) -> None:  # noqa: F811
    manifest = yaml.safe_dump_all([configuration(), configuration("MutatingWebhookConfiguration")])
    code, out, err = await kubectl(hub_kubeconfig, "apply", "-f", "-", stdin=manifest)
    assert code == 0, err
    assert "validatingwebhookconfiguration.admissionregistration.k8s.io/acme created" in out
    assert "mutatingwebhookconfiguration.admissionregistration.k8s.io/acme created" in out
    code, out, err = await kubectl(hub_kubeconfig, "get", "validatingwebhookconfigurations")
    assert code == 0, err
    header, row = out.splitlines()
    assert header.split() == ["NAME", "WEBHOOKS", "AGE"] and row.split()[:2] == ["acme", "1"]
    code, out, err = await kubectl(hub_kubeconfig, "explain", "mutatingwebhookconfiguration.webhooks.reinvocationPolicy")
    assert code == 0, err
    assert "reinvocationPolicy" in out and "IfNeeded" in out
    code, out, err = await kubectl(hub_kubeconfig, "describe", "validatingwebhookconfiguration", "acme")
    assert code == 0, err
    assert "check.acme.io" in out


def test_the_errors_come_in_kubes_order() -> None:
    """Each webhook's own checks, then its review versions, then its name's uniqueness."""
    obj = configuration(
        "MutatingWebhookConfiguration",
        webhook("a.acme.io"),
        webhook("a.acme.io", sideEffects="Some", clientConfig={}, admissionReviewVersions=["v9"], reinvocationPolicy="Always"),
    )
    admreg.mutating_webhook_configuration(obj)
    errors = admreg.validate_mutating_webhook_configuration(obj, None)
    assert [e.field for e in errors] == [
        "webhooks[1].sideEffects", "webhooks[1].reinvocationPolicy", "webhooks[1].clientConfig",
        "webhooks[1].admissionReviewVersions", "webhooks[1].name",
    ]

