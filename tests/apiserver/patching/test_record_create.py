"""record_update on a create takes a one-walk shortcut; it must record what the general path does.

The general path (``_compare`` of the object against an empty one, path sets,
``encode_fields``) runs when the old object is an empty mapping instead of ``None``, so
every case here is recorded both ways and the results compared whole.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from controlplane.apiserver.patching.zerovalues import UNSTRUCTURED

from .builders import kind_zero, make_object, record_update

T1 = "2024-05-01T10:00:00Z"

CONTAINERS = [
    {"name": "b", "image": "b:1", "ports": [{"containerPort": 80}, {"containerPort": 53, "protocol": "UDP"}]},
    {"name": "a", "image": "a:1", "env": [{"name": "X", "value": "1"}], "args": ["--x", "--y"]},
]

CASES: list[tuple[str, dict[str, Any]]] = [
    ("config map with labels and data", make_object(
        "ConfigMap", "c", metadata={"labels": {"b": "2", "a": "1"}, "annotations": {"n": "v"}},
        data={"z": "1", "a": "2"},
    )),
    ("empty maps and null values", make_object(
        "ConfigMap", "c", metadata={"labels": {}}, data={}, binaryData=None,
    )),
    ("server-owned metadata is never owned", make_object(
        "ConfigMap", "c",
        metadata={"uid": "u", "generation": 1, "creationTimestamp": T1, "resourceVersion": "5",
                  "finalizers": ["x/y"], "ownerReferences": [{"uid": "o", "name": "p", "kind": "K"}]},
    )),
    ("deployment with keyed lists, sets and atomic lists", make_object(
        "Deployment", "web",
        spec={
            "replicas": 2,
            "selector": {"matchLabels": {"app": "web"}},
            "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1}},
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {"containers": CONTAINERS, "tolerations": [{"key": "k", "operator": "Exists"}]},
            },
        },
    )),
    ("status is not owned through the main resource", make_object(
        "Deployment", "web", spec={"replicas": 1}, status={"replicas": 1, "conditions": [{"type": "Ready"}]},
    )),
    ("list items without their key are skipped", make_object(
        "Deployment", "web", spec={"template": {"spec": {"containers": [{"image": "nameless"}]}}},
    )),
    ("a list repeating a key", make_object(
        "Deployment", "web",
        spec={"template": {"spec": {"containers": [{"name": "a", "image": "1"}, {"name": "a", "args": ["x"]}]}}},
    )),
    ("unknown kind", {
        "apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"},
        "spec": {"items": [1, 2], "nested": {"deep": {"x": True}}, "empty": {}},
    }),
    ("only system fields", make_object("Namespace", "n")),
    ("a reset of managedFields in the request", make_object("ConfigMap", "c", metadata={"managedFields": []}, data={"a": "1"})),
]


@pytest.mark.parametrize("unstructured", [False, True], ids=["its-kind", "unstructured"])
@pytest.mark.parametrize(("case", "obj"), CASES, ids=[case for case, _ in CASES])
def test_create_records_what_the_general_path_records(case: str, obj: dict[str, Any], unstructured: bool) -> None:
    sent = copy.deepcopy(obj)
    zero = UNSTRUCTURED if unstructured else kind_zero(obj)

    shortcut = record_update(None, obj, manager="kubectl-create", operation="Update", now=T1, zero=zero)
    general = record_update({}, obj, manager="kubectl-create", operation="Update", now=T1, zero=zero)

    assert shortcut == general, case
    assert obj == sent, "the object given must not change"


def test_create_result_orders_fields_as_kubernetes() -> None:
    obj = make_object("ConfigMap", "c", metadata={"labels": {"b": "2", "a": "1"}}, data={"z": "1", "a": "2"})

    created = record_update(None, obj, manager="m", operation="Update", now=T1)

    fields = created["metadata"]["managedFields"][0]["fieldsV1"]
    assert list(fields) == ["f:data", "f:metadata"]
    assert list(fields["f:data"]) == [".", "f:a", "f:z"]
    assert list(fields["f:metadata"]["f:labels"]) == [".", "f:a", "f:b"]


def test_create_with_managed_fields_in_the_request_keeps_them() -> None:
    imported = [{
        "manager": "importer", "operation": "Update", "apiVersion": "v1", "time": T1,
        "fieldsType": "FieldsV1", "fieldsV1": {"f:data": {"f:a": {}}},
    }]
    obj = make_object("ConfigMap", "c", metadata={"managedFields": imported}, data={"a": "1", "b": "2"})

    created = record_update(None, obj, manager="creator", operation="Update", now=T1)

    managers = [entry["manager"] for entry in created["metadata"]["managedFields"]]
    assert managers == ["creator"], "every field set by the create moves to its manager"
    assert created == record_update({}, obj, manager="creator", operation="Update", now=T1)
