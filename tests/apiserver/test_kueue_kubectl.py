"""Kueue's own YAML (its single-cluster setup, a cohort with borrowing limits and preemption, a
WorkloadPriorityClass) applies unchanged to the hub with the real kubectl; kubectl lists the kinds
with Kueue's columns; an unknown spec field and a broken quota are refused naming the field."""

from __future__ import annotations

from pathlib import Path

import pytest

from controlplane.apiserver.kinds.kueue import kueue_resources
from controlplane.apiserver.resources import Registry, core_resources

from .test_real_clients import kubeconfig, kubectl, needs_kubectl, server_url  # noqa: F401 (fixtures)

# As in Kueue's docs (site/content/en/docs/tasks/manage/administer_cluster_quotas.md).
KUEUE_YAML = """\
apiVersion: kueue.x-k8s.io/v1beta1
kind: ResourceFlavor
metadata:
  name: "default-flavor"
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: ClusterQueue
metadata:
  name: "cluster-queue"
spec:
  namespaceSelector: {} # match all.
  resourceGroups:
  - coveredResources: ["cpu", "memory", "nvidia.com/gpu"]
    flavors:
    - name: "default-flavor"
      resources:
      - name: "cpu"
        nominalQuota: 9
      - name: "memory"
        nominalQuota: 36Gi
      - name: "nvidia.com/gpu"
        nominalQuota: 8
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: ClusterQueue
metadata:
  name: "team-b-cq"
spec:
  namespaceSelector: {}
  cohort: "team-ab"
  queueingStrategy: StrictFIFO
  preemption:
    reclaimWithinCohort: Any
    borrowWithinCohort:
      policy: LowerPriority
      maxPriorityThreshold: 100
    withinClusterQueue: LowerPriority
  flavorFungibility:
    whenCanBorrow: Borrow
    whenCanPreempt: TryNextFlavor
  resourceGroups:
  - coveredResources: ["nvidia.com/gpu"]
    flavors:
    - name: "default-flavor"
      resources:
      - name: "nvidia.com/gpu"
        nominalQuota: 8
        borrowingLimit: 4
        lendingLimit: 2
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: LocalQueue
metadata:
  namespace: "default"
  name: "user-queue"
spec:
  clusterQueue: "cluster-queue"
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: WorkloadPriorityClass
metadata:
  name: sample-priority
value: 10000
description: "Sample priority"
"""

CREATED = """\
resourceflavor.kueue.x-k8s.io/default-flavor created
clusterqueue.kueue.x-k8s.io/cluster-queue created
clusterqueue.kueue.x-k8s.io/team-b-cq created
localqueue.kueue.x-k8s.io/user-queue created
workloadpriorityclass.kueue.x-k8s.io/sample-priority created
"""


@pytest.fixture
def api_registry() -> Registry:
    """The ``objects``, ``server_url`` and ``kubeconfig`` fixtures serve Kueue's kinds."""
    return Registry(core_resources(), kueue_resources())


@needs_kubectl
async def test_kubectl_applies_kueue_yaml_unchanged(kubeconfig: Path, tmp_path: Path) -> None:  # noqa: F811
    manifest = tmp_path / "kueue.yaml"
    manifest.write_text(KUEUE_YAML)
    code, out, err = await kubectl(kubeconfig, "apply", "-f", str(manifest))
    assert code == 0, err
    assert out == CREATED

    code, out, err = await kubectl(kubeconfig, "get", "clusterqueues")
    assert code == 0, err
    header, *rows = out.splitlines()
    assert header.split() == ["NAME", "COHORT", "PENDING", "WORKLOADS", "ADMITTED", "WORKLOADS", "AGE"]
    assert [row.split()[:4] for row in rows] == [["cluster-queue", "<none>", "0", "0"], ["team-b-cq", "team-ab", "0", "0"]]
    code, out, err = await kubectl(kubeconfig, "get", "cq", "-o", "wide")
    assert code == 0, err
    assert out.splitlines()[0].split()[:3] == ["NAME", "COHORT", "STRATEGY"]
    code, out, err = await kubectl(kubeconfig, "get", "lq", "-n", "default")
    assert code == 0, err
    header, *rows = out.splitlines()
    assert header.split()[:2] == ["NAME", "CLUSTERQUEUE"]
    assert [row.split()[:2] for row in rows] == [["user-queue", "cluster-queue"]]
    code, out, err = await kubectl(kubeconfig, "get", "workloadpriorityclasses")
    assert code == 0, err
    assert [row.split()[:2] for row in out.splitlines()[1:]] == [["sample-priority", "10000"]]


async def _refused(kubeconfig: Path, path: Path) -> str:  # noqa: F811
    """kubectl apply of ``path`` fails; its stderr."""
    code, _, err = await kubectl(kubeconfig, "apply", "-f", str(path))
    assert code != 0
    return err


BAD_QUEUE = """\
apiVersion: kueue.x-k8s.io/v1beta1
kind: ClusterQueue
metadata: {{name: {name}}}
spec:
  resourceGroups:
  - coveredResources: [nvidia.com/gpu]
    flavors:
    - name: f
      resources: [{quota}]
"""


@needs_kubectl
async def test_kubectl_refuses_broken_kueue_objects_naming_the_field(kubeconfig: Path, tmp_path: Path) -> None:  # noqa: F811
    unknown, negative, no_cohort = (tmp_path / f"{n}.yaml" for n in ("unknown", "negative", "no-cohort"))
    unknown.write_text(
        "apiVersion: kueue.x-k8s.io/v1beta1\nkind: LocalQueue\nmetadata: {name: q, namespace: default}\n"
        "spec: {clusterQueue: cq, clusterQueu: typo}\n"
    )
    negative.write_text(BAD_QUEUE.format(name="bad", quota="{name: nvidia.com/gpu, nominalQuota: '-1'}"))
    no_cohort.write_text(BAD_QUEUE.format(name="lonely", quota="{name: nvidia.com/gpu, nominalQuota: 4, borrowingLimit: 2}"))
    assert "clusterQueu" in await _refused(kubeconfig, unknown)
    err = await _refused(kubeconfig, negative)
    assert 'ClusterQueue "bad" is invalid' in err and "nominalQuota" in err
    assert "need spec.cohort" in await _refused(kubeconfig, no_cohort)


# Kueue's fair sharing (site/content/en/docs/concepts/fair_sharing.md) with hierarchical cohorts:
# a ClusterQueue's fairSharing.weight and a v1alpha1 Cohort with a parent and a weight.
FAIR_SHARING_YAML = """\
apiVersion: kueue.x-k8s.io/v1alpha1
kind: Cohort
metadata:
  name: research
spec:
  parentName: org
  fairSharing:
    weight: "2"
---
apiVersion: kueue.x-k8s.io/v1alpha1
kind: Cohort
metadata:
  name: org
spec:
  resourceGroups:
  - coveredResources: ["nvidia.com/gpu"]
    flavors:
    - name: "default-flavor"
      resources:
      - name: "nvidia.com/gpu"
        nominalQuota: 300
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: ClusterQueue
metadata:
  name: "cluster-queue"
spec:
  namespaceSelector: {}
  cohort: research
  resourceGroups:
  - coveredResources: ["nvidia.com/gpu"]
    flavors:
    - name: "default-flavor"
      resources:
      - name: "nvidia.com/gpu"
        nominalQuota: 9
  fairSharing:
    weight: "0.5"
"""


@needs_kubectl
async def test_kubectl_applies_fair_sharing_weights_and_cohorts(kubeconfig: Path, tmp_path: Path) -> None:  # noqa: F811
    manifest = tmp_path / "fair.yaml"
    manifest.write_text(FAIR_SHARING_YAML)
    code, out, err = await kubectl(kubeconfig, "apply", "-f", str(manifest))
    assert code == 0, err
    assert out.splitlines() == [
        "cohort.kueue.x-k8s.io/research created", "cohort.kueue.x-k8s.io/org created",
        "clusterqueue.kueue.x-k8s.io/cluster-queue created",
    ]
    code, out, err = await kubectl(kubeconfig, "get", "cohorts", "-o", "wide")
    assert code == 0, err
    header, *rows = out.splitlines()
    assert header.split()[:5] == ["NAME", "PARENT", "WEIGHT", "WEIGHTED", "SHARE"]
    assert [row.split()[:3] for row in rows] == [["org", "<none>", "<none>"], ["research", "org", "2"]]
    code, out, err = await kubectl(kubeconfig, "get", "clusterqueue", "cluster-queue", "-o", "jsonpath={.spec.fairSharing.weight}")
    assert code == 0, err
    assert out == "0.5"
    root_limits = tmp_path / "root-limits.yaml"
    root_limits.write_text(
        "apiVersion: kueue.x-k8s.io/v1alpha1\nkind: Cohort\nmetadata: {name: top}\nspec:\n  resourceGroups:\n"
        "  - coveredResources: [nvidia.com/gpu]\n    flavors:\n    - name: f\n"
        "      resources: [{name: nvidia.com/gpu, nominalQuota: 4, lendingLimit: 2}]\n"
    )
    assert "need spec.parentName" in await _refused(kubeconfig, root_limits)
    bad_weight = tmp_path / "bad-weight.yaml"
    bad_weight.write_text(BAD_QUEUE.format(name="heavy", quota="{name: nvidia.com/gpu, nominalQuota: 4}") + "  fairSharing: {weight: '-1'}\n")
    err = await _refused(kubeconfig, bad_weight)
    assert "fairSharing" in err and "weight" in err
