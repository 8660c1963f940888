"""A hub replica that loses its leadership term and wins it again keeps nothing of the lost term.

Each term builds its controllers, informers, queues and caches afresh and lists every kind into
them: a copy of the fleet's objects. What a lost term built is full of reference cycles (a
controller and its loop, a cancelled task's traceback and the frames it names), and under the
hub process's garbage-collector policy what survived a freeze is looked at only by a full pass
(:mod:`controlplane.gcpolicy`): each lost term kept its copy of the fleet until the hourly one.

A real hub (embedded etcd, HTTPS) runs under that policy, with no periodic full pass at all; the
test freezes whatever lives once each term runs, as the policy does every few seconds, then ends
the term by revoking its lease (as etcd expires it when renewals stop), several times over. It
counts the copies of the fleet's objects alive (garbage included: it collects nothing itself)
and checks that every earlier term's controller manager, context, informers, scheduler, health
monitor and token controller are gone.
"""

from __future__ import annotations

import asyncio
import gc
import itertools
import logging
import weakref
from pathlib import Path
from typing import Any

import pytest

from controlplane.apiserver.objects import ObjectStore
from controlplane.gcpolicy import CollectorPolicy
from controlplane.hub import Hub, run_until_signalled
from controlplane.hubconfig import HubConfig
from tests.controllers.fleet import deployment, eventually, node_shape, propagation_policy, put_cluster

#: The fleet's objects carry this name prefix; the test counts their copies in memory.
MARK = "term-probe-"
WORKLOADS = 40
TERMS = 3


def live_copies() -> int:
    """Objects (dicts) of the fleet alive in this process, garbage not yet collected included:
    the frozen ones too (unfrozen to be listed, frozen again at once, with no collection between)."""
    gc.unfreeze()
    try:
        count = 0
        for obj in gc.get_objects():
            if type(obj) is dict:
                meta = obj.get("metadata")
                if type(meta) is dict and str(meta.get("name", "")).startswith(MARK):
                    count += 1
        return count
    finally:
        gc.freeze()


async def put_fleet(objects: ObjectStore) -> None:
    for index in range(2):
        await put_cluster(objects, f"{MARK}cluster-{index}", node_shape(4, gpus=8))
    deployments = objects.registry.require("apps/v1", "Deployment")
    for index in range(WORKLOADS):
        await objects.create(deployments, deployment(f"{MARK}{index}", replicas=1))
    policies = objects.registry.require("policy.gpufed.io/v1alpha1", "PropagationPolicy")
    await objects.create(policies, propagation_policy(f"{MARK}policy"))


async def bindings_made(hub: Hub) -> bool:
    manager = hub.controllers
    if manager is None or not manager.started.is_set() or manager.context is None:
        return False
    names = {str(obj["metadata"]["name"]) for obj in manager.context.bindings.items()}
    return sum(name.startswith(MARK) for name in names) == WORKLOADS


def term_objects(hub: Hub) -> list[weakref.ref[Any]]:
    """The running term's manager, context, informers, scheduler, health monitor and token controller."""
    manager, health, tokens = hub.controllers, hub.health, hub.token_controller
    assert manager is not None and manager.context is not None and health is not None and tokens is not None
    context = manager.context
    return [weakref.ref(o) for o in (manager, context, manager.scheduler, health, tokens, *context.informers)]


async def lose_the_term(hub: Hub) -> None:
    """Revoke the leader's lease, as etcd does when renewals stop; wait for the next term's controllers."""
    assert hub.elector is not None and hub.store is not None
    lost = hub.elector.term
    assert lost is not None
    await hub.store.revoke_lease(lost.lease_id)

    async def next_term() -> bool:
        assert hub.elector is not None
        term = hub.elector.term
        return term is not None and term.revision > lost.revision and await bindings_made(hub)

    await eventually(next_term, what="the hub to lead again with its controllers synced")


async def test_a_replica_keeps_nothing_of_the_terms_it_lost(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    # pytest keeps every record logged during the test, and with them the errors they name (a
    # deposed leader's fenced writes), their tracebacks and whatever the frames held: a process
    # that only writes its log out keeps none of them.
    caplog.set_level(logging.CRITICAL)
    ready: asyncio.Queue[Hub] = asyncio.Queue()
    hub = Hub(HubConfig(state_dir=tmp_path / "hub", port=0, leader_lease_ttl=2))

    async def on_ready(running: Hub) -> None:
        await ready.put(running)

    policy = CollectorPolicy(freeze_interval=3600, full_interval=0)  # no full pass on a schedule
    serving = asyncio.create_task(run_until_signalled(hub, on_ready=on_ready, collector=policy))
    try:
        await asyncio.wait_for(ready.get(), timeout=60)
        assert hub.objects is not None
        await put_fleet(hub.objects)
        await eventually(lambda: bindings_made(hub), what="the first term's bindings")
        # The first term's informers share the objects of the API's watch cache (they came as its
        # events); a later term's lists are copies of their own, until the objects change again.
        await lose_the_term(hub)
        gc.freeze()
        one_term = live_copies()
        assert one_term >= 2 * WORKLOADS

        earlier: list[weakref.ref[Any]] = []
        counts = []
        for _ in range(TERMS):
            earlier.extend(term_objects(hub))
            await lose_the_term(hub)
            gc.freeze()  # what the new term built survived a freeze, as the policy's would
            counts.append(live_copies())
            alive = sorted({type(ref()).__name__ for ref in earlier if ref() is not None})
            assert alive == [], f"objects of a lost term still alive: {alive}"
        # No lost term's copy of the fleet is left: a lost term kept two or more copies per workload
        # (its bindings and workloads), while a term that lists its own copy of what it shared with
        # the API's watch cache before (the workloads, once they changed) adds one per workload, once.
        steps = [later - before for before, later in itertools.pairwise(counts)]
        assert max(counts) < one_term + 2 * WORKLOADS and max(steps) < 1.5 * WORKLOADS, (one_term, counts)
    finally:
        hub.request_stop()
        await asyncio.wait_for(serving, timeout=60)
        gc.unfreeze()
