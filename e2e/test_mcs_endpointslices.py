"""Cross-cluster service discovery with Karmada's MultiClusterService: a Deployment and its
Service in the provider cluster (member1) show up in the consumer cluster (member2) as an
EndpointSlice named ``member1-<slice>`` holding member1's pod IPs, as Karmada's
access-service-across-clusters tutorial describes; the slice goes when the MultiClusterService
is deleted. Real hub on real etcd, two simulated members (whose EndpointSlice controller makes
member1's slices), their agents, the real kubectl."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from e2e.harness import Kubectl, ProcessGroup, wait_for

FLEET = Path(__file__).parent / "fleets" / "karmada-members.yaml"
UPSTREAM = Path(__file__).parent / "manifests" / "upstream" / "karmada"
pytestmark = pytest.mark.e2e

#: The tutorial's first step (a Deployment of nginx in member1), written here: the tutorial's
#: own YAML for it is not among the stored samples.
WORKLOAD = """
apiVersion: apps/v1
kind: Deployment
metadata:
  name: nginx
  labels:
    app: nginx
spec:
  replicas: 2
  selector:
    matchLabels:
      app: nginx
  template:
    metadata:
      labels:
        app: nginx
    spec:
      containers:
      - image: nginx
        name: nginx
        ports:
        - containerPort: 8080
---
apiVersion: policy.karmada.io/v1alpha1
kind: PropagationPolicy
metadata:
  name: mcs-workload
spec:
  resourceSelectors:
  - apiVersion: apps/v1
    kind: Deployment
    name: nginx
  placement:
    clusterAffinity:
      clusterNames:
      - member1
"""


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Kubectl, dict[str, Kubectl]]]:
    with ProcessGroup.running_fleet(tmp_path_factory.mktemp("mcs"), FLEET, ("member1", "member2")) as fleet:
        yield fleet


def _imported(member: Kubectl) -> list[dict[str, Any]]:
    slices = member.json("get", "endpointslices", "-l", "kubernetes.io/service-name=nginx")["items"]
    return [s for s in slices if s["metadata"]["name"].startswith("member1-")]


def test_a_providers_pods_become_endpoints_in_the_consumer_cluster(
    fleet: tuple[Kubectl, dict[str, Kubectl]],
) -> None:
    hub, members = fleet
    hub.run("apply", "-f", "-", input_text=WORKLOAD)
    hub.run("apply", "-f", str(UPSTREAM / "website" / "access-service-across-clusters.yaml"))

    def pod_ips() -> list[str] | None:
        pods = members["member1"].json("get", "pods", "-l", "app=nginx")["items"]
        ips = sorted(p["status"].get("podIP") or "" for p in pods)
        return ips if len(ips) == 2 and all(ips) else None

    ips = wait_for(pod_ips, timeout=90, what="member1's two nginx pods with IPs")

    def dispatched() -> list[dict[str, Any]] | None:
        found = _imported(members["member2"])
        addresses = sorted(a for s in found for e in s.get("endpoints") or [] for a in e["addresses"])
        return found if addresses == ips else None

    [eps] = wait_for(dispatched, timeout=90, what="member1's pod IPs in an EndpointSlice of member2")
    [source] = members["member1"].json("get", "endpointslices", "-l", "kubernetes.io/service-name=nginx")[
        "items"
    ]
    assert eps["metadata"]["name"] == f"member1-{source['metadata']['name']}"
    assert (
        eps["metadata"]["labels"]["endpointslice.kubernetes.io/managed-by"]
        == "endpointslice-dispatch-controller.karmada.io"
    )
    assert eps["metadata"]["annotations"]["endpointslice.karmada.io/provision-cluster"] == "member1"
    assert eps["ports"] == [{"name": "", "port": 8080, "protocol": "TCP"}]
    assert not [s for s in _imported(members["member1"])]  # the provider is not sent its own slices

    conditions = {c["type"]: c for c in hub.json("get", "mcs", "nginx")["status"]["conditions"]}
    assert (
        conditions["EndpointSliceDispatched"]["status"],
        conditions["EndpointSliceDispatched"]["reason"],
    ) == ("True", "EndpointSliceDispatchedSucceed")

    hub.run("delete", "mcs", "nginx")
    wait_for(lambda: not _imported(members["member2"]), timeout=60, what="member2's imported slice gone")
