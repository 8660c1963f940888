"""Karmada's WorkloadRebalancer YAML applies unchanged with the real kubectl, is listed with its
results, and a rebalancer listing no workload is refused naming the field."""

from __future__ import annotations

from pathlib import Path

import pytest

from controlplane.apiserver.kinds.core import core_resources
from controlplane.apiserver.kinds.karmada_apps import karmada_apps_resources
from controlplane.apiserver.resources import Registry

from .test_real_clients import (  # noqa: F401 (fixtures)
    kubeconfig,
    kubectl,
    kubectl_apply,
    kubectl_apply_refused,
    needs_kubectl,
    server_url,
)

# As in Karmada's tutorial (docs/tutorials/workload-rebalancer.md).
KARMADA_YAML = """\
apiVersion: apps.karmada.io/v1alpha1
kind: WorkloadRebalancer
metadata:
  name: demo
spec:
  workloads:
    - apiVersion: apps/v1
      kind: Deployment
      name: foo
      namespace: default
  ttlSecondsAfterFinished: 60
"""


@pytest.fixture
def api_registry() -> Registry:
    """The ``objects``, ``server_url`` and ``kubeconfig`` fixtures serve the rebalancer kind."""
    return Registry(core_resources(), karmada_apps_resources())


@needs_kubectl
async def test_kubectl_applies_a_karmada_workload_rebalancer(kubeconfig: Path) -> None:  # noqa: F811
    out = await kubectl_apply(kubeconfig, KARMADA_YAML)
    assert out.strip() == "workloadrebalancer.apps.karmada.io/demo created"
    code, out, err = await kubectl(kubeconfig, "get", "workloadrebalancers")
    assert code == 0, err
    header, *rows = out.splitlines()
    assert header.split() == ["NAME", "SUCCESSFUL", "AGE"]
    assert [row.split()[:2] for row in rows] == [["demo", "0/1"]]

    empty = "apiVersion: apps.karmada.io/v1alpha1\nkind: WorkloadRebalancer\nmetadata: {name: empty}\nspec: {workloads: []}\n"
    err = await kubectl_apply_refused(kubeconfig, empty)
    assert 'WorkloadRebalancer "empty" is invalid' in err and "spec.workloads" in err
