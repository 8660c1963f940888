"""`gpufed queues`: one row per ClusterQueue, flavor and resource, with the status the hub writes."""

from __future__ import annotations

from gpufed.commands.queues import queue_rows, render

TEAM_A = {
    "metadata": {"name": "team-a"},
    "spec": {
        "cohort": "research", "fairSharing": {"weight": 2},
        "resourceGroups": [{"coveredResources": ["cpu", "nvidia.com/gpu"], "flavors": [
            {"name": "onprem", "resources": [{"name": "cpu", "nominalQuota": 16},
                                             {"name": "nvidia.com/gpu", "nominalQuota": 2, "borrowingLimit": 1}]}]}],
    },
    "status": {
        "pendingWorkloads": 0, "admittedWorkloads": 3, "fairSharing": {"weightedShare": 125},
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
    assert lines[1].split() == ["team-a", "research", "onprem", "cpu", "16", "-", "-", "3", "0", "13", "0", "3", "2", "125"]
    assert lines[2].split() == ["team-a", "research", "onprem", "nvidia.com/gpu", "2", "1", "-", "3", "1", "0"]


LENDER = {
    "metadata": {"name": "lender"},
    "spec": {"cohort": "research", "fairSharing": {"weight": "0"}, "resourceGroups": [{"coveredResources": ["nvidia.com/gpu"], "flavors": [
        {"name": "onprem", "resources": [{"name": "nvidia.com/gpu", "nominalQuota": 8, "lendingLimit": 3}]}]}]},
    "status": {"fairSharing": {"weightedShare": 2**63 - 1}, "flavorsReservation": [
        {"name": "onprem", "resources": [{"name": "nvidia.com/gpu", "total": "2", "borrowed": "0"}]}]},
}


def test_lent_weight_and_share() -> None:
    """LENT is the unused nominal quota within the lendingLimit (none outside a cohort); the
    weight defaults to 1 and the share is the status the hub writes with fair sharing on."""
    rows = {r["clusterQueue"]: r for r in queue_rows([TEAM_A, FRESH, LENDER])}
    assert rows["lender"]["lent"] == "3"  # 6 unused, at most 3
    assert rows["new"]["lent"] == "0"  # no cohort
    assert (rows["lender"]["weight"], rows["lender"]["weightedShare"]) == ("0", 2**63 - 1)
    assert (rows["new"]["weight"], rows["new"]["weightedShare"]) == ("1", None)
    table = render(queue_rows([FRESH, LENDER])).splitlines()
    assert table[0].split()[-3:] == ["ADMITTED", "WEIGHT", "SHARE"]
    assert table[1].split()[-2:] == ["0", "inf"]
    assert table[2].split()[-2:] == ["1", "-"]
