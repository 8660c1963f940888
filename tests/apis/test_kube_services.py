"""kube's Service strategy (what an update keeps and a type change drops), its IP family fields on
a single-stack cluster, and the two allocation ranges: pure, table-driven."""

from __future__ import annotations

import copy
import random
from typing import Any

import pytest

from controlplane.apis.kube import services
from controlplane.apis.kube.validate_core import validate_service
from controlplane.apiserver.serviceallocation.ranges import IPRange, PortRange, next_free


def _svc(**spec: Any) -> dict[str, Any]:
    return {"metadata": {"name": "s"}, "spec": {"ports": [{"name": "http", "port": 80}], **spec}}


NODE_PORT = _svc(type="NodePort", clusterIP="10.96.0.9", clusterIPs=["10.96.0.9"], ipFamilies=["IPv4"],
                 ipFamilyPolicy="SingleStack", externalTrafficPolicy="Cluster",
                 ports=[{"name": "http", "port": 80, "nodePort": 30080}])


@pytest.mark.parametrize(
    ("why", "request_spec", "expected"),
    [
        (
            "a replace without the allocated values keeps them",
            {"type": "NodePort", "ports": [{"name": "http", "port": 80}]},
            {"clusterIP": "10.96.0.9", "clusterIPs": ["10.96.0.9"], "ipFamilies": ["IPv4"],
             "ipFamilyPolicy": "SingleStack", "nodePorts": [30080]},
        ),
        (
            "a node port the request names stays",
            {"type": "NodePort", "ports": [{"name": "http", "port": 80, "nodePort": 30099}]},
            {"clusterIP": "10.96.0.9", "nodePorts": [30099]},
        ),
        (
            "to ExternalName: the address, families, node ports and traffic policy go",
            {**NODE_PORT["spec"], "type": "ExternalName", "externalName": "x.example.com"},
            {"clusterIP": None, "clusterIPs": None, "ipFamilies": None, "ipFamilyPolicy": None,
             "nodePorts": [None], "externalTrafficPolicy": None},
        ),
        (
            "to ClusterIP: the node ports and traffic policy go, the address stays",
            {**NODE_PORT["spec"], "type": "ClusterIP"},
            {"clusterIP": "10.96.0.9", "nodePorts": [None], "externalTrafficPolicy": None},
        ),
        (
            "a changed singular address moves the plural along (validation judges it)",
            {**NODE_PORT["spec"], "clusterIP": "10.96.0.10"},
            {"clusterIP": "10.96.0.10", "clusterIPs": ["10.96.0.10"]},
        ),
    ],
)
def test_prepare_update(why: str, request_spec: dict[str, Any], expected: dict[str, Any]) -> None:
    new = _svc()
    new["spec"] = copy.deepcopy(request_spec)
    services.prepare_update(new, copy.deepcopy(NODE_PORT))
    spec = new["spec"]
    for key, value in expected.items():
        if key == "nodePorts":
            assert [p.get("nodePort") for p in spec["ports"]] == value, why
        else:
            assert spec.get(key) == value, why


@pytest.mark.parametrize(
    ("spec", "policy", "families", "error"),
    [
        ({"selector": {"a": "b"}}, "SingleStack", ["IPv4"], None),
        ({"clusterIP": "None", "clusterIPs": ["None"], "selector": {"a": "b"}}, "SingleStack", ["IPv4"], None),
        ({"clusterIP": "None", "clusterIPs": ["None"]}, "RequireDualStack", ["IPv4", "IPv6"], None),
        ({"ipFamilyPolicy": "RequireDualStack"}, None, None,
         'spec.ipFamilyPolicy: Invalid value: "RequireDualStack": this cluster is not configured for dual-stack services'),
        ({"ipFamilies": ["IPv6"]}, None, None, 'spec.ipFamilies[0]: Invalid value: "IPv6": not configured on this cluster'),
        ({"clusterIP": "fd00::1", "clusterIPs": ["fd00::1"]}, None, None,
         'spec.clusterIPs[0]: Invalid value: []string{"fd00::1"}: IPv6 is not configured on this cluster'),
        ({"type": "ExternalName"}, None, None, None),
    ],
)
def test_ip_family_fields_on_a_single_stack_cluster(
    spec: dict[str, Any], policy: str | None, families: list[str] | None, error: str | None
) -> None:
    found = services.init_ip_families(spec, family="IPv4")
    assert [f"{e.field}: {e.message}" for e in found] == ([error] if error else [])
    if error is None:
        assert spec.get("ipFamilyPolicy") == policy and spec.get("ipFamilies") == families


@pytest.mark.parametrize(
    ("text", "size", "static_band", "first", "last"),
    [
        ("10.0.0.0/24", 254, 16, "10.0.0.1", "10.0.0.254"),
        ("10.96.0.0/12", 2**20 - 2, 256, "10.96.0.1", "10.111.255.254"),
        ("10.96.0.0/28", 14, 0, "10.96.0.1", "10.96.0.14"),
        ("fd00::/64", 65535, 256, "fd00::1", "fd00::ffff"),
    ],
)
def test_ip_ranges_as_kube_sizes_them(text: str, size: int, static_band: int, first: str, last: str) -> None:
    pool = IPRange.parse(text)
    assert (pool.size, pool.static_band) == (size, static_band)
    assert pool.value_at(0) == first and pool.value_at(size - 1) == last
    assert pool.offset_of(first) == 0 and pool.offset_of(last) == size - 1
    assert pool.offset_of(str(pool.network.network_address)) is None  # the network address is never handed out


def test_node_port_range_and_the_draw_order() -> None:
    ports = PortRange.parse("30000-32767")
    assert (ports.size, ports.static_band) == (2768, 86)
    assert ports.offset_of(29999) is None and ports.offset_of(32767) == 2767
    rng = random.Random(1)
    # The static band is drawn from only once every slot above it is taken.
    assert next_free(10, 4, set(), rng) in range(4, 10)
    assert next_free(10, 4, set(range(4, 10)), rng) in range(0, 4)
    assert next_free(10, 4, set(range(10)), rng) is None
    for bad in ("32767-30000", "0-10", "a-b", "30000-70000"):
        with pytest.raises(ValueError):
            PortRange.parse(bad)


@pytest.mark.parametrize(
    ("spec", "errors"),
    [
        ({"type": "ExternalName", "externalName": "x.example.com"}, []),
        ({"type": "ExternalName", "clusterIP": "10.96.0.1", "clusterIPs": ["10.96.0.1"], "ipFamilyPolicy": "SingleStack"},
         ["spec.clusterIPs: Forbidden: may not be set for ExternalName services",
          "spec.ipFamilyPolicy: Forbidden: may not be set for ExternalName services"]),
        ({"type": "NodePort", "clusterIP": "None", "clusterIPs": ["None"]},
         ["spec.clusterIPs[0]: Invalid value: \"None\": may not be set to 'None' for NodePort services"]),
        ({"clusterIP": "10.96.0.1", "clusterIPs": ["10.96.0.2"]},
         ['spec.clusterIPs: Invalid value: []string{"10.96.0.2"}: first value must match `clusterIP`']),
        ({"clusterIPs": ["10.96.0.2"]},
         ['spec.clusterIPs: Invalid value: []string{"10.96.0.2"}: must be empty when `clusterIP` is not specified']),
        ({"clusterIP": "x", "clusterIPs": ["x"]},
         ['spec.clusterIPs[0]: Invalid value: "x": must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)']),
        ({"ipFamilyPolicy": "Single"},
         ['spec.ipFamilyPolicy: Unsupported value: "Single": supported values: "PreferDualStack", "RequireDualStack", '
          '"SingleStack"']),
    ],
)
def test_cluster_ip_fields_validation(spec: dict[str, Any], errors: list[str]) -> None:
    assert [f"{e.field}: {e.message}" for e in services.cluster_ip_fields_errors(spec)] == errors


def test_two_ports_may_not_share_a_node_port_and_protocol() -> None:
    ports = [{"name": "a", "port": 80, "nodePort": 30080}, {"name": "b", "port": 81, "nodePort": 30080},
             {"name": "c", "port": 82, "protocol": "UDP", "nodePort": 30080}]
    found = validate_service({"metadata": {"name": "s"}, "spec": {"type": "NodePort", "ports": ports}}, None)
    assert [f"{e.field}: {e.message}" for e in found] == ["spec.ports[1].nodePort: Duplicate value: 30080"]
