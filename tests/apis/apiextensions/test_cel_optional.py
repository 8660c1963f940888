"""cel-go's optional syntax in CRD rules (kube's CEL environment has ``cel.OptionalTypes``):
``a.?b``, ``a[?k]``, ``[?x]``, ``{?k: v}`` and the optional values' functions, run with cel-go's
semantics and checked against the schema when the CRD is written; and the type checker's refusals
of a rule, an ``oldSelf`` and a ``messageExpression`` that kube refuses when a CRD is written."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from controlplane.apis.apiextensions import cel
from controlplane.apis.apiextensions.cel_parse import plain
from controlplane.apis.apiextensions.structural import structural_errors

SPEC: dict[str, Any] = {
    "type": "object",
    "properties": {
        "replicas": {"type": "integer"},
        "name": {"type": "string"},
        "limits": {"type": "object", "additionalProperties": {"type": "integer"}},
        "ports": {"type": "array", "maxItems": 8, "items": {"type": "integer"}},
        "template": {
            "type": "object",
            "properties": {"image": {"type": "string"}, "pullPolicy": {"type": "string"}},
        },
    },
}


def _run(rule: str, spec: dict[str, Any]) -> list[str]:
    schema = {
        "type": "object",
        "properties": {"spec": {**SPEC, "x-kubernetes-validations": [{"rule": rule}]}},
    }
    assert cel.compile_error(rule, schema["properties"]["spec"]) is None
    return [error.message for error in cel.compile_schema_rules(schema).evaluate({"spec": spec}, None)]


@pytest.mark.parametrize(
    ("rule", "passes", "fails"),
    [
        # ``.?`` on a missing field is optional.none(); every selection after it is optional too.
        ("self.?template.?image.orValue('none') != ''", {}, {"template": {"image": ""}}),
        ("self.?template.image.orValue('x') == 'x'", {"template": {}}, {"template": {"image": "y"}}),
        (
            "!self.?template.pullPolicy.hasValue()",
            {"template": {"image": "i"}},
            {"template": {"pullPolicy": "A"}},
        ),
        # ``[?k]`` on a map is its key, on a list its index.
        ("self.?limits[?'cpu'].orValue(0) < 4", {"limits": {"gpu": 9}}, {"limits": {"cpu": 5}}),
        ("self.?ports[?2].orValue(0) == 0", {"ports": [1, 2]}, {"ports": [1, 2, 3]}),
        ("self.?replicas.or(optional.of(1)).value() > 0", {}, {"replicas": 0}),
        # Optional list elements and map entries are left out when none.
        ("[1, ?self.?replicas].size() == 1", {}, {"replicas": 2}),
        ("{'a': 1, ?'b': self.?name}.size() == 1", {}, {"name": "n"}),
        ("[?self.?replicas, ?self.?name].size() < 2", {"name": "n"}, {"name": "n", "replicas": 1}),
    ],
)
def test_optional_syntax_runs_with_cel_gos_semantics(
    rule: str, passes: dict[str, Any], fails: dict[str, Any]
) -> None:
    assert _run(rule, passes) == []
    assert _run(rule, fails) == [f'Invalid value: "object": failed rule: {rule}']


def test_value_of_none_is_cel_gos_error() -> None:
    rule = "self.?template.?image.value() != ''"
    assert _run(rule, {"template": {"image": "i"}}) == []
    assert _run(rule, {}) == [f'Invalid value: "object": optional.none() dereference evaluating rule: {rule}']


def test_optional_syntax_is_written_as_calls_only_where_it_is_used() -> None:
    assert plain("self.a > 1 ? 'x' : 'y'") == "self.a > 1 ? 'x' : 'y'"
    assert plain("self.?a.b.orValue(1)") == "__optional__(self).a.b.orValue(1)"
    assert plain("(self.?a).?b") == "__optional__(self).a.b"
    assert plain("self.x[?'k']") == "__optional__(self.x)['k']"
    assert plain("x.all(e, e.?f.hasValue())") == "x.all(e, __optional__(e).f.hasValue())"
    assert plain("'a.?b' + \"[?c]\"") == "'a.?b' + \"[?c]\""


def test_an_optionals_fields_are_checked_against_the_schema() -> None:
    """cel-go's checker types ``.?`` as an optional of the field: an undefined field is refused
    at its ``.``, and ``orValue``'s result is the field's type."""
    assert cel.compile_error("self.?template.?image.orValue('') != ''", SPEC) is None
    assert cel.compile_error("self.?template.?tag.orValue('') != ''", SPEC) == (
        "ERROR: <input>:1:15: undefined field 'tag'\n"
        " | self.?template.?tag.orValue('') != ''\n"
        " | ..............^"
    )
    assert cel.compile_error("self.?replicas.orValue(0) == 'a'", SPEC) == (
        "ERROR: <input>:1:27: found no matching overload for '_==_' applied to '(int, string)'\n"
        " | self.?replicas.orValue(0) == 'a'\n"
        " | ..........................^"
    )


@pytest.mark.parametrize(
    ("rule", "optional_old_self", "expected"),
    [
        # ``oldSelf`` has ``self``'s type (an optional of it with optionalOldSelf).
        ("self.replicas >= oldSelf.replica", False, "ERROR: <input>:1:25: undefined field 'replica'"),
        (
            "!oldSelf.hasValue() || oldSelf.value().nme == self.name",
            True,
            "ERROR: <input>:1:39: undefined field 'nme'",
        ),
        ("!oldSelf.hasValue() || oldSelf.value().name == self.name", True, None),
        # cel-go's checker: no string function takes another type; a scalar has no fields.
        (
            "self.name.startsWith(1)",
            False,
            "ERROR: <input>:1:21: found no matching overload for 'startsWith' applied to 'string.(int)'",
        ),
        (
            "self.name.first == 'a'",
            False,
            "ERROR: <input>:1:10: type 'string' does not support field selection",
        ),
        (
            "self.ports.first == 1",
            False,
            "ERROR: <input>:1:11: type 'list(int)' does not support field selection",
        ),
        # kube: a rule must be a bool.
        ("self.replicas + 1", False, "cel expression must evaluate to a bool"),
    ],
)
def test_the_checker_refuses_what_cel_go_refuses(
    rule: str, optional_old_self: bool, expected: str | None
) -> None:
    problem = cel.compile_error(rule, SPEC, optional_old_self=optional_old_self)
    assert (problem.splitlines()[0] if problem else None) == expected


def _spec_errors(rules: list[dict[str, Any]]) -> list[tuple[str, str]]:
    schema = {"type": "object", "properties": {"spec": {**SPEC, "x-kubernetes-validations": rules}}}
    found = structural_errors(schema, "v", cel.compile_error)
    return [(e.field.removeprefix("v.properties[spec].x-kubernetes-validations"), e.message) for e in found]


def test_a_crds_rules_are_refused_in_kubes_words() -> None:
    """kube's CRD validation: a messageExpression that does not compile or is not a string is
    Invalid at ``messageExpression``; a rule that is not a bool is Invalid without ``compilation
    failed``; one over the cost budget is Forbidden."""
    unbounded = "self.limits.all(k, self.limits.all(j, j != k))"
    factor = cel.estimated_cost(unbounded, SPEC) // cel.COST_LIMIT
    assert _spec_errors(
        [
            {"rule": "self.replicas > 0", "messageExpression": "self.replicas"},
            {"rule": "self.replicas > 0", "messageExpression": "'replicas ' + self.nope"},
            {"rule": "self.replicas > 0", "messageExpression": "'replicas ' + string(self.replicas)"},
            {"rule": "self.name"},
            {"rule": unbounded},
            {"rule": "self.?name.orValue('') != ''", "messageExpression": "self.?name.orValue('none')"},
        ]
    ) == [
        (
            "[0].messageExpression",
            'Invalid value: "self.replicas": messageExpression must evaluate to a string',
        ),
        (
            "[1].messageExpression",
            "Invalid value: \"'replicas ' + self.nope\": messageExpression compilation failed: ERROR: "
            "<input>:1:19: undefined field 'nope'\n | 'replicas ' + self.nope\n | ..................^",
        ),
        ("[3].rule", 'Invalid value: "self.name": cel expression must evaluate to a bool'),
        (
            "[4].rule",
            f"Forbidden: estimated rule cost exceeds budget by factor of {factor}x (try simplifying the rule, or adding "
            "maxItems, maxProperties, and maxLength where arrays, maps, and strings are declared)",
        ),
    ]


def test_old_self_is_refused_below_a_list_that_is_not_a_map_list() -> None:
    """kube's withForbidOldSelfValidations: below an atomic or set list, items have no old selves;
    a rule reading oldSelf there is refused at the highest such list. A map list's items and a
    map's values correlate (by keys), so oldSelf is fine below them."""
    item = {
        "type": "object",
        "required": ["a"],
        "properties": {"a": {"type": "string", "x-kubernetes-validations": [{"rule": "self == oldSelf"}]}},
    }
    nested = {"type": "array", "items": {"type": "array", "items": {"type": "string"}}}
    nested["items"]["items"]["x-kubernetes-validations"] = [{"rule": "self == oldSelf"}]
    spec = {
        "type": "object",
        "properties": {
            "atomic": {"type": "array", "items": item},
            "map": {
                "type": "array",
                "x-kubernetes-list-type": "map",
                "x-kubernetes-list-map-keys": ["a"],
                "items": {**item, "properties": {**item["properties"], "in": nested}},
            },
            "values": {"type": "object", "additionalProperties": item},
        },
    }
    found = structural_errors({"type": "object", "properties": {"spec": spec}}, "v", cel.compile_error)
    at = "v.properties[spec].properties"
    assert [(e.field, e.message) for e in found] == [
        (
            f"{at}[atomic].items.properties[a].x-kubernetes-validations[0].rule",
            'Invalid value: "self == oldSelf": oldSelf cannot be used on the uncorrelatable portion of the schema '
            f"within {at}[atomic]",
        ),
        (
            f"{at}[map].items.properties[in].items.items.x-kubernetes-validations[0].rule",
            'Invalid value: "self == oldSelf": oldSelf cannot be used on the uncorrelatable portion of the schema '
            f"within {at}[map].items.properties[in]",
        ),
    ]


def test_a_default_must_pass_its_nodes_rules() -> None:
    """kube's ValidateDefaults: a default the schema takes (its nested defaults applied) runs the
    node's rules as an update from itself (ratcheted: only a transition rule fails) and then, when
    that passed, as a create (an ``optionalOldSelf`` rule with no old value); one the schema
    refuses is not run."""
    spec = {
        "type": "object",
        "default": {"x": 4},
        "x-kubernetes-validations": [{"rule": "self.x > 3 && self.y == 'a'"}],
        "properties": {
            "x": {
                "type": "integer",
                "default": 2,
                "x-kubernetes-validations": [{"rule": "self > 5", "message": "x"}],
            },
            "y": {
                "type": "string",
                "default": "a",
                "x-kubernetes-validations": [{"rule": "self == oldSelf"}],
            },
            "z": {
                "type": "string",
                "default": "b",
                "x-kubernetes-validations": [{"rule": "oldSelf.hasValue()", "optionalOldSelf": True}],
            },
        },
    }
    other = {"type": "integer", "default": "w", "x-kubernetes-validations": [{"rule": "self > 5"}]}
    schema = {"type": "object", "properties": {"spec": spec, "other": other}}
    found = structural_errors(schema, "v", cel.compile_error)
    at = "v.properties[spec]"
    assert [(e.field, e.message.split(" in body")[0]) for e in found] == [
        (f"{at}.default.x", 'Invalid value: "integer": x'),
        (f"{at}.default.z", 'Invalid value: "string": failed rule: oldSelf.hasValue()'),
        (f"{at}.properties[x].default", 'Invalid value: "integer": x'),
        (f"{at}.properties[z].default", 'Invalid value: "string": failed rule: oldSelf.hasValue()'),
        ("v.properties[other].default", 'Invalid value: "string": v.properties[other].default'),
    ]


def test_a_rule_reads_properties_by_kubes_escaped_names() -> None:
    """kube's Escape names the rule's fields: Gateway API's parentRefs rule reads ``__namespace__``,
    so two refs to same-named parents in other namespaces are distinct, the same namespace twice not."""
    data = yaml.safe_load((Path(__file__).parents[2] / "data" / "gateway_parent_refs_rule.yaml").read_text())
    ref = {
        "type": "object",
        "properties": {
            name: {"type": "string"} for name in ("group", "kind", "name", "namespace", "sectionName")
        },
    }
    refs = {"type": "array", "maxItems": 32, "items": ref, "x-kubernetes-validations": [data]}
    assert cel.compile_error(data["rule"], refs) is None
    rules = cel.compile_schema_rules({"type": "object", "properties": {"parentRefs": refs}})
    gateway = {"group": "gateway.networking.k8s.io", "kind": "Gateway", "name": "gw"}
    apart = [{**gateway, "namespace": "a"}, {**gateway, "namespace": "b"}]
    assert rules.evaluate({"parentRefs": apart}, None) == []
    twice = [{**gateway, "namespace": "a"}, {**gateway, "namespace": "a"}]
    assert [e.message for e in rules.evaluate({"parentRefs": twice}, None)] == [
        f'Invalid value: "array": {data["message"]}'
    ]
    other = {"type": "object", "properties": {"if": {"type": "string"}, "x-y": {"type": "integer"}}}
    other["x-kubernetes-validations"] = [{"rule": "self.__if__ == 'a' && self.x__dash__y == 1"}]
    assert cel.compile_schema_rules(other).evaluate({"if": "a", "x-y": 1}, None) == []


def test_a_message_expression_has_its_rules_optional_old_self() -> None:
    """kube compiles a rule's ``messageExpression`` in the rule's environment: with
    ``optionalOldSelf``, its ``oldSelf`` is an optional of the node's type."""

    def schema(message: str) -> dict[str, Any]:
        rule = {
            "rule": "!oldSelf.hasValue() || self == oldSelf.value()",
            "optionalOldSelf": True,
            "messageExpression": message,
        }
        x = {"type": "string", "maxLength": 5, "x-kubernetes-validations": [rule]}
        return {"type": "object", "properties": {"x": x}}

    sized = "'was ' + string(oldSelf.value().size()) + ' long'"
    assert structural_errors(schema(sized), "s", cel.compile_error) == []
    rules = cel.compile_schema_rules(schema(sized), root=False)
    # A string's size in code points, as cel-go counts it, since oldSelf.value() is typed a string.
    assert [e.message for e in rules.evaluate({"x": "ab"}, {"x": "éé"})] == [
        'Invalid value: "string": was 2 long'
    ]
    # oldSelf.orValue('') is a string: adding an int to it is refused when the CRD is written.
    refused = structural_errors(schema("oldSelf.orValue('') + 1"), "s", cel.compile_error)
    assert [(e.field, e.message.splitlines()[0]) for e in refused] == [
        (
            "s.properties[x].x-kubernetes-validations[0].messageExpression",
            "Invalid value: \"oldSelf.orValue('') + 1\": messageExpression compilation failed: ERROR: "
            "<input>:1:21: found no matching overload for '_+_' applied to '(string, int)'",
        )
    ]
