"""`gpufed queues`: one row per ClusterQueue, flavor and resource, with the status the hub writes."""

from __future__ import annotations

from gpufed.commands.queues import queue_rows, render

TEAM_A = {
    "metadata": {"name": "team-a"},
    "spec": {
        "cohort": "research",
        "resourceGroups": [{"coveredResources": ["cpu", "nvidia.com/gpu"], "flavors": [
            {"name": "onprem", "resources": [{"name": "cpu", "nominalQuota": 16},
                                             {"name": "nvidia.com/gpu", "nominalQuota": 2, "borrowingLimit": 1}]}]}],
    },
    "status": {
        "pendingWorkloads": 0, "admittedWorkloads": 3,
        "flavorsReservation": [{"name": "onprem", "resources": [
            {"name": "cpu", "total": "3", "borrowed": "0"}, {"name": "nvidia.com/gpu", "total": "3", "borrowed": "1"}]}],
    },
}
FRESH = {"metadata": {"name": "new"}, "spec": {"resourceGroups": [{"coveredResources": ["nvidia.com/gpu"], "flavors": [
    {"name": "cloud", "resources": [{"name": "nvidia.com/gpu", "nominalQuota": 8}]}]}]}}


def test_rows_per_flavor_and_resource() -> None:
    rows = queue_rows([TEAM_A, FRESH])
    assert [(r["clusterQueue"], r["resource"], r["usage"], r["borrowed"], r["pending"], r["admitted"]) for r in rows] == [
        ("new", "nvidia.com/gpu", "0", "0", 0, 0),
        ("team-a", "cpu", "3", "0", 0, 3),
        ("team-a", "nvidia.com/gpu", "3", "1", None, None),
    ]
    assert rows[2]["borrowingLimit"] == "1" and rows[2]["lendingLimit"] == ""


def test_table() -> None:
    lines = render(queue_rows([TEAM_A])).splitlines()
    assert lines[0].split("  ")[0] == "CLUSTERQUEUE"
    assert lines[2].split() == ["team-a", "research", "onprem", "nvidia.com/gpu", "2", "1", "-", "3", "1"]
