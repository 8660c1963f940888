"""Karmada's defaults on the hub's policies: a policy written as for Karmada reads back as a
Karmada control plane stores it (its CRDs' defaults, its webhook's), through the hub's API and
real kubectl; ``kubectl get pp`` shows Karmada's columns; a policy stored without the defaults
is served with the CRD's; applying the same YAML again writes nothing and ``kubectl diff`` is
empty."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from aiohttp.test_utils import TestClient

from controlplane.apiserver import codec
from controlplane.apiserver.kinds.core import core_resources
from controlplane.apiserver.kinds.gpufed import gpufed_resources
from controlplane.apiserver.kinds.workloads import workload_resources
from controlplane.apiserver.objects import ObjectStore
from controlplane.apiserver.resources import Registry

from .test_real_clients import kubeconfig, kubectl, needs_kubectl, server_url  # noqa: F401 (fixtures)

ROOT = Path(__file__).resolve().parents[2]
APPLY = {"Content-Type": "application/apply-patch+yaml"}
POLICY_KINDS = {
    "PropagationPolicy": "propagationpolicies",
    "ClusterPropagationPolicy": "clusterpropagationpolicies",
    "OverridePolicy": "overridepolicies",
    "ClusterOverridePolicy": "clusteroverridepolicies",
}

#: A Karmada user's policy: failover, a bare spread constraint, Divided without a preference.
FAILOVER_YAML = """\
apiVersion: policy.karmada.io/v1alpha1
kind: PropagationPolicy
metadata:
  name: nginx-failover
spec:
  resourceSelectors:
    - apiVersion: apps/v1
      kind: Deployment
      name: nginx
  propagateDeps: true
  failover:
    application:
      decisionConditions:
        tolerationSeconds: 120
  placement:
    clusterAffinity:
      clusterNames: [member1, member2]
    spreadConstraints:
      - maxGroups: 2
    replicaScheduling:
      replicaSchedulingType: Divided
"""

#: What Karmada stores for FAILOVER_YAML in namespace default (less the webhook's cluster
#: tolerations and gracePeriodSeconds, which the hub leaves to its flags: README).
FAILOVER_STORED_SPEC: dict[str, Any] = {
    "resourceSelectors": [{"apiVersion": "apps/v1", "kind": "Deployment", "name": "nginx", "namespace": "default"}],
    "propagateDeps": True,
    "failover": {"application": {"decisionConditions": {"tolerationSeconds": 120}, "purgeMode": "Graciously"}},
    "placement": {
        "clusterAffinity": {"clusterNames": ["member1", "member2"]},
        "spreadConstraints": [{"maxGroups": 2, "spreadByField": "cluster", "minGroups": 1}],
        "replicaScheduling": {"replicaSchedulingType": "Divided", "replicaDivisionPreference": "Weighted"},
    },
    "conflictResolution": "Abort",
    "preemption": "Never",
    "priority": 0,
    "schedulerName": "default-scheduler",
}


@pytest.fixture
def api_registry() -> Registry:
    return Registry(core_resources(), workload_resources(), gpufed_resources())


def _path(doc: dict[str, Any], *, name: str | None = None) -> str:
    group_version = doc["apiVersion"]
    plural = POLICY_KINDS[doc["kind"]]
    scope = "" if doc["kind"].startswith("Cluster") else "namespaces/default/"
    tail = f"/{name}" if name else ""
    return f"/apis/{group_version}/{scope}{plural}{tail}"


async def test_a_karmada_policy_reads_back_as_karmada_stores_it(api: TestClient[Any, Any]) -> None:
    sent = yaml.safe_load(FAILOVER_YAML)
    created = await api.post(_path(sent), json=sent)
    assert created.status == 201, await created.text()
    assert (await created.json())["spec"] == FAILOVER_STORED_SPEC
    read = await (await api.get(_path(sent, name="nginx-failover"))).json()
    assert read["spec"] == FAILOVER_STORED_SPEC


async def test_tiered_overflow_and_cluster_policies_keep_their_own_meaning(api: TestClient[Any, Any]) -> None:
    """gpufed's tieredOverflow block alone means TieredOverflow: no Weighted is stored next to
    it; a ClusterPropagationPolicy's selectors keep no namespace; an explicit value stays."""
    sent = {
        "apiVersion": "policy.gpufed.io/v1alpha1",
        "kind": "ClusterPropagationPolicy",
        "metadata": {"name": "burst"},
        "spec": {
            "resourceSelectors": [{"apiVersion": "batch/v1", "kind": "Job"}],
            "priority": 7,
            "conflictResolution": "Overwrite",
            "placement": {"replicaScheduling": {"tieredOverflow": {}}, "spreadConstraints": [{"spreadByLabel": "zone"}]},
        },
    }
    created = await api.post(_path(sent), json=sent)
    assert created.status == 201, await created.text()
    assert (await created.json())["spec"] == {
        "resourceSelectors": [{"apiVersion": "batch/v1", "kind": "Job"}],
        "priority": 7,
        "conflictResolution": "Overwrite",
        "placement": {
            "replicaScheduling": {"tieredOverflow": {}, "replicaSchedulingType": "Divided"},
            "spreadConstraints": [{"spreadByLabel": "zone", "minGroups": 1}],
        },
        "preemption": "Never",
        "schedulerName": "default-scheduler",
    }


async def test_an_override_policy_gets_its_namespace_only(api: TestClient[Any, Any]) -> None:
    sent: dict[str, Any] = {
        "apiVersion": "policy.karmada.io/v1alpha1",
        "kind": "OverridePolicy",
        "metadata": {"name": "images"},
        "spec": {
            "resourceSelectors": [{"apiVersion": "apps/v1", "kind": "Deployment", "name": "nginx"}],
            "overrideRules": [{"overriders": {"imageOverrider": [{"component": "Registry", "operator": "replace",
                                                                  "value": "registry.example"}]}}],
        },
    }
    created = await api.post(_path(sent), json=sent)
    assert created.status == 201, await created.text()
    expected = copy.deepcopy(sent["spec"])
    expected["resourceSelectors"][0]["namespace"] = "default"
    assert (await created.json())["spec"] == expected


def _example_policies() -> list[tuple[str, dict[str, Any]]]:
    out = []
    for path in sorted((ROOT / "policies" / "examples").glob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            if isinstance(doc, dict) and doc.get("kind") in POLICY_KINDS:
                doc.setdefault("metadata", {}).pop("namespace", None)
                out.append((path.name, doc))
    return out


EXAMPLES = _example_policies()


@pytest.mark.parametrize(("name", "doc"), EXAMPLES, ids=[f"{n}:{d['metadata']['name']}" for n, d in EXAMPLES])
async def test_every_example_applies_twice_without_a_second_write(
    api: TestClient[Any, Any], name: str, doc: dict[str, Any]
) -> None:
    path = _path(doc, name=doc["metadata"]["name"])
    query = "fieldManager=kubectl&force=true"
    first = await api.patch(f"{path}?{query}", data=yaml.safe_dump(doc), headers=APPLY)
    assert first.status == 201, await first.text()
    stored = await first.json()
    if doc["kind"] in ("PropagationPolicy", "ClusterPropagationPolicy"):
        assert {"conflictResolution", "preemption", "priority", "schedulerName"} <= set(stored["spec"])
    again = await api.patch(f"{path}?{query}", data=yaml.safe_dump(doc), headers=APPLY)
    assert again.status == 200, await again.text()
    assert (await again.json())["metadata"]["resourceVersion"] == stored["metadata"]["resourceVersion"]


async def test_a_policy_stored_without_defaults_is_served_with_the_crds(
    objects: ObjectStore, api: TestClient[Any, Any]
) -> None:
    """As kube defaults what it decodes from etcd: structural defaults only (the webhook's, such as
    the selectors' namespace and Weighted, come with a write)."""
    rt = objects.registry.require("policy.gpufed.io/v1alpha1", "PropagationPolicy")
    old = {
        "apiVersion": "policy.gpufed.io/v1alpha1",
        "kind": "PropagationPolicy",
        "metadata": {"name": "old", "namespace": "default", "uid": "u-1", "creationTimestamp": "2026-01-01T00:00:00Z",
                     "generation": 1},
        "spec": {
            "resourceSelectors": [{"apiVersion": "apps/v1", "kind": "Deployment"}],
            "failover": {"application": {"decisionConditions": {}}},
            "placement": {"replicaScheduling": {}},
        },
    }
    await objects.store.create(rt.key(namespace="default", name="old"), codec.encode(old))
    for group in ("policy.gpufed.io", "policy.karmada.io"):
        read = await (await api.get(f"/apis/{group}/v1alpha1/namespaces/default/propagationpolicies/old")).json()
        assert read["spec"] == {
            "resourceSelectors": [{"apiVersion": "apps/v1", "kind": "Deployment"}],
            "failover": {"application": {"decisionConditions": {"tolerationSeconds": 300}, "purgeMode": "Graciously"}},
            "placement": {"replicaScheduling": {"replicaSchedulingType": "Divided"}},
            "conflictResolution": "Abort",
            "preemption": "Never",
            "priority": 0,
            "schedulerName": "default-scheduler",
        }


@needs_kubectl
async def test_kubectl_shows_karmadas_columns_and_no_diff_after_apply(
    kubeconfig: Path, tmp_path: Path  # noqa: F811
) -> None:
    manifest = tmp_path / "policy.yaml"
    manifest.write_text(FAILOVER_YAML)
    versions = []
    for _ in range(2):
        code, out, err = await kubectl(kubeconfig, "apply", "-f", str(manifest))
        assert code == 0, err
        code, out, err = await kubectl(kubeconfig, "get", "pp", "nginx-failover", "-o", "jsonpath={.metadata.resourceVersion}")
        assert code == 0, err
        versions.append(out)
    # kubectl sends the file's resourceSelectors list again (a merge patch replaces lists, and the
    # stored one carries the webhook's namespace), as against Karmada; defaulted, it changes nothing.
    assert versions[0] == versions[1]
    code, out, err = await kubectl(kubeconfig, "diff", "-f", str(manifest))
    assert (code, out) == (0, ""), err
    server_side = tmp_path / "server-side.yaml"
    server_side.write_text(FAILOVER_YAML.replace("name: nginx-failover", "name: applied-server-side"))
    versions = []
    for _ in range(2):
        code, out, err = await kubectl(kubeconfig, "apply", "--server-side", "-f", str(server_side))
        assert code == 0, err
        code, out, err = await kubectl(kubeconfig, "get", "pp", "applied-server-side", "-o", "jsonpath={.metadata.resourceVersion}")
        versions.append(out)
    assert versions[0] == versions[1]
    code, out, err = await kubectl(kubeconfig, "diff", "--server-side", "-f", str(server_side))
    assert (code, out) == (0, ""), err
    code, out, err = await kubectl(kubeconfig, "delete", "-f", str(server_side))
    assert code == 0, err

    code, out, err = await kubectl(kubeconfig, "get", "pp")
    assert code == 0, err
    header, row = out.splitlines()
    assert header.split() == ["NAME", "CONFLICT-RESOLUTION", "PRIORITY", "AGE"]
    assert row.split()[:3] == ["nginx-failover", "Abort", "0"]
    code, out, err = await kubectl(kubeconfig, "get", "pp", "nginx-failover", "-o", "json")
    assert code == 0, err
    assert json.loads(out)["spec"] == FAILOVER_STORED_SPEC

    code, out, err = await kubectl(kubeconfig, "get", "op")
    assert code == 0, err
    assert "No resources found" in err
