"""``kubectl top`` against the hub: the real kubectl reads the hub's ``metrics.k8s.io``, which the
hub merges from both members' metrics APIs through their agents' tunnels."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from e2e.harness import Kubectl, ProcessGroup, wait_for
from e2e.test_members import FLEET

pytestmark = pytest.mark.e2e
MEMBERS = ("onprem-a100", "cloud-h100")


def _run_pod(member: Kubectl, name: str, namespace: str) -> None:
    member.run("create", "namespace", namespace, check=False)
    pod = {
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": namespace, "labels": {"app": name}},
        "spec": {"containers": [{"name": "main", "image": "x:1", "resources": {"requests": {"cpu": "2", "memory": "4Gi"}}}]},
    }
    member.run("apply", "-f", "-", input_text=json.dumps(pod))


def _rows(hub: Kubectl, *args: str) -> list[list[str]]:
    result = hub.run("top", *args, check=False)
    assert "Metrics API not available" not in result.stderr, result.stderr
    return [line.split() for line in result.stdout.splitlines()[1:]]


def test_kubectl_top_on_the_hub_shows_every_members_pods_and_nodes(processes: ProcessGroup, tmp_path: Path) -> None:
    hub, members = processes.start_fleet(FLEET, MEMBERS, agent_flags=("--enable-proxy",))
    _run_pod(members["onprem-a100"], "train-a", "ml")
    _run_pod(members["cloud-h100"], "train-h", "ml")
    _run_pod(members["cloud-h100"], "serve-h", "team")

    def ml_pods() -> list[list[str]] | None:
        rows = _rows(hub, "pod", "-n", "ml")
        return rows if sorted(r[0] for r in rows) == ["train-a", "train-h"] else None

    rows = wait_for(ml_pods, timeout=90, what="kubectl top pod -n ml to show both members' pods")
    assert all(r[1].endswith("m") and r[2].endswith("Mi") for r in rows), rows

    rows = wait_for(lambda: (r := _rows(hub, "pod", "-A")) and len(r) >= 3 and r, timeout=60,
                    what="kubectl top pod -A")
    assert {(r[0], r[1]) for r in rows} >= {("ml", "train-a"), ("ml", "train-h"), ("team", "serve-h")}, rows

    member_nodes = {name for member in members.values() for name in member.run("get", "nodes", "-o", "name").stdout.split()}
    rows = wait_for(lambda: _rows(hub, "node"), timeout=60, what="kubectl top node")
    assert {f"node/{r[0]}" for r in rows} == member_nodes, rows
    # The hub stores no Node (no allocatable to divide by): kubectl prints no percentages.
    assert all(len(r) == 3 and r[1].endswith("m") and r[2].endswith("Mi") for r in rows), rows
