"""Leader election among a cluster's agents (client-go's algorithm on a Lease), against a real
simulated member's API served over HTTP: a free Lease won at once, renewals, a second candidate
that waits, a takeover once the leader stops renewing, a release that hands over at once, and
a leader that stops when it cannot renew."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes_asyncio.client import ApiClient, Configuration

from controlplane.apis import proxyframing as framing
from controlplane.apis.proxyframing import ProxyRequest
from e2e.harness import free_port
from gpufed.cli import build_parser
from member_agent.agent import Agent
from member_agent.config import config_from_args
from member_agent.electing import ElectionTiming, LeaderElector, LeadershipLost, lease_name
from member_agent.kubeapi import Conflict, Forbidden, KubeApi
from member_agent.tunnel import AgentTunnel
from member_agent.tunnelupgrades import AgentStream
from simulator.resources import member_registry
from tests.controllers.fleet import eventually
from tests.member_agent.memberapi import member_client, served_member
from tests.member_agent.test_agent_integration import (  # noqa: F401 (fixtures)
    CLUSTER,
    Hub,
    Member,
    hub,
    joining_agent_config,
    member,
)

pytestmark = pytest.mark.timeout(60)

NAMESPACE = "gpufed-system"
NAME = lease_name("onprem-a100")
LEASE = f"/apis/coordination.k8s.io/v1/namespaces/{NAMESPACE}/leases/{NAME}"
#: Short timings: the Lease says 1 s; renewals every 0.1 s, given up after 0.6 s.
FAST = ElectionTiming(lease_duration=1.0, renew_deadline=0.6, retry_period=0.1)


@contextlib.asynccontextmanager
async def lease_member() -> AsyncIterator[KubeApi]:
    async with served_member(member_registry()) as served, member_client(served.url) as api:
        yield api


def candidate(
    api: KubeApi, identity: str, timing: ElectionTiming = FAST, changes: list[bool] | None = None
) -> LeaderElector:
    return LeaderElector(
        api,
        namespace=NAMESPACE,
        name=NAME,
        identity=identity,
        timing=timing,
        on_change=None if changes is None else changes.append,
    )


async def spec(api: KubeApi) -> dict[str, Any]:
    lease = await api.get(LEASE)
    return dict(lease["spec"])


async def test_a_free_lease_is_won_at_once_and_renewed() -> None:
    async with lease_member() as api:
        changes: list[bool] = []
        # A retry period of a minute: the first try is made without waiting for one.
        slow = ElectionTiming(lease_duration=300, renew_deadline=200, retry_period=60)
        leader = candidate(api, "a", slow, changes)
        async with asyncio.timeout(10):
            await leader.acquire()
        assert leader.leading and changes == [True]
        first = await spec(api)
        assert first["holderIdentity"] == "a"
        assert first["leaseDurationSeconds"] == 300
        assert first["leaseTransitions"] == 0
        assert first["acquireTime"] == first["renewTime"]

        renewing = candidate(api, "a")
        await renewing.acquire()  # the same identity renews what it holds
        holding = asyncio.create_task(renewing.hold())
        try:
            await eventually(lambda: _renewed_since(api, first["renewTime"]))
            renewed = await spec(api)
            assert renewed["acquireTime"] == first["acquireTime"]
            assert renewed["leaseTransitions"] == 0 and renewed["holderIdentity"] == "a"
        finally:
            holding.cancel()


async def test_the_leader_renews_what_it_last_wrote_without_reading_it_first() -> None:
    async with served_member(member_registry()) as served, member_client(served.url) as api:
        leader = candidate(api, "a")
        await leader.acquire()
        served.requests.clear()
        holding = asyncio.create_task(leader.hold())
        try:
            await eventually(lambda: _renewals(served.requests, 3))
        finally:
            holding.cancel()
        # client-go's fast path: one PUT per renewal, carrying the resourceVersion it last wrote.
        assert {method for method, path, _ in served.requests if path == LEASE} == {"PUT"}


async def _renewals(requests: list[tuple[str, str, str]], count: int) -> bool:
    return sum(path == LEASE for _, path, _ in requests) >= count


async def _renewed_since(api: KubeApi, renew_time: str) -> bool:
    return bool((await spec(api))["renewTime"] != renew_time)


async def test_a_second_candidate_waits_while_the_leader_renews_and_takes_over_when_it_stops() -> None:
    async with lease_member() as api:
        leader, follower = candidate(api, "a"), candidate(api, "b")
        await leader.acquire()
        holding = asyncio.create_task(leader.hold())
        waiting = asyncio.create_task(follower.acquire())
        try:
            # Several lease durations' worth of renewals: the follower never gets in.
            seen: set[str] = set()
            while len(seen) < 15:
                seen.add((await spec(api))["renewTime"])
                await asyncio.sleep(0.05)
            assert not waiting.done() and not follower.leading
            assert (await spec(api))["holderIdentity"] == "a"

            holding.cancel()  # the leader dies: no release, its Lease expires
            async with asyncio.timeout(20):
                await waiting
            taken = await spec(api)
            assert follower.leading
            assert taken["holderIdentity"] == "b" and taken["leaseTransitions"] == 1
            assert taken["acquireTime"] == taken["renewTime"]
        finally:
            holding.cancel()
            waiting.cancel()


async def test_candidates_racing_for_the_lease_elect_exactly_one() -> None:
    async with lease_member() as api:
        long = ElectionTiming(lease_duration=120, renew_deadline=0.6, retry_period=0.1)
        # A released Lease: every candidate reads it free and updates it with the resourceVersion
        # it read; the API server's optimistic concurrency lets one update through (409 for the rest).
        first = candidate(api, "first", long)
        await first.acquire()
        await first.release()
        candidates = [candidate(api, name, long) for name in "abcd"]
        tasks = [asyncio.create_task(c.acquire()) for c in candidates]
        try:
            done, _ = await asyncio.wait(tasks, timeout=10, return_when=asyncio.FIRST_COMPLETED)
            assert len(done) == 1
            winner = (await spec(api))["holderIdentity"]

            async def all_saw_the_winner() -> bool:
                return all(c._observed_spec.get("holderIdentity") == winner for c in candidates)

            await eventually(all_saw_the_winner)
            assert [c.identity for c in candidates if c.leading] == [winner]
            assert sum(task.done() for task in tasks) == 1
        finally:
            for task in tasks:
                task.cancel()


async def test_a_released_lease_is_taken_at_the_next_try_not_after_the_lease_duration() -> None:
    async with lease_member() as api:
        # A Lease of two minutes: the follower could only wait it out by the test's timeout.
        long = ElectionTiming(lease_duration=120, renew_deadline=0.6, retry_period=0.1)
        changes: list[bool] = []
        leader, follower = candidate(api, "a", long, changes), candidate(api, "b", long)
        await leader.acquire()
        waiting = asyncio.create_task(follower.acquire())
        await asyncio.sleep(0.3)
        assert not waiting.done()
        await leader.release()
        assert changes == [True, False] and not leader.leading
        async with asyncio.timeout(10):
            await waiting
        taken = await spec(api)
        assert taken["holderIdentity"] == "b" and taken["leaseTransitions"] == 1


async def test_a_leader_that_cannot_renew_stops_leading() -> None:
    async with lease_member() as api:
        changes: list[bool] = []
        leader = candidate(api, "a", changes=changes)
        await leader.acquire()
        holding = asyncio.create_task(leader.hold())
        # Someone else takes the Lease (an admin, or a candidate that saw it expire).
        lease = await api.get(LEASE)
        lease["spec"] = {**lease["spec"], "holderIdentity": "intruder", "leaseDurationSeconds": 60}
        await api.replace(LEASE, lease)
        with pytest.raises(LeadershipLost, match=r"leader election lost.*held by intruder"):
            async with asyncio.timeout(10):
                await holding
        assert changes == [True, False] and not leader.leading
        assert (await spec(api))["holderIdentity"] == "intruder"
        await leader.release()  # not the leader: nothing written
        assert (await spec(api))["holderIdentity"] == "intruder"


async def test_a_leader_cut_off_from_its_member_stops_within_the_renew_deadline() -> None:
    """client-go's renew deadline bounds the term whatever the reason: a leader whose own path to
    the member is cut (refused connections) while a follower still reaches it stops leading before
    that follower can take the Lease, so the two never lead together."""
    async with lease_member() as api, member_client(f"http://127.0.0.1:{free_port()}") as nowhere:
        leader = candidate(api, "a")
        follower = candidate(api, "b")
        await leader.acquire()
        leader.api = nowhere  # the leader's path to the member breaks; the follower's does not
        await _stops_before_the_follower_leads(leader, follower)


async def _stops_before_the_follower_leads(leader: LeaderElector, follower: LeaderElector) -> None:
    """``leader`` holding and ``follower`` waiting: the leader loses its term (renewals failing
    for the renew deadline) and has stopped leading when the follower takes over."""
    overlap: list[bool] = []
    follower._on_change = lambda leading: overlap.append(leading and leader.leading)
    holding = asyncio.create_task(leader.hold())
    waiting = asyncio.create_task(follower.acquire())
    try:
        with pytest.raises(LeadershipLost, match=r"not renewed within 0\.6s \(held by a; last error: "):
            async with asyncio.timeout(10):
                await holding
        assert not leader.leading
        async with asyncio.timeout(10):
            await waiting
        assert overlap == [False] and follower.leading
    finally:
        holding.cancel()
        waiting.cancel()


async def test_a_leader_whose_renewals_are_refused_stops_within_the_renew_deadline() -> None:
    async with lease_member() as api:
        leader = candidate(api, "a")
        await leader.acquire()

        async def refuse(method: str, path: str, **_: Any) -> dict[str, Any]:
            raise Forbidden(
                403, "Forbidden", f'leases "{NAME}" is forbidden: User "agent" cannot {method} it'
            )

        api.request = refuse  # type: ignore[method-assign]
        with pytest.raises(LeadershipLost, match=r"not renewed within 0\.6s \(held by a; last error: 403"):
            async with asyncio.timeout(10):
                await leader.hold()
        assert not leader.leading


async def test_the_renew_deadline_bounds_a_round_of_slow_renewals() -> None:
    """A slow member, whose every update hangs as long as the request may last and is then refused:
    the renew deadline bounds the whole round (client-go's ``context.WithTimeout(RenewDeadline)``),
    not each request, so the leader has stopped before a follower sees the Lease expire."""
    async with (
        served_member(member_registry()) as served,
        member_client(served.url) as api,
        member_client(served.url) as other,
    ):
        leader, follower = candidate(api, "a"), candidate(other, "b")
        await leader.acquire()
        request = api.request

        async def slow(method: str, path: str, **kwargs: Any) -> dict[str, Any]:
            if method != "PUT":
                return await request(method, path, **kwargs)
            await asyncio.sleep(kwargs.get("request_timeout") or 60)
            raise Forbidden(403, "Forbidden", "slow, then refused")

        api.request = slow  # type: ignore[method-assign]
        await _stops_before_the_follower_leads(leader, follower)


def test_the_election_flags_are_karmada_agents() -> None:
    parser = build_parser()
    base = ["agent", "--hub", "https://hub:6443", "--cluster-name", "onprem-a100", "--state-dir", "/tmp/x"]
    config = config_from_args(parser.parse_args(base))
    assert config.leader_elect is False
    assert (
        config.leader_elect_lease_duration,
        config.leader_elect_renew_deadline,
        config.leader_elect_retry_period,
    ) == (15, 10, 2)
    assert config.leader_elect_resource_namespace == "gpufed-system"
    given = config_from_args(
        parser.parse_args(
            [
                *base,
                "--leader-elect",
                "--leader-elect-lease-duration",
                "1m",
                "--leader-elect-renew-deadline",
                "30s",
                "--leader-elect-retry-period",
                "500ms",
                "--leader-elect-resource-namespace",
                "agents",
            ]
        )
    )
    assert given.leader_elect
    assert (
        given.leader_elect_lease_duration,
        given.leader_elect_renew_deadline,
        given.leader_elect_retry_period,
    ) == (60, 30, 0.5)
    assert given.leader_elect_resource_namespace == "agents"
    with pytest.raises(
        ValueError, match=r"renewDeadline must be greater than retryPeriod\*JitterFactor\(1.2\)"
    ):
        config_from_args(parser.parse_args([*base, "--leader-elect", "--leader-elect-retry-period", "9s"]))
    # The Lease holds whole seconds: a duration it cannot say is refused, naming the nearest ones.
    with pytest.raises(
        ValueError,
        match=r"--leader-elect-lease-duration 15\.5s is not a whole number of seconds .*leaseDurationSeconds.*"
        r"15s or 16s",
    ):
        config_from_args(
            parser.parse_args([*base, "--leader-elect", "--leader-elect-lease-duration", "15.5s"])
        )
    with pytest.raises(ValueError, match="leaseDuration must be greater than renewDeadline"):
        config_from_args(parser.parse_args([*base, "--leader-elect", "--leader-elect-renew-deadline", "15s"]))


async def test_an_agent_that_loses_its_lease_stops_everything_it_runs(
    hub: Hub,  # noqa: F811
    member: Member,  # noqa: F811
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="member_agent.agent")
    config = (await joining_agent_config(hub, member, tmp_path / "agent")).model_copy(
        update={
            "leader_elect": True,
            "leader_elect_lease_duration": 1.0,
            "leader_elect_renew_deadline": 0.6,
            "leader_elect_retry_period": 0.1,
        }
    )
    agent = Agent(config)
    running = agent.spawn()
    try:
        async with asyncio.timeout(30):
            await agent.registered.wait()
        clients = (agent.hub, agent.member)
        assert not any(client.fenced for client in clients if client is not None)
        gauge = agent.metrics.leader.labels(CLUSTER)
        assert gauge._value.get() == 1
        assert f"became leader of cluster {CLUSTER}" in caplog.text
        leases = member.objects.registry.require("coordination.k8s.io/v1", "Lease")
        lease = await member.objects.get(leases, namespace=NAMESPACE, name=lease_name(CLUSTER))
        await member.objects.update(
            leases, {**lease, "spec": {**lease["spec"], "holderIdentity": "intruder"}}
        )
        # run() ends with the loss: its task group, every loop the leader ran, has ended.
        with pytest.raises(LeadershipLost, match="held by intruder"):
            async with asyncio.timeout(30):
                await running
        assert gauge._value.get() == 0
        assert f"stopped leading cluster {CLUSTER}" in caplog.text
        # Fenced the moment the loss was known, then closed.
        assert all(client is not None and client.fenced for client in clients)
        assert agent.hub is None and agent.member is None
        # Not the leader any more: nothing is released (the intruder keeps the Lease).
        lease = await member.objects.get(leases, namespace=NAMESPACE, name=lease_name(CLUSTER))
        assert lease["spec"]["holderIdentity"] == "intruder"
    finally:
        if not running.done():
            await agent.shutdown()


async def test_a_fenced_client_sends_reads_but_no_write() -> None:
    async with served_member(member_registry()) as served, member_client(served.url) as api:
        api.fenced = True
        before = len(served.requests)
        assert (await api.get("/api/v1/namespaces/default"))["metadata"]["name"] == "default"
        configmap = {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "x", "namespace": "default"},
        }
        with pytest.raises(asyncio.CancelledError, match="no longer leads its cluster"):
            await api.create("/api/v1/namespaces/default/configmaps", configmap)
        assert [method for method, _, _ in served.requests[before:]] == ["GET"]


async def test_an_agent_stopped_cleanly_releases_its_lease_after_its_loops_end(
    hub: Hub,  # noqa: F811
    member: Member,  # noqa: F811
    tmp_path: Path,
) -> None:
    config = await joining_agent_config(hub, member, tmp_path / "agent")
    agent = Agent(config.model_copy(update={"leader_elect": True}))
    leases = member.objects.registry.require("coordination.k8s.io/v1", "Lease")
    async with agent:
        async with asyncio.timeout(30):
            await agent.registered.wait()
        held = await member.objects.get(leases, namespace=NAMESPACE, name=lease_name(CLUSTER))
        elector = agent.elector
        assert elector is not None and held["spec"]["holderIdentity"] == elector.identity
    released = await member.objects.get(leases, namespace=NAMESPACE, name=lease_name(CLUSTER))
    assert released["spec"]["holderIdentity"] == ""
    assert released["spec"]["leaseDurationSeconds"] == 1
    assert released["spec"]["leaseTransitions"] == held["spec"]["leaseTransitions"]


async def test_losing_the_lease_cancels_the_proxy_tunnels_streams_at_once() -> None:
    """The fence covers the proxy tunnel: a stream in flight, which would go on writing to the
    member with the agent's client, is cancelled the moment the loss is known, and a request the
    hub sends from then on is not served."""
    parser = build_parser()
    config = config_from_args(
        parser.parse_args(
            ["agent", "--hub", "https://hub:6443", "--cluster-name", CLUSTER, "--state-dir", "/x"]
        )
    )
    agent = Agent(config)
    nowhere = Configuration(host=f"http://127.0.0.1:{free_port()}")
    async with ApiClient(nowhere) as hub_client, ApiClient(nowhere) as member_api:
        tunnel = AgentTunnel(cluster=CLUSTER, hub=hub_client, member=member_api)
        agent.tunnel = tunnel
        stream = AgentStream(1024)
        stream.task = asyncio.create_task(asyncio.Event().wait())  # a stream in flight
        tunnel._streams[1] = stream
        agent._leading_changed(False)
        with pytest.raises(asyncio.CancelledError):
            async with asyncio.timeout(10):
                await stream.task
        opened = framing.open_frame(2, ProxyRequest("PUT", "/api/v1/namespaces/default/configmaps/x"), b"{}")
        tunnel._receive(None, framing.encode(opened))  # type: ignore[arg-type]
        assert 2 not in tunnel._streams


async def test_a_release_is_bounded_as_a_whole_by_one_renew_deadline() -> None:
    """client-go's release runs under one renew deadline: its update refused with a conflict, the
    read and the update again that follow get only the time left, not a renew deadline each."""
    async with lease_member() as api:
        leader = candidate(api, "a")
        await leader.acquire()
        request = api.request
        given: list[tuple[str, float]] = []

        async def slow(method: str, path: str, **kwargs: Any) -> dict[str, Any]:
            timeout = kwargs.get("request_timeout") or 60
            given.append((method, timeout))
            if method == "PUT" and len(given) == 1:  # half the time, then a conflict
                await asyncio.sleep(timeout / 2)
                raise Conflict(409, "Conflict", "the object has been modified")
            if method == "PUT":  # the update again hangs
                await asyncio.sleep(timeout)
            return await request(method, path, **kwargs)

        api.request = slow  # type: ignore[method-assign]
        async with asyncio.timeout(10):
            await leader.release()
        assert not leader.leading
        assert [method for method, _ in given] == ["PUT", "GET", "PUT"]
        # The read and the second update share what the first left of the 0.6 s.
        assert all(timeout <= 0.31 for _, timeout in given[1:])
