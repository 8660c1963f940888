"""kube's work estimate (request/list_work_estimator.go, mutating_work_estimator.go, width.go), with
kube's own width cases: a LIST one seat per 100 objects gone through, from the cache or the store,
at least 1, at most 10 or the level's maximum; a write seen by 10 or more watches its final seats
and additional latency; a watch with its initial events as a LIST from the cache; the watch counts
(watch_tracker.go) and the watch cache's object counts they read."""

from __future__ import annotations

import asyncio

import pytest

from controlplane.apiserver.flowcontrol import FlowControlConfig, FlowController
from controlplane.apiserver.flowcontrol.counting import WatchCounts
from controlplane.apiserver.flowcontrol.estimating import (
    WorkEstimate,
    level_max_seats,
    list_seats,
    mutating_estimate,
    request_estimate,
    seats_limit,
)
from controlplane.apiserver.objects import ObjectStore
from controlplane.apiserver.routing import RequestInfo
from controlplane.apiserver.watchcache import WatchCache

from ..kinds import WIDGET, widget
from .test_queueing import ALICE, classify


@pytest.mark.parametrize(
    ("query", "stored", "seats"),
    [
        ({"resourceVersion": "0"}, 799, 8),  # served from the cache: every object
        ({}, 299, 6),  # a consistent list reads the store: twice every object
        ({}, 799, 10),  # ... at most 10 seats
        ({"resourceVersion": "0", "limit": "399"}, 799, 8),  # from the cache: the limit does not help
        ({"limit": "399"}, 799, 8),  # from the store: twice the limit
        ({"limit": "399", "resourceVersion": "1"}, 799, 8),
        ({"resourceVersion": "1", "resourceVersionMatch": "Exact"}, 799, 10),  # 2 x 799, at most 10
        ({"continue": "token", "limit": "199"}, 799, 4),
        ({"labelSelector": "app=x", "limit": "199"}, 799, 10),  # the count plus the limit
        ({"fieldSelector": "metadata.name=x", "limit": "50"}, 300, 4),
        ({}, 0, 1),  # never fewer than one seat
        ({"resourceVersion": "0"}, 101, 2),
        ({}, None, 1),  # a resource whose count is unknown (kube: ObjectCountNotFoundErr)
        ({"limit": "x"}, 250, 5),  # a limit that is not a number is no limit
    ],
)
def test_list_width(query: dict[str, str], stored: int | None, seats: int) -> None:
    assert list_seats(stored, query) == seats


def _pods(group: str, plural: str) -> int | None:
    return 500 if (group, plural) == ("", "pods") else None


def _no_watches(_info: RequestInfo, _name: str | None) -> int:
    return 0


@pytest.mark.parametrize(
    ("verb", "query", "level_max", "seats"),
    [
        ("list", {}, 0, 10),
        ("list", {}, 8, 8),  # global-default's maximum at 600 seats
        ("list", {"fieldSelector": "metadata.name=one"}, 0, 1),  # kube: a list of one name is a get
        ("get", {}, 0, 1),
        ("create", {}, 0, 1),
        ("watch", {}, 0, 1),  # a watch takes one seat while it starts...
        ("watch", {"sendInitialEvents": "true"}, 0, 5),  # ... its initial events as a LIST from the cache
        ("watch", {"sendInitialEvents": "false"}, 0, 1),
        # kube's reading of a query boolean: any value but 0 and false (any case) is true.
        ("watch", {"sendInitialEvents": "yes"}, 0, 5),
        ("watch", {"sendInitialEvents": ""}, 0, 5),
        ("watch", {"sendInitialEvents": "FALSE"}, 0, 1),
    ],
)
def test_the_estimate_by_verb(verb: str, query: dict[str, str], level_max: int, seats: int) -> None:
    info = RequestInfo("/api/v1/pods", verb, True, "", "v1", None, "pods")
    estimate = request_estimate(info, query, objects=_pods, watches=_no_watches, level_max=level_max)
    assert estimate == WorkEstimate(seats)
    assert request_estimate(None, {}, objects=_pods, watches=_no_watches) == WorkEstimate(1)


@pytest.mark.parametrize(
    ("nominal", "hand_size", "most"),
    [
        # kube's max(1, min(ceil(0.15 x nominal), nominal / handSize)), as in kube's Test_GetMaxSeats
        (5, 6, 1), (10, 6, 1), (15, 6, 2), (20, 6, 3), (35, 6, 5),
        (49, 6, 8),  # global-default of 600 seats
        (245, 6, 37),  # workload-low: 10 once the estimators' limit applies
    ],
)
def test_a_levels_maximum_seats(nominal: int, hand_size: int, most: int) -> None:
    assert level_max_seats(nominal, hand_size) == most
    assert seats_limit(most) == min(most, 10)


@pytest.mark.parametrize(
    ("watches", "maximum", "expected"),
    [
        (0, 10, WorkEstimate(1, 0, 0.0)),
        (9, 10, WorkEstimate(1, 0, 0.0)),  # fewer than 10 watches: nothing after the answer
        (10, 10, WorkEstimate(1, 1, 0.005)),  # a tenth of a seat each for 5 ms: 1 seat for 5 ms
        (25, 10, WorkEstimate(1, 3, 0.005)),
        (150, 10, WorkEstimate(1, 10, 0.0075)),  # 15 seats x 5 ms reshaped to 10 seats x 7.5 ms
        (150, 8, WorkEstimate(1, 8, 0.009375)),
        (1000, 10, WorkEstimate(1, 10, 0.05)),
    ],
)
def test_a_write_keeps_seats_for_its_watchers(watches: int, maximum: int, expected: WorkEstimate) -> None:
    estimate = mutating_estimate(watches, maximum=maximum)
    assert (estimate.initial_seats, estimate.final_seats) == (expected.initial_seats, expected.final_seats)
    assert estimate.additional_latency == pytest.approx(expected.additional_latency)
    assert estimate.max_seats == max(1, expected.final_seats)


def _info(verb: str, path: str, namespace: str | None, name: str | None = None, *, resource: str = "configmaps",
          subresource: str = "") -> RequestInfo:
    return RequestInfo(path, verb, True, "", "v1", namespace, resource, name, subresource)


def test_the_watches_a_write_may_be_seen_by() -> None:
    counts = WatchCounts()
    forgets = [
        counts.register(_info("watch", "/api/v1/configmaps", None), {}),  # every namespace
        counts.register(_info("watch", "/api/v1/namespaces/a/configmaps", "a"), {}),
        counts.register(_info("watch", "/api/v1/namespaces/a/configmaps", "a"), {"labelSelector": "x=y"}),
        counts.register(_info("watch", "/api/v1/namespaces/a/configmaps", "a"), {"fieldSelector": "metadata.name=one"}),
        counts.register(_info("watch", "/api/v1/namespaces/b/configmaps", "b"), {}),
        counts.register(_info("watch", "/api/v1/pods", None, resource="pods"), {"fieldSelector": "spec.nodeName=n1"}),
        counts.register(_info("watch", "/api/v1/pods", None, resource="pods"), {}),
    ]
    assert len(counts) == 6  # the pods of one node are not counted (kube's watch cache index)
    assert counts.interested(_info("create", "/api/v1/namespaces/a/configmaps", "a"), None) == 3
    assert counts.interested(_info("update", "/api/v1/namespaces/a/configmaps/one", "a", "one"), "one") == 4
    assert counts.interested(_info("delete", "/api/v1/namespaces/b/configmaps/two", "b", "two"), "two") == 2
    assert counts.interested(_info("get", "/api/v1/namespaces/a/configmaps/one", "a", "one"), "one") == 0
    assert counts.interested(_info("patch", "/api/v1/namespaces/a/pods/p", "a", "p", resource="pods"), "p") == 1
    for forget in forgets:
        forget()
    assert len(counts) == 0
    assert counts.interested(_info("create", "/api/v1/namespaces/a/configmaps", "a"), None) == 0


def test_a_write_with_many_watchers_is_estimated_from_the_counts() -> None:
    counts = WatchCounts()
    for _ in range(25):
        counts.register(_info("watch", "/api/v1/namespaces/a/configmaps", "a"), {})
    write = _info("create", "/api/v1/namespaces/a/configmaps", "a")
    seen: list[int] = []
    estimate = request_estimate(write, {}, objects=None, watches=counts.interested, observe_watches=seen.append)
    assert (estimate.initial_seats, estimate.final_seats, seen) == (1, 3, [25])
    # A token request writes nothing a watch sees (kube's isRequestExemptFromWatchEvents).
    token = _info("create", "/api/v1/namespaces/a/serviceaccounts/x/token", "a", "x", resource="serviceaccounts",
                  subresource="token")
    assert request_estimate(token, {}, objects=None, watches=lambda _i, _n: 99) == WorkEstimate(1)


async def test_a_wide_list_holds_its_seats() -> None:
    controller = FlowController(FlowControlConfig(total_concurrency=600))
    flow = classify(ALICE, verb="list", group="", resource="configmaps")
    level = controller.levels["global-default"]
    async with controller.seat(flow, WorkEstimate(10)):
        assert (level.executing, level.seats_in_use) == (1, 10)
    assert (level.executing, level.seats_in_use) == (0, 0)


async def test_the_watch_cache_counts_the_objects_of_a_resource(objects_on: ObjectStore) -> None:
    objects = objects_on
    cache = WatchCache(objects)
    try:
        assert cache.object_count(WIDGET.group, WIDGET.plural) is None  # not cached yet
        for name, namespace in (("a", "default"), ("b", "default"), ("c", "kube-system")):
            await objects.create(WIDGET, widget(name, namespace=namespace))
        await cache.listed(WIDGET)
        assert cache.object_count(WIDGET.group, WIDGET.plural) == 3
        await objects.delete(WIDGET, namespace="default", name="a")
        async with asyncio.timeout(10):
            while True:  # the cache follows the store's watch
                if cache.object_count(WIDGET.group, WIDGET.plural) == 2:
                    break
                await asyncio.sleep(0.01)
        assert cache.object_count(WIDGET.group, "gadgets") is None
    finally:
        await cache.close()


async def test_a_write_holds_its_final_seats_after_its_answer() -> None:
    controller = FlowController(FlowControlConfig(total_concurrency=600))
    flow = classify(ALICE, verb="create", group="", resource="configmaps")
    level = controller.levels["global-default"]
    seats = controller.metrics.executing_seats.labels("global-default", "global-default")
    async with controller.seat(flow, WorkEstimate(1, 3, 0.005)):  # 30 watches: 3 seats for 5 ms after
        assert (level.executing, level.seats_in_use, seats._value.get()) == (1, 3, 3)
    # Answered: no longer executing, its seats kept for its additional latency.
    assert (level.executing, level.seats_in_use, seats._value.get()) == (0, 3, 3)
    async with asyncio.timeout(10):
        while True:  # released on the event loop's timer
            if not level.seats_in_use:
                break
            await asyncio.sleep(0.001)
    assert (seats._value.get(), level.requests) == (0, {})
