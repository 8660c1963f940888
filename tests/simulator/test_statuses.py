"""The simulated member's DaemonSet, CronJob and load balancer controllers (pure decisions)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from simulator.statuses import (
    cronjob_due,
    cronjob_job,
    cronjob_status,
    daemon_nodes,
    daemonset_status,
    load_balancer_status,
)


def node(name: str, *, labels: dict[str, str] | None = None, ready: bool = True, taints: list[dict[str, str]] | None = None) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "labels": labels or {}},
        "spec": {"taints": taints or []},
        "status": {"conditions": [{"type": "Ready", "status": "True" if ready else "False"}]},
    }


NODES = [
    node("cpu-0", labels={"pool": "cpu"}),
    node("gpu-0", labels={"pool": "gpu"}, taints=[{"key": "nvidia.com/gpu", "effect": "NoSchedule"}]),
    node("gpu-1", labels={"pool": "gpu"}, taints=[{"key": "nvidia.com/gpu", "effect": "NoSchedule"}]),
    node("down", labels={"pool": "cpu"}, ready=False),
]


def daemonset(*, selector: dict[str, str] | None = None, tolerations: list[dict[str, str]] | None = None) -> dict[str, Any]:
    pod_spec: dict[str, Any] = {"containers": [{"name": "agent", "image": "a"}]}
    if selector:
        pod_spec["nodeSelector"] = selector
    if tolerations:
        pod_spec["tolerations"] = tolerations
    return {"kind": "DaemonSet", "metadata": {"name": "ds", "generation": 2}, "spec": {"template": {"spec": pod_spec}}}


def test_a_daemon_pod_runs_on_every_ready_node_it_selects_and_tolerates() -> None:
    assert daemon_nodes(daemonset(), NODES) == ["cpu-0"]
    tolerant = daemonset(tolerations=[{"key": "nvidia.com/gpu", "operator": "Exists"}])
    assert daemon_nodes(tolerant, NODES) == ["cpu-0", "gpu-0", "gpu-1"]
    only_gpu = daemonset(selector={"pool": "gpu"}, tolerations=[{"operator": "Exists"}])
    status = daemonset_status(only_gpu, NODES)
    assert status["desiredNumberScheduled"] == status["numberReady"] == status["updatedNumberScheduled"] == 2
    assert status["observedGeneration"] == 2


def test_only_load_balancer_services_and_ingresses_get_an_address() -> None:
    lb = {"kind": "Service", "metadata": {"name": "web", "namespace": "ml"}, "spec": {"type": "LoadBalancer"}}
    assert load_balancer_status({**lb, "spec": {"type": "ClusterIP"}}, salt="a") is None
    first = load_balancer_status(lb, salt="a")
    assert first is not None
    (point,) = first["loadBalancer"]["ingress"]
    assert point["ip"].startswith("203.0.113.")
    assert load_balancer_status(lb, salt="a") == first  # stable
    ingress = {"kind": "Ingress", "metadata": {"name": "web", "namespace": "ml"}, "spec": {}}
    assert load_balancer_status(ingress, salt="a") is not None


def cronjob(**spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1", "kind": "CronJob",
        "metadata": {"name": "nightly", "namespace": "ml", "uid": "u1", "creationTimestamp": "2026-01-01T00:00:30Z"},
        "spec": {"schedule": "*/5 * * * *", "jobTemplate": {"spec": {"template": {"spec": {"containers": []}}}}, **spec},
    }


def at(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).astimezone(UTC)


def test_a_cronjob_is_due_at_each_scheduled_time_after_the_last() -> None:
    assert cronjob_due(cronjob(), at("2026-01-01T00:04:59Z"), active=0) is None
    due = cronjob_due(cronjob(), at("2026-01-01T00:05:10Z"), active=0)
    assert due == at("2026-01-01T00:05:00Z")
    ran = {**cronjob(), "status": {"lastScheduleTime": "2026-01-01T00:05:00Z"}}
    assert cronjob_due(ran, at("2026-01-01T00:09:00Z"), active=0) is None
    assert cronjob_due(ran, at("2026-01-01T00:27:00Z"), active=0) == at("2026-01-01T00:25:00Z")  # missed runs: the latest
    assert cronjob_due(cronjob(suspend=True), at("2026-01-01T00:05:10Z"), active=0) is None
    assert cronjob_due(cronjob(concurrencyPolicy="Forbid"), at("2026-01-01T00:05:10Z"), active=1) is None
    assert cronjob_due(cronjob(schedule="not a schedule"), at("2026-01-01T00:05:10Z"), active=0) is None
    # 01:00 in Tokyo is 16:00 UTC the day before.
    tokyo = cronjob(schedule="0 1 * * *", timeZone="Asia/Tokyo")
    assert cronjob_due(tokyo, at("2026-01-01T16:00:05Z"), active=0) == at("2026-01-01T16:00:00Z")


def test_the_job_and_the_status_a_cronjob_gets() -> None:
    scheduled = at("2026-01-01T00:05:00Z")
    job = cronjob_job(cronjob(), scheduled)
    assert job["metadata"]["name"] == f"nightly-{int(scheduled.timestamp()) // 60}"
    assert job["metadata"]["ownerReferences"][0]["uid"] == "u1"
    running = {**job, "metadata": {**job["metadata"], "uid": "j1"}}
    status = cronjob_status(cronjob(), [running], scheduled=scheduled)
    assert status["active"][0]["name"] == job["metadata"]["name"]
    assert status["lastScheduleTime"] == "2026-01-01T00:05:00Z"
    done = {**running, "status": {"conditions": [{"type": "Complete", "status": "True"}], "completionTime": "2026-01-01T00:06:00Z"}}
    status = cronjob_status({**cronjob(), "status": status}, [done], scheduled=None)
    assert "active" not in status
    assert status["lastSuccessfulTime"] == "2026-01-01T00:06:00Z"
