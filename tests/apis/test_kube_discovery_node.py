"""kube's defaulting, validation and ``kubectl get`` cells of EndpointSlice (discovery.k8s.io/v1)
and RuntimeClass (node.k8s.io/v1), as pure functions: each broken manifest gets kube's field
path and message, the manifest as it was passes."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import pytest

from controlplane.apis.kube.defaulting import for_kind as defaulter_for
from controlplane.apis.kube.validation import for_kind
from controlplane.apiserver.kinds import cells

Obj = dict[str, Any]


def endpoint_slice(**fields: Any) -> Obj:
    return {
        "apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
        "metadata": {"name": "web-abc", "labels": {"kubernetes.io/service-name": "web"}},
        "addressType": "IPv4",
        "endpoints": [{"addresses": ["10.0.0.7"], "conditions": {"ready": True}, "nodeName": "gpu-node-1"}],
        "ports": [{"name": "http", "port": 8000, "protocol": "TCP"}],
        **fields,
    }


def runtime_class(**fields: Any) -> Obj:
    return {
        "apiVersion": "node.k8s.io/v1", "kind": "RuntimeClass", "metadata": {"name": "nvidia"},
        "handler": "nvidia",
        "overhead": {"podFixed": {"cpu": "250m", "memory": "64Mi"}},
        "scheduling": {
            "nodeSelector": {"nvidia.com/gpu.present": "true"},
            "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
        },
        **fields,
    }


def errors_of(obj: Obj, old: Obj | None = None) -> list[tuple[str, str]]:
    group = obj["apiVersion"].rpartition("/")[0]
    validator = for_kind(group, obj["kind"])
    assert validator is not None
    return [(e.field, e.message) for e in validator(obj, old)]


def endpoint(*addresses: str, **fields: Any) -> Obj:
    return {"addresses": list(addresses), **fields}


CASES: list[tuple[str, Callable[[], Obj], Callable[[Obj], Any], str, str]] = [
    ("no-address-type", endpoint_slice, lambda o: o.pop("addressType"), "addressType", "Required value"),
    ("address-type", endpoint_slice, lambda o: o.update(addressType="IP"),
     "addressType", 'Unsupported value: "IP": supported values: "FQDN", "IPv4", "IPv6"'),
    ("too-many-endpoints", endpoint_slice, lambda o: o.update(endpoints=[endpoint("10.0.0.7")] * 1001),
     "endpoints", "Too many: 1001: must have at most 1000 items"),
    ("no-addresses", endpoint_slice, lambda o: o.update(endpoints=[endpoint()]),
     "endpoints[0].addresses", "Required value: must contain at least 1 address"),
    ("too-many-addresses", endpoint_slice, lambda o: o.update(endpoints=[endpoint(*["10.0.0.7"] * 101)]),
     "endpoints[0].addresses", "Too many: 101: must have at most 100 items"),
    ("not-ipv4", endpoint_slice, lambda o: o.update(endpoints=[endpoint("10.0.0.7", "fd00::7")]),
     "endpoints[0].addresses[1]", 'Invalid value: "fd00::7": must be a valid IPv4 address'),
    ("loopback", endpoint_slice, lambda o: o.update(endpoints=[endpoint("127.0.0.1")]),
     "endpoints[0].addresses[0]", 'Invalid value: "127.0.0.1": may not be in the loopback range (127.0.0.0/8, ::1/128)'),
    ("unspecified", endpoint_slice, lambda o: o.update(endpoints=[endpoint("0.0.0.0")]),
     "endpoints[0].addresses[0]", 'Invalid value: "0.0.0.0": may not be unspecified (0.0.0.0)'),
    ("link-local", endpoint_slice, lambda o: o.update(endpoints=[endpoint("169.254.169.254")]),
     "endpoints[0].addresses[0]",
     'Invalid value: "169.254.169.254": may not be in the link-local range (169.254.0.0/16, fe80::/10)'),
    ("ipv6-multicast", endpoint_slice, lambda o: o.update(addressType="IPv6", endpoints=[endpoint("ff02::1")]),
     "endpoints[0].addresses[0]",
     'Invalid value: "ff02::1": may not be in the link-local multicast range (224.0.0.0/24, ff02::/10)'),
    ("fqdn", endpoint_slice, lambda o: o.update(addressType="FQDN", endpoints=[endpoint("web")]),
     "endpoints[0].addresses[0]", 'Invalid value: "web": should be a domain with at least two segments separated by dots'),
    ("hostname", endpoint_slice, lambda o: o["endpoints"][0].update(hostname="gpu.node"),
     "endpoints[0].hostname", 'Invalid value: "gpu.node": must not contain dots'),
    ("node-name", endpoint_slice, lambda o: o["endpoints"][0].update(nodeName="GPU_1"),
     "endpoints[0].nodeName", 'Invalid value: "GPU_1": a lowercase RFC 1123 subdomain must consist of lower case '
     "alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. "
     "'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"),
    ("zone-hints", endpoint_slice, lambda o: o["endpoints"][0].update(hints={"forZones": [{"name": f"z{i}"} for i in range(9)]}),
     "endpoints[0].hints.forZones", "Too many: 9: must have at most 8 items"),
    ("too-many-ports", endpoint_slice, lambda o: o.update(ports=[{"name": f"p{i}", "port": i, "protocol": "TCP"} for i in range(101)]),
     "ports", "Too many: 101: must have at most 100 items"),
    ("port-names", endpoint_slice, lambda o: o["ports"].append({"name": "http", "port": 8001, "protocol": "TCP"}),
     "ports[1].name", 'Duplicate value: "http"'),
    ("protocol", endpoint_slice, lambda o: o["ports"][0].update(protocol="HTTP"),
     "ports[0].protocol", 'Unsupported value: "HTTP": supported values: "SCTP", "TCP", "UDP"'),
    ("handler", runtime_class, lambda o: o.update(handler="NVIDIA"),
     "handler", 'Invalid value: "NVIDIA": a lowercase RFC 1123 label must consist of lower case alphanumeric characters '
     "or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for "
     "validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')"),
    ("overhead", runtime_class, lambda o: o["overhead"]["podFixed"].update(cpu="-1"),
     "overhead.limits[cpu]", 'Invalid value: "-1": must be greater than or equal to 0'),
    ("node-selector", runtime_class, lambda o: o["scheduling"]["nodeSelector"].update({"gpu": "a b"}),
     "scheduling.nodeSelector", 'Invalid value: "a b": a valid label must be an empty string or consist of '
     "alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. "
     "'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"),
    ("toleration-twice", runtime_class, lambda o: o["scheduling"]["tolerations"].append(
        {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule", "tolerationSeconds": None}),
     "scheduling.tolerations[1]",
     'Duplicate value: core.Toleration{Key:"nvidia.com/gpu", Operator:"Exists", Value:"", Effect:"NoSchedule", '
     "TolerationSeconds:(*int64)(nil)}"),
]


def test_the_manifests_the_cases_break_are_valid() -> None:
    assert errors_of(endpoint_slice()) == errors_of(runtime_class()) == []


@pytest.mark.parametrize(("manifest", "breaking", "field_path", "message"),
                         [pytest.param(*case[1:], id=case[0]) for case in CASES])
def test_each_broken_manifest_gets_kubes_field_error(
    manifest: Callable[[], Obj], breaking: Callable[[Obj], Any], field_path: str, message: str
) -> None:
    broken = manifest()
    breaking(broken)
    assert (field_path, message) in errors_of(broken)


@pytest.mark.parametrize(
    ("manifest", "changed", "field_path", "message"),
    [
        (endpoint_slice, {"addressType": "FQDN"}, "addressType", 'Invalid value: "FQDN": field is immutable'),
        (runtime_class, {"handler": "runc"}, "handler", 'Invalid value: "runc": field is immutable'),
    ],
)
def test_what_kube_makes_immutable_cannot_change(
    manifest: Callable[..., Obj], changed: Obj, field_path: str, message: str
) -> None:
    stored = manifest()
    assert errors_of(manifest(), stored) == []
    assert (field_path, message) in errors_of(manifest(**changed), stored)


def test_a_runtime_class_without_a_handler_is_refused() -> None:
    bare = {"apiVersion": "node.k8s.io/v1", "kind": "RuntimeClass", "metadata": {"name": "nvidia"}}
    ((field_path, message),) = errors_of(bare)
    assert field_path == "handler" and message.startswith('Invalid value: "": a lowercase RFC 1123 label')


def test_an_ipv4_mapped_address_is_an_ipv4_one_as_go_reads_it() -> None:
    # Go's ParseIP reads "::ffff:10.0.0.7" as 10.0.0.7, and octets with leading zeros as decimal.
    assert errors_of(endpoint_slice(endpoints=[endpoint("::ffff:10.0.0.7", "010.000.000.007")])) == []
    assert ("endpoints[0].addresses[0]", 'Invalid value: "::ffff:10.0.0.7": must be a valid IPv6 address') in errors_of(
        endpoint_slice(addressType="IPv6", endpoints=[endpoint("::ffff:10.0.0.7")])
    )


def test_any_json_shape_gives_field_errors_not_exceptions() -> None:
    for group, kind in (("discovery.k8s.io", "EndpointSlice"), ("node.k8s.io", "RuntimeClass")):
        validator = for_kind(group, kind)
        assert validator is not None
        for garbage in ({"endpoints": 3, "ports": [None, 1]}, {"endpoints": [{"addresses": [7]}]},
                        {"overhead": [], "scheduling": {"tolerations": "x"}}, {"handler": 7}):
            validator(garbage, garbage)
            validator(garbage, None)


def test_endpoint_slice_ports_default_to_an_empty_name_and_tcp() -> None:
    obj = endpoint_slice(ports=[{"port": 8000}, {"name": "dns", "port": 53, "protocol": "UDP"}])
    defaults = defaulter_for("discovery.k8s.io", "EndpointSlice")
    assert defaults is not None
    defaults(obj)
    assert obj["ports"] == [{"port": 8000, "name": "", "protocol": "TCP"}, {"name": "dns", "port": 53, "protocol": "UDP"}]


def test_runtime_class_overhead_quantities_are_canonical() -> None:
    obj = runtime_class(overhead={"podFixed": {"cpu": "0.5", "memory": "1024Mi"}})
    defaults = defaulter_for("node.k8s.io", "RuntimeClass")
    assert defaults is not None
    defaults(obj)
    assert obj["overhead"]["podFixed"] == {"cpu": "500m", "memory": "1Gi"}


NOW = datetime(2026, 1, 1, tzinfo=UTC)


@pytest.mark.parametrize(
    ("fields", "ports", "endpoints"),
    [
        ({}, "8000", "10.0.0.7"),
        ({"ports": [], "endpoints": []}, "<unset>", "<unset>"),
        ({"ports": [{"port": 80}, {"name": "metrics"}, {}, {"port": 9090}],
          "endpoints": [endpoint("10.0.0.1", "10.0.0.2"), endpoint("10.0.0.3", "10.0.0.4"), endpoint("10.0.0.5")]},
         "80,metrics,* + 1 more...", "10.0.0.1,10.0.0.2,10.0.0.3 + 2 more..."),
    ],
)
def test_endpoint_slice_cells_are_kubes(fields: Obj, ports: str, endpoints: str) -> None:
    obj = endpoint_slice(**fields)
    assert cells.endpoint_slice_ports(obj, NOW) == ports
    assert cells.endpoint_slice_endpoints(obj, NOW) == endpoints
