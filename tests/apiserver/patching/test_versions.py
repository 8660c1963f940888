"""Field ownership across versions, as a pure function: a write is compared in an entry's
version only when the entry is in another version than the request's, so the common write,
whose entries all share its version, converts nothing."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest

from controlplane.apiserver.patching import ApplyConflict
from controlplane.apiserver.patching.apply import server_side_apply
from controlplane.apiserver.patching.schema import FieldSchema

from .builders import kind_schema, make_object

T1, T2 = "2024-05-01T10:00:00Z", "2024-05-01T11:00:00Z"


class RenamingConverter:
    """``spec.size`` at apps/v1 is ``spec.count`` at apps/v2 (a renamed field), and counts calls."""

    def __init__(self, schema: FieldSchema) -> None:
        self.schema = schema
        self.calls: list[str] = []

    def __call__(self, obj: Mapping[str, Any], api_version: str) -> tuple[dict[str, Any], FieldSchema] | None:
        self.calls.append(api_version)
        renames = {"apps/v1": ("count", "size"), "apps/v2": ("size", "count")}.get(api_version)
        if renames is None:
            return None
        source, target = renames
        spec = {target if key == source else key: value for key, value in dict(obj.get("spec") or {}).items()}
        return {**obj, "apiVersion": api_version, "spec": spec}, self.schema


def deployment(version: str, **spec: Any) -> dict[str, Any]:
    return {**make_object("Deployment", "web", spec=spec), "apiVersion": version}


def test_entries_of_the_request_version_convert_nothing() -> None:
    schema = kind_schema(make_object("Deployment"))
    converter = RenamingConverter(schema)
    live = server_side_apply(None, deployment("apps/v1", size=1), schema=schema, manager="a", force=False, now=T1)
    applied = server_side_apply(
        live, deployment("apps/v1", size=1, paused=True), schema=schema, manager="b", force=False, now=T2,
        converter=converter,
    )
    assert applied["spec"] == {"size": 1, "paused": True}
    assert converter.calls == []


def test_an_entry_of_another_version_is_compared_in_its_own() -> None:
    schema = kind_schema(make_object("Deployment"))
    converter = RenamingConverter(schema)
    at_v2 = server_side_apply(None, deployment("apps/v2", count=1), schema=schema, manager="a", force=False, now=T1)
    live = {**at_v2, "apiVersion": "apps/v1", "spec": {"size": 1}}  # the same object read at v1
    with pytest.raises(ApplyConflict) as conflict:
        server_side_apply(live, deployment("apps/v1", size=2), schema=schema, manager="b", force=False, now=T2, converter=converter)
    assert str(conflict.value) == 'Apply failed with 1 conflict: conflict with "a": .spec.count'
    assert set(converter.calls) == {"apps/v2"}
