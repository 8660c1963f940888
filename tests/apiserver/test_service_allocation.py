"""A Service's cluster IP and node ports, allocated on the hub as kube-apiserver allocates them:
on both stores, across object layers sharing one store (two hub replicas, a restarted hub),
with kube's refusals word for word, and the repair that frees what a failed write left taken."""

from __future__ import annotations

import asyncio
import random
import uuid
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer

from controlplane.apiserver import errors
from controlplane.apiserver.app import create_app
from controlplane.apiserver.objects import ObjectStore
from controlplane.apiserver.resources import Registry, ResourceType
from controlplane.apiserver.serviceallocation import AllocationRepair, IPRange, PortRange, ServiceAllocator
from controlplane.apiserver.serviceallocation.records import Owner
from controlplane.apiserver.serviceallocation.repair import LEAK_PASSES
from controlplane.storage import Store
from tests.controllers.fleet import namespace_controller, namespace_gone

RANGE = "10.96.0.0/28"  # 14 addresses: 10.96.0.1 - 10.96.0.14
PORTS = "30000-30009"
SERVICES = "/api/v1/namespaces/default/services"


def allocator_on(store: Store) -> ServiceAllocator:
    """Allocation over ``store``; every replica draws the same sequence, so their draws collide."""
    cluster_ips, node_ports = IPRange.parse(RANGE), PortRange.parse(PORTS)
    return ServiceAllocator(store, cluster_ips=cluster_ips, node_ports=node_ports, rng=random.Random(7))


def hub_objects(store: Store, registry: Registry) -> ObjectStore:
    """One hub replica's object layer over ``store``, allocating as the hub does."""
    objects = ObjectStore(store, registry)
    objects.allocate_with(allocator_on(store))
    return objects


def service(name: str, *, kind: str | None = None, namespace: str = "default", **spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"ports": [{"port": 80}], **spec}
    if kind:
        body["type"] = kind
    return {"apiVersion": "v1", "kind": "Service", "metadata": {"name": name, "namespace": namespace}, "spec": body}


@pytest.fixture
def hub(objects_on: ObjectStore) -> ObjectStore:
    """The object layer over each store, allocating as the hub does."""
    objects_on.allocate_with(allocator_on(objects_on.store))
    return objects_on


@pytest.fixture
def svc_type(api_registry: Registry) -> ResourceType:
    return api_registry.require("v1", "Service")


async def test_a_cluster_ip_service_gets_an_address_of_the_range_and_kube_ip_family_fields(
    hub: ObjectStore, svc_type: ResourceType
) -> None:
    created = await hub.create(svc_type, service("web"))
    spec = created["spec"]
    assert IPRange.parse(RANGE).offset_of(spec["clusterIP"]) is not None
    assert spec["clusterIPs"] == [spec["clusterIP"]]
    assert spec["ipFamilies"] == ["IPv4"]
    assert spec["ipFamilyPolicy"] == "SingleStack"
    assert spec["internalTrafficPolicy"] == "Cluster"
    stored = await hub.get(svc_type, namespace="default", name="web")
    assert stored["spec"]["clusterIP"] == spec["clusterIP"]


async def test_addresses_are_unique_until_the_range_is_full(hub: ObjectStore, svc_type: ResourceType) -> None:
    ips = {(await hub.create(svc_type, service(f"s{i}")))["spec"]["clusterIP"] for i in range(14)}
    assert len(ips) == 14
    with pytest.raises(errors.Invalid) as caught:
        await hub.create(svc_type, service("one-too-many"))
    # kube's words, as a 422's cause: the request cannot succeed until a Service goes (kube: 500)
    assert [(c.field, c.message) for c in caught.value.causes] == [
        ("spec.clusterIPs", "failed to allocate a serviceIP: range is full")]
    await hub.delete(svc_type, namespace="default", name="s3")
    again = await hub.create(svc_type, service("after-delete"))
    assert again["spec"]["clusterIP"] not in ips - {again["spec"]["clusterIP"]}


async def test_a_requested_address_is_honoured_and_a_taken_or_outside_one_is_kubes_422(
    hub: ObjectStore, svc_type: ResourceType
) -> None:
    created = await hub.create(svc_type, service("dns", clusterIP="10.96.0.10"))
    assert created["spec"]["clusterIPs"] == ["10.96.0.10"]
    with pytest.raises(errors.Invalid) as taken:
        await hub.create(svc_type, service("dns2", clusterIP="10.96.0.10"))
    assert taken.value.message == (
        'Service "dns2" is invalid: spec.clusterIPs: Invalid value: []string{"10.96.0.10"}: '
        "failed to allocate IP 10.96.0.10: provided IP is already allocated"
    )
    with pytest.raises(errors.Invalid) as outside:
        await hub.create(svc_type, service("far", clusterIP="10.0.0.5"))
    assert outside.value.message == (
        'Service "far" is invalid: spec.clusterIPs: Invalid value: []string{"10.0.0.5"}: failed to allocate IP '
        "10.0.0.5: provided IP is not in the valid range. The range of valid IPs is 10.96.0.0/28"
    )
    with pytest.raises(errors.Invalid) as malformed:
        await hub.create(svc_type, service("bad", clusterIP="10.96.0.300"))
    assert "spec.clusterIPs[0]: Invalid value: \"10.96.0.300\": must be a valid IP address" in malformed.value.message


async def test_headless_and_external_name_services_take_no_address(hub: ObjectStore, svc_type: ResourceType) -> None:
    headless = await hub.create(svc_type, service("db", clusterIP="None", selector={"app": "db"}))
    assert headless["spec"]["clusterIPs"] == ["None"]
    assert headless["spec"]["ipFamilies"] == ["IPv4"]
    bare = await hub.create(svc_type, service("bare", clusterIP="None"))
    assert bare["spec"]["ipFamilyPolicy"] == "RequireDualStack"
    assert bare["spec"]["ipFamilies"] == ["IPv4", "IPv6"]
    external = await hub.create(
        svc_type, service("ext", kind="ExternalName", externalName="db.example.com", ports=[])
    )
    assert "clusterIP" not in external["spec"]
    assert "ipFamilies" not in external["spec"]
    allocator = allocator_on(hub.store)
    assert [r.value for r in await allocator.ip_records.read_all()] == []


async def test_a_type_change_releases_and_allocates(hub: ObjectStore, svc_type: ResourceType) -> None:
    created = await hub.create(svc_type, service("flip", clusterIP="10.96.0.5"))
    flipped = dict(created, spec={"type": "ExternalName", "externalName": "x.example.com", **{
        k: v for k, v in created["spec"].items() if k != "type"}})
    turned = await hub.update(svc_type, flipped)
    assert "clusterIP" not in turned["spec"] and "ipFamilyPolicy" not in turned["spec"]
    assert [r.value for r in await allocator_on(hub.store).ip_records.read_all()] == []
    await hub.create(svc_type, service("taker", clusterIP="10.96.0.5"))  # free again
    back = dict(turned, spec={**turned["spec"], "type": "ClusterIP"})
    back["spec"].pop("externalName")
    restored = await hub.update(svc_type, back)
    assert restored["spec"]["clusterIP"] not in ("", "10.96.0.5")
    assert restored["spec"]["ipFamilies"] == ["IPv4"]


async def test_an_update_that_leaves_allocated_values_out_keeps_them(hub: ObjectStore, svc_type: ResourceType) -> None:
    created = await hub.create(svc_type, service("keep", kind="NodePort"))
    port = created["spec"]["ports"][0]["nodePort"]
    replaced = service("keep", kind="NodePort")
    replaced["metadata"]["labels"] = {"tier": "web"}
    updated = await hub.update(svc_type, replaced)
    assert updated["spec"]["clusterIP"] == created["spec"]["clusterIP"]
    assert updated["spec"]["ports"][0]["nodePort"] == port
    changed = dict(updated, spec={**updated["spec"], "clusterIP": "10.96.0.9", "clusterIPs": ["10.96.0.9"]})
    with pytest.raises(errors.Invalid):
        await hub.update(svc_type, changed)


async def test_node_ports_are_drawn_named_refused_and_released(hub: ObjectStore, svc_type: ResourceType) -> None:
    web = await hub.create(svc_type, service("web", kind="NodePort", ports=[
        {"name": "http", "port": 80}, {"name": "dns", "port": 53, "protocol": "UDP"},
        {"name": "dns-tcp", "port": 53, "protocol": "TCP"},
    ]))
    ports = [p["nodePort"] for p in web["spec"]["ports"]]
    assert all(PortRange.parse(PORTS).offset_of(p) is not None for p in ports)
    assert ports[1] == ports[2] and ports[0] != ports[1]  # one number serves 53/UDP and 53/TCP
    with pytest.raises(errors.Invalid) as taken:
        await hub.create(svc_type, service("clash", kind="NodePort", ports=[{"port": 81, "nodePort": ports[0]}]))
    assert taken.value.message == (
        f'Service "clash" is invalid: spec.ports[0].nodePort: Invalid value: {ports[0]}: provided port is already allocated'
    )
    with pytest.raises(errors.Invalid) as outside:
        await hub.create(svc_type, service("low", kind="NodePort", ports=[{"port": 81, "nodePort": 8080}]))
    assert outside.value.message == (
        'Service "low" is invalid: spec.ports[0].nodePort: Invalid value: 8080: provided port is not in the valid '
        "range. The range of valid ports is 30000-30009"
    )
    to_cluster_ip = dict(web, spec={**web["spec"], "type": "ClusterIP"})
    updated = await hub.update(svc_type, to_cluster_ip)
    assert all("nodePort" not in p for p in updated["spec"]["ports"])
    assert "externalTrafficPolicy" not in updated["spec"]
    named = await hub.create(svc_type, service("named", kind="NodePort", ports=[{"port": 81, "nodePort": ports[0]}]))
    assert named["spec"]["ports"][0]["nodePort"] == ports[0]


async def test_load_balancers_get_node_ports_unless_told_not_and_a_health_check_port_when_local(
    hub: ObjectStore, svc_type: ResourceType
) -> None:
    plain = await hub.create(svc_type, service("lb", kind="LoadBalancer"))
    assert plain["spec"]["ports"][0]["nodePort"]
    bare = await hub.create(svc_type, service("lb-bare", kind="LoadBalancer", allocateLoadBalancerNodePorts=False))
    assert "nodePort" not in bare["spec"]["ports"][0]
    local = await hub.create(svc_type, service("lb-local", kind="LoadBalancer", externalTrafficPolicy="Local"))
    health = local["spec"]["healthCheckNodePort"]
    assert PortRange.parse(PORTS).offset_of(health) is not None
    assert health != local["spec"]["ports"][0]["nodePort"]
    with pytest.raises(errors.Invalid) as taken:
        await hub.create(svc_type, service(
            "lb-clash", kind="LoadBalancer", externalTrafficPolicy="Local", healthCheckNodePort=health
        ))
    assert [(c.field, c.message) for c in taken.value.causes] == [("spec.healthCheckNodePort", (
        f"Invalid value: {health}: failed to allocate requested HealthCheck NodePort {health}: "
        "provided port is already allocated"
    ))]
    # The refused create took nothing: its drawn node port is free again.
    held = {int(r.value) for r in await allocator_on(hub.store).port_records.read_all()}
    assert held == {plain["spec"]["ports"][0]["nodePort"], local["spec"]["ports"][0]["nodePort"], health}


async def test_node_ports_run_out_with_a_422_that_names_the_ports(hub: ObjectStore, svc_type: ResourceType) -> None:
    for i in range(10):  # the test range holds 10 ports
        await hub.create(svc_type, service(f"np{i}", kind="NodePort"))
    with pytest.raises(errors.Invalid) as caught:
        await hub.create(svc_type, service("np-too-many", kind="NodePort"))
    assert [(c.field, c.message) for c in caught.value.causes] == [
        ("spec.ports", "failed to allocate a nodePort: range is full")]
    await hub.delete(svc_type, namespace="default", name="np4")
    assert (await hub.create(svc_type, service("np-after", kind="NodePort")))["spec"]["ports"][0]["nodePort"]


@pytest.mark.parametrize("dry_run", [False, True])
async def test_a_health_check_port_that_is_one_of_the_services_own_node_ports_is_refused(
    hub: ObjectStore, svc_type: ResourceType, dry_run: bool
) -> None:
    """kube allocates the node ports first, so the health check port then finds its own
    Service's number taken (kube's allocator answers 500; the hub 422 with its words)."""
    clash = service("lb-self", kind="LoadBalancer", externalTrafficPolicy="Local", healthCheckNodePort=30003,
                    ports=[{"port": 80, "nodePort": 30003}])
    with pytest.raises(errors.Invalid) as refused:
        await hub.create(svc_type, clash, dry_run=dry_run)
    assert [(c.field, c.message) for c in refused.value.causes] == [("spec.healthCheckNodePort", (
        "Invalid value: 30003: failed to allocate requested HealthCheck NodePort 30003: "
        "provided port is already allocated"
    ))]
    assert not await allocator_on(hub.store).port_records.read_all()
    # An update to Local naming a node port the Service held until now is refused as well.
    cluster = await hub.create(svc_type, service("lb-later", kind="LoadBalancer", ports=[{"port": 80, "nodePort": 30004}]))
    local = dict(cluster, spec={**cluster["spec"], "externalTrafficPolicy": "Local", "healthCheckNodePort": 30004})
    with pytest.raises(errors.Invalid):
        await hub.update(svc_type, local)
    local["spec"]["healthCheckNodePort"] = 30005
    assert (await hub.update(svc_type, local))["spec"]["healthCheckNodePort"] == 30005


async def test_a_dry_run_fills_the_fields_and_takes_nothing(hub: ObjectStore, svc_type: ResourceType) -> None:
    answer = await hub.create(svc_type, service("dry", kind="NodePort"), dry_run=True)
    assert answer["spec"]["clusterIP"] == "10.96.0.0"  # kube's dry run shows the range's base
    assert answer["spec"]["ports"][0]["nodePort"] == 32769
    allocator = allocator_on(hub.store)
    assert await allocator.ip_records.read_all() == [] and await allocator.port_records.read_all() == []


async def test_deleting_a_namespace_releases_its_services(hub: ObjectStore, svc_type: ResourceType) -> None:
    ns_type = hub.registry.require("v1", "Namespace")
    await hub.create(ns_type, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team"}})
    await hub.create(svc_type, service("web", kind="NodePort", namespace="team"))
    async with namespace_controller(hub):
        await hub.delete(ns_type, name="team")
        await namespace_gone(hub, "team")
    allocator = allocator_on(hub.store)
    assert await allocator.ip_records.read_all() == [] and await allocator.port_records.read_all() == []


async def test_two_replicas_racing_for_one_address_one_wins(store: Store, api_registry: Registry) -> None:
    replicas = [hub_objects(store, api_registry), hub_objects(store, api_registry)]
    await replicas[0].bootstrap()
    svc_type = api_registry.require("v1", "Service")
    for round_ in range(5):
        ip = f"10.96.0.{round_ + 1}"
        results = await asyncio.gather(
            *(r.create(svc_type, service(f"race-{round_}-{i}", clusterIP=ip)) for i, r in enumerate(replicas)),
            return_exceptions=True,
        )
        won = [r for r in results if isinstance(r, dict)]
        lost = [r for r in results if isinstance(r, errors.Invalid)]
        assert len(won) == 1 and len(lost) == 1, results
        assert "provided IP is already allocated" in lost[0].message
    drawn = await asyncio.gather(*(replicas[i % 2].create(svc_type, service(f"drawn-{i}")) for i in range(9)))
    assert len({d["spec"]["clusterIP"] for d in drawn}) == 9


async def test_allocations_survive_a_restarted_hub(store: Store, api_registry: Registry) -> None:
    first = hub_objects(store, api_registry)
    await first.bootstrap()
    svc_type = api_registry.require("v1", "Service")
    kept = await first.create(svc_type, service("kept", kind="NodePort"))
    restarted = hub_objects(store, api_registry)  # a new hub process over the same store
    with pytest.raises(errors.Invalid):
        await restarted.create(svc_type, service("again", clusterIP=kept["spec"]["clusterIP"]))
    with pytest.raises(errors.Invalid):
        port = kept["spec"]["ports"][0]["nodePort"]
        await restarted.create(svc_type, service("again", kind="NodePort", ports=[{"port": 80, "nodePort": port}]))


async def test_the_repair_frees_leaks_after_three_passes_and_records_what_services_hold(
    hub: ObjectStore, svc_type: ResourceType, store: Store
) -> None:
    allocator = allocator_on(hub.store)
    # A create whose hub died between taking the address and storing the Service.
    await allocator.ip_records.claim("10.96.0.7", Owner("default", "ghost", "uid-1"))
    # A Service stored without a record (before the hub allocated, or a record lost).
    unrecorded = ObjectStore(store, hub.registry)  # no allocation: writes as the hub once did
    await unrecorded.create(svc_type, service("old", clusterIP="10.96.0.8", clusterIPs=["10.96.0.8"]))
    repair = AllocationRepair(hub, allocator, interval=0)
    first = await repair.repair_once()
    assert first.recorded == 1 and first.freed == 0
    for _ in range(LEAK_PASSES - 2):
        assert (await repair.repair_once()).freed == 0
    assert (await repair.repair_once()).freed == 1
    assert {r.value for r in await allocator.ip_records.read_all()} == {"10.96.0.8"}
    with pytest.raises(errors.Invalid):
        await hub.create(svc_type, service("dup", clusterIP="10.96.0.8"))
    await hub.create(svc_type, service("reuse", clusterIP="10.96.0.7"))



async def test_a_service_stored_before_the_hub_allocated_gets_an_address_on_its_next_write_not_a_status_one(
    hub: ObjectStore, svc_type: ResourceType, store: Store
) -> None:
    await ObjectStore(store, hub.registry).create(svc_type, service("legacy"))  # no allocation
    stored = await hub.get(svc_type, namespace="default", name="legacy")
    assert "clusterIP" not in stored["spec"]
    status = {**stored, "status": {"loadBalancer": {"ingress": [{"ip": "192.0.2.1"}]}}}
    after_status = await hub.update_status(svc_type, status)
    assert "clusterIP" not in after_status["spec"]
    assert await allocator_on(store).ip_records.read_all() == []
    labelled = dict(after_status, metadata={**after_status["metadata"], "labels": {"a": "b"}})
    updated = await hub.update(svc_type, labelled)
    assert [r.value for r in await allocator_on(store).ip_records.read_all()] == [updated["spec"]["clusterIP"]]


@pytest.mark.parametrize("dry_run", [False, True])
async def test_a_service_created_by_a_put_of_its_status_gets_no_allocated_value(
    hub: ObjectStore, api_registry: Registry, store: Store, dry_run: bool
) -> None:
    """kube's Service status store is a copy of the main store taken before the main store's
    allocation hooks (``BeginCreate``, ``BeginUpdate``) are set (``NewREST`` in
    pkg/registry/core/service/storage/storage.go): the Service a PUT of a missing one's status
    creates has no cluster IP, no node port and no IP family fields, and takes nothing from the
    pools. The same Service created through the main resource gets them."""
    query = "?dryRun=All" if dry_run else ""
    async with TestClient(TestServer(create_app(hub, api_registry))) as client:
        answer = await client.put(f"{SERVICES}/web/status{query}", json=service("web", kind="NodePort"))
        assert answer.status == 201, await answer.text()
        spec = (await answer.json())["spec"]
        allocated = {"clusterIP", "clusterIPs", "ipFamilies", "ipFamilyPolicy"}
        assert not allocated & set(spec) and "nodePort" not in spec["ports"][0], spec
        if not dry_run:
            stored = await (await client.get(f"{SERVICES}/web")).json()
            assert not allocated & set(stored["spec"]) and "nodePort" not in stored["spec"]["ports"][0], stored
        assert await allocator_on(store).ip_records.read_all() == []
        assert await allocator_on(store).port_records.read_all() == []
        created = await client.post(f"{SERVICES}{query}", json=service("main", kind="NodePort"))
        assert created.status == 201, await created.text()
        main = (await created.json())["spec"]
        assert allocated <= set(main) and main["ports"][0]["nodePort"], main


async def test_two_hub_processes_on_one_etcd_never_share_an_address(etcd_endpoint: str, api_registry: Registry) -> None:
    """Two etcd clients (two hub processes) over one etcd: the create-if-absent of etcd decides."""
    from controlplane.storage import EtcdStore

    prefix = f"/gpufed-test/{uuid.uuid4().hex}"
    async with EtcdStore([etcd_endpoint], prefix=prefix) as one, EtcdStore([etcd_endpoint], prefix=prefix) as two:
        replicas = [hub_objects(one, api_registry), hub_objects(two, api_registry)]
        await replicas[0].bootstrap()
        svc_type = api_registry.require("v1", "Service")
        drawn = await asyncio.gather(
            *(replicas[i % 2].create(svc_type, service(f"s{i}", kind="NodePort")) for i in range(9))
        )
    assert len({d["spec"]["clusterIP"] for d in drawn}) == 9
    assert len({d["spec"]["ports"][0]["nodePort"] for d in drawn}) == 9
