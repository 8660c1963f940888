"""A CRD's ``additionalPrinterColumns`` cell by cell as kube's table convertor makes them: nothing
found is an empty cell whatever the type, a ``string`` column prints what it finds as kube's
JSONPath printer does (a map or list as Go's JSON, another value with Go's ``%v``), the other types
keep a value of their JSON type only, and a ``date`` is an age (``<unknown>``, ``<invalid>``)."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml

from controlplane.apis.apiextensions.crd import validate_crd
from controlplane.apiserver.crd.registry import DynamicRegistry
from controlplane.apiserver.crd.types import crd_resource_type, custom_types, printer_column
from controlplane.apiserver.kinds.core import core_resources
from controlplane.apiserver.resources import Registry

from .test_crd_apply import until
from .test_real_clients import kubeconfig, kubectl, needs_kubectl, server_url  # noqa: F401 (fixtures)

NOW = datetime(2026, 1, 1, 0, 5, tzinfo=UTC)


def cell(kind: str, json_path: str, obj: dict[str, Any]) -> Any:
    return printer_column({"name": "C", "type": kind, "jsonPath": json_path}).getter(obj, NOW)


@pytest.mark.parametrize(("value", "printed"), [
    ("text", "text"),
    ("", ""),
    (3, "3"),
    (1.5, "1.5"),
    (2.0, "2"),
    (1e6, "1e+06"),
    (0.00001, "1e-05"),
    (True, "true"),
    (None, "<no value>"),
    (["x", "y"], '["x","y"]'),
    ({"b": 1, "a": [1.0, 0.5, 1e-7, 1e21]}, '{"a":[1,0.5,1e-7,1e+21],"b":1}'),
    ({"html": "<a&b>"}, '{"html":"\\u003ca\\u0026b\\u003e"}'),
    ([], "[]"),
    ({}, "{}"),
])
def test_a_string_column_prints_what_it_finds_as_kubes_jsonpath_printer(value: Any, printed: str) -> None:
    assert cell("string", ".spec.v", {"spec": {"v": value}}) == printed


@pytest.mark.parametrize("kind", ["string", "integer", "number", "boolean", "date"])
@pytest.mark.parametrize("obj", [{}, {"spec": None}, {"spec": {"items": []}}, {"spec": {"other": 1}}])
def test_nothing_found_is_an_empty_cell_whatever_the_type(kind: str, obj: dict[str, Any]) -> None:
    assert cell(kind, ".spec.v", obj) is None
    assert cell(kind, ".spec.items[0]", obj) is None


@pytest.mark.parametrize(("kind", "value", "expected"), [
    ("integer", 3, 3),
    ("integer", 3.9, 3),
    ("integer", -3.9, -3),
    ("integer", "3", None),
    ("integer", True, None),
    ("integer", None, None),
    ("number", 3, 3),
    ("number", 1.5, 1.5),
    ("number", "1.5", None),
    ("number", False, None),
    ("boolean", True, True),
    ("boolean", "true", None),
    ("boolean", 1, None),
    ("date", "2026-01-01T00:00:00Z", "5m"),
    ("date", "2025-12-31T22:59:59.123456789-01:00", "5m"),
    ("date", "", "<unknown>"),
    ("date", "null", "<unknown>"),
    ("date", "0001-01-01T00:00:00Z", "<unknown>"),
    ("date", "2026-01-01T00:00:00", "<invalid>"),
    ("date", "2026-01-01", "<invalid>"),
    ("date", "yesterday", "<invalid>"),
    ("date", 1767225600, None),
    ("date", None, None),
])
def test_other_types_keep_a_value_of_their_json_type(kind: str, value: Any, expected: Any) -> None:
    assert cell(kind, ".spec.v", {"spec": {"v": value}}) == expected


CRD: dict[str, Any] = {
    "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
    "metadata": {"name": "jobsets.ml.example.com"},
    "spec": {
        "group": "ml.example.com", "scope": "Namespaced",
        "names": {"plural": "jobsets", "singular": "jobset", "kind": "JobSet"},
        "versions": [{
            "name": "v1", "served": True, "storage": True,
            "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}},
            "additionalPrinterColumns": [
                {"name": "Zones", "type": "string", "jsonPath": ".spec.zones"},
                {"name": "Limits", "type": "string", "jsonPath": ".spec.limits"},
                {"name": "Workers", "type": "string", "jsonPath": ".spec.workers"},
                {"name": "Ratio", "type": "number", "jsonPath": ".spec.ratio"},
                {"name": "Finished", "type": "date", "jsonPath": ".status.finishedAt"},
            ],
        }],
    },
}


def test_the_crds_columns_are_served_in_order() -> None:
    [rt] = custom_types(CRD)
    obj = {"spec": {"zones": ["a", "b"], "limits": {"gpu": 8}, "workers": 4, "ratio": 0.5}}
    assert [column.getter(obj, NOW) for column in rt.columns] == ['["a","b"]', '{"gpu":8}', "4", 0.5, None]


@pytest.fixture
def api_registry() -> Registry:
    return DynamicRegistry(core_resources(), [crd_resource_type()])


@needs_kubectl
async def test_kubectl_get_prints_kubes_cells(kubeconfig: Path) -> None:  # noqa: F811
    code, _, err = await kubectl(kubeconfig, "apply", "-f", "-", stdin=yaml.safe_dump(CRD))
    assert code == 0, err

    async def served() -> bool:
        return (await kubectl(kubeconfig, "get", "jobsets.ml.example.com"))[0] == 0

    await until(served)
    jobset = {"apiVersion": "ml.example.com/v1", "kind": "JobSet", "metadata": {"name": "train"},
              "spec": {"zones": ["eu-1", "eu-2"], "limits": {"gpu": 8, "mig": "3g.40gb"}, "workers": 4, "ratio": 0.5}}
    code, _, err = await kubectl(kubeconfig, "apply", "-f", "-", stdin=yaml.safe_dump(jobset))
    assert code == 0, err
    code, out, err = await kubectl(kubeconfig, "get", "jobset", "train")
    assert code == 0, err
    # The FINISHED cell kube leaves empty (no value), where the hub used to print <unknown>.
    assert [line.split() for line in out.splitlines()] == [
        ["NAME", "ZONES", "LIMITS", "WORKERS", "RATIO", "FINISHED"],
        ["train", '["eu-1","eu-2"]', '{"gpu":8,"mig":"3g.40gb"}', "4", "0.5"],
    ]


def test_columns_are_checked_as_kube_checks_them() -> None:
    """kube's ValidateCustomResourceColumnDefinition: a known type and format, and a path starting
    with a dot, each refused at kube's field path (``JSONPath``, as kube spells it)."""
    columns = [
        {"name": "A", "type": "strin", "jsonPath": ".spec.a", "priority": 1},
        {"name": "B", "type": "date", "format": "time", "jsonPath": "spec.b"},
        {"name": "", "jsonPath": ""},
        {"name": "D", "type": "integer", "format": "int32", "jsonPath": ".spec.d"},
    ]
    crd = {
        "metadata": {"name": "widgets.example.com"},
        "spec": {"group": "example.com", "scope": "Namespaced", "conversion": {"strategy": "None"}, "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "listKind": "WidgetList"},
                 "versions": [{"name": "v1", "served": True, "storage": True, "additionalPrinterColumns": columns,
                               "schema": {"openAPIV3Schema": {"type": "object"}}}]},
    }
    base = "spec.versions[0].additionalPrinterColumns"
    assert [(e.field, e.message) for e in validate_crd(crd)] == [
        (f"{base}[0].type", 'Invalid value: "strin": must be one of boolean,date,integer,number,string'),
        (f"{base}[1].format",
         'Invalid value: "time": must be one of byte,date,date-time,double,float,int32,int64,password'),
        (f"{base}[1].JSONPath", 'Invalid value: "spec.b": must be a simple json path starting with .'),
        (f"{base}[2].name", "Required value"),
        (f"{base}[2].type", "Required value: must be one of boolean,date,integer,number,string"),
        (f"{base}[2].JSONPath", "Required value"),
    ]
