"""Karmada's FederatedResourceQuota, end to end: Karmada's own sample applies unchanged to the hub,
member1 and member2 get a v1 ResourceQuota with their share (member3 is not in the fleet and gets
nothing), member1's own quota admission keeps a Deployment past its share from starting there
(the hub's Event says so), and the hub's status shows what each member uses and the sum. Real hub on real etcd, two simulated
members named as in Karmada's samples, their agents, the real kubectl."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from e2e.harness import Kubectl, ProcessGroup, wait_for

FLEET = Path(__file__).parent / "fleets" / "karmada-members.yaml"
pytestmark = pytest.mark.e2e

#: Karmada's sample, as its documentation gives it ("Deploy a simple FederatedResourceQuota").
KARMADA_SAMPLE = """
apiVersion: policy.karmada.io/v1alpha1
kind: FederatedResourceQuota
metadata:
  name: test
  namespace: test
spec:
  overall:
    cpu: 100
  staticAssignments:
    - clusterName: member1
      hard:
        cpu: 20
    - clusterName: member2
      hard:
        cpu: 50
    - clusterName: member3
      hard:
        cpu: 30
"""

#: Three replicas of 8 CPUs, all in member1, whose share is 20: two fit, the third waits.
WORKLOAD = """
apiVersion: apps/v1
kind: Deployment
metadata: {name: api, namespace: test}
spec:
  replicas: 3
  selector: {matchLabels: {app: api}}
  template:
    metadata: {labels: {app: api}}
    spec:
      containers:
        - name: api
          image: registry.local/api:1
          resources: {requests: {cpu: "8"}}
---
apiVersion: policy.karmada.io/v1alpha1
kind: PropagationPolicy
metadata: {name: api, namespace: test}
spec:
  resourceSelectors:
    - {apiVersion: apps/v1, kind: Deployment, name: api}
  placement:
    clusterAffinity: {clusterNames: [member1]}
    replicaScheduling: {replicaSchedulingType: Duplicated}
"""


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Kubectl, dict[str, Kubectl]]]:
    with ProcessGroup.running_fleet(tmp_path_factory.mktemp("frq"), FLEET, ("member1", "member2")) as fleet:
        yield fleet


def _member_hard(member: Kubectl) -> dict[str, str] | None:
    quota = member.json_or_none("get", "resourcequota", "test", "-n", "test")
    return ((quota or {}).get("spec") or {}).get("hard")


def test_karmadas_sample_splits_the_quota_and_members_enforce_it(fleet: tuple[Kubectl, dict[str, Kubectl]]) -> None:
    hub, members = fleet
    hub.run("create", "namespace", "test")
    out = hub.run("apply", "-f", "-", input_text=KARMADA_SAMPLE).stdout
    assert "federatedresourcequota.policy.karmada.io/test created" in out

    wait_for(lambda: _member_hard(members["member1"]) == {"cpu": "20"}, timeout=60, what="member1's ResourceQuota")
    wait_for(lambda: _member_hard(members["member2"]) == {"cpu": "50"}, timeout=60, what="member2's ResourceQuota")

    hub.run("apply", "-f", "-", input_text=WORKLOAD)
    member1 = members["member1"]

    def refused() -> str | None:
        for rs in (member1.json_or_none("get", "replicasets", "-n", "test") or {}).get("items") or ():
            for cond in (rs.get("status") or {}).get("conditions") or ():
                if cond.get("type") == "ReplicaFailure":
                    return str(cond.get("message"))
        return None

    message = wait_for(refused, timeout=90, what="member1 refusing the third replica")
    assert "exceeded quota: test, requested: cpu=8, used: cpu=16, limited: cpu=20" in message
    pods = member1.json("get", "pods", "-n", "test")["items"]
    assert len(pods) == 2, [p["metadata"]["name"] for p in pods]

    def hub_says() -> str | None:
        events = hub.json("get", "events", "-n", "test", "--field-selector", "reason=PodsNotStarting")["items"]
        return next((e["message"] for e in events if "exceeded quota: test" in e["message"]), None)

    said = wait_for(hub_says, timeout=90, what="the hub's PodsNotStarting Event")
    assert said.startswith("cluster member1: 1 pod(s) cannot be created: FailedCreate: "), said

    def status() -> dict[str, Any] | None:
        found = (hub.json_or_none("get", "federatedresourcequota", "test", "-n", "test") or {}).get("status") or {}
        used = {item["clusterName"]: (item.get("used") or {}).get("cpu") for item in found.get("aggregatedStatus") or ()}
        return found if used == {"member1": "16", "member2": "0"} else None

    found = wait_for(status, timeout=90, what="the hub's status of what each member uses")
    assert found["overall"] == {"cpu": "100"}
    assert found["overallUsed"] == {"cpu": "16"}
    assert [(i["clusterName"], i["hard"]) for i in found["aggregatedStatus"]] == [
        ("member1", {"cpu": "20"}), ("member2", {"cpu": "50"}),
    ]
    assert hub.run("get", "federatedresourcequotas", "-n", "test").stdout.split()[:3] == ["NAME", "AGE", "test"]

    hub.run("delete", "federatedresourcequota", "test", "-n", "test")
    wait_for(lambda: _member_hard(member1) is None and _member_hard(members["member2"]) is None,
             timeout=60, what="the members' ResourceQuotas removed with it")
