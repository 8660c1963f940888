"""Kueue's MultiKueueConfig and MultiKueueCluster (``kueue.x-k8s.io/v1beta2`` and ``v1beta1``) are
served, so a MultiKueue setup written for Kueue (a queue whose check is of the multikueue controller,
the check, its config, the clusters) applies unchanged: the CRD's default filled, its schema's limits
and CEL rule enforced with kube's wording, one stored object read at both versions (v1beta1's
``spec.kubeConfig`` is v1beta2's ``spec.clusterSource.kubeConfig``), through the hub's HTTP API on a
real etcd and with the real kubectl."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from .test_kube_validation import Client, hub, hub_kubeconfig  # noqa: F401 (fixtures)
from .test_kueue_cluster_config import _applied_both_ways
from .test_kueue_versions import V1B1, V1B2, ok
from .test_real_clients import kubectl, needs_kubectl

Obj = dict[str, Any]


def mk_config(version: str, *clusters: Any, name: str = "fleet") -> Obj:
    return {"apiVersion": f"kueue.x-k8s.io/{version}", "kind": "MultiKueueConfig", "metadata": {"name": name},
            "spec": {"clusters": list(clusters)}}


def mk_cluster(version: str, name: str, spec: Obj) -> Obj:
    return {"apiVersion": f"kueue.x-k8s.io/{version}", "kind": "MultiKueueCluster", "metadata": {"name": name},
            "spec": spec}


async def test_a_cluster_reads_back_at_both_versions_with_the_default_location_type(hub: Client) -> None:  # noqa: F811
    await ok(await hub.post(f"{V1B1}/multikueueclusters",
                            json=mk_cluster("v1beta1", "east", {"kubeConfig": {"location": "east-kubeconfig"}})), 201)
    v2 = await ok(await hub.get(f"{V1B2}/multikueueclusters/east"))
    assert v2["spec"] == {"clusterSource": {"kubeConfig": {"location": "east-kubeconfig", "locationType": "Secret"}}}
    created = await ok(await hub.post(f"{V1B2}/multikueueclusters", json=mk_cluster(
        "v1beta2", "west", {"clusterSource": {"kubeConfig": {"location": "/etc/west.kubeconfig", "locationType": "Path"}}})), 201)
    assert created["spec"]["clusterSource"]["kubeConfig"]["locationType"] == "Path"
    v1 = await ok(await hub.get(f"{V1B1}/multikueueclusters/west"))
    assert v1["spec"] == {"kubeConfig": {"location": "/etc/west.kubeconfig", "locationType": "Path"}}
    # A ClusterProfile reference has no place in v1beta1's kubeConfig: it is kept beside it.
    await ok(await hub.post(f"{V1B2}/multikueueclusters", json=mk_cluster(
        "v1beta2", "profiled", {"clusterSource": {"clusterProfileRef": {"name": "north"}}})), 201)
    assert (await ok(await hub.get(f"{V1B1}/multikueueclusters/profiled")))["spec"] == {"clusterProfileRef": {"name": "north"}}
    assert (await ok(await hub.get(f"{V1B2}/multikueueclusters/profiled")))["spec"] == {
        "clusterSource": {"clusterProfileRef": {"name": "north"}}}


EXACTLY_ONE = 'spec.clusterSource: Invalid value: "object": exactly one of the fields in [kubeConfig clusterProfileRef] must be set'


@pytest.mark.parametrize(("version", "spec", "message"), [
    ("v1beta2", {"clusterSource": {}}, EXACTLY_ONE),
    ("v1beta2", {"clusterSource": {"kubeConfig": {"location": "a"}, "clusterProfileRef": {"name": "a"}}}, EXACTLY_ONE),
    ("v1beta2", {"clusterSource": {"kubeConfig": {"location": ""}}},
     'spec.clusterSource.kubeConfig.location: Invalid value: "": '
     "spec.clusterSource.kubeConfig.location in body should be at least 1 chars long"),
    ("v1beta2", {"clusterSource": {"kubeConfig": {"location": "a" * 257}}},
     "spec.clusterSource.kubeConfig.location: Too long: may not be more than 256 bytes"),
    ("v1beta2", {"clusterSource": {"kubeConfig": {"location": "a", "locationType": "ConfigMap"}}},
     'spec.clusterSource.kubeConfig.locationType: Unsupported value: "ConfigMap": supported values: "Secret", "Path"'),
    ("v1beta2", {}, "spec.clusterSource: Required value"),
    ("v1beta1", {"kubeConfig": {"locationType": "Secret"}}, "spec.kubeConfig.location: Required value"),
    ("v1beta1", {"clusterProfileRef": {"name": "a"}}, "spec.kubeConfig: Required value"),
])
async def test_a_clusters_source_follows_kueues_schema(hub: Client, version: str, spec: Obj, message: str) -> None:  # noqa: F811
    response = await hub.post(f"{V1B2 if version == 'v1beta2' else V1B1}/multikueueclusters",
                              json=mk_cluster(version, "refused", spec))
    body = await response.json()
    assert response.status == 422, body
    assert message in body["message"], body
    assert (await hub.get(f"{V1B2}/multikueueclusters/refused")).status == 404


@pytest.mark.parametrize(("version", "clusters", "message"), [
    ("v1beta2", ("east", "west", "east"), 'spec.clusters[2]: Duplicate value: "east"'),
    ("v1beta1", ("east", "east"), 'spec.clusters[1]: Duplicate value: "east"'),
    ("v1beta2", (), "spec.clusters: Invalid value: 0: spec.clusters in body should have at least 1 items"),
    ("v1beta2", tuple(f"c{n}" for n in range(21)), "spec.clusters: Too many: 21: must have at most 20 items"),
    ("v1beta2", ("x" * 257,), "spec.clusters[0]: Too long: may not be more than 256 bytes"),
])
async def test_a_configs_clusters_follow_kueues_schema(hub: Client, version: str, clusters: tuple[str, ...], message: str) -> None:  # noqa: F811
    response = await hub.post(f"{V1B2 if version == 'v1beta2' else V1B1}/multikueueconfigs",
                              json=mk_config(version, *clusters, name="refused"))
    body = await response.json()
    assert response.status == 422, body
    assert message in body["message"], body


async def test_a_config_reads_back_at_both_versions(hub: Client) -> None:  # noqa: F811
    await ok(await hub.post(f"{V1B2}/multikueueconfigs", json=mk_config("v1beta2", "east", "west")), 201)
    read = await ok(await hub.get(f"{V1B1}/multikueueconfigs/fleet"))
    assert (read["apiVersion"], read["spec"]) == ("kueue.x-k8s.io/v1beta1", {"clusters": ["east", "west"]})


#: A MultiKueue setup of the shape Kueue's docs give (v1beta1): a queue whose admission check is of
#: the multikueue controller, the check naming its config, the config naming two worker clusters,
#: each reached through a kubeconfig Secret.
MULTIKUEUE_YAML = """\
apiVersion: kueue.x-k8s.io/v1beta1
kind: ResourceFlavor
metadata:
  name: shared-gpus
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: ClusterQueue
metadata:
  name: dispatched
spec:
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: [cpu, nvidia.com/gpu]
    flavors:
    - name: shared-gpus
      resources:
      - name: cpu
        nominalQuota: 32
      - name: nvidia.com/gpu
        nominalQuota: 8
  admissionChecks:
  - dispatch-to-workers
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: LocalQueue
metadata:
  namespace: default
  name: team-queue
spec:
  clusterQueue: dispatched
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: AdmissionCheck
metadata:
  name: dispatch-to-workers
spec:
  controllerName: kueue.x-k8s.io/multikueue
  parameters:
    apiGroup: kueue.x-k8s.io
    kind: MultiKueueConfig
    name: workers
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: MultiKueueConfig
metadata:
  name: workers
spec:
  clusters:
  - worker-a
  - worker-b
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: MultiKueueCluster
metadata:
  name: worker-a
spec:
  kubeConfig:
    locationType: Secret
    location: worker-a-kubeconfig
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: MultiKueueCluster
metadata:
  name: worker-b
spec:
  kubeConfig:
    location: worker-b-kubeconfig
"""


@needs_kubectl
async def test_kubectl_applies_a_kueue_multikueue_setup(hub_kubeconfig: Path) -> None:  # noqa: F811
    out = await _applied_both_ways(hub_kubeconfig, MULTIKUEUE_YAML)
    assert "multikueueconfig.kueue.x-k8s.io/workers created" in out
    assert "multikueuecluster.kueue.x-k8s.io/worker-b created" in out
    code, out, err = await kubectl(hub_kubeconfig, "get", "multikueuecluster", "worker-b", "-o", "yaml")
    assert code == 0, err
    served = yaml.safe_load(out)
    assert served["apiVersion"] == "kueue.x-k8s.io/v1beta2"
    assert served["spec"] == {"clusterSource": {"kubeConfig": {"location": "worker-b-kubeconfig", "locationType": "Secret"}}}
    code, out, err = await kubectl(hub_kubeconfig, "get", "multikueueclusters")
    assert code == 0 and out.splitlines()[0].split() == ["NAME", "CONNECTED", "AGE"], err
    code, out, err = await kubectl(hub_kubeconfig, "get", "multikueueconfigs", "workers", "-o", "jsonpath={.spec.clusters}")
    assert code == 0 and out == '["worker-a","worker-b"]', err
    code, out, err = await kubectl(hub_kubeconfig, "explain", "multikueuecluster.spec.clusterSource.kubeConfig.locationType")
    assert code == 0 and "FIELD: locationType <string>" in out, err
