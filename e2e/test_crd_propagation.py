"""CRD instances propagate, end to end: a CRD (printer columns, a CEL rule, defaults, a scale
subresource) and two of its instances applied to the hub with a ClusterPropagationPolicy that
divides the scale subresource's replicas by weight (the same policy sends the CRD, which has no
replicas, whole to every member it selects), and an OverridePolicy. The policy, applied
before the CRD, says its Trainer selector matches nothing (ResourceSelectorsServed=False) until
the CRD is served. The CRD lands whole in both members (each serves the kind at once), each
instance's replicas are split across them at ``.spec.replicas``, one copy overridden in one
member; the members' ``.status.replicas`` sum into the hub's, and ``kubectl scale`` of the hub
object re-divides it. Each member's copy is visible through the member's own API with the CRD's
printer columns. The instances are applied once each member's Cluster lists the kind in
``status.apiEnablements`` (the scheduler places them only there). Deleting the CRD at the hub
removes it, and its instances, from the members.
Real hub on real etcd, two simulated members, two agents, the real kubectl."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from e2e.harness import Kubectl, ProcessGroup, wait_for

FLEET = Path(__file__).parent / "fleets" / "any-kind.yaml"
CRD = Path(__file__).parent / "manifests" / "crd" / "trainers.yaml"
pytestmark = pytest.mark.e2e

# One policy for the CRD and its instances: the CRD has no replicas, so it goes whole to every
# member its Divided placement selects, while the Trainers' replicas are divided between them.
POLICIES = """
apiVersion: policy.karmada.io/v1alpha1
kind: ClusterPropagationPolicy
metadata: {name: trainers-everywhere}
spec:
  resourceSelectors:
    - {apiVersion: apiextensions.k8s.io/v1, kind: CustomResourceDefinition, name: trainers.ml.example.com}
    - {apiVersion: ml.example.com/v1, kind: Trainer}
  placement:
    clusterAffinity:
      clusterNames: [east, west]
    replicaScheduling:
      replicaSchedulingType: Divided
      replicaDivisionPreference: Weighted
      weightPreference:
        staticWeightList:
          - {targetCluster: {clusterNames: [east]}, weight: 1}
          - {targetCluster: {clusterNames: [west]}, weight: 1}
---
apiVersion: policy.karmada.io/v1alpha1
kind: OverridePolicy
metadata: {name: smaller-model-in-the-west, namespace: ml}
spec:
  resourceSelectors:
    - {apiVersion: ml.example.com/v1, kind: Trainer, name: llama}
  overrideRules:
    - targetCluster: {clusterNames: [west]}
      overriders:
        plaintext:
          - {path: /spec/model, operator: replace, value: llama-3-8b}
"""

TRAINERS = """
apiVersion: ml.example.com/v1
kind: Trainer
metadata: {name: llama, namespace: ml}
spec: {model: llama-3-70b, replicas: 4}
---
apiVersion: ml.example.com/v1
kind: Trainer
metadata: {name: mistral, namespace: ml}
spec: {model: mistral-7b}
"""


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Kubectl, dict[str, Kubectl]]]:
    with ProcessGroup.running_fleet(tmp_path_factory.mktemp("crd-propagation"), FLEET, ("east", "west")) as fleet:
        yield fleet


def _selectors_served(hub: Kubectl) -> dict[str, Any] | None:
    policy = hub.json("get", "clusterpropagationpolicies.policy.karmada.io", "trainers-everywhere")
    conditions = (policy.get("status") or {}).get("conditions") or ()
    return next((c for c in conditions if c["type"] == "ResourceSelectorsServed"), None)


def test_the_crd_and_its_instances_are_divided_across_the_members_with_the_overrides(
    fleet: tuple[Kubectl, dict[str, Kubectl]],
) -> None:
    hub, members = fleet
    applied = hub.run("apply", "-f", "-", input_text=POLICIES)
    assert "the hub does not serve kind Trainer in ml.example.com/v1" in applied.stderr  # kubectl's Warning:
    unserved = wait_for(lambda: _selectors_served(hub), timeout=60, what="the policy's ResourceSelectorsServed")
    assert (unserved["status"], unserved["reason"]) == ("False", "UnservedKind")
    assert "Trainer (ml.example.com/v1) is not served by the hub" in unserved["message"]
    assert "trainers-everywhere" in hub.run("get", "cpp").stdout

    hub.run("apply", "-f", str(CRD))
    hub.run("wait", "--for=condition=Established", "crd/trainers.ml.example.com", "--timeout=30s")
    hub.run("wait", "--for=condition=ResourceSelectorsServed", "cpp/trainers-everywhere", "--timeout=60s")

    def lists_trainer(name: str) -> bool:
        """Whether the member's agent lists the CRD's kind among the APIs its member serves."""
        status = hub.json("get", "cluster", name)["status"]
        served = {(e["groupVersion"], r["kind"]) for e in status.get("apiEnablements") or () for r in e.get("resources") or ()}
        complete = {c["type"]: c for c in status["conditions"]}.get("CompleteAPIEnablements") or {}
        return ("ml.example.com/v1", "Trainer") in served and complete.get("reason") == "Complete"

    # The scheduler places a Trainer only where the member's Cluster lists the kind (APIEnablement):
    # the instances come once the CRD is served in both.
    wait_for(lambda: all(lists_trainer(name) for name in members), timeout=60, what="both members listing Trainer")
    hub.run("apply", "-f", "-", input_text=TRAINERS)

    def member_trainers(llama: int) -> dict[str, dict[str, Any]] | None:
        found: dict[str, dict[str, Any]] = {}
        for name, member in members.items():
            listed = member.json_or_none("get", "trainers.ml.example.com", "-n", "ml")
            found[name] = {t["metadata"]["name"]: t for t in (listed or {}).get("items") or ()}
            if found[name].get("llama", {}).get("spec", {}).get("replicas") != llama:
                return None
        if sum("mistral" in items for items in found.values()) != 1:
            return None
        return found

    found = wait_for(lambda: member_trainers(2), timeout=120, what="llama's 4 replicas split 2 + 2, mistral in one member")
    # The schema's defaults came with the hub's copy; the override changed the west's llama only.
    assert found["east"]["llama"]["spec"] == {"model": "llama-3-70b", "replicas": 2, "maxReplicas": 8}
    assert found["west"]["llama"]["spec"] == {"model": "llama-3-8b", "replicas": 2, "maxReplicas": 8}
    # mistral's one (defaulted) replica went whole to one member: the shares sum to the hub's.
    (mistral,) = [items["mistral"] for items in found.values() if "mistral" in items]
    assert mistral["spec"]["replicas"] == 1 and mistral["spec"]["maxReplicas"] == 8

    hub_table = hub.run("get", "trainers", "-n", "ml", "--sort-by=.metadata.name").stdout.splitlines()
    assert hub_table[0].split() == ["NAME", "MODEL", "REPLICAS", "AGE"]
    assert hub_table[1].split()[:3] == ["llama", "llama-3-70b", "4"]
    for name, member in members.items():
        crd = member.json("get", "crd", "trainers.ml.example.com")
        conditions = {c["type"]: c["status"] for c in crd["status"]["conditions"]}
        assert conditions["Established"] == "True", name
        assert crd["spec"]["versions"][0]["subresources"]["scale"]["specReplicasPath"] == ".spec.replicas"
        # The member serves the kind as the hub does: its printer columns, its CEL rule.
        table = member.run("get", "trainers", "-n", "ml", "--sort-by=.metadata.name").stdout.splitlines()
        assert table[0].split() == ["NAME", "MODEL", "REPLICAS", "AGE"]
        assert table[1].split()[:3] == ["llama", "llama-3-8b" if name == "west" else "llama-3-70b", "2"]
        refused = member.run(
            "patch", "trainer", "llama", "-n", "ml", "--type=merge", "-p", '{"spec":{"replicas":9}}', check=False
        )
        assert refused.returncode != 0 and "replicas must not exceed maxReplicas" in refused.stderr

    # What a member's operator reports at .status.replicas is summed into the hub's.
    for name, running in (("east", 2), ("west", 1)):
        members[name].run(
            "patch", "trainer", "llama", "-n", "ml", "--subresource=status", "--type=merge",
            "-p", f'{{"status":{{"replicas":{running}}}}}',
        )

    def hub_replicas() -> int | None:
        status = hub.json("get", "trainer", "llama", "-n", "ml").get("status") or {}
        return 3 if status.get("replicas") == 3 else None

    wait_for(hub_replicas, timeout=120, what="the members' 2 + 1 running replicas in the hub's status.replicas")

    # kubectl scale goes through the hub object's /scale; the new total is divided again.
    hub.run("scale", "trainer", "llama", "-n", "ml", "--replicas=6")
    wait_for(lambda: member_trainers(3), timeout=120, what="llama's 6 replicas split 3 + 3")

    # The CRD's binding is cluster-wide, kept in gpufed-system; the hub tells where it went.
    binding = hub.json("get", "resourcebinding", "trainers.ml.example.com-customresourcedefinition", "-n", "gpufed-system")
    assert {t["name"] for t in binding["spec"]["clusters"]} == {"east", "west"}

    # Deleting the CRD at the hub deletes its instances there and the CRD in every member.
    hub.run("delete", "crd", "trainers.ml.example.com", "--timeout=120s")

    def members_without_it() -> bool:
        return all(member.json_or_none("get", "crd", "trainers.ml.example.com") is None for member in members.values())

    wait_for(members_without_it, timeout=120, what="the CRD gone from both members")
