"""An update through ``scale`` made in one version of a kind and recorded at another (a CRD version
its conversion webhook serves): :func:`moved_to_version` moves the writer's entry to that version's
replicas field, as kube's scale handler records it at the request's version."""

from __future__ import annotations

from typing import Any

import pytest

from controlplane.apiserver.patching.scalefields import moved_to_version, replicas_path

V1, V2 = "ml.example.com/v1", "ml.example.com/v2"
PATHS = {V1: replicas_path("spec.workers"), V2: replicas_path("spec.size"), "ml.example.com/v3": None}


def _entry(manager: str, version: str, fields: dict[str, Any], *, subresource: str = "scale") -> dict[str, Any]:
    entry = {"manager": manager, "operation": "Update", "apiVersion": version, "time": "2026-01-01T00:00:00Z",
             "fieldsType": "FieldsV1", "fieldsV1": fields}
    return {**entry, "subresource": subresource} if subresource else entry


@pytest.mark.parametrize(("entries", "to_version", "expected"), [
    pytest.param(
        [_entry("hpa", V1, {"f:spec": {"f:workers": {}}}), _entry("alice", V1, {"f:spec": {"f:image": {}}}, subresource="")],
        V2,
        [_entry("alice", V1, {"f:spec": {"f:image": {}}}, subresource=""), _entry("hpa", V2, {"f:spec": {"f:size": {}}})],
        id="moved-to-the-versions-path",
    ),
    pytest.param(
        [_entry("hpa", V1, {"f:spec": {"f:workers": {}}}), _entry("hpa", V2, {"f:metadata": {"f:labels": {}}})],
        V2,
        [_entry("hpa", V2, {"f:metadata": {"f:labels": {}}, "f:spec": {"f:size": {}}})],
        id="merged-into-its-entry-there",
    ),
    pytest.param(
        [_entry("hpa", V1, {"f:spec": {"f:workers": {}}})],
        "ml.example.com/v3",
        [_entry("hpa", V1, {"f:spec": {"f:workers": {}}})],
        id="left-where-the-version-has-no-scale",
    ),
    pytest.param(
        [_entry("other", V1, {"f:spec": {"f:workers": {}}})],
        V2,
        [_entry("other", V1, {"f:spec": {"f:workers": {}}})],
        id="another-managers-entry-stays",
    ),
])
def test_an_update_through_scale_moves_to_the_requested_version(
    entries: list[dict[str, Any]], to_version: str, expected: list[dict[str, Any]]
) -> None:
    assert moved_to_version(entries, PATHS, manager="hpa", from_version=V1, to_version=to_version) == expected
