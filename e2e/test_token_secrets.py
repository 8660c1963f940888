"""A long-lived ServiceAccount token in a Secret, end to end: kube's documented steps applied to
the hub with kubectl give a filled Secret whose token kubectl then uses as the account; the
Secret propagated to a member carries neither the hub's token nor the hub's account uid (the
member's own token controller fills its copy); deleting the account on the hub deletes the
Secret, its member copy, and ends the token. Real hub on real etcd, a simulated member, its agent."""

from __future__ import annotations

import base64
from pathlib import Path

import pytest

from e2e.harness import ProcessGroup, wait_for

FLEET = Path(__file__).parent / "fleets" / "placement.yaml"
pytestmark = pytest.mark.e2e

MANIFESTS = """
apiVersion: v1
kind: ServiceAccount
metadata: {name: ci, namespace: ml}
---
apiVersion: v1
kind: Secret
metadata:
  name: ci-token
  namespace: ml
  annotations: {kubernetes.io/service-account.name: ci}
type: kubernetes.io/service-account-token
---
apiVersion: policy.gpufed.io/v1alpha1
kind: PropagationPolicy
metadata: {name: ci-token, namespace: ml}
spec:
  resourceSelectors:
    - {apiVersion: v1, kind: Secret, name: ci-token}
  placement:
    clusterAffinity: {clusterNames: [onprem-a100]}
"""


def test_a_token_secret_works_on_the_hub_and_reaches_members_without_the_hubs_token(processes: ProcessGroup) -> None:
    launched = {"onprem-a100": processes.launch_member(FLEET, "onprem-a100", time_scale=20.0)}
    _, hub = processes.start_hub()
    member = processes.join_members(hub, FLEET, launched)["onprem-a100"]
    wait_for(lambda: len(hub.json("get", "clusters")["items"]) == 1, timeout=90, what="the cluster joined")
    hub.run("create", "namespace", "ml")
    hub.run("apply", "-f", "-", input_text=MANIFESTS)

    def hub_token() -> str:
        result = hub.run("get", "secret", "ci-token", "-n", "ml", "-o", "jsonpath={.data.token}", check=False)
        return base64.b64decode(result.stdout).decode() if result.returncode == 0 else ""

    wait_for(hub_token, timeout=60, what="the hub's token Secret filled")
    token = hub_token()
    whoami = hub.run("--token", token, "auth", "whoami", "-o", "jsonpath={.status.userInfo.username}")
    assert whoami.stdout == "system:serviceaccount:ml:ci"

    copy = wait_for(lambda: member.json_or_none("get", "secret", "ci-token", "-n", "ml"),
                    timeout=90, what="the Secret in the member")
    assert copy["type"] == "kubernetes.io/service-account-token"
    assert not copy.get("data"), "the hub's token, CA and namespace stay on the hub"
    assert copy["metadata"]["annotations"].get("kubernetes.io/service-account.name") == "ci"
    assert "kubernetes.io/service-account.uid" not in copy["metadata"]["annotations"]

    hub.run("delete", "serviceaccount", "ci", "-n", "ml")
    wait_for(lambda: hub.json_or_none("get", "secret", "ci-token", "-n", "ml") is None,
             timeout=60, what="the account's token Secret deleted on the hub")
    wait_for(lambda: member.json_or_none("get", "secret", "ci-token", "-n", "ml") is None,
             timeout=90, what="the member's copy deleted")
    refused = hub.run("--token", token, "auth", "whoami", check=False)
    assert refused.returncode != 0 and "Unauthorized" in refused.stderr, refused.stderr
