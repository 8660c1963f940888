"""Karmada's FederatedHPA and CronFederatedHPA YAML applies unchanged with the real kubectl, is
listed by its short names with the columns of Karmada's CRDs, and bad rules are refused in the
words of Karmada's webhooks."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from controlplane.apiserver.kinds.core import core_resources
from controlplane.apiserver.kinds.karmada_autoscaling import karmada_autoscaling_resources
from controlplane.apiserver.resources import Registry
from controlplane.apiserver.tables import IncludeObject, column_definitions, row

from .test_real_clients import (  # noqa: F401 (fixtures)
    kubeconfig,
    kubectl,
    kubectl_apply,
    kubectl_apply_refused,
    needs_kubectl,
    server_url,
)

# As in Karmada's FederatedHPA and CronFederatedHPA user guides.
KARMADA_YAML = """\
apiVersion: autoscaling.karmada.io/v1alpha1
kind: FederatedHPA
metadata:
  name: nginx
spec:
  scaleTargetRef:
    apiVersion: apps/v1
    kind: Deployment
    name: nginx
  minReplicas: 1
  maxReplicas: 10
  behavior:
    scaleDown:
      stabilizationWindowSeconds: 10
    scaleUp:
      stabilizationWindowSeconds: 10
  metrics:
    - type: Resource
      resource:
        name: cpu
        target:
          type: Utilization
          averageUtilization: 10
---
apiVersion: autoscaling.karmada.io/v1alpha1
kind: CronFederatedHPA
metadata:
  name: nginx-cronfhpa
spec:
  scaleTargetRef:
    apiVersion: autoscaling.karmada.io/v1alpha1
    kind: FederatedHPA
    name: nginx
  rules:
    - name: "scale-up"
      schedule: "*/1 * * * *"
      targetMinReplicas: 5
"""


@pytest.fixture
def api_registry() -> Registry:
    return Registry(core_resources(), karmada_autoscaling_resources())


@needs_kubectl
async def test_kubectl_applies_karmadas_autoscalers(kubeconfig: Path) -> None:  # noqa: F811
    out = await kubectl_apply(kubeconfig, KARMADA_YAML)
    assert out.split("\n")[:2] == [
        "federatedhpa.autoscaling.karmada.io/nginx created",
        "cronfederatedhpa.autoscaling.karmada.io/nginx-cronfhpa created",
    ]
    code, out, err = await kubectl(kubeconfig, "get", "fhpa")
    assert code == 0, err
    header, *rows = out.splitlines()
    assert header.split() == ["NAME", "REFERENCE-KIND", "REFERENCE-NAME", "MINPODS", "MAXPODS", "REPLICAS", "AGE"]
    # No status yet: REPLICAS is empty, as for a CRD column whose path is unset.
    assert [row.split()[:5] for row in rows] == [["nginx", "Deployment", "nginx", "1", "10"]]
    assert len(rows[0].split()) == 6
    code, out, err = await kubectl(kubeconfig, "get", "cronfhpa")
    assert code == 0, err
    header, *rows = out.splitlines()
    assert header.split() == ["NAME", "REFERENCE-KIND", "REFERENCE-NAME", "AGE"]
    assert [row.split()[:3] for row in rows] == [["nginx-cronfhpa", "FederatedHPA", "nginx"]]
    # kubectl's generic description of a CRD's object: no status until the controller writes one
    # (a CRD's create drops the zero status Karmada's webhook gives it).
    code, out, err = await kubectl(kubeconfig, "describe", "fhpa", "nginx")
    assert code == 0, err
    described = [line.split(":")[0].strip() for line in out.splitlines()]
    assert described[:6] == ["Name", "Namespace", "Labels", "Annotations", "API Version", "Kind"]
    assert "Scale Target Ref" in described and "Status" not in described
    assert out.splitlines()[-1].split() == ["Events:", "<none>"]
    # Karmada's defaults: the behaviour's unset fields as kube's HPA, the rule's history limits.
    code, out, err = await kubectl(kubeconfig, "get", "cronfhpa", "nginx-cronfhpa", "-o",
                                   "jsonpath={.spec.rules[0].successfulHistoryLimit},{.spec.rules[0].suspend}")
    assert (code, out) == (0, "3,false"), err
    code, out, err = await kubectl(kubeconfig, "get", "fhpa", "nginx", "-o",
                                   "jsonpath={.spec.behavior.scaleUp.selectPolicy}")
    assert (code, out) == (0, "Max"), err
    # The schema is kube's HPA parts: `kubectl explain` reaches the metric sources.
    code, out, err = await kubectl(kubeconfig, "explain", "fhpa.spec.metrics.pods.target")
    assert code == 0, err
    assert "averageValue" in out
    code, out, err = await kubectl(kubeconfig, "explain", "cronfhpa.spec.rules")
    assert code == 0, err
    assert "targetMinReplicas" in out


@needs_kubectl
async def test_bad_autoscalers_are_refused_in_karmadas_words(kubeconfig: Path) -> None:  # noqa: F811
    bad_fhpa = """\
apiVersion: autoscaling.karmada.io/v1alpha1
kind: FederatedHPA
metadata: {name: bad}
spec:
  scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: web}
  minReplicas: 3
  maxReplicas: 2
"""
    err = await kubectl_apply_refused(kubeconfig, bad_fhpa)
    assert ('admission webhook "federatedhpa.karmada.io" denied the request: '
            "spec.maxReplicas: Invalid value: 2: must be greater than or equal to `minReplicas`") in err
    bad_cron = """\
apiVersion: autoscaling.karmada.io/v1alpha1
kind: CronFederatedHPA
metadata: {name: bad}
spec:
  scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: web}
  rules:
    - {name: a, schedule: "not a cron", targetReplicas: 1}
    - {name: a, schedule: "0 * * * *", timeZone: Mars/Olympus}
"""
    err = await kubectl_apply_refused(kubeconfig, bad_cron)
    assert 'admission webhook "cronfederatedhpa.karmada.io" denied the request: [' in err
    for expected in (
        'spec.rules[0].schedule: Invalid value: "not a cron": invalid cron format',
        'spec.rules[1].name: Duplicate value: "a"',
        'spec.rules[1].timeZone: Invalid value: "Mars/Olympus": unknown time zone Mars/Olympus',
        'spec.rules[1].targetReplicas: Invalid value: "": targetReplicas cannot be nil if you want to scale Deployment',
    ):
        assert expected in err


def test_columns_are_those_kube_serves_for_karmadas_crds() -> None:
    """The Table's columns are those kube's CRD table convertor makes of the
    ``additionalPrinterColumns`` of Karmada's CRDs: their names, types and priorities, the
    description kube gives a column without one, AGE a ``date``; an unset field is no value."""
    def crd(json_path: str) -> str:
        return f"Custom resource definition column (in JSONPath format): {json_path}"

    reference = [("REFERENCE-KIND", "string", 0, crd(".spec.scaleTargetRef.kind")),
                 ("REFERENCE-NAME", "string", 0, crd(".spec.scaleTargetRef.name"))]
    age = ("AGE", "date", 0, crd(".metadata.creationTimestamp"))
    fhpa_rt, cron_rt = karmada_autoscaling_resources()
    assert [(d["name"], d["type"], d["priority"], d["description"]) for d in column_definitions(fhpa_rt)[1:]] == [
        *reference, ("MINPODS", "integer", 0, crd(".spec.minReplicas")),
        ("MAXPODS", "integer", 0, crd(".spec.maxReplicas")), ("REPLICAS", "integer", 0, crd(".status.currentReplicas")),
        age]
    assert [(d["name"], d["type"], d["priority"], d["description"])
            for d in column_definitions(cron_rt)[1:]] == [*reference, age]
    now = datetime(2024, 5, 1, 12, 0, tzinfo=UTC)
    obj = {"metadata": {"name": "nginx", "creationTimestamp": "2024-05-01T11:00:00Z"},
           "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "nginx"},
                    "minReplicas": 1, "maxReplicas": 10}}
    assert row(fhpa_rt, obj, include=IncludeObject.NONE, now=now)["cells"] == [
        "nginx", "Deployment", "nginx", 1, 10, None, "60m"]
