"""A simulated member allocates a Service's cluster IP and node ports as a real member's API
does (the hub's allocator, over the member's own store): ``kubectl get svc`` against it shows a
``CLUSTER-IP``, a headless Service keeps ``None``, and a delete gives the address back."""

from __future__ import annotations

import ipaddress
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from controlplane.apiserver.serviceallocation import DEFAULT_SERVICE_CLUSTER_IP_RANGE
from simulator.profile import parse_fleet
from simulator.server import SimServer, SimServerConfig

FLEET = {"clusters": [{"name": "s", "nodeGroups": [{"name": "cpu", "count": 1, "cpu": 8, "memoryGiB": 32}]}]}


@pytest.fixture
async def member(tmp_path: Path) -> AsyncIterator[SimServer]:
    profile = parse_fleet(FLEET).clusters[0]
    config = SimServerConfig(profile=profile, state_dir=tmp_path, seed=1, snapshot_interval=None)
    async with SimServer(config) as server:
        yield server


def _service(name: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"selector": {"app": name}, "ports": [{"port": 80, "targetPort": 8080}], **spec},
    }


async def test_a_member_allocates_a_services_cluster_ip_and_node_ports(member: SimServer) -> None:
    objects = member.objects
    service_rt = objects.registry.require("v1", "Service")
    web = await objects.create(service_rt, _service("web"))
    ip = web["spec"]["clusterIP"]
    assert ipaddress.ip_address(ip) in ipaddress.ip_network(DEFAULT_SERVICE_CLUSTER_IP_RANGE)
    assert (web["spec"]["clusterIPs"], web["spec"]["ipFamilies"]) == ([ip], ["IPv4"])

    exposed = await objects.create(service_rt, _service("exposed", type="NodePort"))
    assert 30000 <= exposed["spec"]["ports"][0]["nodePort"] <= 32767
    headless = await objects.create(service_rt, _service("headless", clusterIP="None"))
    assert headless["spec"]["clusterIP"] == "None"

    # The address the first Service held is free again once it is deleted.
    await objects.delete(service_rt, namespace="default", name="web")
    again = await objects.create(service_rt, _service("again", clusterIP=ip))
    assert again["spec"]["clusterIP"] == ip
