"""Karmada's FederatedQuotaEnforcement, end to end (``gpufed controlplane
--federated-quota-enforcement``): a FederatedResourceQuota's ``overall`` holds back a workload
whose placement would take the namespace past it (its binding says ``QuotaExceeded`` in Karmada's
words, the hub's Event too, the member gets nothing), ``status.overallUsed`` counts the
namespace's bindings, and scaling another workload down makes room. Real hub on real etcd, one
simulated member and its agent, the real kubectl."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from e2e.harness import Kubectl, ProcessGroup, wait_for

FLEET = Path(__file__).parent / "fleets" / "karmada-members.yaml"
pytestmark = pytest.mark.e2e

QUOTA = """
apiVersion: policy.karmada.io/v1alpha1
kind: FederatedResourceQuota
metadata: {name: team, namespace: team}
spec:
  overall: {cpu: 10}
---
apiVersion: policy.karmada.io/v1alpha1
kind: PropagationPolicy
metadata: {name: all, namespace: team}
spec:
  resourceSelectors: [{apiVersion: apps/v1, kind: Deployment}]
  placement: {clusterAffinity: {clusterNames: [member1]}}
"""


def deployment(name: str, replicas: int, cpu: int) -> str:
    return f"""
apiVersion: apps/v1
kind: Deployment
metadata: {{name: {name}, namespace: team}}
spec:
  replicas: {replicas}
  selector: {{matchLabels: {{app: {name}}}}}
  template:
    metadata: {{labels: {{app: {name}}}}}
    spec:
      containers: [{{name: main, image: registry.local/{name}:1, resources: {{requests: {{cpu: "{cpu}"}}}}}}]
"""


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Kubectl, dict[str, Kubectl]]]:
    root = tmp_path_factory.mktemp("frq-enforcement")
    with ProcessGroup.running_fleet(root, FLEET, ("member1",), "--federated-quota-enforcement") as fleet:
        yield fleet


def _scheduled(hub: Kubectl, name: str) -> dict[str, Any] | None:
    binding = hub.json_or_none("get", "resourcebinding", f"{name}-deployment", "-n", "team") or {}
    return next((c for c in (binding.get("status") or {}).get("conditions") or () if c["type"] == "Scheduled"), None)


def test_overall_holds_back_what_would_pass_it(fleet: tuple[Kubectl, dict[str, Kubectl]]) -> None:
    hub, members = fleet
    hub.run("create", "namespace", "team")
    hub.run("apply", "-f", "-", input_text=QUOTA + "---" + deployment("web", 2, 4))
    wait_for(lambda: (_scheduled(hub, "web") or {}).get("status") == "True", timeout=60, what="web placed")

    def used() -> str | None:
        quota = hub.json_or_none("get", "federatedresourcequota", "team", "-n", "team") or {}
        return ((quota.get("status") or {}).get("overallUsed") or {}).get("cpu")

    wait_for(lambda: used() == "8", timeout=60, what="overallUsed counting web's bindings")

    hub.run("apply", "-f", "-", input_text=deployment("big", 1, 3))
    held = wait_for(lambda: (c := _scheduled(hub, "big")) and c["reason"] == "QuotaExceeded" and c,
                    timeout=60, what="big held back by the quota")
    message = "FederatedResourceQuota(team/team) exceeded for resource cpu: requested sum 11, limit 10."
    assert (held["status"], held["message"]) == ("False", message)
    events = hub.json("get", "events", "-n", "team", "--field-selector", "reason=FailedScheduling")["items"]
    assert any(e["message"] == message and e["involvedObject"]["name"] == "big" for e in events)
    assert members["member1"].json_or_none("get", "deployment", "big", "-n", "team") is None

    hub.run("scale", "deployment", "web", "-n", "team", "--replicas=1")
    wait_for(lambda: (_scheduled(hub, "big") or {}).get("status") == "True", timeout=60, what="big placed once web shrank")
    wait_for(lambda: used() == "7", timeout=60, what="overallUsed: web's 4 and big's 3")
    wait_for(lambda: members["member1"].json_or_none("get", "deployment", "big", "-n", "team"), timeout=60,
             what="big in member1")
