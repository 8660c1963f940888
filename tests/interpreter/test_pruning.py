"""What a member copy loses per kind (Karmada's prune): one cluster's fields go, the user's stay."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from controlplane.interpreter.pruning import prune_for_member

Obj = dict[str, Any]

SERVICE_PORTS = [{"port": 80, "targetPort": 8080}]
TEMPLATE = {"spec": {"containers": [{"name": "c", "image": "i"}], "restartPolicy": "Never"}}


def _service(**spec: Any) -> Obj:
    return {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web"}, "spec": {"ports": SERVICE_PORTS, **spec}}


_AGGREGATION = {"clusterRoleSelectors": [{"matchLabels": {"example.com/aggregate-to-monitoring": "true"}}]}
_READ_PODS = [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch"]}]


def _cluster_role(**fields: Any) -> Obj:
    return {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": "monitoring"},
            **fields}


def _job(**spec: Any) -> Obj:
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "train"}, "spec": {**spec}}


PRUNED: list[tuple[str, Obj, Obj]] = [
    (
        "an exported Service loses its clusterIP and clusterIPs",
        _service(clusterIP="10.96.4.7", clusterIPs=["10.96.4.7"], type="ClusterIP"),
        _service(type="ClusterIP"),
    ),
    (
        "a Service with only clusterIPs loses them",
        _service(clusterIPs=["10.96.4.7", "fd00::7"]),
        _service(),
    ),
    (
        "a Deployment loses its revision annotations, keeps the user's",
        {
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web", "annotations": {
                "deployment.kubernetes.io/revision": "4",
                "deployment.kubernetes.io/revision-history": "1,2",
                "team": "a",
            }},
        },
        {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "annotations": {"team": "a"}}},
    ),
    (
        "a Deployment with only its revision annotation has no annotations left",
        {"apiVersion": "apps/v1", "kind": "Deployment",
         "metadata": {"name": "web", "annotations": {"deployment.kubernetes.io/revision": "4"}}},
        {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"}},
    ),
    (
        "a service-account token Secret loses its data and the account's uid",
        {
            "apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/service-account-token",
            "metadata": {"name": "robot-token", "annotations": {
                "kubernetes.io/service-account.name": "robot",
                "kubernetes.io/service-account.uid": "6f1e",
            }},
            "data": {"token": "ZXlK", "ca.crt": "LS0t", "namespace": "ZGVmYXVsdA=="},
        },
        {
            "apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/service-account-token",
            "metadata": {"name": "robot-token", "annotations": {"kubernetes.io/service-account.name": "robot"}},
        },
    ),
    (
        "a ServiceAccount loses the token Secrets generated for it, keeps the others",
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "robot"},
         "secrets": [{"name": "robot-token-x7k2p"}, {"name": "registry"}, {"name": "robot-token-9fz"}]},
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "robot"}, "secrets": [{"name": "registry"}]},
    ),
    (
        "a ServiceAccount with only generated token Secrets has no secrets left",
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "robot"},
         "secrets": [{"name": "robot-token-x7k2p"}]},
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "robot"}},
    ),
    (
        "a PersistentVolumeClaim loses the node the old cluster picked",
        {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "data", "annotations": {
            "volume.kubernetes.io/selected-node": "old-node-3", "backup": "daily"}}},
        {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "data", "annotations": {
            "backup": "daily"}}},
    ),
    (
        "a Job loses its TTL and the selector and labels generated from the hub's uid",
        _job(
            ttlSecondsAfterFinished=30,
            selector={"matchLabels": {"batch.kubernetes.io/controller-uid": "u-1"}},
            template={"metadata": {"labels": {
                "batch.kubernetes.io/controller-uid": "u-1", "controller-uid": "u-1",
                "batch.kubernetes.io/job-name": "train", "job-name": "train", "app": "train",
            }}, **TEMPLATE},
        ),
        _job(template={"metadata": {"labels": {"app": "train"}}, **TEMPLATE}),
    ),
    (
        "a Job with a manual selector keeps its selector and labels, loses its TTL",
        _job(
            manualSelector=True,
            ttlSecondsAfterFinished=0,
            selector={"matchLabels": {"controller-uid": "mine"}},
            template={"metadata": {"labels": {"controller-uid": "mine"}}, **TEMPLATE},
        ),
        _job(
            manualSelector=True,
            selector={"matchLabels": {"controller-uid": "mine"}},
            template={"metadata": {"labels": {"controller-uid": "mine"}}, **TEMPLATE},
        ),
    ),
    (
        "an aggregated ClusterRole loses the rules the hub's aggregation filled in",
        _cluster_role(aggregationRule=_AGGREGATION, rules=_READ_PODS),
        _cluster_role(aggregationRule=_AGGREGATION),
    ),
]

KEPT: list[tuple[str, Obj]] = [
    ("a headless Service", _service(clusterIP="None", clusterIPs=["None"])),
    ("a headless Service given by clusterIPs alone", _service(clusterIPs=["None"])),
    ("a Service without addresses", _service(type="LoadBalancer")),
    (
        "a Secret of another type",
        {"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
         "metadata": {"name": "creds", "annotations": {"kubernetes.io/service-account.uid": "6f1e"}},
         "data": {"password": "aHVudGVyMg=="}},
    ),
    (
        "a ServiceAccount whose Secrets were not generated for it",
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "robot"},
         "secrets": [{"name": "other-token-abc"}, {"name": "robot-tokens"}]},
    ),
    ("a Job without a TTL or a generated selector", _job(parallelism=2, template=TEMPLATE)),
    (
        "a StatefulSet, whose kind has nothing to drop",
        {"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "db", "annotations": {
            "deployment.kubernetes.io/revision": "4"}}, "spec": {"clusterIP": "10.0.0.1"}},
    ),
    ("a ClusterRole without aggregation", _cluster_role(rules=_READ_PODS)),
    (
        "a custom kind named Service in another group",
        {"apiVersion": "example.com/v1", "kind": "Service", "metadata": {"name": "s"}, "spec": {"clusterIP": "x"}},
    ),
]


@pytest.mark.parametrize(("given", "expected"), [(g, e) for _, g, e in PRUNED], ids=[i for i, _, _ in PRUNED])
def test_one_clusters_fields_are_dropped(given: Obj, expected: Obj) -> None:
    prune_for_member(given)
    assert given == expected


@pytest.mark.parametrize("given", [g for _, g in KEPT], ids=[i for i, _ in KEPT])
def test_the_users_fields_are_kept(given: Obj) -> None:
    before = copy.deepcopy(given)
    prune_for_member(given)
    assert given == before
