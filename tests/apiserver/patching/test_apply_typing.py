"""An applied configuration that structured-merge-diff cannot type is refused in its words.

kube's field manager types the applied object before merging it (``typed.AsTyped``); every
case below is an error of SMD's ``validate.go``/``helpers.go``, word for word: the path of the
list or field, then SMD's message; several errors under ``errors:``.
"""

from __future__ import annotations

from typing import Any

import pytest

from controlplane.apiserver.patching.apply import UntypedApply
from controlplane.apiserver.patching.structural import structural_apply_schema

from . import builders
from .builders import make_object

T1 = "2026-01-01T00:00:00Z"

_CONTAINERS = ".spec.template.spec.containers"


def _deployment(containers: Any, **pod: Any) -> dict[str, Any]:
    return make_object("Deployment", "web", spec={
        "selector": {"matchLabels": {"app": "web"}},
        "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": containers, **pod}},
    })


def _refusal(config: dict[str, Any], live: dict[str, Any] | None = None) -> str:
    with pytest.raises(UntypedApply) as caught:
        builders.server_side_apply(live, config, manager="kubectl", force=False, now=T1)
    return str(caught.value)


BUILT_IN = [
    ("duplicate keys", _deployment([{"name": "a", "image": "a:1"}, {"name": "a", "image": "a:2"}]),
     f'{_CONTAINERS}: duplicate entries for key [name="a"]'),
    ("duplicate keys of two fields", _deployment([{"name": "a", "ports": [
        {"containerPort": 80}, {"containerPort": 80, "protocol": "TCP"}]}]),
     f'{_CONTAINERS}[name="a"].ports: duplicate entries for key [containerPort=80,protocol="TCP"]'),
    ("an item that is not an object", _deployment(["a"]),
     f"{_CONTAINERS}: element 0: associative list with keys may not have non-map elements"),
    ("a null item", _deployment([{"name": "a"}, None]),
     f"{_CONTAINERS}: element 1: associative list with keys may not have a null element"),
    ("a scalar where a list is expected", _deployment(5),
     f"{_CONTAINERS}: expected list, got &{{5}}"),
    ("an object where a list is expected", _deployment({"name": "a"}),
     f"{_CONTAINERS}: expected list, got &{{map[name:a]}}"),
    ("a scalar where an object is expected", make_object("Deployment", "web", spec={"template": "x"}),
     ".spec.template: expected map, got &{x}"),
    ("a scalar where a map is expected", make_object("ConfigMap", "c", metadata={"labels": ["a", 1.5, True, None]}),
     ".metadata.labels: expected map, got &{[a 1.5 true <nil>]}"),
    ("an object in a set", make_object("ConfigMap", "c", metadata={"finalizers": [{"name": "x"}]}),
     ".metadata.finalizers: element 0: associative list without keys has an element that's a map type"),
    ("a list in a set", make_object("ConfigMap", "c", metadata={"finalizers": [["x"]]}),
     ".metadata.finalizers: element 0: not supported: associative list with lists as elements"),
    ("a null in a set", make_object("ConfigMap", "c", metadata={"finalizers": ["x", None]}),
     ".metadata.finalizers: element 1: associative list without keys has an element that's an explicit null"),
    ("a duplicate in a set", make_object("ConfigMap", "c", metadata={"finalizers": ["x", "y", "x"]}),
     '.metadata.finalizers: duplicate entries for key [="x"]'),
    ("the first keyless item ends the list's checks",
     _deployment([{"name": "a"}, {"name": "a"}, {"image": "i"}, {"name": "b"}, {"name": "b"}]),
     f'errors:\n  {_CONTAINERS}: duplicate entries for key [name="a"]\n'
     f"  {_CONTAINERS}: element 2: associative list with keys has an element that omits key field \"name\" "
     "(and doesn't have default value)"),
    ("errors in two places, and in the status", {**_deployment(7, initContainers=[{"name": "i"}, {"name": "i"}]),
                                                 "status": {"conditions": "x"}},
     f"errors:\n  {_CONTAINERS}: expected list, got &{{7}}\n"
     '  .spec.template.spec.initContainers: duplicate entries for key [name="i"]\n'
     "  .status.conditions: expected list, got &{x}"),
]


@pytest.mark.parametrize(("config", "message"), [c[1:] for c in BUILT_IN], ids=[c[0] for c in BUILT_IN])
def test_an_untyped_configuration_is_refused_in_smds_words(config: dict[str, Any], message: str) -> None:
    assert _refusal(config) == message


def test_a_key_field_given_as_null_is_a_null_key() -> None:
    """SMD reads a key field that is present as the key, ``null`` included (only an absent one
    takes its default or is refused): the item is applied (its null field is not kept), and owned
    by that key."""
    applied = _deployment([{"name": "a", "image": "a:1", "ports": [{"containerPort": 80, "protocol": None}]}])
    result = builders.server_side_apply(None, applied, manager="kubectl", force=False, now=T1)

    [entry] = result["metadata"]["managedFields"]
    ports = entry["fieldsV1"]["f:spec"]["f:template"]["f:spec"]["f:containers"]['k:{"name":"a"}']["f:ports"]
    assert list(ports) == ['k:{"containerPort":80,"protocol":null}']
    assert result["spec"]["template"]["spec"]["containers"][0]["ports"] == [{"containerPort": 80}]


def test_a_null_key_and_a_defaulted_one_are_two_items() -> None:
    applied = _deployment([{"name": "a", "ports": [{"containerPort": 80}, {"containerPort": 80, "protocol": None}]}])
    result = builders.server_side_apply(None, applied, manager="kubectl", force=False, now=T1)
    assert len(result["spec"]["template"]["spec"]["containers"][0]["ports"]) == 2
    [entry] = result["metadata"]["managedFields"]
    ports = entry["fieldsV1"]["f:spec"]["f:template"]["f:spec"]["f:containers"]['k:{"name":"a"}']["f:ports"]
    assert sorted(ports) == ['k:{"containerPort":80,"protocol":"TCP"}', 'k:{"containerPort":80,"protocol":null}']


_CRD_SCHEMA = {
    "type": "object",
    "properties": {
        "spec": {
            "type": "object",
            "properties": {
                "gpus": {"type": "array", "x-kubernetes-list-type": "set", "items": {"type": "integer"}},
                "pools": {
                    "type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name", "zone"],
                    "items": {"type": "object", "properties": {
                        "name": {"type": "string"}, "zone": {"type": "string", "default": "a"},
                        "size": {"type": "object", "properties": {"count": {"type": "integer"}}},
                    }},
                },
                "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
            },
        },
    },
}


def _custom(**spec: Any) -> dict[str, Any]:
    return {"apiVersion": "example.com/v1", "kind": "Fleet", "metadata": {"name": "f"}, "spec": spec}


CUSTOM = [
    ("a set with duplicate values", _custom(gpus=[1, 2, 1]), ".spec.gpus: duplicate entries for key [=1]"),
    ("a set that is a scalar", _custom(gpus=100000000), ".spec.gpus: expected list, got &{1e+08}"),
    ("duplicate keys, a default filling one", _custom(pools=[{"name": "p"}, {"name": "p", "zone": "a"}]),
     '.spec.pools: duplicate entries for key [name="p",zone="a"]'),
    ("a scalar where an object is expected, below a keyed item", _custom(pools=[{"name": "p", "size": 3}]),
     '.spec.pools[name="p",zone="a"].size: expected map, got &{3}'),
    ("a scalar where the spec is expected", {**_custom(), "spec": "x"}, ".spec: expected map, got &{x}"),
]


@pytest.mark.parametrize(("config", "message"), [c[1:] for c in CUSTOM], ids=[c[0] for c in CUSTOM])
def test_a_custom_resource_is_typed_by_its_crd_schema(config: dict[str, Any], message: str) -> None:
    with pytest.raises(UntypedApply) as caught:
        builders.patching.server_side_apply(
            None, config, schema=structural_apply_schema(_CRD_SCHEMA), manager="m", force=False, now=T1
        )
    assert str(caught.value) == message


def test_what_no_schema_describes_is_not_typed() -> None:
    """Below ``x-kubernetes-preserve-unknown-fields`` kube deduces the type from the value."""
    config = _custom(free={"a": [{"x": 1}, {"x": 1}], "b": 5}, pools=None)
    result = builders.patching.server_side_apply(
        None, config, schema=structural_apply_schema(_CRD_SCHEMA), manager="m", force=False, now=T1
    )
    assert result["spec"]["free"] == {"a": [{"x": 1}, {"x": 1}], "b": 5}
