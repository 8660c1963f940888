"""CRD instances propagate, end to end: a CRD (printer columns, a CEL rule, defaults, a scale
subresource) and two of its instances applied to the hub with a ClusterPropagationPolicy and an
OverridePolicy land in both members: the CRD first (each member serves the kind at once), then
the instances, one of them overridden in one member; each member's copy is visible through the
member's own API with the CRD's printer columns. Deleting the CRD at the hub removes it, and
its instances, from the members. Real hub on real etcd, two simulated members, two agents,
the real kubectl."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from e2e.harness import Kubectl, ProcessGroup, wait_for

FLEET = Path(__file__).parent / "fleets" / "any-kind.yaml"
CRD = Path(__file__).parent / "manifests" / "crd" / "trainers.yaml"
pytestmark = pytest.mark.e2e

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
    replicaScheduling: {replicaSchedulingType: Duplicated}
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
spec: {model: llama-3-70b, replicas: 2}
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


def test_the_crd_and_its_instances_land_in_the_members_with_the_overrides(
    fleet: tuple[Kubectl, dict[str, Kubectl]],
) -> None:
    hub, members = fleet
    hub.run("apply", "-f", "-", input_text=POLICIES)
    hub.run("apply", "-f", str(CRD))
    hub.run("wait", "--for=condition=Established", "crd/trainers.ml.example.com", "--timeout=30s")
    hub.run("apply", "-f", "-", input_text=TRAINERS)

    def member_trainers() -> dict[str, dict[str, Any]] | None:
        found: dict[str, dict[str, Any]] = {}
        for name, member in members.items():
            listed = member.json_or_none("get", "trainers.ml.example.com", "-n", "ml")
            items = {t["metadata"]["name"]: t for t in (listed or {}).get("items") or ()}
            if set(items) != {"llama", "mistral"}:
                return None
            found[name] = items
        return found

    found = wait_for(member_trainers, timeout=120, what="both Trainers in both members")
    # The schema's defaults came with the hub's copy; the override changed the west's llama only.
    assert found["east"]["llama"]["spec"] == {"model": "llama-3-70b", "replicas": 2, "maxReplicas": 8}
    assert found["west"]["llama"]["spec"] == {"model": "llama-3-8b", "replicas": 2, "maxReplicas": 8}
    assert found["west"]["mistral"]["spec"] == {"model": "mistral-7b", "replicas": 1, "maxReplicas": 8}

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
            "patch", "trainer", "mistral", "-n", "ml", "--type=merge", "-p", '{"spec":{"replicas":9}}', check=False
        )
        assert refused.returncode != 0 and "replicas must not exceed maxReplicas" in refused.stderr

    # The CRD's binding is cluster-wide, kept in gpufed-system; the hub tells where it went.
    binding = hub.json("get", "resourcebinding", "trainers.ml.example.com-customresourcedefinition", "-n", "gpufed-system")
    assert {t["name"] for t in binding["spec"]["clusters"]} == {"east", "west"}

    # Deleting the CRD at the hub deletes its instances there and the CRD in every member.
    hub.run("delete", "crd", "trainers.ml.example.com", "--timeout=120s")

    def members_without_it() -> bool:
        return all(member.json_or_none("get", "crd", "trainers.ml.example.com") is None for member in members.values())

    wait_for(members_without_it, timeout=120, what="the CRD gone from both members")
