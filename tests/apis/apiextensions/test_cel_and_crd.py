"""CEL rules (``x-kubernetes-validations``) and kube's validation of a CRD itself (table-driven)."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from controlplane.apis.apiextensions import cel
from controlplane.apis.apiextensions.crd import default_crd, validate_crd
from controlplane.apis.apiextensions.structural import structural_errors

RULES: dict[str, Any] = {
    "type": "object",
    "properties": {
        "spec": {
            "type": "object",
            "x-kubernetes-validations": [
                {
                    "rule": "self.replicas <= self.maxReplicas",
                    "message": "replicas must not exceed maxReplicas",
                },
                {"rule": "self.model.startsWith('m')"},
                {
                    "rule": "self.replicas >= oldSelf.replicas",
                    "message": "may not scale down",
                    "reason": "FieldValueForbidden",
                },
                {
                    "rule": "self.replicas != 7",
                    "messageExpression": "'replicas may not be ' + string(self.replicas)",
                    "fieldPath": ".replicas",
                },
            ],
            "properties": {
                "model": {"type": "string"},
                "replicas": {"type": "integer"},
                "maxReplicas": {"type": "integer"},
                "tags": {
                    "type": "array",
                    "items": {"type": "string", "x-kubernetes-validations": [{"rule": "self.size() < 4"}]},
                },
            },
        },
    },
}


def _errors(spec: dict[str, Any], old: dict[str, Any] | None = None) -> list[tuple[str, str, str]]:
    rules = cel.compile_schema_rules(RULES)
    found = rules.evaluate({"spec": spec}, {"spec": old} if old is not None else None)
    return [(e.type.value, e.field, e.message) for e in found]


@pytest.mark.parametrize(
    ("spec", "old", "expected"),
    [
        ({"model": "m1", "replicas": 1, "maxReplicas": 2}, None, []),
        (
            {"model": "m1", "replicas": 3, "maxReplicas": 2},
            None,
            [("FieldValueInvalid", "spec", 'Invalid value: "object": replicas must not exceed maxReplicas')],
        ),
        (
            {"model": "x", "replicas": 1, "maxReplicas": 2},
            None,
            [
                (
                    "FieldValueInvalid",
                    "spec",
                    "Invalid value: \"object\": failed rule: self.model.startsWith('m')",
                )
            ],
        ),
        # A transition rule runs only on update, with the stored value as oldSelf.
        (
            {"model": "m", "replicas": 1, "maxReplicas": 2},
            {"model": "m", "replicas": 2, "maxReplicas": 2},
            [("FieldValueForbidden", "spec", "Forbidden: may not scale down")],
        ),
        (
            {"model": "m", "replicas": 7, "maxReplicas": 9},
            None,
            [("FieldValueInvalid", "spec.replicas", 'Invalid value: "object": replicas may not be 7')],
        ),
        (
            {"model": "m", "replicas": 1},
            None,
            [
                (
                    "FieldValueInvalid",
                    "spec",
                    'Invalid value: "object": no such key: maxReplicas evaluating rule: replicas must not exceed maxReplicas',
                )
            ],
        ),
        (
            {"model": "m", "replicas": 1, "maxReplicas": 1, "tags": ["ok", "toolong"]},
            None,
            [("FieldValueInvalid", "spec.tags[1]", 'Invalid value: "string": failed rule: self.size() < 4')],
        ),
    ],
)
def test_rules_fail_with_kubes_messages(
    spec: dict[str, Any], old: dict[str, Any] | None, expected: list[Any]
) -> None:
    assert _errors(spec, old) == expected


def test_compile_errors_and_cost_budget() -> None:
    assert cel.compile_error("self.x > 1") is None
    # cel-go's optional macros are not evaluated here: refused when written, not at every object.
    opt_map = "oldSelf.optMap(o, o.size()).orValue(0) < 4 || self.size() >= 4"
    assert (
        cel.compile_error(opt_map) == "ERROR: <input>:1:9: the optMap macro is not supported by this server"
    )
    assert (cel.compile_error("self.x >") or "").startswith("ERROR: <input>:1:9: Syntax error")
    unbounded = {"type": "array", "items": {"type": "array", "items": {"type": "string"}}}
    nested = "self.all(x, x.all(y, self.exists(z, z == y)))"
    problem = cel.compile_error(nested, unbounded)
    assert problem is not None and problem.startswith("estimated rule cost exceeds budget by factor of")
    bounded = {
        "type": "array",
        "maxItems": 10,
        "items": {"type": "array", "maxItems": 10, "items": {"type": "string"}},
    }
    assert cel.compile_error(nested, bounded) is None
    assert cel.estimated_cost(nested, bounded) == 10 * (1 + 10 * (1 + 10))
    # Nesting multiplies along the fields walked, not the largest list anywhere (Kueue's
    # ClusterQueue rule over 16 groups x 64 flavors x 64 resources, beside an unbounded list).
    queue = {
        "type": "object",
        "properties": {
            "admissionChecks": {"type": "array", "items": {"type": "string"}},
            "resourceGroups": {
                "type": "array",
                "maxItems": 16,
                "items": {
                    "type": "object",
                    "properties": {
                        "flavors": {
                            "type": "array",
                            "maxItems": 64,
                            "items": {
                                "type": "object",
                                "properties": {
                                    "resources": {
                                        "type": "array",
                                        "maxItems": 64,
                                        "items": {"type": "object"},
                                    },
                                },
                            },
                        },
                    },
                },
            },
        },
    }
    rule = "has(self.resourceGroups) ? self.resourceGroups.all(rg, rg.flavors.all(f, f.resources.all(r, !has(r.x)))) : true"
    assert cel.compile_error(rule, queue) is None
    assert cel.estimated_cost(rule, queue) == 16 * (1 + 64 * (1 + 64))
    quadratic = "self.admissionChecks.all(x, self.admissionChecks.exists(y, y == x))"
    assert (cel.compile_error(quadratic, queue) or "").startswith("estimated rule cost exceeds budget")


CRD: dict[str, Any] = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": "trainers.ml.example.com"},
    "spec": {
        "group": "ml.example.com",
        "scope": "Namespaced",
        "names": {"plural": "trainers", "kind": "Trainer"},
        "versions": [
            {
                "name": "v1",
                "served": True,
                "storage": True,
                "schema": {"openAPIV3Schema": {"type": "object", "properties": {"spec": {"type": "object"}}}},
            }
        ],
    },
}


def _crd_errors(change: Any) -> list[tuple[str, str]]:
    crd = copy.deepcopy(CRD)
    change(crd)
    default_crd(crd)
    return [(e.field, e.message) for e in validate_crd(crd, compile_rule=cel.compile_error)]


def _schema(crd: dict[str, Any]) -> dict[str, Any]:
    return crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]  # type: ignore[no-any-return]


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (lambda c: None, []),
        (
            lambda c: c["metadata"].update(name="trainer.ml.example.com"),
            (
                "metadata.name",
                'Invalid value: "trainer.ml.example.com": must be spec.names.plural+"."+spec.group',
            ),
        ),
        (
            lambda c: c["spec"].update(group="example"),
            ("spec.group", 'Invalid value: "example": should be a domain with at least one dot'),
        ),
        (
            lambda c: c["spec"].update(scope="Global"),
            ("spec.scope", 'Unsupported value: "Global": supported values: "Cluster", "Namespaced"'),
        ),
        (
            lambda c: c["spec"]["versions"][0].update(storage=False),
            ("spec.versions", "Invalid value: 0: must have exactly one version marked as storage version"),
        ),
        (
            lambda c: c["spec"]["versions"].append(copy.deepcopy(c["spec"]["versions"][0])),
            ("spec.versions[1].name", 'Duplicate value: "v1"'),
        ),
        (
            lambda c: c["spec"]["versions"][0].pop("schema"),
            ("spec.versions[0].schema.openAPIV3Schema", "Required value: schemas are required"),
        ),
        (
            lambda c: _schema(c)["properties"].update(size={"description": "no type"}),
            (
                "spec.versions[0].schema.openAPIV3Schema.properties[size].type",
                "Required value: must not be empty for specified object fields",
            ),
        ),
        (
            lambda c: _schema(c)["properties"]["spec"].update(
                {"x-kubernetes-validations": [{"rule": "self.a >"}]}
            ),
            (
                "spec.versions[0].schema.openAPIV3Schema.properties[spec].x-kubernetes-validations[0].rule",
                'Invalid value: "self.a >": compilation failed: ERROR: <input>:1:9: Syntax error: mismatched input',
            ),
        ),
        (
            lambda c: c["spec"]["versions"][0].update(
                subresources={
                    "scale": {"specReplicasPath": ".replicas", "statusReplicasPath": ".status.replicas"}
                }
            ),
            (
                "spec.versions[0].subresources.scale.specReplicasPath",
                'Invalid value: ".replicas": should be a json path under .spec',
            ),
        ),
        (
            lambda c: _schema(c)["properties"]["spec"].update(pattern="(?<=a)b"),
            (
                "spec.versions[0].schema.openAPIV3Schema.properties[spec].pattern",
                'Invalid value: "(?<=a)b": must be a valid regular expression, but isn\'t: invalid perl operator: (?<=',
            ),
        ),
        (
            lambda c: _schema(c)["properties"].update(size={"type": "integer", "minimum": 1, "default": 0}),
            (
                "spec.versions[0].schema.openAPIV3Schema.properties[size].default",
                "Invalid value: 0: spec.versions[0].schema.openAPIV3Schema.properties[size].default in body should be greater than or equal to 1",
            ),
        ),
        # A default is valid once the defaults under it are applied (Kueue's `default: {}`).
        (
            lambda c: _schema(c)["properties"].update(
                opts={
                    "type": "object",
                    "default": {},
                    "required": ["mode"],
                    "properties": {"mode": {"type": "string", "default": "Never"}},
                }
            ),
            [],
        ),
        (
            lambda c: c["spec"].update(preserveUnknownFields=True),
            ("spec.preserveUnknownFields", "Invalid value: true: must be false"),
        ),
        (
            lambda c: c["spec"]["names"].update(plural="Trainers"),
            (
                "spec.names.plural",
                'Invalid value: "Trainers": a lowercase RFC 1123 label must consist of lower case alphanumeric '
                "characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', "
                "regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')",
            ),
        ),
    ],
)
def test_crd_validation(change: Any, expected: tuple[str, str] | list[Any]) -> None:
    found = _crd_errors(change)
    if expected == []:
        assert found == []
    else:
        field, message = expected
        assert any(f == field and m.startswith(message) for f, m in found), found


def test_crd_defaults() -> None:
    crd = copy.deepcopy(CRD)
    default_crd(crd)
    assert crd["spec"]["names"]["listKind"] == "TrainerList"
    assert crd["spec"]["names"]["singular"] == "trainer"
    assert crd["spec"]["conversion"] == {"strategy": "None"}


@pytest.mark.parametrize(
    "rule",
    [
        "self.name.lowerAscii() == 'abc' && self.name.upperAscii() == 'ABC'",
        "self.csv.split(',') == ['a', 'b'] && ['a', 'b'].join('-') == 'a-b'",
        "self.name.indexOf('b') == 1 && self.name.substring(1) == 'bc' && self.name.replace('b', 'x') == 'axc'",
        "self.items.isSorted() && self.items.sum() == 6 && self.items.min() == 1 && self.items.max() == 3",
        "self.items.indexOf(2) == 1 && self.items.lastIndexOf(3) == 2",
        "self.name.find('[bc]+') == 'bc' && self.name.findAll('[a-c]').size() == 3",
        "sets.contains(self.items, [1, 2]) && sets.intersects(self.items, [3, 4])",
        "self.name.matches('^a') && duration('1s') < duration('2s')",
        "quantity('1Gi') == quantity('1024Mi') && quantity('1Gi').isGreaterThan(quantity('1M'))",
        "isQuantity('500m') && !isQuantity('five') && quantity('500m').isInteger() == false",
        "quantity('1Gi').add(quantity('1Gi')).compareTo(quantity('2Gi')) == 0 && quantity('2k').asInteger() == 2000",
        "quantity('1.5').asApproximateFloat() == 1.5 && quantity('1').sub(quantity('2')).sign() == -1",
        # kube's ParseQuantity reads a suffix alone as zero, and refuses a space inside.
        "isQuantity('Ki') && quantity('m').sign() == 0 && !isQuantity('10 Gi') && !isQuantity('1_000')",
    ],
)
def test_kubes_cel_libraries_are_available(rule: str) -> None:
    """Rules may use what kube's CRD validation environment offers beyond core CEL."""
    rules = cel.compile_schema_rules({"type": "object", "x-kubernetes-validations": [{"rule": rule}]})
    assert rules.evaluate({"name": "abc", "csv": "a,b", "items": [1, 2, 3]}, None) == []


_ITEMS = {"type": "object", "properties": {"items": {"type": "array", "items": {"type": "integer"}}}}


@pytest.mark.parametrize(
    ("rule", "refused"),
    [
        # kube's base environment has neither cel-go's math nor its bindings nor its encoders.
        ("math.abs(-1) == 1", [(0, "math"), (8, "abs")]),
        ("cel.bind(n, self.items, n.size() > 0)", [(0, "cel"), (8, "bind"), (9, "n"), (24, "n")]),
        ("base64.encode(b'a') != ''", [(0, "base64"), (13, "encode")]),
        ("nope(self.items)", [(4, "nope")]),
        ("self.items.size() > limit", [(20, "limit")]),
    ],
)
def test_what_kubes_environment_does_not_declare_is_refused_in_cel_gos_words(
    rule: str, refused: list[tuple[int, str]]
) -> None:
    expected = "\n".join(
        f"ERROR: <input>:1:{at + 1}: undeclared reference to '{name}' (in container '')\n | {rule}\n | {'.' * at}^"
        for at, name in refused
    )
    assert cel.compile_error(rule, _ITEMS) == expected


@pytest.mark.parametrize(
    "rule",
    [
        "sets.contains(self.items, [1]) && optional.of(1).hasValue() && optional.none().orValue(2) == 2",
        "type(self.items) == list && int('1') == 1 && string(1) == '1' && duration('1s') < duration('2s')",
        "self.items.all(i, i > 0) && self.items.map(i, i * 2).size() == 3 && has(self.items)",
        "quantity('1').isInteger() && isURL('https://x') && ip('10.0.0.1').family() == 4",
    ],
)
def test_what_kubes_environment_declares_is_not_refused(rule: str) -> None:
    assert cel.compile_error(rule, _ITEMS) is None


def test_a_library_error_is_kubes_evaluation_error_and_prints_nothing(
    capsys: pytest.CaptureFixture[str],
) -> None:
    rules = cel.compile_schema_rules(
        {
            "type": "object",
            "properties": {
                "memory": {
                    "type": "string",
                    "x-kubernetes-validations": [{"rule": "quantity(self).isLessThan(quantity('1Gi'))"}],
                }
            },
        }
    )
    found = rules.evaluate({"memory": "lots"}, None)
    assert [(e.field, e.message) for e in found] == [
        (
            "memory",
            'Invalid value: "string": quantities must match the regular expression: '
            "'lots' is not a valid quantity (e.g. 500m, 2, 1Gi) evaluating rule: quantity(self).isLessThan(quantity('1Gi'))",
        )
    ]
    assert capsys.readouterr().err == ""
    assert rules.evaluate({"memory": "512Mi"}, None) == []


def test_an_int_or_string_shows_no_type_and_a_value_of_the_other_type_is_kubes_overload_error() -> None:
    """kube shows a failed rule's node type (an int-or-string has none); a string where the rule
    compares a number is cel-go's runtime "no such overload", in kube's words."""
    rules = cel.compile_schema_rules(
        {
            "type": "object",
            "properties": {
                "procs": {
                    "x-kubernetes-int-or-string": True,
                    "x-kubernetes-validations": [
                        {"rule": "self > 0 || self in ['auto']", "message": "auto or a number"}
                    ],
                }
            },
        }
    )
    assert rules.evaluate({"procs": "auto"}, None) == rules.evaluate({"procs": 2}, None) == []
    assert [e.message for e in rules.evaluate({"procs": 0}, None)] == ['Invalid value: "": auto or a number']
    assert [e.message for e in rules.evaluate({"procs": "many"}, None)] == [
        "Invalid value: \"\": 'no such overload': call arguments did not match a supported operator, function or "
        "macro signature for rule: auto or a number"
    ]


def test_transition_rules_in_a_map_list_see_the_old_item_with_the_same_keys() -> None:
    rules = cel.compile_schema_rules(
        {
            "type": "object",
            "properties": {
                "ports": {
                    "type": "array",
                    "x-kubernetes-list-type": "map",
                    "x-kubernetes-list-map-keys": ["name"],
                    "items": {
                        "type": "object",
                        "x-kubernetes-validations": [
                            {"rule": "self.port == oldSelf.port", "message": "port is immutable"},
                        ],
                    },
                }
            },
        }
    )
    old = {"ports": [{"name": "a", "port": 1}, {"name": "b", "port": 2}]}
    new = {"ports": [{"name": "b", "port": 3}, {"name": "a", "port": 1}, {"name": "c", "port": 9}]}
    found = rules.evaluate(new, old)
    # Item b changed its port; a is unchanged (found by its key, not its index); c is new.
    assert [(e.field, e.message) for e in found] == [
        ("ports[0]", 'Invalid value: "object": port is immutable')
    ]


def test_rules_ratchet_on_unchanged_values_but_transition_rules_do_not() -> None:
    """kube's CRDValidationRatcheting: a rule does not refuse a value its stored object already
    had (nor a value below an unchanged node that has no old self, a set's item); a changed value
    and a transition rule are checked as ever."""
    rules = cel.compile_schema_rules(
        {
            "type": "object",
            "properties": {
                "spec": {
                    "type": "object",
                    "x-kubernetes-validations": [{"rule": "self.size < 3", "message": "too big"}],
                    "properties": {
                        "size": {"type": "integer"},
                        "floor": {
                            "type": "integer",
                            "x-kubernetes-validations": [
                                {"rule": "self >= oldSelf", "message": "may not go down"}
                            ],
                        },
                        "tags": {
                            "type": "array",
                            "x-kubernetes-list-type": "set",
                            "items": {
                                "type": "string",
                                "x-kubernetes-validations": [
                                    {"rule": "self.size() < 4", "message": "long tag"}
                                ],
                            },
                        },
                    },
                },
                "status": {"type": "object", "properties": {"phase": {"type": "string"}}},
            },
        }
    )
    old = {"spec": {"size": 5, "floor": 1, "tags": ["toolong"]}, "status": {"phase": "A"}}

    def fields(new: dict[str, Any], stored: dict[str, Any] | None) -> list[tuple[str, str]]:
        return [(e.field, e.message.rsplit(": ", 1)[1]) for e in rules.evaluate(new, stored)]

    assert fields({**old, "status": {"phase": "B"}}, old) == []  # only the status changed
    assert fields(old, None) == [
        ("spec", "too big"),
        ("spec.tags[0]", "long tag"),
    ]  # a create ratchets nothing
    # The spec changed (its rule is checked), its tags did not (theirs is not).
    assert fields({"spec": {**old["spec"], "size": 6}}, old) == [("spec", "too big")]
    # The set's item has no old self; its list changed, so it is checked.
    assert fields({"spec": {**old["spec"], "tags": ["toolong", "ok"]}}, old) == [
        ("spec", "too big"),
        ("spec.tags[0]", "long tag"),
    ]
    assert fields({"spec": {**old["spec"], "floor": 0}}, old) == [
        ("spec", "too big"),
        ("spec.floor", "may not go down"),
    ]


def test_optional_old_self_rules_run_on_create_with_an_optional_old_self() -> None:
    """kube's conformance case for ``optionalOldSelf: true``: the rule runs on create too, its
    ``oldSelf`` an optional (``optional.none()`` with no old value, ``hasValue()``/``value()``)."""
    case = yaml.safe_load((Path(__file__).parents[2] / "data" / "optional_old_self_schema.yaml").read_text())
    rules = cel.compile_schema_rules(case["schema"])
    created, updated = case["created"], case["updated"]
    assert rules.evaluate(created, None) == []
    found = rules.evaluate(copy.deepcopy(created), created)
    assert sorted(e.field for e in found) == sorted(case["unchanged_fields"])
    assert {e.message for e in found} == {
        'Invalid value: "string": failed rule: !oldSelf.hasValue() || self != oldSelf.value()'
    }
    assert rules.evaluate(updated, created) == []
    # A field the old object lacks has an old self of none, as on create.
    assert rules.evaluate({"field": "foo"}, {"struct": {}}) == []


def test_formatted_strings_reach_rules_as_kube_types_them() -> None:
    """As kube's UnstructuredToVal: a ``date-time`` or ``date`` string is a timestamp, a
    ``duration`` a duration, a ``byte`` string its decoded bytes, at the rule's node and below it."""
    rules = cel.compile_schema_rules(
        {
            "type": "object",
            "properties": {
                "expires": {
                    "type": "string",
                    "format": "date-time",
                    "x-kubernetes-validations": [
                        {"rule": "self > timestamp('2020-01-01T00:00:00Z')", "message": "too old"}
                    ],
                },
                "timeout": {
                    "type": "string",
                    "format": "duration",
                    "x-kubernetes-validations": [{"rule": "self < duration('1h')", "message": "too long"}],
                },
                "key": {
                    "type": "string",
                    "format": "byte",
                    "x-kubernetes-validations": [{"rule": "size(self) == 2", "message": "two bytes"}],
                },
                "window": {
                    "type": "object",
                    "x-kubernetes-validations": [
                        {"rule": "self.runs.all(r, r.at < self.until)", "message": "late"}
                    ],
                    "properties": {
                        "until": {"type": "string", "format": "date"},
                        "runs": {
                            "type": "array",
                            "maxItems": 4,
                            "items": {
                                "type": "object",
                                "properties": {"at": {"type": "string", "format": "date-time"}},
                            },
                        },
                    },
                },
            },
        }
    )

    def fields(obj: dict[str, Any]) -> list[str]:
        return [f"{e.field}: {e.message}" for e in rules.evaluate(obj, None)]

    ok = {
        "expires": "2021-06-01T10:00:00Z",
        "timeout": "30m",
        "key": "YWI=",
        "window": {"until": "2024-01-02", "runs": [{"at": "2024-01-01T23:00:00Z"}]},
    }
    assert fields(ok) == []
    late = {
        "expires": "2019-06-01T10:00:00.5+02:00",
        "timeout": "1h30m",
        "key": "YWJj",
        "window": {"until": "2024-01-01", "runs": [{"at": "2024-01-01T23:00:00Z"}]},
    }
    assert fields(late) == [
        'expires: Invalid value: "string": too old',
        'timeout: Invalid value: "string": too long',
        'key: Invalid value: "string": two bytes',
        'window: Invalid value: "object": late',
    ]


@pytest.mark.parametrize(
    ("rule", "error"),
    [
        ("self.replicas / 0 == 1", "division by zero"),
        ("self.replicas % 0 == 1", "modulus by zero"),
        ("self.replicas * 9223372036854775807 > 0", "integer overflow"),
        ("uint(-self.replicas) > 0u", "unsigned integer overflow"),
        ("int(double(self.replicas) * 1e20) > 0", "integer overflow"),
    ],
)
def test_a_rules_arithmetic_errors_are_cel_gos(rule: str, error: str) -> None:
    """cel-go's words for arithmetic that fails (common/types/overflow.go), in kube's detail."""
    rules = cel.compile_schema_rules(
        {
            "type": "object",
            "x-kubernetes-validations": [{"rule": rule}],
            "properties": {"replicas": {"type": "integer"}},
        }
    )
    assert [e.message for e in rules.evaluate({"replicas": 5}, None)] == [
        f'Invalid value: "object": {error} evaluating rule: {rule}'
    ]


def test_a_number_is_a_double_to_a_rule_even_without_a_fraction() -> None:
    """kube's UnstructuredToVal makes a ``number`` a double: ``ratio: 1`` adds to ``0.5``, in a
    field, a list's items and a map's values."""
    rules = cel.compile_schema_rules(
        {
            "type": "object",
            "properties": {
                "ratio": {"type": "number"},
                "weights": {"type": "array", "items": {"type": "number"}},
                "shares": {"type": "object", "additionalProperties": {"type": "number"}},
            },
            "x-kubernetes-validations": [
                {"rule": "self.ratio + 0.5 < 2.0"},
                {"rule": "self.weights.all(w, w / 2.0 > 0.0)"},
                {"rule": "self.shares.all(k, self.shares[k] * 2.0 > 0.0)"},
            ],
        }
    )
    assert rules.evaluate({"ratio": 1, "weights": [1, 2.5], "shares": {"a": 3}}, None) == []


def test_a_rule_that_cannot_be_evaluated_is_not_ratcheted() -> None:
    """kube's CEL validator ratchets a rule that evaluates to false on an unchanged value; an
    evaluation error (``no such key``) it reports whatever the old value."""
    schema = {
        "type": "object",
        "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
        "x-kubernetes-validations": [{"rule": "self.a > 1", "message": "small"}, {"rule": "self.b > 1"}],
    }
    rules = cel.compile_schema_rules(schema, root=False)
    stored = {"a": 0}
    assert [e.message for e in rules.evaluate(stored, stored)] == [
        'Invalid value: "object": no such key: b evaluating rule: self.b > 1'
    ]


def test_a_default_is_checked_as_kubes_validate_defaults_checks_it() -> None:
    """kube's ValidateDefaults runs the rules over the default as an update from itself, which
    ratchets every rule but the transition rules (and one that cannot be evaluated), then, when
    that found nothing, as a create."""

    def defaults(rules: list[dict[str, Any]]) -> list[str]:
        node = {"type": "integer", "default": 5, "x-kubernetes-validations": rules}
        schema = {"type": "object", "properties": {"x": node}}
        return [e.message.split(" in body")[0] for e in structural_errors(schema, "s", cel.compile_error)]

    plain = {"rule": "self < 3", "message": "plain"}
    transition = {"rule": "self == oldSelf + 1", "message": "transition"}
    assert defaults([plain, transition]) == ['Invalid value: "integer": transition']
    assert defaults([plain]) == ['Invalid value: "integer": plain']
    assert defaults([plain, {"rule": "self / 0 == 1", "message": "zero"}]) == [
        'Invalid value: "integer": division by zero evaluating rule: zero'
    ]


def test_a_member_function_kubes_environment_does_not_declare_is_refused() -> None:
    rule = "self.items.distinct().size() > 0"
    assert cel.compile_error(rule, _ITEMS) == (
        f"ERROR: <input>:1:20: undeclared reference to 'distinct' (in container '')\n | {rule}\n | {'.' * 19}^"
    )
