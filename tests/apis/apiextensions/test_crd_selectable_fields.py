"""kube's validation of a CRD's ``selectableFields`` (apiextensions ``ValidateCustomResourceSelectableFields``):
messages and field paths, at the top level when every version has the same schema and fields,
else per version."""

from __future__ import annotations

from typing import Any

import pytest

from controlplane.apis.apiextensions.crd import validate_crd

SCHEMA: dict[str, Any] = {"type": "object", "properties": {
    "metadata": {"type": "object"},
    "spec": {"type": "object", "properties": {
        "color": {"type": "string", "enum": ["red", "blue"]}, "size": {"type": "integer"}, "on": {"type": "boolean"},
        "at": {"type": "string", "format": "date-time"}, "ratio": {"type": "number"},
        "tags": {"type": "array", "items": {"type": "string"}},
        "labels": {"type": "object", "additionalProperties": {"type": "string"}},
        "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
    }},
}}
TYPE = "must point to a field of type string, boolean or integer. Enum string fields and strings with formats are allowed."


def _version(name: str, fields: list[Any], *, storage: bool = True, schema: dict[str, Any] | None = SCHEMA) -> dict[str, Any]:
    version: dict[str, Any] = {"name": name, "served": True, "storage": storage, "selectableFields": fields}
    if schema is not None:
        version["schema"] = {"openAPIV3Schema": schema}
    return version


def _errors(*versions: dict[str, Any]) -> list[tuple[str, str, str]]:
    crd = {"metadata": {"name": "widgets.example.com"}, "spec": {
        "group": "example.com", "scope": "Namespaced", "versions": list(versions),
        "names": {"plural": "widgets", "kind": "Widget", "listKind": "WidgetList"},
    }}
    return [(e.type.value, e.field, e.message) for e in validate_crd(crd) if "selectableFields" in e.field]


@pytest.mark.parametrize("path", [".spec.color", ".spec.size", ".spec.on", ".spec.at", ".spec.labels.team", ".spec.labels"])
def test_a_simple_path_to_a_string_boolean_or_integer_field_is_valid(path: str) -> None:
    expected = [] if path != ".spec.labels" else [
        ("FieldValueInvalid", "spec.selectableFields[0].jsonPath", f'Invalid value: "{path}": {TYPE}')
    ]
    assert _errors(_version("v1", [{"jsonPath": path}])) == expected


@pytest.mark.parametrize(
    ("selectable", "expected"),
    [
        ({}, [("FieldValueRequired", "Required value")]),
        ({"jsonPath": ""}, [("FieldValueRequired", "Required value")]),
        ({"jsonPath": ".spec.nope"}, [("FieldValueInvalid", 'Invalid value: ".spec.nope": is an invalid path: does not refer to a valid field')]),
        ({"jsonPath": "spec.color"}, [("FieldValueInvalid", 'Invalid value: "spec.color": is an invalid path: expected [ or . but got: spec')]),
        ({"jsonPath": ".spec."}, [("FieldValueInvalid", 'Invalid value: ".spec.": is an invalid path: unexpected end of JSON path')]),
        ({"jsonPath": ".spec.tags[0]"}, [("FieldValueInvalid", 'Invalid value: ".spec.tags[0]": is an invalid path: array notation is not allowed')]),
        ({"jsonPath": ".spec.color.x"}, [("FieldValueInvalid", 'Invalid value: ".spec.color.x": is an invalid path: does not refer to a valid field')]),
        ({"jsonPath": ".spec.ratio"}, [("FieldValueInvalid", f'Invalid value: ".spec.ratio": {TYPE}')]),
        ({"jsonPath": ".spec.tags"}, [("FieldValueInvalid", f'Invalid value: ".spec.tags": {TYPE}')]),
        ({"jsonPath": ".spec.free"}, [("FieldValueInvalid", f'Invalid value: ".spec.free": {TYPE}')]),
        ({"jsonPath": ".metadata"}, [
            ("FieldValueInvalid", 'Invalid value: ".metadata": must not point to fields in metadata'),
            ("FieldValueInvalid", f'Invalid value: ".metadata": {TYPE}'),
        ]),
    ],
)
def test_an_invalid_selectable_field_gets_kubes_error(selectable: dict[str, Any], expected: list[tuple[str, str]]) -> None:
    found = _errors(_version("v1", [selectable]))
    assert found == [(kind, "spec.selectableFields[0].jsonPath", message) for kind, message in expected]


def test_duplicates_and_more_than_eight() -> None:
    fields = [{"jsonPath": ".spec.color"}, {"jsonPath": ".spec.color"}]
    assert _errors(_version("v1", fields)) == [
        ("FieldValueDuplicate", "spec.selectableFields[1].jsonPath", 'Duplicate value: ".spec.color"')
    ]
    eight = [{"jsonPath": f".spec.labels.k{index}"} for index in range(8)]
    assert _errors(_version("v1", eight)) == []
    assert _errors(_version("v1", [*eight, {"jsonPath": ".spec.size"}])) == [
        ("FieldValueTooMany", "spec.selectableFields", "Too many: 9: must have at most 8 items")
    ]


def test_versions_that_differ_are_checked_each_at_its_own_path() -> None:
    found = _errors(
        _version("v1", [{"jsonPath": ".spec.color"}]),
        _version("v2", [{"jsonPath": ".spec.nope"}], storage=False),
        _version("v3", [{"jsonPath": ".spec.size"}], storage=False, schema=None),
    )
    assert found == [
        ("FieldValueInvalid", "spec.versions[1].selectableFields[0].jsonPath",
         'Invalid value: ".spec.nope": is an invalid path: does not refer to a valid field'),
        ("FieldValueInvalid", "spec.versions[2].selectableFields",
         'Invalid value: "": selectableFields may only be set when version.schema.openAPIV3Schema is not included'),
    ]
    # The same schema and fields in every version: checked once, at the top level.
    same = [{"jsonPath": ".spec.nope"}]
    assert _errors(_version("v1", same), _version("v2", same, storage=False)) == [
        ("FieldValueInvalid", "spec.selectableFields[0].jsonPath",
         'Invalid value: ".spec.nope": is an invalid path: does not refer to a valid field'),
    ]
