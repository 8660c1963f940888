"""CronFederatedHPA rules fire at their schedule (a controllable clock), scale a workload or a
FederatedHPA's bounds, and keep Karmada's execution history within its limits."""

from __future__ import annotations

import shutil
from datetime import UTC, datetime, timedelta, tzinfo
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from controlplane.apiserver.objects import ObjectStore
from controlplane.controllers.context import ControllerContext
from controlplane.controllers.federatedhpa.cron import CronFederatedHPAController, local_zone
from controlplane.controllers.federatedhpa.cronrules import in_status_order, next_time, plan, recorded

from .conftest import FAST
from .fleet import deployment

API = "autoscaling.karmada.io/v1alpha1"
START = datetime(2026, 3, 2, 8, 59, 30, tzinfo=UTC)  # a Monday
SHANGHAI = ZoneInfo("Asia/Shanghai")


@pytest.fixture(autouse=True)
def utc_hub(monkeypatch: pytest.MonkeyPatch) -> None:
    """The controllers here run in a hub whose local time zone is UTC (as in its container)."""
    monkeypatch.setenv("TZ", "UTC")


def _offset(zone: tzinfo) -> timedelta | None:
    return datetime(2026, 7, 1, 12, 0).replace(tzinfo=zone).utcoffset()


@pytest.mark.parametrize(("environ", "expected"), [
    ({"TZ": "Asia/Shanghai"}, timedelta(hours=8)),
    ({"TZ": ":Europe/Paris"}, timedelta(hours=2)),  # summer time
    ({"TZ": "/usr/share/zoneinfo/Asia/Tokyo"}, timedelta(hours=9)),
    ({"TZ": ""}, timedelta(0)),
    ({"TZ": "UTC"}, timedelta(0)),
    ({"TZ": "Nowhere/Else"}, timedelta(0)),  # Go falls back to UTC
    ({}, timedelta(hours=8)),  # the localtime file: Shanghai's here
])
def test_the_local_zone_is_found_as_go_finds_time_local(
    environ: dict[str, str], expected: timedelta, tmp_path: Path
) -> None:
    localtime = tmp_path / "localtime"
    shutil.copy("/usr/share/zoneinfo/Asia/Shanghai", localtime)
    assert _offset(local_zone(environ, str(localtime))) == expected
    assert _offset(local_zone({}, str(tmp_path / "missing"))) == timedelta(0)


@pytest.mark.parametrize(("zone", "expected"), [
    (None, datetime(2026, 3, 3, 1, 0, tzinfo=UTC)),  # the local zone: Shanghai's 09:00
    ("Local", datetime(2026, 3, 3, 1, 0, tzinfo=UTC)),
    ("UTC", datetime(2026, 3, 2, 9, 0, tzinfo=UTC)),
    ("", datetime(2026, 3, 2, 9, 0, tzinfo=UTC)),
])
def test_a_rule_without_a_time_zone_is_read_in_the_local_one(zone: str | None, expected: datetime) -> None:
    rule = {"schedule": "0 9 * * *", **({"timeZone": zone} if zone is not None else {})}
    assert next_time(rule, START, local=SHANGHAI) == expected
    assert plan(rule, None, START, local=SHANGHAI).next == expected


@pytest.mark.parametrize(
    ("rule", "after", "expected"),
    [
        ({"schedule": "0 9 * * *"}, START, datetime(2026, 3, 2, 9, 0, tzinfo=UTC)),
        ({"schedule": "*/15 * * * *"}, START, datetime(2026, 3, 2, 9, 0, tzinfo=UTC)),
        # 09:00 in Shanghai is 01:00 UTC: the next one is the following day's.
        ({"schedule": "0 9 * * *", "timeZone": "Asia/Shanghai"}, START, datetime(2026, 3, 3, 1, 0, tzinfo=UTC)),
        ({"schedule": "0 9 * * 1-5"}, datetime(2026, 3, 6, 10, 0, tzinfo=UTC), datetime(2026, 3, 9, 9, 0, tzinfo=UTC)),
        ({"schedule": "@hourly"}, START, datetime(2026, 3, 2, 9, 0, tzinfo=UTC)),
    ],
)
def test_next_time(rule: dict[str, Any], after: datetime, expected: datetime) -> None:
    assert next_time(rule, after) == expected


def test_a_rule_is_due_once_at_its_time() -> None:
    rule = {"name": "morning", "schedule": "0 9 * * *"}
    first = plan(rule, None, START)
    assert first.due is None and first.next == datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
    history = recorded(rule, None, next_execution=first.next)
    assert plan(rule, history, START + timedelta(seconds=29)).due is None
    due = plan(rule, history, START + timedelta(seconds=31))
    assert due.due == datetime(2026, 3, 2, 9, 0, tzinfo=UTC) and due.next == datetime(2026, 3, 3, 9, 0, tzinfo=UTC)
    # A changed schedule is planned afresh, not fired for the old time.
    assert plan({**rule, "schedule": "30 9 * * *"}, history, START + timedelta(minutes=5)).due is None
    # Suspended: no next execution.
    assert plan({**rule, "suspend": True}, history, START + timedelta(minutes=5)).next is None


def test_history_is_newest_first_within_its_limits() -> None:
    rule = {"name": "r", "schedule": "* * * * *", "successfulHistoryLimit": 2, "failedHistoryLimit": 1}
    history: dict[str, Any] | None = None
    for minute in range(4):
        history = recorded(rule, history, next_execution=None, execution={"scheduleTime": f"m{minute}"})
        history = recorded(rule, history, next_execution=None, execution={"scheduleTime": f"f{minute}"}, failed=True)
    assert history is not None
    assert [e["scheduleTime"] for e in history["successfulExecutions"]] == ["m3", "m2"]
    assert [e["scheduleTime"] for e in history["failedExecutions"]] == ["f3"]


class Clock:
    def __init__(self, now: datetime) -> None:
        self.now = now

    def __call__(self) -> datetime:
        return self.now


async def _status(objects: ObjectStore, name: str) -> dict[str, Any]:
    rt = objects.registry.require(API, "CronFederatedHPA")
    return (await objects.get(rt, namespace="default", name=name)).get("status") or {}


async def test_rules_scale_a_workload_and_a_federated_hpa(objects: ObjectStore) -> None:
    clock = Clock(START)
    ctx = ControllerContext(objects, settings=FAST, clock=clock)
    controller = CronFederatedHPAController(ctx)
    deployments = objects.registry.require("apps/v1", "Deployment")
    await objects.create(deployments, deployment("web", replicas=1))
    await objects.create(objects.registry.require(API, "FederatedHPA"), {
        "apiVersion": API, "kind": "FederatedHPA", "metadata": {"name": "web", "namespace": "default"},
        "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
                 "minReplicas": 1, "maxReplicas": 4}})
    crons = objects.registry.require(API, "CronFederatedHPA")
    for name, ref, rules in (
        ("workload", {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
         [{"name": "morning", "schedule": "0 9 * * *", "targetReplicas": 3}]),
        ("bounds", {"apiVersion": API, "kind": "FederatedHPA", "name": "web"},
         [{"name": "morning", "schedule": "0 9 * * *", "targetMinReplicas": 2, "targetMaxReplicas": 8}]),
        ("ghost", {"apiVersion": "apps/v1", "kind": "Deployment", "name": "ghost"},
         [{"name": "morning", "schedule": "0 9 * * *", "targetReplicas": 3}]),
    ):
        await objects.create(crons, {"apiVersion": API, "kind": "CronFederatedHPA",
                                     "metadata": {"name": name, "namespace": "default"},
                                     "spec": {"scaleTargetRef": ref, "rules": rules}})
        # Planned, not fired: the next execution is 09:00, 30 s away.
        assert await controller.reconcile(("default", name)) == pytest.approx(30.01)
    assert (await _status(objects, "workload"))["executionHistories"] == [
        {"ruleName": "morning", "nextExecutionTime": "2026-03-02T09:00:00Z"}]
    assert (await objects.get(deployments, namespace="default", name="web"))["spec"]["replicas"] == 1

    clock.now = START + timedelta(seconds=45)
    for name in ("workload", "bounds", "ghost"):
        await controller.reconcile(("default", name))
    assert (await objects.get(deployments, namespace="default", name="web"))["spec"]["replicas"] == 3
    fhpa = await objects.get(objects.registry.require(API, "FederatedHPA"), namespace="default", name="web")
    assert (fhpa["spec"]["minReplicas"], fhpa["spec"]["maxReplicas"]) == (2, 8)
    assert (await _status(objects, "workload"))["executionHistories"] == [{
        "ruleName": "morning", "nextExecutionTime": "2026-03-03T09:00:00Z",
        "successfulExecutions": [{"scheduleTime": "2026-03-02T09:00:00Z", "executionTime": "2026-03-02T09:00:15Z",
                                  "appliedReplicas": 3}],
    }]
    bounds = (await _status(objects, "bounds"))["executionHistories"][0]["successfulExecutions"][0]
    assert (bounds["appliedMinReplicas"], bounds["appliedMaxReplicas"]) == (2, 8)
    failed = (await _status(objects, "ghost"))["executionHistories"][0]
    assert failed["failedExecutions"][0]["message"] == 'deployments.apps "ghost" not found'
    assert "successfulExecutions" not in failed

    # Not again before the next day's time.
    await objects.update(deployments, {**(await objects.get(deployments, namespace="default", name="web")),
                                       "spec": {**deployment("web", replicas=1)["spec"]}})
    clock.now = START + timedelta(hours=2)
    await controller.reconcile(("default", "workload"))
    assert (await objects.get(deployments, namespace="default", name="web"))["spec"]["replicas"] == 1


def test_a_lowered_limit_cuts_a_list_at_its_next_execution_only() -> None:
    """Karmada cuts the list it adds an execution to, not the others, and not without one."""
    rule = {"name": "r", "schedule": "* * * * *", "successfulHistoryLimit": 1, "failedHistoryLimit": 1}
    history = {"ruleName": "r", "successfulExecutions": [{"scheduleTime": f"m{i}"} for i in range(3)],
               "failedExecutions": [{"scheduleTime": f"f{i}"} for i in range(3)]}
    kept = recorded(rule, history, next_execution=None)
    assert (len(kept["successfulExecutions"]), len(kept["failedExecutions"])) == (3, 3)
    failed = recorded(rule, history, next_execution=None, execution={"scheduleTime": "f9"}, failed=True)
    assert [e["scheduleTime"] for e in failed["failedExecutions"]] == ["f9"]
    assert len(failed["successfulExecutions"]) == 3


def test_histories_keep_the_status_order_and_new_rules_come_last() -> None:
    old = [{"ruleName": "b"}, {"ruleName": "gone"}, {"ruleName": "a"}]
    new = {"a": {"ruleName": "a", "n": 1}, "new": {"ruleName": "new"}, "b": {"ruleName": "b", "n": 2}}
    assert in_status_order(old, new) == [{"ruleName": "b", "n": 2}, {"ruleName": "a", "n": 1}, {"ruleName": "new"}]


async def _events(objects: ObjectStore, name: str) -> list[tuple[str, str, str]]:
    items = (await objects.list(objects.registry.require("v1", "Event"), namespace="default")).items
    return [(e["type"], e["reason"], e["message"]) for e in items if e["involvedObject"].get("name") == name
            and e["involvedObject"].get("kind") == "CronFederatedHPA"]


async def test_the_controller_reads_rules_in_the_hub_process_zone(
    objects: ObjectStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Karmada's controller reads a rule without a ``timeZone`` in its process's local zone."""
    monkeypatch.setenv("TZ", "Asia/Shanghai")
    controller = CronFederatedHPAController(ControllerContext(objects, settings=FAST, clock=Clock(START)))
    await objects.create(objects.registry.require("apps/v1", "Deployment"), deployment("web", replicas=1))
    await objects.create(objects.registry.require(API, "CronFederatedHPA"), {
        "apiVersion": API, "kind": "CronFederatedHPA", "metadata": {"name": "local", "namespace": "default"},
        "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
                 "rules": [{"name": "morning", "schedule": "0 9 * * *", "targetReplicas": 3}]}})
    await controller.reconcile(("default", "local"))
    assert (await _status(objects, "local"))["executionHistories"] == [
        {"ruleName": "morning", "nextExecutionTime": "2026-03-03T01:00:00Z"}]


async def test_karmadas_events_and_the_rules_targets_as_applied(objects: ObjectStore) -> None:
    """A failed execution is Karmada's ``ScaleFailed`` Warning Event; a rule whose schedule cannot
    be planned (30 February passes the webhook, as in Karmada, and never comes) its
    ``StartRuleFailed``, with no history; a successful execution records each of the rule's
    targets as applied, as Karmada records them, whatever the target reads."""
    clock = Clock(START)
    ctx = ControllerContext(objects, settings=FAST, clock=clock)
    controller = CronFederatedHPAController(ctx)
    await objects.create(objects.registry.require("apps/v1", "Deployment"), deployment("web", replicas=1))
    crons = objects.registry.require(API, "CronFederatedHPA")
    for name, target, rules in (
        ("workload", "web", [{"name": "morning", "schedule": "0 9 * * *", "targetReplicas": 3, "targetMinReplicas": 2}]),
        ("ghost", "ghost", [{"name": "morning", "schedule": "0 9 * * *", "targetReplicas": 3}]),
        ("never", "web", [{"name": "feb30", "schedule": "0 0 30 2 *", "targetReplicas": 3}]),
    ):
        await objects.create(crons, {"apiVersion": API, "kind": "CronFederatedHPA",
                                     "metadata": {"name": name, "namespace": "default"}, "spec": {
                                         "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": target},
                                         "rules": rules}})
        await controller.reconcile(("default", name))
    assert await _events(objects, "never") == [("Warning", "StartRuleFailed", "failed to find next date")]
    assert "executionHistories" not in await _status(objects, "never")

    clock.now = START + timedelta(seconds=45)
    for name in ("workload", "ghost"):
        await controller.reconcile(("default", name))
    applied = (await _status(objects, "workload"))["executionHistories"][0]["successfulExecutions"][0]
    assert (applied["appliedReplicas"], applied["appliedMinReplicas"]) == (3, 2)
    assert await _events(objects, "workload") == []
    assert await _events(objects, "ghost") == [("Warning", "ScaleFailed", 'deployments.apps "ghost" not found')]


async def test_a_rule_sets_a_kube_hpas_bounds(objects: ObjectStore) -> None:
    """Karmada's rules set the bounds of an ``autoscaling/v2`` HorizontalPodAutoscaler as of a
    FederatedHPA (its webhook asks for ``targetReplicas`` all the same)."""
    clock = Clock(START)
    controller = CronFederatedHPAController(ControllerContext(objects, settings=FAST, clock=clock))
    hpas = objects.registry.require("autoscaling/v2", "HorizontalPodAutoscaler")
    await objects.create(hpas, {"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
                                "metadata": {"name": "web", "namespace": "default"},
                                "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
                                         "minReplicas": 1, "maxReplicas": 4}})
    await objects.create(objects.registry.require(API, "CronFederatedHPA"), {
        "apiVersion": API, "kind": "CronFederatedHPA", "metadata": {"name": "bounds", "namespace": "default"},
        "spec": {"scaleTargetRef": {"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler", "name": "web"},
                 "rules": [{"name": "morning", "schedule": "0 9 * * *", "targetReplicas": 1,
                            "targetMinReplicas": 2, "targetMaxReplicas": 8}]}})
    await controller.reconcile(("default", "bounds"))
    clock.now = START + timedelta(seconds=45)
    await controller.reconcile(("default", "bounds"))
    hpa = await objects.get(hpas, namespace="default", name="web")
    assert (hpa["spec"]["minReplicas"], hpa["spec"]["maxReplicas"]) == (2, 8)
    assert "successfulExecutions" in (await _status(objects, "bounds"))["executionHistories"][0]
