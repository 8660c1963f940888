"""Kueue's own YAML (its single-cluster setup, a cohort with borrowing limits and preemption, a
WorkloadPriorityClass, an AdmissionCheck and ClusterQueues naming it at v1beta1 and v1beta2)
applies unchanged to the hub with the real kubectl; kubectl lists the kinds with Kueue's columns;
an unknown spec field, a broken quota and a changed ``controllerName`` are refused naming the field."""

from __future__ import annotations

from pathlib import Path

import pytest

from controlplane.apiserver.kinds.core import core_resources
from controlplane.apiserver.kinds.kueue import kueue_resources
from controlplane.apiserver.resources import Registry

from .test_real_clients import (  # noqa: F401 (fixtures)
    kubeconfig,
    kubectl,
    kubectl_apply,
    kubectl_apply_refused,
    needs_kubectl,
    server_url,
)

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
async def test_kubectl_applies_kueue_yaml_unchanged(kubeconfig: Path) -> None:  # noqa: F811
    assert await kubectl_apply(kubeconfig, KUEUE_YAML) == CREATED

    code, out, err = await kubectl(kubeconfig, "get", "clusterqueues")
    assert code == 0, err
    header, *rows = out.splitlines()
    assert header.split() == ["NAME", "COHORT", "PENDING", "WORKLOADS", "ADMITTED", "WORKLOADS", "AGE"]
    assert [row.split()[:4] for row in rows] == [
        ["cluster-queue", "<none>", "0", "0"],
        ["team-b-cq", "team-ab", "0", "0"],
    ]
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
async def test_kubectl_refuses_broken_kueue_objects_naming_the_field(kubeconfig: Path) -> None:  # noqa: F811
    unknown = (
        "apiVersion: kueue.x-k8s.io/v1beta1\nkind: LocalQueue\nmetadata: {name: q, namespace: default}\n"
        "spec: {clusterQueue: cq, clusterQueu: typo}\n"
    )
    negative = BAD_QUEUE.format(name="bad", quota="{name: nvidia.com/gpu, nominalQuota: '-1'}")
    no_cohort = BAD_QUEUE.format(
        name="lonely", quota="{name: nvidia.com/gpu, nominalQuota: 4, borrowingLimit: 2}"
    )
    assert "clusterQueu" in await kubectl_apply_refused(kubeconfig, unknown)
    err = await kubectl_apply_refused(kubeconfig, negative)
    assert 'admission webhook "vclusterqueue.kb.io" denied the request' in err
    assert 'nominalQuota: Invalid value: "-1": must be greater than or equal to 0' in err
    assert "borrowingLimit must be nil when cohort is empty" in await kubectl_apply_refused(
        kubeconfig, no_cohort
    )


# Kueue's fair sharing (site/content/en/docs/concepts/fair_sharing.md) with hierarchical cohorts:
# a ClusterQueue's fairSharing.weight and a v1alpha1 Cohort with a parent (v1alpha1's ``parent``,
# v1beta1's ``parentName``) and a weight.
FAIR_SHARING_YAML = """\
apiVersion: kueue.x-k8s.io/v1alpha1
kind: Cohort
metadata:
  name: research
spec:
  parent: org
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
        "cohort.kueue.x-k8s.io/research created",
        "cohort.kueue.x-k8s.io/org created",
        "clusterqueue.kueue.x-k8s.io/cluster-queue created",
    ]
    code, out, err = await kubectl(kubeconfig, "get", "cohorts", "-o", "wide")
    assert code == 0, err
    header, *rows = out.splitlines()
    assert header.split()[:5] == ["NAME", "PARENT", "WEIGHT", "WEIGHTED", "SHARE"]
    assert [row.split()[:3] for row in rows] == [["org", "<none>", "<none>"], ["research", "org", "2"]]
    code, out, err = await kubectl(
        kubeconfig, "get", "clusterqueue", "cluster-queue", "-o", "jsonpath={.spec.fairSharing.weight}"
    )
    assert code == 0, err
    assert out == "0.5"
    root_limits = (
        "apiVersion: kueue.x-k8s.io/v1alpha1\nkind: Cohort\nmetadata: {name: top}\nspec:\n  resourceGroups:\n"
        "  - coveredResources: [nvidia.com/gpu]\n    flavors:\n    - name: f\n"
        "      resources: [{name: nvidia.com/gpu, nominalQuota: 4, lendingLimit: 2}]\n"
    )
    assert (
        'lendingLimit: Invalid value: "2": must be nil when parent is empty'
        in await kubectl_apply_refused(kubeconfig, root_limits)
    )
    bad_weight = (
        BAD_QUEUE.format(name="heavy", quota="{name: nvidia.com/gpu, nominalQuota: 4}")
        + "  fairSharing: {weight: '-1'}\n"
    )
    err = await kubectl_apply_refused(kubeconfig, bad_weight)
    assert 'admission webhook "vclusterqueue.kb.io" denied the request: spec.fairSharing: Invalid value: "-1": ' in err


# As in Kueue's docs (site/content/en/docs/admission-check-controllers/provisioning.md), with the
# ClusterQueue of its concepts page (admission_check.md) in both versions.
CHECKS_YAML = """\
apiVersion: kueue.x-k8s.io/v1beta2
kind: AdmissionCheck
metadata:
  name: sample-prov
spec:
  controllerName: kueue.x-k8s.io/provisioning-request
  parameters:
    apiGroup: kueue.x-k8s.io
    kind: ProvisioningRequestConfig
    name: prov-test-config
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: ClusterQueue
metadata:
  name: "cluster-queue"
spec:
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: ["cpu"]
    flavors:
    - name: "default-flavor"
      resources:
      - name: "cpu"
        nominalQuota: 9
  admissionChecks:
  - sample-prov
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: by-flavor}
spec:
  namespaceSelector: {}
  resourceGroups: [{coveredResources: [cpu], flavors: [{name: default-flavor, resources: [{name: cpu, nominalQuota: 9}]}]}]
  admissionChecksStrategy:
    admissionChecks:
    - name: sample-prov
      onFlavors: [default-flavor]
"""


@needs_kubectl
async def test_kubectl_applies_kueues_admission_check_yaml_unchanged(kubeconfig: Path) -> None:  # noqa: F811
    assert await kubectl_apply(kubeconfig, CHECKS_YAML) == (
        "admissioncheck.kueue.x-k8s.io/sample-prov created\n"
        "clusterqueue.kueue.x-k8s.io/cluster-queue created\n"
        "clusterqueue.kueue.x-k8s.io/by-flavor created\n"
    )
    code, out, err = await kubectl(
        kubeconfig,
        "get",
        "admissionchecks.v1beta1.kueue.x-k8s.io",
        "sample-prov",
        "-o",
        "jsonpath={.spec.retryDelayMinutes} {.spec.parameters.kind}",
    )
    assert (code, out) == (0, "15 ProvisioningRequestConfig"), err
    code, out, err = await kubectl(kubeconfig, "get", "admissionchecks")
    assert code == 0, err
    assert [row.split()[0] for row in out.splitlines()[1:]] == ["sample-prov"]
    # v1beta1's list of checks reads at v1beta2 as one rule for every flavor, and back.
    code, out, err = await kubectl(
        kubeconfig,
        "get",
        "clusterqueues.v1beta2.kueue.x-k8s.io",
        "cluster-queue",
        "-o",
        "jsonpath={.spec.admissionChecksStrategy.admissionChecks[0].name}",
    )
    assert (code, out) == (0, "sample-prov"), err
    code, out, err = await kubectl(
        kubeconfig,
        "get",
        "clusterqueues.v1beta1.kueue.x-k8s.io",
        "by-flavor",
        "-o",
        "jsonpath={.spec.admissionChecksStrategy.admissionChecks[0].onFlavors[0]}",
    )
    assert (code, out) == (0, "default-flavor"), err


@needs_kubectl
async def test_kubectl_refuses_a_changed_controller_and_a_check_without_one(kubeconfig: Path) -> None:  # noqa: F811
    check = "apiVersion: kueue.x-k8s.io/v1beta1\nkind: AdmissionCheck\nmetadata: {{name: c}}\nspec: {{controllerName: {}}}\n"
    assert (
        await kubectl_apply(kubeconfig, check.format("example.com/budget"))
        == "admissioncheck.kueue.x-k8s.io/c created\n"
    )
    err = await kubectl_apply_refused(kubeconfig, check.format("example.com/other"))
    assert 'spec.controllerName: Invalid value: "string": field is immutable' in err
    err = await kubectl_apply_refused(
        kubeconfig,
        "apiVersion: kueue.x-k8s.io/v1beta2\nkind: AdmissionCheck\nmetadata: {name: d}\nspec: {}\n",
    )
    assert 'The AdmissionCheck "d" is invalid: spec.controllerName: Required value' in err
