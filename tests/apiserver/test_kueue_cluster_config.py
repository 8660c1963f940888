"""Kueue's ProvisioningRequestConfig (``kueue.x-k8s.io/v1beta2`` and ``v1beta1``) and Topology (and
``v1alpha1``) are served, so a provisioning setup written for Kueue (flavor, queue with a check of
the provisioning-request controller, the check, its config) and a topology-aware one (a Topology, a
flavor naming it) apply unchanged: Kueue's CRD defaults filled, its schema's limits and CEL rules
enforced, one stored object read at every version (through the hub's HTTP API on a real etcd, and
with the real kubectl)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from .test_kube_validation import Client, hub, hub_kubeconfig  # noqa: F401 (fixtures)
from .test_kueue_versions import GROUP, V1B1, V1B2, ok
from .test_real_clients import kubectl, needs_kubectl

Obj = dict[str, Any]


def config(version: str, name: str = "gpu-capacity", **spec: Any) -> Obj:
    return {"apiVersion": f"kueue.x-k8s.io/{version}", "kind": "ProvisioningRequestConfig", "metadata": {"name": name},
            "spec": {"provisioningClassName": "check-capacity.autoscaling.x-k8s.io", **spec}}


async def test_kueues_defaults_fill_the_retry_strategy(hub: Client) -> None:  # noqa: F811
    created = await ok(await hub.post(f"{V1B2}/provisioningrequestconfigs", json=config("v1beta2")), 201)
    assert created["spec"]["retryStrategy"] == {"backoffLimitCount": 3, "backoffBaseSeconds": 60, "backoffMaxSeconds": 1800}
    partial = config("v1beta1", "partial", retryStrategy={"backoffLimitCount": 0})
    created = await ok(await hub.post(f"{V1B1}/provisioningrequestconfigs", json=partial), 201)
    assert created["spec"]["retryStrategy"] == {"backoffLimitCount": 0, "backoffBaseSeconds": 60, "backoffMaxSeconds": 1800}
    # One stored object, read at either version.
    read = await ok(await hub.get(f"{V1B1}/provisioningrequestconfigs/gpu-capacity"))
    assert read["apiVersion"] == "kueue.x-k8s.io/v1beta1"
    assert read["spec"]["provisioningClassName"] == "check-capacity.autoscaling.x-k8s.io"


@pytest.mark.parametrize(("spec", "field"), [
    ({"provisioningClassName": "Check_Capacity"}, "spec.provisioningClassName"),
    ({"managedResources": ["nvidia.com/gpu", "nvidia.com/gpu"]}, "spec.managedResources"),
    ({"parameters": {"zone": "z" * 256}}, "spec.parameters"),
    ({"podSetMergePolicy": "Merged"}, "spec.podSetMergePolicy"),
    ({"podSetUpdates": {"nodeSelector": [{"key": "pool", "valueFromProvisioningClassDetail": ""}]}},
     "spec.podSetUpdates.nodeSelector[0].valueFromProvisioningClassDetail"),
    ({"retryStrategy": {"backoffLimitCount": "two"}}, "spec.retryStrategy.backoffLimitCount"),
])
async def test_kueues_schema_limits_are_enforced(hub: Client, spec: Obj, field: str) -> None:  # noqa: F811
    response = await hub.post(f"{V1B2}/provisioningrequestconfigs", json=config("v1beta2", "refused", **spec))
    body = await response.json()
    assert response.status in (400, 422), body
    assert field in body["message"], body
    assert (await hub.get(f"{V1B2}/provisioningrequestconfigs/refused")).status == 404


#: A provisioning setup of the shape Kueue's docs give: a check of Kueue's provisioning-request
#: controller on one flavor of the queue, and the config it names (with the old parameters map).
PROVISIONING_YAML = """\
apiVersion: kueue.x-k8s.io/v1beta1
kind: ResourceFlavor
metadata:
  name: gpu-nodes
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: ClusterQueue
metadata:
  name: provisioned
spec:
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: [nvidia.com/gpu]
    flavors:
    - name: gpu-nodes
      resources:
      - name: nvidia.com/gpu
        nominalQuota: 4
  admissionChecksStrategy:
    admissionChecks:
    - name: capacity-check
      onFlavors: [gpu-nodes]
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: AdmissionCheck
metadata:
  name: capacity-check
spec:
  controllerName: kueue.x-k8s.io/provisioning-request
  parameters:
    apiGroup: kueue.x-k8s.io
    kind: ProvisioningRequestConfig
    name: capacity-config
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: ProvisioningRequestConfig
metadata:
  name: capacity-config
spec:
  provisioningClassName: check-capacity.autoscaling.x-k8s.io
  managedResources: [nvidia.com/gpu]
  parameters:
    maxRunDuration: "3600"
  retryStrategy:
    backoffLimitCount: 1
    backoffBaseSeconds: 30
"""


async def _applied_both_ways(kubeconfig: Path, text: str) -> list[str]:
    """``text`` applied client-side, then server-side: the first apply's lines."""
    code, out, err = await kubectl(kubeconfig, "apply", "-f", "-", stdin=text)
    assert code == 0, err
    code, _, err = await kubectl(kubeconfig, "apply", "--server-side", "-f", "-", stdin=text)
    assert code == 0, err
    return out.splitlines()


@needs_kubectl
async def test_kubectl_applies_a_kueue_provisioning_setup(hub_kubeconfig: Path) -> None:  # noqa: F811
    out = await _applied_both_ways(hub_kubeconfig, PROVISIONING_YAML)
    assert "provisioningrequestconfig.kueue.x-k8s.io/capacity-config created" in out
    code, out, err = await kubectl(hub_kubeconfig, "get", "provisioningrequestconfig", "capacity-config", "-o", "yaml")
    served = yaml.safe_load(out)
    assert served["apiVersion"] == "kueue.x-k8s.io/v1beta2", err
    assert served["spec"]["retryStrategy"] == {"backoffLimitCount": 1, "backoffBaseSeconds": 30, "backoffMaxSeconds": 1800}
    code, out, err = await kubectl(hub_kubeconfig, "get", "provisioningrequestconfigs")
    assert code == 0 and out.split()[:3] == ["NAME", "AGE", "capacity-config"], err
    code, out, err = await kubectl(hub_kubeconfig, "explain", "provisioningrequestconfig.spec.retryStrategy.backoffMaxSeconds")
    assert code == 0 and "FIELD: backoffMaxSeconds <integer>" in out, err


def topology(version: str, *labels: str, name: str = "racks") -> Obj:
    return {"apiVersion": f"kueue.x-k8s.io/{version}", "kind": "Topology", "metadata": {"name": name},
            "spec": {"levels": [{"nodeLabel": label} for label in labels]}}


LEVELS = ("cloud.example.com/topology-block", "cloud.example.com/topology-rack", "kubernetes.io/hostname")


async def test_a_topology_reads_back_at_every_version(hub: Client) -> None:  # noqa: F811
    await ok(await hub.post(f"{GROUP}/v1alpha1/topologies", json=topology("v1alpha1", *LEVELS)), 201)
    for version in ("v1alpha1", "v1beta1", "v1beta2"):
        read = await ok(await hub.get(f"{GROUP}/{version}/topologies/racks"))
        assert (read["apiVersion"], read["spec"]) == (f"kueue.x-k8s.io/{version}", topology(version, *LEVELS)["spec"])


@pytest.mark.parametrize(("levels", "message"), [
    ((), "spec.levels"),
    (("rack", "rack"), 'spec.levels: Invalid value: "array": must be unique'),
    (("kubernetes.io/hostname", "rack"),
     'spec.levels: Invalid value: "array": the kubernetes.io/hostname label can only be used at the lowest level of topology'),
    (("not a label",), "spec.levels[0].nodeLabel"),
    (tuple(f"level-{n}" for n in range(17)), "spec.levels"),
])
async def test_a_topologys_levels_follow_kueues_rules(hub: Client, levels: tuple[str, ...], message: str) -> None:  # noqa: F811
    response = await hub.post(f"{V1B2}/topologies", json=topology("v1beta2", *levels, name="refused"))
    body = await response.json()
    assert response.status == 422, body
    assert message in body["message"], body


async def test_a_topologys_levels_are_immutable(hub: Client) -> None:  # noqa: F811
    created = await ok(await hub.post(f"{V1B1}/topologies", json=topology("v1beta1", *LEVELS, name="fixed")), 201)
    changed = {**created, "spec": {"levels": [{"nodeLabel": "cloud.example.com/topology-rack"}]}}
    response = await hub.put(f"{V1B1}/topologies/fixed", json=changed)
    body = await response.json()
    assert response.status == 422, body
    assert 'spec.levels: Invalid value: "array": field is immutable' in body["message"], body
    labelled = {**created, "metadata": {**created["metadata"], "labels": {"team": "infra"}}}
    await ok(await hub.put(f"{V1B1}/topologies/fixed", json=labelled))


#: A topology-aware setup of the shape Kueue's docs give: the Topology at v1alpha1, a flavor naming it.
TOPOLOGY_YAML = """\
apiVersion: kueue.x-k8s.io/v1alpha1
kind: Topology
metadata:
  name: dc-layout
spec:
  levels:
  - nodeLabel: cloud.example.com/topology-block
  - nodeLabel: kubernetes.io/hostname
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: ResourceFlavor
metadata:
  name: tas-gpus
spec:
  nodeLabels:
    cloud.example.com/node-group: gpus
  topologyName: dc-layout
"""


@needs_kubectl
async def test_kubectl_applies_a_kueue_topology_setup(hub_kubeconfig: Path) -> None:  # noqa: F811
    out = await _applied_both_ways(hub_kubeconfig, TOPOLOGY_YAML)
    assert out == ["topology.kueue.x-k8s.io/dc-layout created", "resourceflavor.kueue.x-k8s.io/tas-gpus created"]
    code, out, err = await kubectl(hub_kubeconfig, "get", "topologies", "dc-layout", "-o", "yaml")
    assert code == 0, err
    served = yaml.safe_load(out)
    assert served["apiVersion"] == "kueue.x-k8s.io/v1beta2", err
    assert [level["nodeLabel"] for level in served["spec"]["levels"]] == [
        "cloud.example.com/topology-block", "kubernetes.io/hostname"]
