"""kube's work estimate of a LIST (request/list_work_estimator.go), with kube's own width cases:
one seat per 100 objects gone through, from the cache or the store, at least 1, at most 10; and
the watch cache's object counts it reads."""

from __future__ import annotations

import asyncio

import pytest

from controlplane.apiserver.flowcontrol import FlowControlConfig, FlowController
from controlplane.apiserver.flowcontrol.estimating import list_seats, request_seats
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


@pytest.mark.parametrize(("verb", "seats"), [("list", 10), ("get", 1), ("create", 1), ("watch", 1)])
def test_only_lists_of_resources_are_wider(verb: str, seats: int) -> None:
    info = RequestInfo("/api/v1/pods", verb, True, "", "v1", None, "pods")
    assert request_seats(info, {}, lambda group, plural: 500 if (group, plural) == ("", "pods") else None) == seats
    assert request_seats(None, {}, lambda group, plural: 500) == 1


async def test_a_wide_list_holds_its_seats() -> None:
    controller = FlowController(FlowControlConfig(total_concurrency=600))
    flow = classify(ALICE, verb="list", group="", resource="configmaps")
    level = controller.levels["global-default"]
    async with controller.seat(flow, 10):
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
