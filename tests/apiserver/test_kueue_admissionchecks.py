"""Kueue's AdmissionCheck, served at ``kueue.x-k8s.io/v1beta2`` and v1beta1: Kueue's sample check
and ClusterQueues naming it (v1beta1's ``admissionChecks``, v1beta2's ``admissionChecksStrategy``)
apply unchanged with the real kubectl; ``retryDelayMinutes`` defaults to 15; ``controllerName``
cannot change; a Workload's ``status.admissionChecks`` takes only Kueue's states."""

from __future__ import annotations

from pathlib import Path

import pytest

from controlplane.apiserver.kinds.kueue import kueue_resources
from controlplane.apiserver.resources import Registry, core_resources

from .test_real_clients import (  # noqa: F401 (fixtures)
    kubeconfig,
    kubectl,
    kubectl_apply,
    kubectl_apply_refused,
    needs_kubectl,
    server_url,
)

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
metadata:
  name: "by-flavor"
spec:
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: ["cpu"]
    flavors:
    - name: "default-flavor"
      resources:
      - name: "cpu"
        nominalQuota: 9
  admissionChecksStrategy:
    admissionChecks:
    - name: sample-prov
      onFlavors: [default-flavor]
"""


@pytest.fixture
def api_registry() -> Registry:
    """The ``objects``, ``server_url`` and ``kubeconfig`` fixtures serve Kueue's kinds."""
    return Registry(core_resources(), kueue_resources())


@needs_kubectl
async def test_kubectl_applies_kueues_admission_check_yaml_unchanged(kubeconfig: Path) -> None:  # noqa: F811
    assert await kubectl_apply(kubeconfig, CHECKS_YAML) == (
        "admissioncheck.kueue.x-k8s.io/sample-prov created\n"
        "clusterqueue.kueue.x-k8s.io/cluster-queue created\n"
        "clusterqueue.kueue.x-k8s.io/by-flavor created\n"
    )
    code, out, err = await kubectl(kubeconfig, "get", "admissionchecks.v1beta1.kueue.x-k8s.io", "sample-prov",
                                   "-o", "jsonpath={.spec.retryDelayMinutes} {.spec.parameters.kind}")
    assert (code, out) == (0, "15 ProvisioningRequestConfig"), err
    code, out, err = await kubectl(kubeconfig, "get", "admissionchecks")
    assert code == 0, err
    assert [row.split()[0] for row in out.splitlines()[1:]] == ["sample-prov"]
    # v1beta1's list of checks reads at v1beta2 as one rule for every flavor, and back.
    code, out, err = await kubectl(kubeconfig, "get", "clusterqueues.v1beta2.kueue.x-k8s.io", "cluster-queue",
                                   "-o", "jsonpath={.spec.admissionChecksStrategy.admissionChecks[0].name}")
    assert (code, out) == (0, "sample-prov"), err
    code, out, err = await kubectl(kubeconfig, "get", "clusterqueues.v1beta1.kueue.x-k8s.io", "by-flavor",
                                   "-o", "jsonpath={.spec.admissionChecksStrategy.admissionChecks[0].onFlavors[0]}")
    assert (code, out) == (0, "default-flavor"), err


@needs_kubectl
async def test_kubectl_refuses_a_changed_controller_and_a_check_without_one(kubeconfig: Path) -> None:  # noqa: F811
    check = "apiVersion: kueue.x-k8s.io/v1beta1\nkind: AdmissionCheck\nmetadata: {{name: c}}\nspec: {{controllerName: {}}}\n"
    assert await kubectl_apply(kubeconfig, check.format("example.com/budget")) == "admissioncheck.kueue.x-k8s.io/c created\n"
    err = await kubectl_apply_refused(kubeconfig, check.format("example.com/other"))
    assert 'spec.controllerName: Invalid value: "string": field is immutable' in err
    err = await kubectl_apply_refused(kubeconfig, "apiVersion: kueue.x-k8s.io/v1beta2\nkind: AdmissionCheck\nmetadata: {name: d}\nspec: {}\n")
    assert 'The AdmissionCheck "d" is invalid: spec.controllerName: Required value' in err
