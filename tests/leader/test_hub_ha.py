"""Two hub replicas on one etcd: both serve the API, one runs the controllers (and shows it in
the gpufed-system/gpufed-controllers Lease), and the other takes over when it stops."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

import aiohttp

from controlplane.apis import constants as c
from controlplane.apiserver import errors
from controlplane.apiserver.kubeconfig import load_kubeconfig
from controlplane.apiserver.tls import client_ssl_context
from controlplane.hub import Hub
from controlplane.hubconfig import HubConfig
from controlplane.hubleading import LEADER_LEASE_NAME
from controlplane.storage import EmbeddedEtcd

LIMIT = 20.0


#: The leader Lease's TTL: the leader steps down when it has not renewed for 2/3 of it, so a TTL of
#: 2 s lost the lead to a 1.3 s stall of a loaded machine (once in CI: the test's follower still ran
#: the controllers it was tearing down). The handover under test is a resignation, which does not
#: wait for the TTL.
LEASE_TTL = 6


def replica(tmp_path: Path, etcd: EmbeddedEtcd, name: str) -> Hub:
    return Hub(HubConfig(
        state_dir=tmp_path / name, port=0, etcd_endpoints=(etcd.client_url,), etcd_tls=etcd.client_tls, identity=name,
        leader_lease_ttl=LEASE_TTL, cluster_monitor_grace_period=0.5,
    ))


async def eventually(probe: Callable[[], Any], what: str) -> Any:
    try:
        async with asyncio.timeout(LIMIT):
            while True:
                value = await probe()
                if value:
                    return value
                await asyncio.sleep(0.05)
    except TimeoutError:
        raise AssertionError(f"timed out waiting for {what}") from None


async def readyz(hub: Hub) -> int:
    creds = load_kubeconfig(hub.kubeconfig_path)
    connector = aiohttp.TCPConnector(ssl=client_ssl_context(creds.ca_pem))
    async with (
        aiohttp.ClientSession(connector=connector, timeout=aiohttp.ClientTimeout(total=10)) as session,
        session.get(f"{hub.url}/readyz", headers={"Authorization": f"Bearer {creds.token}"}) as resp,
    ):
        return resp.status


def rt(hub: Hub, api_version: str, kind: str) -> Any:
    assert hub.objects is not None
    return hub.objects.registry.require(api_version, kind)


async def get(hub: Hub, api_version: str, kind: str, name: str, namespace: str | None = None) -> dict[str, Any] | None:
    assert hub.objects is not None
    try:
        return await hub.objects.get(rt(hub, api_version, kind), namespace=namespace, name=name)
    except errors.NotFound:
        return None


async def add_cluster(hub: Hub, name: str) -> None:
    assert hub.objects is not None
    await hub.objects.create(rt(hub, "cluster.gpufed.io/v1alpha1", "Cluster"), {
        "apiVersion": "cluster.gpufed.io/v1alpha1", "kind": "Cluster", "metadata": {"name": name},
        "spec": {"provider": "onprem"},
    })


async def leader_lease_holder(hub: Hub) -> str | None:
    lease = await get(hub, "coordination.k8s.io/v1", "Lease", LEADER_LEASE_NAME, c.SYSTEM_NAMESPACE)
    return None if lease is None else str(lease["spec"]["holderIdentity"])


async def runs_controllers(via: Hub, cluster: str) -> None:
    """The leader's controllers act: the cluster gets its execution namespace and, with no
    agent heartbeat past the (short) start-up grace, the health monitor marks it unreachable."""
    await add_cluster(via, cluster)

    async def acted() -> bool:
        namespace = await get(via, "v1", "Namespace", f"{c.EXECUTION_NAMESPACE_PREFIX}{cluster}")
        obj = await get(via, "cluster.gpufed.io/v1alpha1", "Cluster", cluster)
        taints = {(t["key"], t["effect"]) for t in ((obj or {}).get("spec") or {}).get("taints") or ()}
        # NoSchedule: with every cluster unreachable the hub suspects itself and sets no NoExecute.
        return namespace is not None and (c.TAINT_UNREACHABLE, "NoSchedule") in taints

    await eventually(acted, f"the leader's controllers to act on cluster {cluster}")


async def test_two_replicas_one_leader_and_handover(tmp_path: Path, etcd: EmbeddedEtcd) -> None:
    async with replica(tmp_path, etcd, "hub-a") as a, replica(tmp_path, etcd, "hub-b") as b:
        assert a.elector is not None and b.elector is not None

        async def one_leader() -> Hub | None:
            leaders = [h for h in (a, b) if h.elector is not None and h.elector.is_leader]
            assert len(leaders) <= 1
            return leaders[0] if leaders else None

        leader: Hub = await eventually(one_leader, "a leader")
        follower = b if leader is a else a
        assert await readyz(leader) == 200 and await readyz(follower) == 200
        assert await eventually(lambda: leader_lease_holder(follower), "the leader Lease") == leader.config.identity
        assert follower.controllers is None and follower.health is None
        await runs_controllers(follower, "gpu-1")

        await leader.shutdown()  # resigns
        assert await eventually(one_leader, "the follower to take over") is follower

        async def holder_is_follower() -> bool:
            return bool(await leader_lease_holder(follower) == follower.config.identity)

        await eventually(holder_is_follower, "the Lease to name the new leader")
        lease = await get(follower, "coordination.k8s.io/v1", "Lease", LEADER_LEASE_NAME, c.SYSTEM_NAMESPACE)
        assert lease is not None and lease["spec"]["leaseTransitions"] == 1
        await runs_controllers(follower, "gpu-2")
