"""Field paths in `422 Invalid` causes read as kube writes them: no pydantic union-member tags
(``….str``, ``….int``), map keys in brackets, one cause per field (a value that fits no member
of an int-or-string is one type error, as kube words it)."""

from __future__ import annotations

from typing import Any

import pytest

from controlplane.apiserver import errors
from controlplane.apiserver.objects import ObjectStore
from controlplane.apiserver.validation import format_path
from controlplane.hub import hub_registry
from controlplane.storage import MemoryStore


@pytest.mark.parametrize(
    ("loc", "expected"),
    [
        (("spec", "clusters", 0, "name"), "spec.clusters[0].name"),
        (("spec", "resources", "nvidia.com/gpu"), "spec.resources[nvidia.com/gpu]"),
        (("metadata", "labels", "app.kubernetes.io/name"), "metadata.labels[app.kubernetes.io/name]"),
        (("spec", "replicaScheduling", "weightPreference"), "spec.replicaScheduling.weightPreference"),
    ],
)
def test_format_path(loc: tuple[str | int, ...], expected: str) -> None:
    assert format_path(loc) == expected


def policy(resources: Any) -> dict[str, Any]:
    return {
        "apiVersion": "policy.gpufed.io/v1alpha1", "kind": "PropagationPolicy",
        "metadata": {"name": "shapes", "namespace": "default"},
        "spec": {
            "resourceSelectors": [{"apiVersion": "apps/v1", "kind": "Deployment"}],
            "gpuShapes": {"alternatives": [{"resources": resources}]},
        },
    }


@pytest.mark.parametrize(
    ("resources", "field", "message"),
    [
        ({"nvidia.com/gpu": [1]}, "spec.gpuShapes.alternatives[0].resources[nvidia.com/gpu]",
         'Invalid value: "array": spec.gpuShapes.alternatives[0].resources[nvidia.com/gpu] in body'
         ' must be of type integer,string: "array"'),
        ({"nvidia.com/gpu": {"count": 1}}, "spec.gpuShapes.alternatives[0].resources[nvidia.com/gpu]",
         'Invalid value: "object": spec.gpuShapes.alternatives[0].resources[nvidia.com/gpu] in body'
         ' must be of type integer,string: "object"'),
    ],
)
async def test_invalid_policy_causes_name_the_field_once(resources: Any, field: str, message: str) -> None:
    registry = hub_registry()
    async with MemoryStore() as memory:
        objects = ObjectStore(memory, registry)
        await objects.bootstrap()
        rt = registry.require("policy.gpufed.io/v1alpha1", "PropagationPolicy")
        with pytest.raises(errors.Invalid) as caught:
            await objects.create(rt, policy(resources))
    causes = caught.value.to_status()["details"]["causes"]
    assert causes == [{"reason": "FieldValueTypeInvalid", "message": message, "field": field}]
