"""ValidatingAdmissionPolicy and its binding, without a server: kube's validation messages, the
policy's matching (``resourceNames``, ``excludeResourceRules``), and the evaluation of one write —
matchConditions, variables, messageExpression, reasons and failurePolicy — table by table."""

from __future__ import annotations

from typing import Any

import pytest

from controlplane.apis.kube import admissionpolicy, admissionregistration
from controlplane.apiserver.admission import Operation, WebhookRequest
from controlplane.apiserver.webhooks import policies
from controlplane.hub import hub_registry

REGISTRY = hub_registry()
DEPLOYMENTS = REGISTRY.require("apps/v1", "Deployment")
RULE = {"operations": ["CREATE"], "apiGroups": ["apps"], "apiVersions": ["v1"], "resources": ["deployments"]}


def spec_policy(**spec: Any) -> dict[str, Any]:
    obj = {"metadata": {"name": "p"}, "spec": {"matchConstraints": {"resourceRules": [RULE]},
                                                 "validations": [{"expression": "true"}], **spec}}
    admissionpolicy.validating_admission_policy(obj)
    return obj


def errors_of(obj: dict[str, Any], *, binding: bool = False) -> list[tuple[str, str]]:
    check = (admissionpolicy.validate_validating_admission_policy_binding if binding
             else admissionpolicy.validate_validating_admission_policy)
    return [(e.field, e.message) for e in check(obj, None)]


@pytest.mark.parametrize(("spec", "expected"), [
    ({"validations": []}, [
        ("spec.validations", "Required value: validations or auditAnnotations must contain at least one item"),
        ("spec.auditAnnotations", "Required value: validations or auditAnnotations must contain at least one item"),
    ]),
    ({"validations": [{"expression": ""}]}, [("spec.validations[0].expression", "Required value: expression is not specified")]),
    ({"validations": [{"expression": "1 +"}]}, [(
        "spec.validations[0].expression",
        "Invalid value: \"1 +\": compilation failed: ERROR: <input>:1:4: Syntax error: mismatched input '<EOF>' expecting "
        "{'[', '{', '(', '.', '-', '!', 'true', 'false', 'null', NUM_FLOAT, NUM_INT, NUM_UINT, STRING, BYTES, IDENTIFIER}",
    )]),
    ({"validations": [{"expression": "true", "reason": "Teapot"}]}, [(
        "spec.validations[0].reason",
        'Unsupported value: "Teapot": supported values: "Forbidden", "Invalid", "RequestEntityTooLarge", "Unauthorized"',
    )]),
    ({"validations": [{"expression": "true", "messageExpression": "  "}]},
     [("spec.validations[0].messageExpression", 'Invalid value: "  ": must be non-empty if specified')]),
    ({"validations": [{"expression": "true", "message": "a\nb"}]},
     [("spec.validations[0].message", 'Invalid value: "a\\nb": message must not contain line breaks')]),
    ({"failurePolicy": "Sometimes"}, [("spec.failurePolicy", 'Unsupported value: "Sometimes": supported values: "Fail", "Ignore"')]),
    ({"matchConstraints": None}, [("spec.matchConstraints", "Required value")]),
    ({"variables": [{"name": "1x", "expression": "true"}]},
     [("spec.variables[0].name", 'Invalid value: "1x": name is not a valid CEL identifier')]),
    ({"matchConditions": [{"name": "a", "expression": "true"}, {"name": "a", "expression": "true"}]},
     [("spec.matchConditions[1].name", 'Duplicate value: "a"')]),
    ({"paramKind": {"kind": "ConfigMap"}}, [("spec.paramKind.apiVersion", "Required value")]),
    ({"paramKind": {"apiVersion": "a/b/c", "kind": "Config_Map"}}, [
        ("spec.paramKind.apiVersion", 'Invalid value: "a/b/c": unexpected GroupVersion string: a/b/c'),
        ("spec.paramKind.kind", 'Invalid value: "Config_Map": may have mixed case, but should otherwise match: a DNS-1035 '
         "label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end "
         "with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for validation is "
         "'[a-z]([-a-z0-9]*[a-z0-9])?')"),
    ]),
    ({"matchConstraints": {"resourceRules": [{**RULE, "resourceNames": ["x", "x"]}]}},
     [("spec.matchConstraints.resourceRules[0].resourceNames[1]", 'Duplicate value: "x"')]),
    ({"variables": [{"name": "in", "expression": "true"}]},
     [("spec.variables[0].name", 'Invalid value: "in": name is not a valid CEL identifier')]),
    # No cost bound when written: kube compiles the expression with ``object`` untyped (Kueue's
    # sample-enforce-requests-policy.yaml nests two comprehensions over a Workload's pod sets).
    ({"validations": [{"expression": "object.a.all(x, object.b.all(y, object.c.all(z, true)))"}]}, []),
    ({"matchConditions": [{"name": "m", "expression": "object.a.all(x, x.b.all(y, y.c.all(z, true)))"}]}, []),
])
def test_policy_validation_messages(spec: dict[str, Any], expected: list[tuple[str, str]]) -> None:
    assert errors_of(spec_policy(**spec)) == expected


def test_policy_defaults_are_kubes() -> None:
    spec = spec_policy()["spec"]
    assert spec["failurePolicy"] == "Fail"
    assert spec["matchConstraints"] == {
        "resourceRules": [{**RULE, "scope": "*"}], "matchPolicy": "Equivalent", "namespaceSelector": {}, "objectSelector": {},
    }


@pytest.mark.parametrize(("spec", "expected"), [
    ({"policyName": "p", "validationActions": ["Deny"]}, []),
    ({"validationActions": ["Deny"]}, [("spec.policyName", "Required value")]),
    ({"policyName": "p"}, [("spec.validationActions", "Required value: at least one validation action is required")]),
    ({"policyName": "p", "validationActions": ["Deny", "Deny"]}, [("spec.validationActions[1]", 'Duplicate value: "Deny"')]),
    ({"policyName": "p", "validationActions": ["Block"]},
     [("spec.validationActions[0]", 'Unsupported value: "Block": supported values: "Audit", "Deny", "Warn"')]),
    ({"policyName": "p", "validationActions": ["Deny"], "paramRef": {"name": "a/b", "parameterNotFoundAction": "Maybe"}}, [
        ("spec.paramRef.name", "Invalid value: \"a/b\": may not contain '/'"),
        ("spec.paramRef.parameterNotFoundAction", 'Unsupported value: "Maybe": supported values: "Deny", "Allow"'),
    ]),
    ({"policyName": "p", "validationActions": ["Deny", "Warn"]}, [(
        "spec.validationActions",
        'Invalid value: []admissionregistration.ValidationAction{"Deny", "Warn"}: must not contain both Deny and Warn '
        "(repeating the same validation failure information in the API response and headers serves no purpose)",
    )]),
    ({"policyName": "p", "validationActions": ["Deny"], "paramRef": {"parameterNotFoundAction": "Deny"}},
     [("spec.paramRef", "Required value: one of name or selector must be specified")]),
    ({"policyName": "p", "validationActions": ["Deny"], "paramRef": {"name": "x"}},
     [("spec.paramRef.parameterNotFoundAction", "Required value")]),
])
def test_binding_validation_messages(spec: dict[str, Any], expected: list[tuple[str, str]]) -> None:
    assert errors_of({"metadata": {"name": "b"}, "spec": spec}, binding=True) == expected


def write(name: str = "x", *, labels: dict[str, str] | None = None, replicas: int = 1) -> WebhookRequest:
    obj = {"metadata": {"name": name, "labels": labels or {}}, "spec": {"replicas": replicas}}
    return WebhookRequest(Operation.CREATE, DEPLOYMENTS, name, "default", obj)


@pytest.mark.parametrize(("match", "name", "matches"), [
    ({"resourceRules": [RULE]}, "x", True),
    ({"resourceRules": [{**RULE, "resourceNames": ["y"]}]}, "x", False),
    ({"resourceRules": [{**RULE, "resourceNames": ["x", "y"]}]}, "x", True),
    ({"resourceRules": [RULE], "excludeResourceRules": [{**RULE, "resourceNames": ["x"]}]}, "x", False),
    ({"resourceRules": [RULE], "excludeResourceRules": [{**RULE, "resourceNames": ["x"]}]}, "y", True),
    ({"resourceRules": [{**RULE, "operations": ["UPDATE"]}]}, "x", False),
])
def test_policy_resource_matching(match: dict[str, Any], name: str, matches: bool) -> None:
    compiled = policies.policy_of(spec_policy(matchConstraints=match))
    assert (policies.matched_resource(compiled.match, write(name), REGISTRY) is not None) is matches


def run(request: WebhookRequest, params: Any = None, **spec: Any) -> list[policies.Decision]:
    compiled = policies.policy_of(spec_policy(**spec))
    variables = {"object": request.obj, "oldObject": request.old, "request": {"operation": "CREATE"},
                 "namespaceObject": None, "params": params}
    return policies.evaluate(compiled, variables)


def audit(request: WebhookRequest, *value_expressions: str, **spec: Any) -> tuple[list[policies.Decision], list[tuple[str, str]]]:
    """The decisions and published audit annotations (keys ``a0``, ``a1``...) of a policy with no validation."""
    annotations: list[tuple[str, str]] = []
    compiled = policies.policy_of(spec_policy(
        validations=[], auditAnnotations=[{"key": f"a{i}", "valueExpression": e} for i, e in enumerate(value_expressions)],
        **spec,
    ))
    variables = {"object": request.obj, "oldObject": None, "request": {"operation": "CREATE"},
                 "namespaceObject": None, "params": None}
    return policies.evaluate(compiled, variables, None, annotations), annotations


def test_audit_annotations_are_kubes_string_or_null() -> None:
    # A string is trimmed and published; empty or null is left out; a long value is cut to 10 KiB.
    decisions, published = audit(write("x" * 20000, replicas=3), "'  replicas ' + string(object.spec.replicas) + ' '",
                                 "'  '", "null", "object.spec.replicas > 2 ? object.metadata.name : null")
    assert decisions == []
    assert published == [("a0", "replicas 3"), ("a3", "x" * 10240)]
    # Another type is an error whatever the failure policy, and denies whatever the binding's actions.
    unsupported = policies.Decision(True, "valueExpression 'object.spec.replicas' resulted in unsupported return type: int. "
                                          "Return type must be either string or null.", denies_always=True)
    assert audit(write(), "object.spec.replicas", failurePolicy="Ignore") == ([unsupported], [])
    # An evaluation error denies under Fail, and is left out under Ignore.
    error = policies.Decision(True, "expression 'object.spec.missing' resulted in error: no such key: missing", denies_always=True)
    assert audit(write(), "object.spec.missing", "'kept'") == ([error], [("a1", "kept")])
    assert audit(write(), "object.spec.missing", "'kept'", failurePolicy="Ignore") == ([], [("a1", "kept")])
    # Not evaluated when the policy's matchConditions leave the write out.
    assert audit(write(), "'x'", matchConditions=[{"name": "never", "expression": "false"}]) == ([], [])


def test_each_failed_validation_is_a_decision_with_its_message_and_reason() -> None:
    validations = [
        {"expression": "object.spec.replicas <= 2", "message": "too many"},
        {"expression": "object.spec.replicas <= 1", "reason": "Forbidden",
         "messageExpression": "'replicas ' + string(object.spec.replicas) + ' > 1'"},
        {"expression": "object.spec.replicas == 0", "messageExpression": "object.nope", "message": "fallback"},
        {"expression": "object.spec.replicas < 0 "},
        {"expression": "request.operation == 'CREATE'"},
    ]
    assert run(write(replicas=3), validations=validations) == [
        policies.Decision(True, "too many", "Invalid"),
        policies.Decision(True, "replicas 3 > 1", "Forbidden"),
        policies.Decision(True, "fallback", "Invalid"),  # a failing messageExpression falls back to message
        policies.Decision(True, "failed expression: object.spec.replicas < 0", "Invalid"),
    ]
    assert run(write(replicas=0), validations=validations[:3]) == []


def test_match_conditions_all_true_or_the_policy_does_not_apply() -> None:
    deny = [{"expression": "false", "message": "no"}]
    team = {"name": "has-team", "expression": "'team' in object.metadata.labels"}
    assert run(write(labels={"team": "a"}), validations=deny, matchConditions=[team]) == [policies.Decision(True, "no")]
    assert run(write(), validations=deny, matchConditions=[team]) == []
    # An error fails closed (Fail) or open (Ignore); a false condition wins over an error.
    broken = {"name": "broken", "expression": "object.spec.missing"}
    [decision] = run(write(labels={"team": "a"}), validations=deny, matchConditions=[team, broken])
    assert decision.message == (
        "failed to evaluate matchConditions for policy p: expression 'object.spec.missing' resulted in error: no such key: missing"
    )
    assert run(write(labels={"team": "a"}), validations=deny, matchConditions=[team, broken], failurePolicy="Ignore") == []
    assert run(write(), validations=deny, matchConditions=[team, broken]) == []


def test_variables_params_and_failure_policy() -> None:
    variables = [{"name": "limit", "expression": "int(params.data.max)"},
                 {"name": "over", "expression": "object.spec.replicas > variables.limit"},
                 {"name": "bad", "expression": "object.spec.missing"}]
    validations = [{"expression": "!variables.over", "messageExpression": "'at most ' + string(variables.limit)"}]
    params = {"data": {"max": "2"}}
    assert run(write(replicas=3), params, variables=variables, validations=validations) == [policies.Decision(True, "at most 2")]
    assert run(write(replicas=2), params, variables=variables, validations=validations) == []
    # A variable that fails is an error only for the expressions reading it.
    reading_bad = [{"expression": "variables.bad == 1"}]
    assert run(write(), params, variables=variables, validations=reading_bad) == [policies.Decision(
        True, "expression 'object.spec.missing' resulted in error: no such key: missing")]
    # Under Ignore the error admits: a decision that denies nothing, which kube's dispatcher counts.
    assert run(write(), params, variables=variables, validations=reading_bad, failurePolicy="Ignore") == [policies.Decision(
        False, "expression 'object.spec.missing' resulted in error: no such key: missing")]


def test_a_webhooks_match_conditions_are_validated_as_a_policys() -> None:
    hook = {"name": "a.acme.io", "clientConfig": {"url": "https://acme.io/x"}, "sideEffects": "None",
            "admissionReviewVersions": ["v1"], "rules": [RULE],
            "matchConditions": [{"name": "", "expression": "true"}, {"name": "b", "expression": "1 +"}, {"name": "b"}]}
    errors = admissionregistration.webhook_errors(hook, "webhooks[0]", mutating=False)
    assert [(e.field, e.message.split(":")[0]) for e in errors] == [
        ("webhooks[0].matchConditions[0].name", "Required value"),
        ("webhooks[0].matchConditions[1].expression", "Invalid value"),
        ("webhooks[0].matchConditions[2].expression", "Required value"),
        ("webhooks[0].matchConditions[2].name", "Duplicate value"),
    ]
