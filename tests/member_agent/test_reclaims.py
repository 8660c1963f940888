"""The agent's view of spot reclaims: spot shapes in the report, lost pods per workload."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from member_agent.capacity import summarize
from member_agent.reclaims import ReclaimLog

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def _node(name: str, *, labels: dict[str, str] | None = None, taints: list[dict[str, str]] | None = None) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "labels": labels or {}},
        "spec": {"taints": taints or []},
        "status": {"allocatable": {"cpu": "8", "nvidia.com/gpu": "4"}, "conditions": [{"type": "Ready", "status": "True"}]},
    }


def _pod(name: str, node: str, deployment: str = "infer", phase: str = "Running") -> dict[str, Any]:
    return {
        "metadata": {
            "name": f"{deployment}-abc-{name}",
            "namespace": "ml",
            "labels": {"pod-template-hash": "abc"},
            "ownerReferences": [{"kind": "ReplicaSet", "name": f"{deployment}-abc", "controller": True}],
        },
        "spec": {"nodeName": node, "containers": [{"resources": {"requests": {"nvidia.com/gpu": "1"}}}]},
        "status": {"phase": phase},
    }


SPOT = {"cloud.google.com/gke-spot": "true"}
NOTICE = [{"key": "cloud.google.com/impending-node-termination", "value": "true", "effect": "NoSchedule"}]


def test_report_marks_spot_shapes_and_counts_spot_nodes() -> None:
    status = summarize([_node("a", labels=SPOT), _node("b")], [], now="2026-01-01T00:00:00Z")
    assert status["nodeSummary"] == {"total": 2, "ready": 2, "spot": 1}
    assert sorted(bool(shape.get("spot")) for shape in status["nodeShapes"]) == [False, True]
    plain = summarize([_node("b")], [], now="2026-01-01T00:00:00Z")
    assert "spot" not in plain["nodeSummary"] and "spot" not in plain["nodeShapes"][0]


@pytest.mark.parametrize(
    ("node", "news"),
    [(_node("a", labels=SPOT), False), (_node("a", labels=SPOT, taints=NOTICE), True), (_node("a"), False)],
)
def test_notice_is_news_once(node: dict[str, Any], news: bool) -> None:
    log = ReclaimLog()
    assert log.node_changed("a", node, now=T0) == (news, set())
    assert log.node_changed("a", node, now=T0) == (False, set())


def _log_with(pods: list[dict[str, Any]], *nodes: dict[str, Any]) -> ReclaimLog:
    log = ReclaimLog(window_seconds=60)
    for node in nodes:
        log.node_changed(node["metadata"]["name"], node, now=T0)
    for pod in pods:
        log.pod_changed(pod["metadata"]["name"], pod, now=T0)
    return log


def test_a_spot_node_gone_counts_its_running_pods_per_workload() -> None:
    pods = [_pod("1", "a"), _pod("2", "a"), _pod("3", "b"), _pod("4", "a", deployment="done", phase="Succeeded")]
    log = _log_with(pods, _node("a", labels=SPOT), _node("b", labels=SPOT), _node("c"))
    ref = ("ml", "Deployment", "infer")
    assert log.node_changed("a", None, now=T0) == (True, {ref})
    # The pods' own deletions come later: counted once.
    assert log.pod_changed("infer-abc-1", None, now=T0) == set()
    assert log.node_changed("b", None, now=T0 + timedelta(seconds=5)) == (True, {ref})
    assert log.entry(ref, now=T0 + timedelta(seconds=5)) == {"pods": 3, "nodes": ["a", "b"], "time": "2026-01-01T00:00:05Z"}
    # A node that was not spot going away is not a reclaim.
    log.pod_changed("infer-abc-5", _pod("5", "c"), now=T0)
    assert log.node_changed("c", None, now=T0) == (False, set())

    status = {"manifestStatuses": [{"identifier": {"kind": "Deployment", "namespace": "ml", "name": "infer"}}]}
    annotated = log.annotate(status, now=T0 + timedelta(seconds=10))
    assert annotated["manifestStatuses"][0]["reclaimed"]["pods"] == 3
    # Past the window the entry leaves the status.
    assert "reclaimed" not in log.annotate(annotated, now=T0 + timedelta(seconds=70))["manifestStatuses"][0]


def test_pods_deleted_just_before_their_node_still_count() -> None:
    """The pod watch may deliver the deletions before the node watch delivers the node's."""
    log = _log_with([_pod("1", "a"), _pod("2", "b")], _node("a", labels=SPOT), _node("b", labels=SPOT))
    ref = ("ml", "Deployment", "infer")
    assert log.pod_changed("infer-abc-1", None, now=T0) == set()
    assert log.node_changed("a", None, now=T0 + timedelta(seconds=1)) == (True, {ref})
    assert log.entry(ref, now=T0 + timedelta(seconds=2)) == {"pods": 1, "nodes": ["a"], "time": "2026-01-01T00:00:01Z"}
    # A pod deleted long before its node went is not the reclaim's.
    assert log.pod_changed("infer-abc-2", None, now=T0) == set()
    assert log.node_changed("b", None, now=T0 + timedelta(minutes=5)) == (True, set())
