"""The field types structured-merge-diff reads from a kind's OpenAPI, and its errors typing an
applied object by them, without a server: kube's definitions of built-in kinds, a CRD's schema."""

from __future__ import annotations

from typing import Any

import pytest

from controlplane.apiserver.openapi.applytypes import applied_type
from controlplane.apiserver.patching.smdtypes import Scalar, Shape, TypeCompiler
from controlplane.apiserver.patching.typedvalue import typing_errors
from controlplane.hub import hub_registry


def _errors(api_version: str, kind: str, obj: dict[str, Any]) -> list[str]:
    rt = hub_registry().require(api_version, kind)
    return typing_errors({"apiVersion": api_version, "kind": kind, **obj}, rt.apply_schema, applied_type(rt))


@pytest.mark.parametrize(("obj", "errors"), [
    ({"data": {"port": 80}}, [".data.port: expected string, got &value.valueUnstructured{Value:80}"]),
    ({"data": {"a": {"b": None, "c": [1.5, "x"]}}},
     ['.data.a: expected string, got &value.valueUnstructured{Value:map[string]interface {}{"b":interface {}(nil), '
      '"c":[]interface {}{1.5, "x"}}}']),
    ({"data": {"a": None}, "immutable": None}, []),  # null is any type
    ({"immutable": "no"}, [".immutable: expected boolean, got &{no}"]),
    # A time is untyped: any scalar (its decoding refuses what is not one).
    ({"metadata": {"name": "c", "creationTimestamp": 5}}, []),
    # SMD stops walking an object at its first undeclared field (the hub walks by name), not others.
    ({"metadata": {"name": 1, "zz": 1, "aa": 1}, "zbogus": 1, "zzz": 1},
     [".metadata.aa: field not declared in schema", ".zbogus: field not declared in schema"]),
])
def test_a_config_map_is_typed_by_kubes_definitions(obj: dict[str, Any], errors: list[str]) -> None:
    assert _errors("v1", "ConfigMap", obj) == errors


def test_a_crd_schema_is_typed_with_kubes_added_fields_and_its_own_recursion() -> None:
    """A CRD's own kind (JSONSchemaProps refers to itself) compiles; a custom resource's root and
    an embedded resource declare apiVersion, kind and ObjectMeta's metadata."""
    assert _errors("apiextensions.k8s.io/v1", "CustomResourceDefinition", {
        "metadata": {"name": "a.b"},
        "spec": {"versions": [{"name": "v1", "schema": {"openAPIV3Schema": {
            "properties": {"x": {"properties": {"y": {"type": 5}}}}}}}]},
    }) == ['.spec.versions[0].schema.openAPIV3Schema.properties.x.properties.y.type: expected string, got '
           "&value.valueUnstructured{Value:5}"]
    compiler = TypeCompiler({})
    root = compiler.custom_resource({"type": "object", "properties": {"spec": {"type": "object", "properties": {
        "inner": {"type": "object", "x-kubernetes-embedded-resource": True, "properties": {"spec": {"type": "object"}}},
    }}}})
    inner = root.fields["spec"].fields["inner"]
    assert sorted(root.fields) == sorted(inner.fields) == ["apiVersion", "kind", "metadata", "spec"]
    assert inner.fields["kind"].scalar is Scalar.STRING and inner.element is None
    assert compiler.custom_resource({"type": "object"}).shape is Shape.MAP  # anything, but typed metadata


def test_an_int_or_string_takes_anything_as_kubes_openapi_v3_types_it() -> None:
    """kube types applied objects by its OpenAPI v3, where an IntOrString has no type (a oneOf): SMD
    reads that as anything, and leaves a list there to the kind's decoding. A CRD's
    ``x-kubernetes-int-or-string`` has no type either."""
    strategy = {"rollingUpdate": {"maxSurge": [1], "maxUnavailable": {"a": 1}}}
    assert _errors("apps/v1", "Deployment", {"metadata": {"name": "d"}, "spec": {"strategy": strategy}}) == []
    port = TypeCompiler({}).custom_resource({"type": "object", "properties": {"port": {"x-kubernetes-int-or-string": True}}})
    assert port.fields["port"].shape is Shape.DEDUCED


def test_a_raw_extension_takes_anything_as_kubes_conversion_hardcodes_it() -> None:
    revision = {"metadata": {"name": "r"}, "revision": 1}
    for data in ("x", {"spec": {"any": [1]}}, [1]):
        assert _errors("apps/v1", "ControllerRevision", {**revision, "data": data}) == []
    assert _errors("apps/v1", "ControllerRevision", {**revision, "revision": "one"}) == [
        ".revision: expected numeric (int or float), got string"
    ]
