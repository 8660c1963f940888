"""Pure Event bookkeeping: kube's recorder correlation (count, timestamps), TTL and per-namespace cap."""

from __future__ import annotations

from typing import Any

import pytest

from controlplane.apis.events import EventType
from simulator.clock import rfc3339
from simulator.events import EventAction, EventBook, EventReason

T0 = 1_700_000_000.0


def _pod(name: str = "p", namespace: str = "ns") -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "uid": f"uid-{name}", "resourceVersion": "7"},
    }


def _observe(book: EventBook, pod: dict[str, Any], message: str, now: float, **kw: Any) -> Any:
    return book.observe(
        pod,
        component="default-scheduler",
        type=kw.get("type", EventType.WARNING),
        reason=kw.get("reason", EventReason.FAILED_SCHEDULING),
        message=message,
        action=EventAction.SCHEDULING,
        now=now,
    )


def test_same_event_counts_up() -> None:
    book = EventBook()
    first = _observe(book, _pod(), "0/2 nodes are available: 2 Insufficient nvidia.com/gpu.", T0)
    again = _observe(book, _pod(), "0/2 nodes are available: 2 Insufficient nvidia.com/gpu.", T0 + 30)
    assert again is first and len(book) == 1
    event = again.to_manifest()
    assert event["count"] == 2
    assert event["firstTimestamp"] == rfc3339(T0) and event["lastTimestamp"] == rfc3339(T0 + 30)
    assert event["metadata"]["name"] == f"p.{int(T0 * 1e9):x}"
    assert event["involvedObject"] == {
        "apiVersion": "v1", "kind": "Pod", "namespace": "ns", "name": "p", "uid": "uid-p", "resourceVersion": "7",
    }
    assert event["source"] == {"component": "default-scheduler"}
    assert event["reportingComponent"] == "default-scheduler"
    assert (event["type"], event["reason"], event["action"]) == ("Warning", "FailedScheduling", "Scheduling")


@pytest.mark.parametrize(
    ("other", "message", "reason"),
    [
        (_pod(), "0/2 nodes are available: 2 Insufficient cpu.", EventReason.FAILED_SCHEDULING),  # new message
        (_pod("q"), "0/2 nodes are available: 2 Insufficient nvidia.com/gpu.", EventReason.FAILED_SCHEDULING),
        (_pod(), "0/2 nodes are available: 2 Insufficient nvidia.com/gpu.", EventReason.SCHEDULED),
    ],
)
def test_different_events_stay_apart(other: dict[str, Any], message: str, reason: EventReason) -> None:
    book = EventBook()
    first = _observe(book, _pod(), "0/2 nodes are available: 2 Insufficient nvidia.com/gpu.", T0)
    second = _observe(book, other, message, T0, reason=reason)
    assert second is not first and len(book) == 2
    assert first.count == 1 and second.count == 1
    assert first.name != second.name  # one object, one instant: still two names


def test_events_expire_after_ttl_from_last_occurrence() -> None:
    book = EventBook(ttl=3600)
    old = _observe(book, _pod("a"), "m", T0)
    kept = _observe(book, _pod("b"), "m", T0)
    _observe(book, _pod("b"), "m", T0 + 1800)  # seen again: its TTL starts over
    assert book.next_expiry() == T0 + 3600
    assert book.expire(T0 + 3599) == []
    assert book.expire(T0 + 3600) == [old]
    assert list(book.records.values()) == [kept]
    assert book.next_expiry() == T0 + 1800 + 3600
    # An expired Event that happens again is a new Event.
    again = _observe(book, _pod("a"), "m", T0 + 3700)
    assert again is not old and again.count == 1


def test_namespace_cap_drops_least_recently_seen() -> None:
    book = EventBook(max_per_namespace=2)
    a = _observe(book, _pod("a"), "m", T0)
    b = _observe(book, _pod("b"), "m", T0 + 1)
    _observe(book, _pod("a"), "m", T0 + 2)
    other_ns = _observe(book, _pod("z", "other"), "m", T0)
    c = _observe(book, _pod("c"), "m", T0 + 3)
    assert book.expire(T0 + 4) == [b]
    assert sorted(r.name for r in book.records.values()) == sorted(r.name for r in (a, c, other_ns))


def test_load_takes_back_stored_events() -> None:
    book = EventBook()
    stored = _observe(EventBook(), _pod(), "m", T0).to_manifest()
    stored["count"] = 4
    stored["metadata"]["resourceVersion"] = "12"
    record = book.load(stored)
    assert record is not None and record.count == 4
    again = _observe(book, _pod(), "m", T0 + 5)
    assert again is record and again.to_manifest()["count"] == 5
    assert again.name == stored["metadata"]["name"]
    assert book.load({"metadata": {"name": "x"}}) is None
