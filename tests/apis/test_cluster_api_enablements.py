"""``Cluster.status.apiEnablements`` in Karmada's shape and field names, kept by the hub's store as
an agent writes it and served in the Cluster's schema (``kubectl explain``, ``/openapi/v2``)."""

from __future__ import annotations

from typing import Any

from controlplane.apis.cluster_v1alpha1 import Cluster
from controlplane.apiserver.kinds.core import core_resources
from controlplane.apiserver.kinds.gpufed import gpufed_resources
from controlplane.apiserver.objects import ObjectStore
from controlplane.apiserver.openapi.catalog import SchemaCatalog
from controlplane.apiserver.openapi.upstream import UpstreamDefinitions
from controlplane.apiserver.resources import Registry
from controlplane.apiserver.validation import check_model
from controlplane.hub import hub_registry
from controlplane.storage import MemoryStore

#: As Karmada's karmadactl get cluster -o yaml shows a member's (``pkg/apis/cluster/v1alpha1/types.go``).
STATUS: dict[str, Any] = {
    "apiEnablements": [
        {"groupVersion": "apps/v1", "resources": [{"name": "deployments", "kind": "Deployment"}]},
        {"groupVersion": "ray.io/v1", "resources": [{"name": "rayjobs", "kind": "RayJob"}]},
    ],
    "conditions": [
        {
            "type": "CompleteAPIEnablements",
            "status": "True",
            "reason": "Complete",
            "message": "collected complete APIEnablements from the cluster",
            "lastTransitionTime": "2026-01-01T00:00:00Z",
        }
    ],
}


def test_the_model_reads_karmadas_fields() -> None:
    cluster = Cluster.model_validate(
        {"metadata": {"name": "a"}, "spec": {"provider": "onprem"}, "status": STATUS}
    )
    assert cluster.status is not None and cluster.status.api_enablements is not None
    assert cluster.status.api_enablements[1].group_version == "ray.io/v1"
    assert cluster.model_dump(mode="json", by_alias=True, exclude_none=True)["status"] == STATUS


async def test_the_store_keeps_the_list_as_the_agent_wrote_it() -> None:
    registry = Registry(core_resources(), gpufed_resources())
    clusters = registry.require("cluster.gpufed.io/v1alpha1", "Cluster")
    async with MemoryStore() as memory:
        objects = ObjectStore(memory, registry)
        await objects.bootstrap()
        created = await objects.create(
            clusters,
            {
                "apiVersion": "cluster.gpufed.io/v1alpha1",
                "kind": "Cluster",
                "metadata": {"name": "a"},
                "spec": {"provider": "onprem"},
            },
        )
        written = await objects.update_status(clusters, {**created, "status": STATUS})
        assert written["status"]["apiEnablements"] == STATUS["apiEnablements"]


def test_the_schema_serves_the_list() -> None:
    registry = hub_registry()
    catalog = SchemaCatalog(registry, UpstreamDefinitions.load())
    cluster = catalog.kind(registry.require("cluster.gpufed.io/v1alpha1", "Cluster"))
    status = cluster.definitions["io.gpufed.cluster.v1alpha1.ClusterStatus"]["properties"]
    assert status["apiEnablements"]["items"] == {
        "$ref": "#/definitions/io.gpufed.cluster.v1alpha1.APIEnablement"
    }
    assert status["apiEnablements"]["description"].startswith("The APIs the member serves")
    enablement = cluster.definitions["io.gpufed.cluster.v1alpha1.APIEnablement"]["properties"]
    assert set(enablement) == {"groupVersion", "resources"}
    resource = cluster.definitions["io.gpufed.cluster.v1alpha1.APIResource"]["properties"]
    assert set(resource) == {"name", "kind"}


def _cluster(enablements: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "apiVersion": "cluster.gpufed.io/v1alpha1",
        "kind": "Cluster",
        "metadata": {"name": "a"},
        "spec": {"provider": "onprem"},
        "status": {"apiEnablements": enablements, "lastReportTime": "2026-01-01T00:00:00Z"},
    }


def test_a_report_that_leaves_the_list_as_stored_does_not_validate_it_again() -> None:
    """Each report carries the whole list (up to 5,000 resources): it is validated when it changes
    only. A stored list that would not pass today's check (seen here) shows it is not read again."""
    stored = [{"groupVersion": "v1", "resources": [{"name": 5, "kind": "Pod"}]}]
    same = check_model(_cluster(stored), Cluster, status_only=True, old=_cluster(stored))
    assert same.causes == [] and same.unknown == []

    changed = [*stored, {"groupVersion": "apps/v1", "resources": [{"name": 7}]}]
    refused = check_model(_cluster(changed), Cluster, status_only=True, old=_cluster(stored))
    assert [c.field for c in refused.causes] == [
        "status.apiEnablements[0].resources[0].name",
        "status.apiEnablements[1].resources[0].name",
        "status.apiEnablements[1].resources[0].kind",
    ]
    assert check_model(_cluster(stored), Cluster, status_only=True).causes  # no stored object: checked
