"""Object builders shared by the patching tests."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from controlplane.apiserver import patching
from controlplane.apiserver.patching.schema import FieldSchema, builtin_apply_schema
from controlplane.apiserver.patching.zerovalues import UNSTRUCTURED, zero_value

API_VERSIONS = {
    "Deployment": "apps/v1",
    "StatefulSet": "apps/v1",
    "Job": "batch/v1",
    "Lease": "coordination.k8s.io/v1",
}


def make_object(kind: str, name: str = "obj", **body: Any) -> dict[str, Any]:
    """A ``kind`` object named ``name`` in namespace ``default`` with ``body`` as top-level fields."""
    metadata = {"name": name, "namespace": "default", **body.pop("metadata", {})}
    return {"apiVersion": API_VERSIONS.get(kind, "v1"), "kind": kind, "metadata": metadata, **body}


def kind_schema(obj: Mapping[str, Any]) -> FieldSchema:
    """The apply schema the server passes for ``obj``'s built-in kind (by its apiVersion's group)."""
    group = str(obj.get("apiVersion") or "").rpartition("/")[0]
    return builtin_apply_schema(group, str(obj.get("kind") or ""))


def kind_zero(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    """The zero value the server passes for ``obj``'s kind: a built-in kind's, or a custom
    resource's (a group of a dotted name outside ``*.k8s.io``)."""
    group = str(obj.get("apiVersion") or "").rpartition("/")[0]
    if "." in group and not group.endswith(".k8s.io"):
        return UNSTRUCTURED
    return zero_value(group, str(obj.get("kind") or ""))


def record_update(old: dict[str, Any] | None, new: dict[str, Any], **options: Any) -> dict[str, Any]:
    """:func:`patching.record_update` with the schema and zero value of ``new``'s kind."""
    options.setdefault("zero", kind_zero(new))
    return patching.record_update(old, new, schema=kind_schema(new), **options)


def server_side_apply(live: dict[str, Any] | None, applied: dict[str, Any], **options: Any) -> dict[str, Any]:
    """:func:`patching.server_side_apply` with the schema of the applied (or live) object's kind."""
    kind_of = applied if applied.get("kind") else (live or {})
    return patching.server_side_apply(live, applied, schema=kind_schema(kind_of), **options)
