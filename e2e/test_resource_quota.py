"""A ResourceQuota on the hub, end to end (real hub on its embedded etcd, real kubectl): the hub
counts it (``kubectl describe quota`` shows what is used), refuses the create past it in kube's
words (a server-side dry run too), and gives a slot back when an object is deleted."""

from __future__ import annotations

import pytest

from e2e.harness import Kubectl, ProcessGroup, wait_for

pytestmark = pytest.mark.e2e

REFUSED = (
    'configmaps "c3" is forbidden: exceeded quota: q, requested: count/configmaps=1, '
    "used: count/configmaps=3, limited: count/configmaps=3"
)


def _used(hub: Kubectl) -> dict[str, str] | None:
    quota = hub.json_or_none("get", "quota", "q", "-n", "x")
    return ((quota or {}).get("status") or {}).get("used")


def test_a_quota_counts_refuses_and_gives_back(processes: ProcessGroup) -> None:
    _, hub = processes.start_hub()
    hub.run("create", "namespace", "x")
    # The namespace's root CA ConfigMap (kube-root-ca.crt) counts, as on kube.
    wait_for(lambda: hub.json_or_none("get", "configmap", "kube-root-ca.crt", "-n", "x"), timeout=30,
             what="the root CA ConfigMap")
    hub.run("create", "configmap", "c1", "-n", "x", "--from-literal=k=v")
    out = hub.run("create", "quota", "q", "--hard=count/configmaps=3,secrets=5", "-n", "x").stdout
    assert "resourcequota/q created" in out
    wait_for(lambda: _used(hub) == {"count/configmaps": "2", "secrets": "0"}, timeout=30, what="the quota counted")

    hub.run("create", "configmap", "c2", "-n", "x", "--from-literal=k=v")
    refused = hub.run("create", "configmap", "c3", "-n", "x", "--from-literal=k=v", check=False)
    assert refused.returncode != 0
    assert refused.stderr.strip() == f"error: failed to create configmap: {REFUSED}"
    dry = hub.run("create", "configmap", "c3", "-n", "x", "--dry-run=server", check=False)
    assert REFUSED in dry.stderr
    names = [c["metadata"]["name"] for c in hub.json("get", "configmaps", "-n", "x")["items"]]
    assert names == ["c1", "c2", "kube-root-ca.crt"]

    described = hub.run("describe", "quota", "q", "-n", "x").stdout
    rows = {line.split()[0]: line.split()[1:] for line in described.splitlines() if line.startswith(("count/", "secrets"))}
    assert rows == {"count/configmaps": ["3", "3"], "secrets": ["0", "5"]}, described

    hub.run("delete", "configmap", "c1", "-n", "x")
    wait_for(lambda: (_used(hub) or {}).get("count/configmaps") == "2", timeout=30, what="the delete given back")
    assert "configmap/c3 created" in hub.run("create", "configmap", "c3", "-n", "x").stdout
