"""A long list gives the event loop turns while it is decoded.

The hub's waste sampler and every controller's informer list all bindings and Works at once;
decoded in one go, thousands of them held the hub's event loop for seconds (its leader lease
and the agents' calls waited). :func:`decode_all` decodes a page
:data:`~controlplane.apiserver.objects.reading.DECODE_TURN` objects at a time with a turn for
the loop in between; the list is the same.
"""

from __future__ import annotations

import asyncio

from controlplane.apiserver.objects import ObjectStore
from controlplane.apiserver.objects.reading import DECODE_TURN


async def test_a_long_list_is_decoded_with_turns_for_the_loop(objects_on: ObjectStore) -> None:
    configmaps = objects_on.registry.require("v1", "ConfigMap")
    count = 2 * DECODE_TURN + 10
    for index in range(count):
        await objects_on.create(
            configmaps, {"metadata": {"name": f"cm{index:04d}", "namespace": "default"}, "data": {"i": str(index)}}
        )
    turns = 0

    async def tick() -> None:
        nonlocal turns
        while True:
            await asyncio.sleep(0)
            turns += 1

    ticker = asyncio.ensure_future(tick())
    await asyncio.sleep(0)
    before = turns
    try:
        listed = await objects_on.list(configmaps, namespace="default")
    finally:
        ticker.cancel()
    assert [obj["data"]["i"] for obj in listed.items] == [str(i) for i in range(count)]
    # The store's own awaits give turns too; the decoding adds one per DECODE_TURN objects.
    assert turns - before >= count // DECODE_TURN
