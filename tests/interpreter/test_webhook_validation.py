"""ResourceInterpreterWebhookConfiguration validation, case by case with Karmada's messages."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from controlplane.interpreter.webhook_validation import validate_webhook_configuration


def _config(**changes: Any) -> dict[str, Any]:
    hook: dict[str, Any] = {
        "name": "workloads.example.com",
        "clientConfig": {"url": "https://webhook.example.com/interpreter-workload"},
        "rules": [
            {"operations": ["InterpretReplica", "Retain"], "apiGroups": ["workload.example.io"],
             "apiVersions": ["v1alpha1"], "kinds": ["Workload"]}
        ],
        "interpreterContextVersions": ["v1alpha1"],
        "timeoutSeconds": 3,
    }
    hook.update(changes)
    return {"apiVersion": "config.karmada.io/v1alpha1", "kind": "ResourceInterpreterWebhookConfiguration",
            "metadata": {"name": "examples"}, "webhooks": [hook]}


def _rule(**changes: Any) -> list[dict[str, Any]]:
    rule = copy.deepcopy(_config()["webhooks"][0]["rules"][0])
    rule.update(changes)
    return [rule]


def _errors(obj: dict[str, Any]) -> list[tuple[str, str]]:
    return [(e.field, e.message) for e in validate_webhook_configuration(obj)]


def test_karmada_sample_is_valid() -> None:
    assert _errors(_config()) == []
    service = {"service": {"namespace": "karmada-system", "name": "webhook"}, "caBundle": "Cg=="}
    assert _errors(_config(clientConfig=service, timeoutSeconds=None)) == []
    assert _errors(_config(rules=_rule(operations=["*"], apiGroups=[""], apiVersions=["*"], kinds=["*"]))) == []


P = "webhooks[0]"


@pytest.mark.parametrize(
    ("config", "expected"),
    [
        (_config(name="workloads"), [(f"{P}.name", 'Invalid value: "workloads": should be a domain with at least two segments separated by dots')]),
        (_config(name=""), [(f"{P}.name", "Required value")]),
        (_config(timeoutSeconds=31), [(f"{P}.timeoutSeconds", "Invalid value: 31: the timeout value must be between 1 and 30 seconds")]),
        (_config(timeoutSeconds=0), [(f"{P}.timeoutSeconds", "Invalid value: 0: the timeout value must be between 1 and 30 seconds")]),
        (_config(clientConfig={}), [(f"{P}.clientConfig", "Required value: exactly one of url or service is required")]),
        (_config(clientConfig={"url": "http://webhook.example.com/x"}),
         [(f"{P}.clientConfig.url", "Invalid value: \"http\": 'https' is the only allowed URL scheme; desired format: https://host[/path]")]),
        (_config(clientConfig={"service": {"name": "webhook"}}),
         [(f"{P}.clientConfig.service.namespace", "Required value: service namespace is required")]),
        (_config(interpreterContextVersions=[]), [(f"{P}.interpreterContextVersions", "Required value: must specify one of v1alpha1")]),
        (_config(interpreterContextVersions=["v1"]),
         [(f"{P}.interpreterContextVersions", 'Invalid value: []string{"v1"}: must include at least one of v1alpha1')]),
        (_config(interpreterContextVersions=["v1alpha1", "v1alpha1"]),
         [(f"{P}.interpreterContextVersions[1]", 'Invalid value: "v1alpha1": duplicate version')]),
        (_config(rules=_rule(operations=[])), [(f"{P}.rules[0].operations", "Required value")]),
        (_config(rules=_rule(operations=["*", "Retain"])),
         [(f"{P}.rules[0].operations",
           'Invalid value: []v1alpha1.InterpreterOperation{"*", "Retain"}: if \'*\' is present, must not specify other operations')]),
        (_config(rules=_rule(operations=["Prune"])),
         [(f"{P}.rules[0].operations[0]",
           'Unsupported value: "Prune": supported values: "*", "AggregateStatus", "InterpretDependency", '
           '"InterpretHealth", "InterpretReplica", "InterpretStatus", "Retain", "ReviseReplica"')]),
        (_config(rules=_rule(apiGroups=[])), [(f"{P}.rules[0].apiGroups", "Required value")]),
        (_config(rules=_rule(apiGroups=["*", "apps"])),
         [(f"{P}.rules[0].apiGroups", 'Invalid value: []string{"*", "apps"}: if \'*\' is present, must not specify other API groups')]),
        (_config(rules=_rule(apiVersions=[""])), [(f"{P}.rules[0].apiVersions[0]", "Required value")]),
        (_config(rules=_rule(apiVersions=["*", "v1"])),
         [(f"{P}.rules[0].apiVersions", 'Invalid value: []string{"*", "v1"}: if \'*\' is present, must not specify other API versions')]),
        (_config(rules=_rule(kinds=[])), [(f"{P}.rules[0].kinds", "Required value")]),
        (_config(rules=_rule(kinds=["Workload", ""])), [(f"{P}.rules[0].kinds[1]", "Required value")]),
        (_config(rules=_rule(kinds=["*", "Workload"])),
         [(f"{P}.rules[0].kinds", 'Invalid value: []string{"*", "Workload"}: if \'*\' is present, must not specify other kinds')]),
    ],
)
def test_refusals(config: dict[str, Any], expected: list[tuple[str, str]]) -> None:
    assert _errors(config) == expected


def test_webhook_names_are_unique() -> None:
    config = _config()
    config["webhooks"].append(copy.deepcopy(config["webhooks"][0]))
    assert _errors(config) == [("webhooks[1].name", 'Duplicate value: "workloads.example.com"')]
