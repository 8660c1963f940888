"""A CRD's kind as the server serves it: names, scope, subresources, printer columns (kube's
JSONPath cells) and the scale subresource's label selector string."""

from __future__ import annotations

import copy
from datetime import UTC, datetime
from typing import Any

import pytest

from controlplane.apiserver.crd.scaling import custom_scale
from controlplane.apiserver.crd.types import (
    crd_resource_type,
    custom_types,
    json_path_getter,
    version_priority,
)
from controlplane.apiserver.objects.scale import scale_of

CRD: dict[str, Any] = {
    "metadata": {"name": "trainers.ml.example.com"},
    "spec": {
        "group": "ml.example.com",
        "scope": "Cluster",
        "names": {"plural": "trainers", "singular": "trainer", "kind": "Trainer", "shortNames": ["tr"], "categories": ["ml"]},
        "versions": [
            {"name": "v1beta1", "served": True, "storage": False, "schema": {"openAPIV3Schema": {"type": "object"}}},
            {
                "name": "v1", "served": True, "storage": True,
                "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}},
                "subresources": {"status": {}, "scale": {
                    "specReplicasPath": ".spec.workers", "statusReplicasPath": ".status.workers",
                    "labelSelectorPath": ".status.selector",
                }},
                "additionalPrinterColumns": [
                    {"name": "Ready", "type": "string", "jsonPath": '.status.conditions[?(@.type=="Ready")].status'},
                    {"name": "First", "type": "string", "jsonPath": ".spec.items[0]"},
                    {"name": "Zone", "type": "string", "jsonPath": ".metadata.labels['topology.kubernetes.io/zone']", "priority": 1},
                    {"name": "Started", "type": "date", "jsonPath": ".status.startTime"},
                ],
            },
        ],
    },
}
OBJ: dict[str, Any] = {
    "metadata": {"name": "a", "labels": {"topology.kubernetes.io/zone": "eu-1"}},
    "spec": {"workers": 3, "items": ["x", "y"]},
    "status": {"workers": 2, "selector": "app=a", "startTime": "2026-01-01T00:00:00Z",
               "conditions": [{"type": "Progressing", "status": "False"}, {"type": "Ready", "status": "True"}]},
}


def test_every_served_version_is_served_most_preferred_first() -> None:
    rt, beta = custom_types(CRD)
    assert (rt.version, beta.version) == ("v1", "v1beta1")
    # conversion None: the other version reads and writes the same objects, stored as v1.
    assert rt.custom is not None and beta.custom is not None
    assert (rt.custom.stored_api_version, beta.custom.stored_api_version) == ("", "ml.example.com/v1")
    assert beta.key(namespace=None, name="a") == rt.key(namespace=None, name="a")
    assert (beta.api_version, beta.storage_api_version) == ("ml.example.com/v1beta1", "ml.example.com/v1")
    assert rt.storage_api_version == rt.api_version == "ml.example.com/v1"
    # Each version has its own schema's hooks and columns.
    assert beta.columns != rt.columns and beta.custom.schema == {"type": "object"}


def test_the_storage_version_is_served_with_the_crds_names_and_subresources() -> None:
    rt, _ = custom_types(CRD)
    assert (rt.group, rt.version, rt.kind, rt.plural, rt.singular) == ("ml.example.com", "v1", "Trainer", "trainers", "trainer")
    assert not rt.namespaced and rt.has_status
    assert rt.short_names == ("tr",) and rt.categories == ("ml",)
    assert rt.key(namespace=None, name="a") == "/registry/ml.example.com/trainers/a"
    scale = scale_of(rt, OBJ)
    assert (scale["spec"], scale["status"]) == ({"replicas": 3}, {"replicas": 2, "selector": "app=a"})


def test_a_scale_without_label_selector_path_has_no_selector() -> None:
    """kube's scaleFromCustomResource reads a selector only through a declared
    ``labelSelectorPath``: without one the Scale has none, whatever ``.status.selector`` holds."""
    crd = copy.deepcopy(CRD)
    del crd["spec"]["versions"][1]["subresources"]["scale"]["labelSelectorPath"]
    rt, _ = custom_types(crd)
    assert rt.scale is not None and rt.scale.label_selector == ""
    scale = scale_of(rt, OBJ)
    assert scale["status"] == {"replicas": 2}
    assert custom_scale(rt, OBJ)[0]["status"] == {"replicas": 2}


def test_printer_columns_read_kubes_jsonpath() -> None:
    rt, _ = custom_types(CRD)
    now = datetime(2026, 1, 1, 0, 5, tzinfo=UTC)
    cells = [column.getter(OBJ, now) for column in rt.columns]
    assert cells == ["True", "x", "eu-1", "5m"]
    assert [c.priority for c in rt.columns] == [0, 0, 1, 0]
    # kube's description of a column the CRD gives none.
    assert rt.columns[1].description == "Custom resource definition column (in JSONPath format): .spec.items[0]"
    # Nothing found is an empty cell, a date too (kube's table convertor).
    assert [column.getter({"metadata": {}}, now) for column in rt.columns] == [None, None, None, None]


def test_kube_version_priority() -> None:
    names = ["v1beta1", "foo", "v2alpha1", "v1", "v2", "v1alpha1", "v11beta2", "v1beta2"]
    assert sorted(names, key=version_priority) == ["v2", "v1", "v11beta2", "v1beta2", "v1beta1", "v2alpha1", "v1alpha1", "foo"]


@pytest.mark.parametrize(
    ("expression", "expected"),
    [(".spec.workers", 3), ("{.spec.items[1]}", "y"), (".status.conditions[?(@.type=='Progressing')].status", "False"),
     (".spec.missing.deeper", None), (".spec.items[5]", None)],
)
def test_json_paths(expression: str, expected: Any) -> None:
    assert json_path_getter(expression)(OBJ) == expected


def test_the_crd_kind_adds_the_cleanup_finalizer() -> None:
    rt = crd_resource_type()
    assert (rt.api_version, rt.plural, rt.short_names) == ("apiextensions.k8s.io/v1", "customresourcedefinitions", ("crd", "crds"))
    obj: dict[str, Any] = {"metadata": {"name": "x"}}
    assert rt.prepare is not None
    rt.prepare(obj)
    rt.prepare(obj)
    assert obj["metadata"]["finalizers"] == ["customresourcecleanup.apiextensions.k8s.io"]
