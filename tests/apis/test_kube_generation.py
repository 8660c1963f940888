"""Which kinds kube keeps a generation for, and telling a content change from a metadata or
status write with or without one (as the hub's controllers ask it per watch event)."""

from __future__ import annotations

from typing import Any

import pytest

from controlplane.apis.kube.generation import content_changed, keeps_generation


@pytest.mark.parametrize(
    ("group", "kind", "kept"),
    [
        ("apps", "Deployment", True),
        ("batch", "CronJob", True),
        ("policy", "PodDisruptionBudget", True),
        ("networking.k8s.io", "IngressClass", True),
        ("apiextensions.k8s.io", "CustomResourceDefinition", True),
        ("kubeflow.org", "PyTorchJob", True),  # a custom resource: always
        ("work.gpufed.io", "Work", True),
        ("", "ConfigMap", False),
        ("", "Secret", False),
        ("", "Service", False),
        ("", "Pod", False),  # from v1.33 on; the hub serves v1.32
        ("autoscaling", "HorizontalPodAutoscaler", False),
        ("rbac.authorization.k8s.io", "ClusterRole", False),
        ("node.k8s.io", "RuntimeClass", False),
        ("", "Node", False),
        ("discovery.k8s.io", "EndpointSlice", True),
        ("example.com", "ConfigMap", True),  # a CRD's kind of the same name is a custom resource
    ],
)
def test_kube_keeps_a_generation_where_its_strategy_does(group: str, kind: str, kept: bool) -> None:
    assert keeps_generation(group, kind) is kept


def _cm(data: dict[str, str], **meta: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", **meta}, "data": data}


def _deploy(replicas: int, generation: int, **meta: Any) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "d", "generation": generation, **meta},
        "spec": {"replicas": replicas}, "status": {"replicas": replicas},
    }


@pytest.mark.parametrize(
    ("old", "new", "changed"),
    [
        (_cm({"a": "1"}, resourceVersion="1"), _cm({"a": "2"}, resourceVersion="2"), True),
        (_cm({"a": "1"}, resourceVersion="1"), _cm({"a": "1"}, resourceVersion="2", labels={"x": "y"}), False),
        # Written by an older hub (every kind had a generation): it no longer moves, the data does.
        (_cm({"a": "1"}, generation=1), _cm({"a": "2"}, generation=1), True),
        (_cm({"a": "1"}, generation=1), _cm({"a": "1"}, generation=1, annotations={"n": "1"}), False),
        ({**_cm({}), "binaryData": {"b": "AA=="}}, _cm({}), True),  # a key that went counts
        # A Deployment by its generation alone: a status write or a scale of status is not a change.
        (_deploy(1, 1), _deploy(1, 2), True),
        (_deploy(1, 1), {**_deploy(1, 1), "status": {"replicas": 5}}, False),
        (_deploy(1, 1), _deploy(1, 1, managedFields=[{"manager": "m"}]), False),
    ],
)
def test_content_changed_by_generation_or_by_content(old: dict[str, Any], new: dict[str, Any], changed: bool) -> None:
    assert content_changed(old, new) is changed
