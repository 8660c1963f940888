"""kube's defaulting and validation of FlowSchema and PriorityLevelConfiguration, with its messages
(pkg/apis/flowcontrol/validation), and the config ensurer's decisions."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from controlplane.apis.kube import flowcontrol
from controlplane.apis.kube.flowcontrol_bootstrap import (
    AUTO_UPDATE_ANNOTATION,
    FLOW_SCHEMAS,
    PRIORITY_LEVELS,
    bootstrap_object,
    ensured,
)

RULE = {"subjects": [{"kind": "User", "user": {"name": "alice"}}],
        "resourceRules": [{"verbs": ["get"], "apiGroups": [""], "resources": ["pods"], "namespaces": ["*"]}]}


def schema(name: str = "mine", **spec: Any) -> dict[str, Any]:
    obj = {"kind": "FlowSchema", "metadata": {"name": name}, "spec": {
        "priorityLevelConfiguration": {"name": "global-default"}, "matchingPrecedence": 500, "rules": [copy.deepcopy(RULE)],
    }}
    obj["spec"].update(spec)
    return obj


def level(name: str = "mine", **spec: Any) -> dict[str, Any]:
    obj = {"kind": "PriorityLevelConfiguration", "metadata": {"name": name}, "spec": {"type": "Limited", "limited": {
        "nominalConcurrencyShares": 10, "lendablePercent": 0,
        "limitResponse": {"type": "Queue", "queuing": {"queues": 64, "handSize": 8, "queueLengthLimit": 50}},
    }}}
    obj["spec"].update(spec)
    return obj


def messages(errors: list[Any]) -> list[tuple[str, str]]:
    return [(e.field, e.message) for e in errors]


def with_rule(**changes: Any) -> dict[str, Any]:
    rule = copy.deepcopy(RULE)
    for key, value in changes.items():
        if key.startswith("rr_"):
            rule["resourceRules"][0][key[3:]] = value
        elif value is None:
            rule.pop(key, None)
        else:
            rule[key] = value
    return schema(rules=[rule])


@pytest.mark.parametrize(("obj", "expected"), [
    (schema(), []),
    (schema(matchingPrecedence=10001), [("spec.matchingPrecedence", "Invalid value: 10001: must not be greater than 10000")]),
    (schema(matchingPrecedence=-3), [("spec.matchingPrecedence", "Invalid value: -3: must be a positive value")]),
    (schema(matchingPrecedence=1), [("spec.matchingPrecedence",
                                     "Invalid value: 1: only the schema named 'exempt' may have matchingPrecedence 1")]),
    (schema(distinguisherMethod={"type": "ByGroup"}), [("spec.distinguisherMethod.type",
        'Unsupported value: &flowcontrol.FlowDistinguisherMethod{Type:"ByGroup"}: supported values: "ByNamespace", "ByUser"')]),
    (schema(priorityLevelConfiguration={}), [("spec.priorityLevelConfiguration.name",
                                              "Required value: must reference a priority level")]),
    (with_rule(subjects=[]), [("spec.rules[0].subjects", "Required value: subjects must contain at least one value")]),
    (with_rule(subjects=[{"kind": "Robot"}]), [("spec.rules[0].subjects[0].kind",
                                                'Unsupported value: "Robot": supported values: "Group", "ServiceAccount", "User"')]),
    (with_rule(subjects=[{"kind": "Group", "user": {"name": "x"}}]), [
        ("spec.rules[0].subjects[0].group", "Required value: group is required when subject kind is 'Group'"),
        ("spec.rules[0].subjects[0].user", "Forbidden: user is forbidden when subject kind is not 'User'")]),
    (with_rule(subjects=[{"kind": "ServiceAccount", "serviceAccount": {"name": "*"}}]), [
        ("spec.rules[0].subjects[0].serviceAccount.namespace", "Required value: must specify namespace for service account")]),
    (with_rule(resourceRules=None), [("spec.rules[0]",
        "Required value: at least one of resourceRules and nonResourceRules has to be non-empty")]),
    (with_rule(rr_verbs=["get", "*"]), [("spec.rules[0].resourceRules[0].verbs",
        'Invalid value: []string{"get", "*"}: if \'*\' is present, must not specify other verbs')]),
    (with_rule(rr_verbs=["steal"]), [("spec.rules[0].resourceRules[0].verbs",
        'Unsupported value: []string{"steal"}: supported values: "create", "delete", "deletecollection", "get", "list", '
        '"patch", "proxy", "update", "watch"')]),
    (with_rule(rr_apiGroups=[]), [("spec.rules[0].resourceRules[0].apiGroups",
                                   "Required value: resource rules must supply at least one api group")]),
    (with_rule(rr_resources=["pods", "*"]), [("spec.rules[0].resourceRules[0].resources",
        'Invalid value: []string{"pods", "*"}: if \'*\' is present, must not specify other resources')]),
    (with_rule(rr_namespaces=[]), [("spec.rules[0].resourceRules[0].namespaces",
        "Required value: resource rules that are not cluster scoped must supply at least one namespace")]),
    (with_rule(rr_namespaces=["Bad_NS"]), [("spec.rules[0].resourceRules[0].namespaces[0]",
        'Invalid value: "Bad_NS": each member of this list must be \'*\' or a DNS-1123 label; a lowercase RFC 1123 '
        "label must consist of lower case alphanumeric characters or '-', and must start and end with an "
        "alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is "
        "'[a-z0-9]([-a-z0-9]*[a-z0-9])?')")]),
    (with_rule(resourceRules=None, nonResourceRules=[{"verbs": ["get"], "nonResourceURLs": ["/apis/*/x"]}]), [
        ("spec.rules[0].nonResourceRules[0].nonResourceURLs[0]",
         'Invalid value: "/apis/*/x": wildcard can only do suffix matching')]),
    (with_rule(resourceRules=None, nonResourceRules=[{"verbs": ["get"], "nonResourceURLs": ["healthz"]}]), [
        ("spec.rules[0].nonResourceRules[0].nonResourceURLs[0]", 'Invalid value: "healthz": must start with slash')]),
    (schema(name="exempt"), [("spec", "Invalid value: flowcontrol.FlowSchemaSpec{...}: spec of 'exempt' must equal the fixed value")]),
    ({**schema(), "status": {"conditions": [{"type": "Dangling"}, {"type": "Dangling"}]}},
     [("status.conditions[1].type", 'Duplicate value: "Dangling"')]),
])
def test_flow_schema_validation(obj: dict[str, Any], expected: list[tuple[str, str]]) -> None:
    assert messages(flowcontrol.validate_flow_schema(obj)) == expected


@pytest.mark.parametrize(("obj", "expected"), [
    (level(), []),
    (level(type="Exempt"), [("spec.type", 'Invalid value: "Exempt": type must be \'Exempt\' if and only if name is \'exempt\''),
                            ("spec.limited", "Forbidden: must be nil if the type is not Limited")]),
    (level(type="Fast"), [("spec.type", 'Unsupported value: "Fast": supported values: "Exempt", "Limited"')]),
    (level(limited=None), [("spec.limited", "Required value: must not be empty when type is Limited")]),
    (level(exempt={}), [("spec.exempt", "Forbidden: must be nil if the type is Limited")]),
    (level(limited={"nominalConcurrencyShares": -1, "lendablePercent": 101, "borrowingLimitPercent": -1,
                     "limitResponse": {"type": "Reject", "queuing": {}}}), [
        ("spec.limited.nominalConcurrencyShares", "Invalid value: -1: must be a non-negative integer"),
        ("spec.limited.limitResponse.queuing", "Forbidden: must be nil if limited.limitResponse.type is not Limited"),
        ("spec.limited.lendablePercent", "Invalid value: 101: must be between 0 and 100, inclusive"),
        ("spec.limited.borrowingLimitPercent", "Invalid value: -1: if specified, must be a non-negative integer")]),
    (level(limited={"nominalConcurrencyShares": 1, "limitResponse": {"type": "Queue"}}), [
        ("spec.limited.limitResponse.queuing", "Required value: must not be empty if limited.limitResponse.type is Limited")]),
    (level(limited={"nominalConcurrencyShares": 1, "limitResponse": {"type": "Queue", "queuing": {
        "queues": 4, "handSize": 5, "queueLengthLimit": 0}}}), [
        ("spec.limited.limitResponse.queuing.queueLengthLimit", "Invalid value: 0: must be positive"),
        ("spec.limited.limitResponse.queuing.handSize", "Invalid value: 5: should not be greater than queues (4)")]),
    (level(limited={"nominalConcurrencyShares": 1, "limitResponse": {"type": "Queue", "queuing": {
        "queues": 10000000, "handSize": 10, "queueLengthLimit": 5}}}), [
        ("spec.limited.limitResponse.queuing.handSize",
         "Invalid value: 10: required entropy bits of deckSize 10000000 and handSize 10 should not be greater than 60")]),
    (level(name="catch-all"), [("spec", "Invalid value: flowcontrol.PriorityLevelConfigurationSpec{...}: "
                                        "spec of 'catch-all' must equal the fixed value")]),
])
def test_priority_level_validation(obj: dict[str, Any], expected: list[tuple[str, str]]) -> None:
    assert messages(flowcontrol.validate_priority_level(obj)) == expected


def test_the_exempt_level_may_tune_only_its_exempt_field() -> None:
    exempt = copy.deepcopy(PRIORITY_LEVELS["exempt"])
    exempt["spec"]["exempt"] = {"nominalConcurrencyShares": 5, "lendablePercent": 10}
    assert flowcontrol.validate_priority_level(exempt) == []
    exempt["spec"]["exempt"]["lendablePercent"] = 101
    assert messages(flowcontrol.validate_priority_level(exempt)) == [
        ("spec.exempt.lendablePercent", "Invalid value: 101: must be between 0 and 100, inclusive")]


def test_defaults_are_kube_v1s() -> None:
    obj = {"kind": "PriorityLevelConfiguration", "metadata": {"name": "x"}, "spec": {"type": "Limited", "limited": {
        "limitResponse": {"type": "Queue", "queuing": {}}}}}
    assert flowcontrol.defaulted(obj)["spec"]["limited"] == {
        "nominalConcurrencyShares": 30, "lendablePercent": 0,
        "limitResponse": {"type": "Queue", "queuing": {"handSize": 8, "queues": 64, "queueLengthLimit": 50}},
    }
    assert flowcontrol.defaulted({"kind": "FlowSchema", "spec": {}})["spec"]["matchingPrecedence"] == 1000


@pytest.mark.parametrize("obj", [*FLOW_SCHEMAS.values(), *PRIORITY_LEVELS.values()], ids=lambda o: o["metadata"]["name"])
def test_the_bootstrap_objects_are_valid_and_already_defaulted(obj: dict[str, Any]) -> None:
    validate = flowcontrol.validate_flow_schema if obj["kind"] == "FlowSchema" else flowcontrol.validate_priority_level
    assert validate(obj) == [] and flowcontrol.defaulted(obj) == obj


def _stored(name: str, kind: str, *, annotation: str | None, generation: int = 2, shares: int = 99) -> dict[str, Any]:
    obj = bootstrap_object(kind, name)
    assert obj is not None
    obj["metadata"].update(generation=generation, annotations={} if annotation is None else {AUTO_UPDATE_ANNOTATION: annotation})
    if kind == "PriorityLevelConfiguration" and obj["spec"].get("limited"):
        obj["spec"]["limited"]["nominalConcurrencyShares"] = shares
    return obj


@pytest.mark.parametrize(("name", "mandatory", "annotation", "generation", "spec_back", "annotated"), [
    ("catch-all", True, "false", 2, True, "true"),  # mandatory: always put back
    ("global-default", False, "true", 2, True, "true"),
    ("global-default", False, "false", 2, False, None),  # the admin's edit stays, untouched
    ("global-default", False, None, 2, False, "false"),  # edited by someone: kept, and marked so
    ("global-default", False, None, 1, True, "true"),  # as the server made it
    ("global-default", False, "yes", 2, False, "false"),  # not a Go boolean
])
def test_the_ensurer_decides_as_kube(
    name: str, mandatory: bool, annotation: str | None, generation: int, spec_back: bool, annotated: str | None
) -> None:
    stored = _stored(name, "PriorityLevelConfiguration", annotation=annotation, generation=generation)
    out = ensured(stored, mandatory=mandatory)
    if annotated is None:
        assert out is None
        return
    assert out is not None and out["metadata"]["annotations"][AUTO_UPDATE_ANNOTATION] == annotated
    assert (out["spec"] == PRIORITY_LEVELS[name]["spec"]) is spec_back
