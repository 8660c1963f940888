"""A collection larger than one etcd response, end to end with real processes.

Two hub replicas share one etcd and accept etcd responses of at most 2 MiB
(``--etcd-max-response-bytes``, scaled down from the 512 MiB default so that the test needs
megabytes, not gigabytes). 300 ConfigMaps of 16 KiB (4.8 MB) are more than one response
can carry. When the leader is killed, the other replica lists every kind to start its
controllers -- ConfigMaps included -- and must still start them and schedule a workload;
kubectl's chunked list, an unbounded LIST and a delete-collection over the ConfigMaps
work through either replica.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from e2e.harness import Kubectl, ProcessGroup, wait_for

HERE = Path(__file__).parent
FLEET = HERE / "fleets" / "failover.yaml"
CLUSTER = "onprem-a100"
CONFIGMAPS = 300
VALUE_BYTES = 16 * 1024
MAX_RESPONSE_BYTES = 2 * 1024 * 1024
pytestmark = pytest.mark.e2e

WORKLOAD = f"""\
apiVersion: policy.gpufed.io/v1alpha1
kind: PropagationPolicy
metadata: {{name: after-handover, namespace: ml}}
spec:
  resourceSelectors: [{{apiVersion: apps/v1, kind: Deployment, name: after-handover}}]
  placement:
    clusterAffinity: {{clusterNames: [{CLUSTER}]}}
---
apiVersion: apps/v1
kind: Deployment
metadata: {{name: after-handover, namespace: ml}}
spec:
  replicas: 2
  selector: {{matchLabels: {{app: after-handover}}}}
  template:
    metadata: {{labels: {{app: after-handover}}}}
    spec:
      containers: [{{name: c, image: registry.example.com/tiny:1, resources: {{requests: {{cpu: 10m}}}}}}]
"""


def _holder(via: Kubectl) -> str:
    lease = via.json("get", "lease", "gpufed-controllers", "-n", "gpufed-system")
    return str(lease["spec"]["holderIdentity"])


def _ready(hub: Kubectl) -> bool:
    clusters = hub.json("get", "clusters")["items"]
    return any(
        cond["type"] == "Ready" and cond["status"] == "True"
        for cluster in clusters
        for cond in cluster.get("status", {}).get("conditions", [])
    )


def _configmaps(path: Path) -> Path:
    items = [
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": f"cm{i:03d}", "namespace": "big"},
         "data": {"blob": "x" * VALUE_BYTES}}
        for i in range(CONFIGMAPS)
    ]
    path.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": items}))
    return path


def _placed_replicas(hub: Kubectl) -> int:
    binding = hub.json("get", "resourcebinding", "after-handover-deployment", "-n", "ml")
    return sum(int(t["replicas"]) for t in binding["spec"].get("clusters") or ())


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_a_new_leader_starts_its_controllers_over_a_collection_larger_than_one_etcd_response(
    processes: ProcessGroup, tmp_path: Path
) -> None:
    launched = processes.launch_member(FLEET, CLUSTER, time_scale=20.0)
    _, etcd_url = processes.start_etcd()
    common = ("--etcd-endpoints", etcd_url, "--leader-lease-ttl", "2",
              "--etcd-max-response-bytes", str(MAX_RESPONSE_BYTES))
    hubs = [processes.launch_hub(name, *common, "--identity", name) for name in ("hub-a", "hub-b")]
    (first, hub_a), (second, hub_b) = (up() for up in hubs)
    replicas = {"hub-a": (first, hub_a), "hub-b": (second, hub_b)}
    leader_name = wait_for(lambda: _holder(hub_b), timeout=60, what="a leader")
    leader_proc, _ = replicas[leader_name]
    other_name = "hub-b" if leader_name == "hub-a" else "hub-a"
    other_proc, other = replicas[other_name]

    # A member joined through the replica that survives.
    _, member, dcgm = launched()
    processes.start_agent(other, FLEET, CLUSTER, member, dcgm)
    wait_for(lambda: _ready(other), timeout=90, what=f"{CLUSTER} Ready")

    other.run("create", "namespace", "big")
    other.run("create", "namespace", "ml")
    other.run("create", "-f", str(_configmaps(tmp_path / "configmaps.json")), timeout=180)
    assert CONFIGMAPS * VALUE_BYTES > MAX_RESPONSE_BYTES

    leader_proc.stop(kill=True)
    wait_for(lambda: _holder(other) == other_name, timeout=60, what=f"{other_name} to take over")
    wait_for(lambda: "controllers started" in other_proc.log(), timeout=60,
             what=f"{other_name} to start its controllers after listing {CONFIGMAPS} ConfigMaps")

    other.run("apply", "-f", "-", input_text=WORKLOAD)
    wait_for(lambda: _placed_replicas(other) == 2, timeout=60, what="the new leader to schedule a workload")
    wait_for(lambda: member.json("get", "deployment", "after-handover", "-n", "ml")["spec"]["replicas"] == 2,
             timeout=60, what="the workload in the member")

    # kubectl's chunked list (limit=500) and an unbounded LIST both read etcd in pages (the
    # namespace's root CA ConfigMap, kube-root-ca.crt, is one more).
    assert len(other.json("get", "configmaps", "-n", "big")["items"]) == CONFIGMAPS + 1
    unbounded = other.run("get", "--raw", "/api/v1/namespaces/big/configmaps").stdout
    assert len(json.loads(unbounded)["items"]) == CONFIGMAPS + 1

    deleted = other.run("delete", "--raw", "/api/v1/namespaces/big/configmaps", timeout=120)
    assert len(json.loads(deleted.stdout)["items"]) == CONFIGMAPS + 1
    left = other.json("get", "configmaps", "-n", "big")["items"]  # the root CA comes back, as on kube
    assert [c["metadata"]["name"] for c in left if c["metadata"]["name"] != "kube-root-ca.crt"] == []
