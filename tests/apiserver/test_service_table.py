"""A Service's and an Ingress's table rows, as kube's printers write them.

Before, an ExternalName Service showed an empty CLUSTER-IP and ``<none>`` for EXTERNAL-IP
(kube: ``<none>`` and the external name), a LoadBalancer listed its external IPs before its
ingress points, and ingress points were neither sorted nor deduplicated.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from controlplane.apiserver.kinds.core import core_resources
from controlplane.apiserver.kinds.networking import INGRESS
from controlplane.apiserver.resources import Registry
from controlplane.apiserver.tables import IncludeObject, column_definitions, row

NOW = datetime(2026, 1, 1, tzinfo=UTC)
BALANCER = {"loadBalancer": {"ingress": [{"ip": "203.0.113.9"}, {"hostname": "lb.example.com"}, {"ip": "203.0.113.9"}]}}


def cells(group_version: str, kind: str, obj: dict[str, Any]) -> dict[str, Any]:
    rt = INGRESS if kind == "Ingress" else Registry(core_resources()).require(group_version, kind)
    obj = {"metadata": {"name": "x", "namespace": "default", "creationTimestamp": "2026-01-01T00:00:00Z"}, **obj}
    names = [d["name"] for d in column_definitions(rt)]
    return dict(zip(names, row(rt, obj, include=IncludeObject.NONE, now=NOW)["cells"], strict=True))


@pytest.mark.parametrize(
    ("spec", "status", "cluster_ip", "external_ip"),
    [
        ({"type": "ExternalName", "externalName": "db.example.com"}, {}, "<none>", "db.example.com"),
        ({"type": "ClusterIP", "clusterIPs": ["10.96.0.7"]}, {}, "10.96.0.7", "<none>"),
        ({"type": "ClusterIP", "clusterIPs": ["None"]}, {}, "None", "<none>"),
        ({"type": "NodePort", "clusterIPs": ["10.96.0.7"], "externalIPs": ["198.51.100.1"]}, {},
         "10.96.0.7", "198.51.100.1"),
        ({"type": "LoadBalancer", "clusterIPs": ["10.96.0.7"]}, {}, "10.96.0.7", "<pending>"),
        ({"type": "LoadBalancer", "clusterIPs": ["10.96.0.7"]}, BALANCER, "10.96.0.7", "203.0.113.9,lb.example.com"),
        ({"type": "LoadBalancer", "clusterIPs": ["10.96.0.7"], "externalIPs": ["198.51.100.1"]}, BALANCER,
         "10.96.0.7", "203.0.113.9,lb.example.com,198.51.100.1"),
    ],
    ids=["external-name", "cluster-ip", "headless", "node-port", "pending", "balancer", "balancer-and-external"],
)
def test_service_addresses_are_kubes(spec: dict[str, Any], status: dict[str, Any], cluster_ip: str, external_ip: str) -> None:
    row_cells = cells("v1", "Service", {"spec": spec, "status": status})
    assert (row_cells["Cluster-IP"], row_cells["External-IP"]) == (cluster_ip, external_ip)


def test_ingress_address_is_sorted_once_each() -> None:
    row_cells = cells("networking.k8s.io/v1", "Ingress", {"spec": {}, "status": BALANCER})
    assert row_cells["Address"] == "203.0.113.9,lb.example.com"
