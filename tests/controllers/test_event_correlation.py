"""The hub's Events as client-go's EventCorrelator makes them: an Event recorded again is the same
Event with its count grown and its lastTimestamp moved (created again, count kept, if it was
deleted meanwhile), and after 10 similar Events (one reason, different messages) within
10 minutes the next are one ``(combined from similar events): ...`` Event."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from controlplane.apis.events import EventType
from controlplane.apiserver.objects import ObjectStore
from controlplane.controllers.context import ControllerContext
from controlplane.controllers.eventcorrelating import EventCorrelator
from controlplane.controllers.events import EventReason, record_event

from .conftest import FAST

START = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
WORK = {"apiVersion": "work.karmada.io/v1alpha1", "kind": "Work",
        "metadata": {"name": "web", "namespace": "default", "uid": "u-1"}}


class Clock:
    def __init__(self, now: datetime) -> None:
        self.now = now

    def __call__(self) -> datetime:
        return self.now


def event(message: str, *, reason: str = "ReflectStatusFailed", name: str = "web.1") -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Event", "metadata": {"name": name, "namespace": "karmada-es-east"},
            "involvedObject": {"apiVersion": "work.karmada.io/v1alpha1", "kind": "Work", "name": "web",
                               "namespace": "karmada-es-east", "uid": "u-1"},
            "reason": reason, "message": message, "type": "Warning", "source": {"component": "gpufed-hub"},
            "reportingComponent": "gpufed-hub", "firstTimestamp": "t0", "lastTimestamp": "t0", "count": 1}


def test_a_repeated_event_updates_the_first() -> None:
    correlator = EventCorrelator()
    first = correlator.correlate(event("boom", name="web.1"), now=START)
    assert not first.updates and first.event["count"] == 1
    again = correlator.correlate({**event("boom", name="web.2"), "lastTimestamp": "t1"}, now=START)
    assert again.updates and again.key == first.key
    assert (again.event["metadata"]["name"], again.event["count"]) == ("web.1", 2)
    assert (again.event["firstTimestamp"], again.event["lastTimestamp"]) == ("t0", "t1")
    # Another reason, or another message, is another Event.
    assert not correlator.correlate(event("boom", reason="InterpretHealthFailed", name="web.3"), now=START).updates
    assert not correlator.correlate(event("bang", name="web.4"), now=START).updates


def test_similar_events_are_combined_after_ten() -> None:
    correlator = EventCorrelator()
    for index in range(9):
        correlated = correlator.correlate(event(f"failure {index}", name=f"web.{index}"), now=START)
        assert not correlated.updates and correlated.event["message"] == f"failure {index}"
    tenth = correlator.correlate(event("failure 9", name="web.9"), now=START + timedelta(seconds=1))
    assert not tenth.updates
    assert tenth.event["message"] == "(combined from similar events): failure 9"
    eleventh = correlator.correlate(event("failure 10", name="web.10"), now=START + timedelta(seconds=2))
    assert eleventh.updates and eleventh.event["metadata"]["name"] == "web.9" and eleventh.event["count"] == 2
    assert eleventh.event["message"] == "(combined from similar events): failure 10"
    # More than 10 minutes after the last similar one: counted afresh.
    later = correlator.correlate(event("failure 11", name="web.11"), now=START + timedelta(minutes=11))
    assert not later.updates and later.event["message"] == "failure 11"


async def test_record_event_grows_the_count_of_one_event(objects: ObjectStore) -> None:
    clock = Clock(START)
    ctx = ControllerContext(objects, settings=FAST, clock=clock)
    rt = objects.registry.require("v1", "Event")

    async def recorded() -> list[dict[str, Any]]:
        return [e for e in (await objects.list(rt, namespace="default")).items if e["reason"] == "ReflectStatusFailed"]

    for _ in range(3):
        await record_event(ctx, WORK, type=EventType.WARNING, reason=EventReason.REFLECT_STATUS_FAILED, message="boom")
        clock.now += timedelta(seconds=10)
    [stored] = await recorded()
    assert (stored["count"], stored["message"]) == (3, "boom")
    assert (stored["firstTimestamp"], stored["lastTimestamp"]) == ("2026-03-01T12:00:00Z", "2026-03-01T12:00:20Z")

    # Deleted meanwhile: created again, its count going on.
    await objects.delete(rt, namespace="default", name=stored["metadata"]["name"])
    await record_event(ctx, WORK, type=EventType.WARNING, reason=EventReason.REFLECT_STATUS_FAILED, message="boom")
    [again] = await recorded()
    assert (again["metadata"]["name"], again["count"]) == (stored["metadata"]["name"], 4)

    # A new message is a new Event.
    await record_event(ctx, WORK, type=EventType.WARNING, reason=EventReason.REFLECT_STATUS_FAILED, message="bang")
    assert sorted((e["message"], e["count"]) for e in await recorded()) == [("bang", 1), ("boom", 4)]
