"""A CRD's structural schema over objects: kube's validation messages and field paths,
pruning of undeclared fields, and defaulting (table-driven)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from controlplane.apis.apiextensions.schema import (
    apply_defaults,
    format_ok,
    integral_floats_made_ints,
    prune,
    validate,
)

SPEC: dict[str, Any] = {
    "type": "object",
    "properties": {
        "spec": {
            "type": "object",
            "required": ["model"],
            "properties": {
                "model": {"type": "string", "maxLength": 5, "minLength": 1, "pattern": "^[a-z0-9-]+$"},
                "replicas": {"type": "integer", "minimum": 0, "maximum": 10, "default": 1},
                "ratio": {"type": "number", "exclusiveMinimum": True, "minimum": 0},
                "color": {"type": "string", "enum": ["red", "blue"]},
                "gpus": {"x-kubernetes-int-or-string": True},
                "when": {"type": "string", "format": "date-time"},
                "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 2, "x-kubernetes-list-type": "set"},
                "ports": {
                    "type": "array",
                    "x-kubernetes-list-type": "map",
                    "x-kubernetes-list-map-keys": ["name"],
                    "items": {"type": "object", "properties": {"name": {"type": "string"}, "port": {"type": "integer"}}},
                },
                "labels": {"type": "object", "additionalProperties": {"type": "string"}, "maxProperties": 2},
                "extra": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
                "template": {
                    "type": "object",
                    "x-kubernetes-embedded-resource": True,
                    "properties": {"spec": {"type": "object", "properties": {"size": {"type": "integer"}}}},
                },
                "note": {"type": "string", "nullable": True},
            },
        },
    },
}


def _obj(**spec: Any) -> dict[str, Any]:
    return {"apiVersion": "ml.example.com/v1", "kind": "Trainer", "metadata": {"name": "a"}, "spec": {"model": "m", **spec}}


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ({"replicas": "many"}, ("spec.replicas", 'Invalid value: "string": spec.replicas in body must be of type integer: "string"')),
        ({"replicas": -1}, ("spec.replicas", "Invalid value: -1: spec.replicas in body should be greater than or equal to 0")),
        ({"replicas": 11}, ("spec.replicas", "Invalid value: 11: spec.replicas in body should be less than or equal to 10")),
        ({"ratio": 0}, ("spec.ratio", "Invalid value: 0: spec.ratio in body should be greater than 0")),
        ({"color": "pink"}, ("spec.color", 'Unsupported value: "pink": supported values: "red", "blue"')),
        ({"model": "toolong"}, ("spec.model", "Too long: may not be more than 5 bytes")),
        ({"model": ""}, ("spec.model", 'Invalid value: "": spec.model in body should be at least 1 chars long')),
        ({"model": "A_B"}, ("spec.model", "Invalid value: \"A_B\": spec.model in body should match '^[a-z0-9-]+$'")),
        ({"gpus": 1.5}, ("spec.gpus", 'Invalid value: "number": spec.gpus in body must be of type integer,string: "number"')),
        ({"when": "yesterday"}, ("spec.when", 'Invalid value: "yesterday": spec.when in body must be of type date-time: "yesterday"')),
        ({"tags": ["a", "b", "c"]}, ("spec.tags", "Too many: 3: must have at most 2 items")),
        ({"tags": ["a", "a"]}, ("spec.tags[1]", 'Duplicate value: "a"')),
        ({"ports": [{"name": "x", "port": 1}, {"name": "x", "port": 2}]}, ("spec.ports[1]", 'Duplicate value: map[string]interface {}{"name":"x"}')),
        ({"labels": {"a": "1", "b": "2", "c": "3"}}, ("spec.labels", "Too many: 3: must have at most 2 items")),
        ({"labels": {"app.kubernetes.io/name": 3}}, ("spec.labels[app.kubernetes.io/name]", 'Invalid value: "integer": spec.labels[app.kubernetes.io/name] in body must be of type string: "integer"')),
        ({"template": {"spec": {}}}, ("spec.template.apiVersion", "Required value: must not be empty")),
        ({"replicas": None}, ("spec.replicas", 'Invalid value: "null": spec.replicas in body must be of type integer: "null"')),
    ],
)
def test_validation_gives_kubes_field_path_and_message(spec: dict[str, Any], expected: tuple[str, str]) -> None:
    errors = validate(_obj(**spec), SPEC)
    assert (errors[0].field, errors[0].message) == expected
    # kube-openapi's InvalidTypeCode (a type or a format) is apiextensions' field.TypeInvalid.
    wrong_type = " in body must be of type " in expected[1]
    assert (str(errors[0].type) == "FieldValueTypeInvalid") is wrong_type


def test_required_and_valid_values() -> None:
    missing = _obj()
    del missing["spec"]["model"]
    assert [(e.field, e.message) for e in validate(missing, SPEC)] == [("spec.model", "Required value")]
    fine = _obj(
        replicas=3, ratio=0.5, color="red", gpus="50%", when="2026-01-02T03:04:05Z", tags=["a", "b"],
        ports=[{"name": "x"}, {"name": "y"}], labels={"a": "1"}, extra={"anything": [1]}, note=None,
        template={"apiVersion": "v1", "kind": "Pod", "spec": {"size": 1}},
    )
    assert validate(fine, SPEC) == []
    assert validate(_obj(gpus=2), SPEC) == []


def test_pruning_drops_undeclared_fields_and_keeps_preserved_and_embedded_ones() -> None:
    obj = _obj(bogus=1, extra={"kept": {"deep": 1}}, labels={"free": "x"},
               template={"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {"size": 1, "junk": 2}})
    obj["status"] = {"anything": 1}
    obj["metadata"]["labels"] = {"a": "b"}
    dropped = prune(obj, SPEC)
    assert sorted(dropped, key=str) == sorted([("spec", "bogus"), ("status",), ("spec", "template", "spec", "junk")], key=str)
    assert "bogus" not in obj["spec"] and "status" not in obj
    assert obj["spec"]["extra"] == {"kept": {"deep": 1}}
    assert obj["spec"]["labels"] == {"free": "x"}
    assert obj["spec"]["template"]["metadata"] == {"name": "p"}
    assert obj["metadata"]["labels"] == {"a": "b"}


def test_integral_floats_of_integer_fields_become_integers() -> None:
    schema = {"type": "object", "properties": {
        "counts": {"type": "array", "items": {"type": "integer"}},
        "limits": {"type": "object", "additionalProperties": {"type": "integer"}},
        "ratio": {"type": "number"},
        "gpus": {"x-kubernetes-int-or-string": True},
    }}
    obj = {"counts": [1.0, 2.5, 2.0**60], "limits": {"a": 4.0}, "ratio": 2.0, "gpus": 1.0, "other": 3.0}
    integral_floats_made_ints(obj, schema)
    # A fraction, a float past 2^53 - 1 and any other field's float are left for validation.
    assert obj == {"counts": [1, 2.5, 2.0**60], "limits": {"a": 4}, "ratio": 2.0, "gpus": 1.0, "other": 3.0}
    assert [type(v) for v in obj["counts"]] == [int, float, float] and type(obj["limits"]["a"]) is int
    assert [type(obj[k]) for k in ("ratio", "gpus", "other")] == [float, float, float]


def test_defaults_fill_unset_and_null_fields_only() -> None:
    schema = copy.deepcopy(SPEC)
    schema["properties"]["spec"]["properties"]["ports"]["items"]["properties"]["port"]["default"] = 80
    obj = _obj(ports=[{"name": "x"}, {"name": "y", "port": 8080}])
    apply_defaults(obj, schema)
    assert obj["spec"]["replicas"] == 1
    assert [p["port"] for p in obj["spec"]["ports"]] == [80, 8080]
    kept = _obj(replicas=4)
    apply_defaults(kept, schema)
    assert kept["spec"]["replicas"] == 4
    nulled = _obj(replicas=None)
    apply_defaults(nulled, schema)
    assert nulled["spec"]["replicas"] == 1


@pytest.mark.parametrize(
    ("fmt", "good", "bad"),
    [
        ("date-time", "2026-01-02T03:04:05Z", "2026-01-02"),
        ("date", "2026-01-02", "02/01/2026"),
        ("uuid", "123e4567-e89b-12d3-a456-426614174000", "123"),
        ("ipv4", "10.0.0.1", "10.0.0.256"),
        ("ipv6", "::1", "1::2::3"),
        ("cidr", "10.0.0.0/8", "10.0.0.0"),
        ("byte", "aGk=", "not base64!"),
        ("hostname", "node-1.example.com", "-bad-"),
    ],
)
def test_formats_kube_checks(fmt: str, good: str, bad: str) -> None:
    assert format_ok(fmt, good)
    assert not format_ok(fmt, bad)
    assert format_ok("unknown-format", bad)


def test_patterns_match_in_linear_time() -> None:
    """RE2, as kube: a backtracking-prone pattern over a crafted value answers at once (Python's
    ``re`` would run for longer than the test's timeout)."""
    schema = {"type": "object", "properties": {"name": {"type": "string", "pattern": "^(a+)+$"}}}
    errors = validate({"name": "a" * 100_000 + "b"}, schema)
    assert [e.field for e in errors] == ["name"]
    assert validate({"name": "aaa"}, schema) == []


def test_metadata_is_never_pruned_even_when_the_schema_declares_it_bare() -> None:
    """controller-gen writes ``metadata: {type: object}`` at the root (and in embedded objects)."""
    schema = {
        "type": "object",
        "properties": {
            "apiVersion": {"type": "string"}, "kind": {"type": "string"}, "metadata": {"type": "object"},
            "spec": {"type": "object", "properties": {"model": {"type": "string"}, "template": {
                "type": "object", "x-kubernetes-embedded-resource": True, "x-kubernetes-preserve-unknown-fields": False,
                "properties": {"metadata": {"type": "object"}},
            }}},
        },
    }
    obj = _obj(template={"apiVersion": "v1", "kind": "Pod", "metadata": {"labels": {"a": "b"}}})
    obj["metadata"]["labels"] = {"app": "x"}
    assert prune(obj, schema) == []
    assert obj["metadata"] == {"name": "a", "labels": {"app": "x"}}
    assert obj["spec"]["template"]["metadata"] == {"labels": {"a": "b"}}


RATCHETED: dict[str, Any] = {
    "type": "object",
    "properties": {
        "limit": {"type": "string", "maxLength": 3},
        "byIndex": {"type": "array", "items": {"type": "string", "maxLength": 3}},
        "atomic": {"type": "array", "x-kubernetes-list-type": "atomic", "items": {"type": "string", "maxLength": 3}},
        "ports": {
            "type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"],
            "items": {"type": "object", "properties": {"name": {"type": "string"}, "port": {"type": "integer", "maximum": 10}}},
        },
        "count": {"type": "integer", "maximum": 1},
    },
}


@pytest.mark.parametrize(
    ("old", "new", "expected"),
    [
        # Unchanged values are not refused, however the schema changed since they were written.
        ({"limit": "long", "count": 5}, {"limit": "long", "count": 1}, []),
        ({"limit": "long"}, {"limit": "longer"}, ["limit"]),
        # Lists with no list type find old items by index; map lists by their keys.
        ({"byIndex": ["long", "a"]}, {"byIndex": ["long", "b"]}, []),
        ({"byIndex": ["a", "long"]}, {"byIndex": ["long", "a"]}, ["byIndex[0]"]),
        ({"ports": [{"name": "a", "port": 99}]}, {"ports": [{"name": "b", "port": 1}, {"name": "a", "port": 99}]}, []),
        # Atomic lists only as a whole: one item changed, every item is checked.
        ({"atomic": ["long", "a"]}, {"atomic": ["long", "b"]}, ["atomic[0]"]),
        ({"atomic": ["long"]}, {"atomic": ["long"]}, []),
        # 1.0 is not 1: a changed type is a change.
        ({"count": 5}, {"count": 5.0}, ["count"]),
        # No stored object (a create): nothing ratchets.
        (None, {"limit": "long"}, ["limit"]),
    ],
)
def test_updates_ratchet_unchanged_values(old: Any, new: dict[str, Any], expected: list[str]) -> None:
    found = validate(new, RATCHETED) if old is None else validate(new, RATCHETED, old=old)
    assert [e.field for e in found] == expected


def test_an_embedded_objects_metadata_is_checked_as_kubes_object_meta() -> None:
    """kube's validateEmbeddedResource: ValidateObjectMeta with path-segment names."""
    schema = {"type": "object", "properties": {"tmpl": {
        "type": "object", "x-kubernetes-embedded-resource": True, "x-kubernetes-preserve-unknown-fields": True,
    }}}
    fine = {"tmpl": {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "Any_Name", "labels": {"app": "x"}}}}
    assert validate(fine, schema) == []
    # A generateName is a prefix (IsValidPathSegmentPrefix): "." and ".." begin longer names.
    for prefix in (".", ".."):
        assert validate({"tmpl": {"apiVersion": "v1", "kind": "Pod", "metadata": {"generateName": prefix}}}, schema) == []
    slashed = {"tmpl": {"apiVersion": "v1", "kind": "Pod", "metadata": {"generateName": "a/"}}}
    assert [e.message for e in validate(slashed, schema)] == ["Invalid value: \"a/\": may not contain '/'"]
    bad = {"tmpl": {"apiVersion": "v1", "kind": "Pod", "metadata": {
        "name": "a/b", "namespace": "Bad", "labels": {"app": "b c"}, "annotations": {"-x": "y"},
    }}}
    label = ("a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and "
             "must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex "
             "used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')")
    assert [(e.field, e.message) for e in validate(bad, schema)] == [
        ("tmpl.metadata.name", "Invalid value: \"a/b\": may not contain '/'"),
        ("tmpl.metadata.namespace", 'Invalid value: "Bad": a lowercase RFC 1123 label must consist of lower case '
         "alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  "
         "or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')"),
        ("tmpl.metadata.labels", f'Invalid value: "b c": {label}'),
        ("tmpl.metadata.annotations", 'Invalid value: "-x": name part must consist of alphanumeric characters, '
         "'-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  "
         "or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"),
    ]
