"""A CRD version's schema checked as kube's ValidateStructural and
ValidateCustomResourceDefinitionOpenAPISchema check it: kube's extensions where they apply, the
root ``metadata`` restricted to ``name`` and ``generateName`` (no defaults in it), ``$ref``, and the
items and keys of ``x-kubernetes-list-type: map`` and ``set`` lists."""

from __future__ import annotations

import copy
from typing import Any

from controlplane.apis.apiextensions import cel
from controlplane.apis.apiextensions.crd import default_crd, validate_crd
from controlplane.apis.apiextensions.structural import structural_errors

ROOT = "spec.versions[0].schema.openAPIV3Schema"


def _errors(properties: dict[str, Any], **root: Any) -> list[tuple[str, str]]:
    schema = {"type": "object", "properties": properties, **root}
    return [(e.field.removeprefix(ROOT), e.message) for e in structural_errors(schema, ROOT)]


def test_kubes_extensions_are_refused_where_they_do_not_apply() -> None:
    spec = {
        "type": "object",
        "properties": {
            "f": {"type": "object", "x-kubernetes-embedded-resource": True},
            "g": {"x-kubernetes-embedded-resource": True, "x-kubernetes-preserve-unknown-fields": True},
            "i": {"x-kubernetes-int-or-string": True, "x-kubernetes-preserve-unknown-fields": True},
            "l": {"type": "string", "x-kubernetes-list-type": "set"},
            "m": {"type": "string", "x-kubernetes-map-type": "atomic"},
            "n": {"type": "object", "x-kubernetes-map-type": "foo"},
            "p": {"type": "object", "x-kubernetes-preserve-unknown-fields": False},
            "r": {"type": "string", "$ref": "#/x"},
            "u": {"type": "object", "additionalProperties": False, "properties": {"a": {"type": "string"}}},
        },
    }
    s = ".properties[spec].properties"
    assert _errors({"spec": spec}) == [
        (
            f"{s}[f].properties",
            "Required value: must not be empty if x-kubernetes-embedded-resource is true "
            "without x-kubernetes-preserve-unknown-fields",
        ),
        (f"{s}[g].type", "Required value: must be object if x-kubernetes-embedded-resource is true"),
        (
            f"{s}[i].x-kubernetes-preserve-unknown-fields",
            "Invalid value: true: must be false if x-kubernetes-int-or-string is true",
        ),
        (f"{s}[l].type", 'Invalid value: "string": must be array if x-kubernetes-list-type is specified'),
        (f"{s}[m].type", 'Invalid value: "string": must be object if x-kubernetes-map-type is specified'),
        (f"{s}[n].x-kubernetes-map-type", 'Unsupported value: "foo": supported values: "atomic", "granular"'),
        (f"{s}[p].x-kubernetes-preserve-unknown-fields", "Invalid value: false: must be true or undefined"),
        (f"{s}[r].$ref", "Forbidden: $ref is not supported"),
        (
            f"{s}[u].additionalProperties",
            "Forbidden: additionalProperties and properties are mutual exclusive",
        ),
    ]


def test_the_root_metadata_may_only_restrict_name_and_generate_name() -> None:
    assert (
        _errors({"metadata": {"type": "object", "properties": {"name": {"type": "string", "maxLength": 63}}}})
        == []
    )
    assert _errors({"metadata": {"type": "object", "properties": {"labels": {"type": "object"}}}}) == [
        (
            ".properties[metadata]",
            "Forbidden: must not specify anything other than name and generateName, "
            "but metadata is implicitly specified",
        ),
    ]
    # Zero values and keywords a structural schema does not hold are nothing to kube.
    for nothing in ({"nullable": False}, {"description": ""}, {"x-kubernetes-embedded-resource": False},
                    {"example": {"name": "x"}}, {"externalDocs": {"url": "https://example.com"}}):
        assert _errors({"metadata": {"type": "object", **nothing}}) == [], nothing
    assert _errors({"metadata": {"type": "object", "nullable": True}}) != []
    assert _errors(
        {"metadata": {"type": "object", "properties": {"name": {"type": "string", "default": "x"}}}}
    ) == [
        (
            ".properties[metadata].properties[name].default",
            "Forbidden: must not be set in top-level metadata",
        ),
    ]
    assert _errors({}, additionalProperties={"type": "string"}) == [
        (".additionalProperties", "Forbidden: must not be used at the root"),
    ]


def test_map_and_set_lists_are_checked_as_kube_checks_them() -> None:
    ports = {
        "type": "array",
        "x-kubernetes-list-type": "map",
        "x-kubernetes-list-map-keys": ["name", "port", "proto"],
        "items": {
            "type": "object",
            "required": ["port"],
            "properties": {
                "name": {"type": "string"},
                "port": {"type": "object"},
                "other": {"type": "string"},
            },
        },
    }
    tags = {"type": "array", "x-kubernetes-list-type": "set", "items": {"type": "object"}}
    keyed = {"type": "array", "x-kubernetes-list-map-keys": ["name"], "items": {"type": "string"}}
    s = ".properties[spec].properties"
    spec = {"type": "object", "properties": {"ports": ports, "tags": tags, "keyed": keyed}}
    assert _errors({"spec": spec}) == [
        (
            f"{s}[ports].items.properties[port].type",
            'Invalid value: "object": must be a scalar type if parent array\'s x-kubernetes-list-type is map',
        ),
        (
            f"{s}[ports].x-kubernetes-list-map-keys",
            'Invalid value: []string{"name", "port", "proto"}: entries must all be names of item properties',
        ),
        (
            f"{s}[ports].items.properties[name].default",
            "Required value: this property is in "
            "x-kubernetes-list-map-keys, so it must have a default or be a required property",
        ),
        (
            f"{s}[tags].items.x-kubernetes-map-type",
            "Invalid value: null: must be atomic as item of a list with x-kubernetes-list-type=set",
        ),
        (
            f"{s}[keyed].x-kubernetes-list-type",
            "Required value: must be map if x-kubernetes-list-map-keys is non-empty",
        ),
    ]


def test_rules_are_type_checked_against_the_schema_as_kubes_compiler_does() -> None:
    """kube compiles a rule with ``self`` typed by its node (SchemaDeclType): a field the node does
    not declare, or operands no overload takes, fail compilation; a resource's root always has
    ``apiVersion``, ``kind`` and ``metadata.name``, and only those of its metadata."""

    def rule(text: str) -> list[dict[str, str]]:
        return [{"rule": text}]

    schema = {
        "type": "object",
        "x-kubernetes-validations": rule("self.metadata.name != '' && self.kind == 'W'"),
        "properties": {
            "spec": {
                "type": "object",
                "x-kubernetes-validations": rule("self.size > 'a'"),
                "properties": {
                    "size": {"type": "integer", "x-kubernetes-validations": rule("self > 0")},
                    "tmpl": {
                        "type": "object",
                        "x-kubernetes-embedded-resource": True,
                        "x-kubernetes-preserve-unknown-fields": True,
                        "x-kubernetes-validations": rule("self.metadata.name != ''"),
                    },
                    "open": {
                        "type": "object",
                        "x-kubernetes-preserve-unknown-fields": True,
                        "x-kubernetes-validations": rule("self.anything == 1"),
                    },
                },
            }
        },
    }
    schema["x-kubernetes-validations"] += rule("self.metadata.labels.size() < 3")
    errors = [(e.field, e.message) for e in structural_errors(schema, ROOT, cel.compile_error)]
    assert errors == [
        (
            f"{ROOT}.x-kubernetes-validations[1].rule",
            'Invalid value: "self.metadata.labels.size() < 3": compilation failed: ERROR: <input>:1:14: undefined '
            "field 'labels'\n | self.metadata.labels.size() < 3\n | .............^",
        ),
        (
            f"{ROOT}.properties[spec].x-kubernetes-validations[0].rule",
            "Invalid value: \"self.size > 'a'\": compilation failed: ERROR: <input>:1:11: found no matching overload "
            "for '_>_' applied to '(int, string)'\n | self.size > 'a'\n | ..........^",
        ),
    ]


def test_a_rules_fields_are_checked_as_kube_checks_them() -> None:
    """kube's checks of an x-kubernetes-validations entry: its reason, message, messageExpression,
    fieldPath (a path into the node's schema) and optionalOldSelf (only with a rule that reads oldSelf)."""
    rules = [
        {"rule": "self.a != ''", "reason": "Bogus"},
        {"rule": "self.a != ''", "message": "two\nlines"},
        {"rule": "self.a != ''", "messageExpression": "  "},
        {"rule": "self.a != ''", "fieldPath": ".nope"},
        {"rule": "self.a != ''", "optionalOldSelf": True},
        {
            "rule": "self.a != oldSelf.a",
            "optionalOldSelf": True,
            "fieldPath": ".a",
            "reason": "FieldValueForbidden",
        },
        {"rule": " "},
        {"rule": "self.a != ''\n&& true"},
    ]
    spec = {"type": "object", "properties": {"a": {"type": "string"}}, "x-kubernetes-validations": rules}
    at = ".properties[spec].x-kubernetes-validations"
    assert [
        (e.field.removeprefix(ROOT), e.message)
        for e in structural_errors({"type": "object", "properties": {"spec": spec}}, ROOT, cel.compile_error)
    ] == [
        (
            f"{at}[0].reason",
            'Unsupported value: "Bogus": supported values: "FieldValueDuplicate", '
            '"FieldValueForbidden", "FieldValueInvalid", "FieldValueRequired"',
        ),
        (f"{at}[1].message", 'Invalid value: "two\\nlines": message must not contain line breaks'),
        (f"{at}[2].messageExpression", "Required value: messageExpression must be non-empty if specified"),
        (f"{at}[3].fieldPath", 'Invalid value: ".nope": fieldPath must be a valid path'),
        (f"{at}[4].optionalOldSelf", "Invalid value: true: may not be set if oldSelf is not used in rule"),
        (f"{at}[6].rule", "Required value: rule is not specified"),
        (f"{at}[7].message", "Required value: message must be specified if rule contains line breaks"),
    ]


def _crd_with(ports: dict[str, Any]) -> dict[str, Any]:
    schema = {"type": "object", "properties": {"spec": {"type": "object", "properties": {"ports": ports}}}}
    crd = {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "foos.ex.com"},
        "spec": {
            "group": "ex.com",
            "scope": "Namespaced",
            "names": {"plural": "foos", "kind": "Foo"},
            "versions": [{"name": "v1", "served": True, "storage": True, "schema": {"openAPIV3Schema": schema}}],
        },
    }
    default_crd(crd)
    return crd


def test_a_crd_stored_with_map_list_errors_keeps_them_on_update_as_kube_ratchets_them() -> None:
    """kube's requireMapListKeysMapSetValidation: checked on create, and on an update of a CRD
    stored without such errors; not on an update of one stored with them."""
    keyless = {
        "type": "array",
        "x-kubernetes-list-type": "map",
        "x-kubernetes-list-map-keys": ["name"],
        "items": {"type": "object", "properties": {"name": {"type": "string"}}},
    }
    stored = _crd_with(keyless)
    missing_default = "this property is in x-kubernetes-list-map-keys, so it must have a default or be a required property"
    assert [e.message for e in validate_crd(stored)] == [f"Required value: {missing_default}"]
    labelled = copy.deepcopy(stored)
    labelled["metadata"]["labels"] = {"team": "a"}
    assert validate_crd(labelled, old=stored) == []
    valid = _crd_with({**keyless, "items": {**keyless["items"], "required": ["name"]}})
    assert [e.message for e in validate_crd(stored, old=valid)] == [f"Required value: {missing_default}"]
