"""``Cluster.status.nodeScoring``: the member scheduler's node scoring, as its agent reports it. The
hub keeps the five values it knows, refuses any other with a 422 naming the field and the values it
takes (the schema served: tests/apiserver/test_openapi.py)."""

from __future__ import annotations

import pytest

from controlplane.apiserver import errors
from controlplane.apiserver.kinds.core import core_resources
from controlplane.apiserver.kinds.gpufed import gpufed_resources
from controlplane.apiserver.objects import ObjectStore
from controlplane.apiserver.resources import Registry
from controlplane.storage import MemoryStore

SCORINGS = ["LeastAllocated", "MostAllocated", "RequestedToCapacityRatio", "FragmentationAware", "Unknown"]


def cluster(name: str) -> dict[str, object]:
    return {"apiVersion": "cluster.gpufed.io/v1alpha1", "kind": "Cluster", "metadata": {"name": name},
            "spec": {"provider": "onprem"}}


async def test_a_known_scoring_is_kept_and_another_is_refused_with_the_values_it_takes() -> None:
    registry = Registry(core_resources(), gpufed_resources())
    clusters = registry.require("cluster.gpufed.io/v1alpha1", "Cluster")
    async with MemoryStore() as memory:
        objects = ObjectStore(memory, registry)
        await objects.bootstrap()
        created = await objects.create(clusters, cluster("gpu-a"))
        for scoring in SCORINGS:
            created = await objects.update_status(clusters, {**created, "status": {"nodeScoring": scoring}})
            assert created["status"]["nodeScoring"] == scoring
        with pytest.raises(errors.Invalid) as caught:
            await objects.update_status(clusters, {**created, "status": {"nodeScoring": "BinPacking"}})
        status = caught.value.to_status()
        assert status["code"] == 422
        assert status["message"].startswith('Cluster.cluster.gpufed.io "gpu-a" is invalid: ')
        (cause,) = status["details"]["causes"]
        assert (cause["field"], cause["reason"]) == ("status.nodeScoring", "FieldValueNotSupported")
        assert cause["message"] == 'Unsupported value: "BinPacking": supported values: ' + ", ".join(
            f'"{scoring}"' for scoring in SCORINGS
        )
        assert (await objects.get(clusters, name="gpu-a"))["status"]["nodeScoring"] == "Unknown"

