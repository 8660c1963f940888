"""Kueue's pod integration as pure functions: the scheduling gate added once, removed leaving the
Pod's other gates, and a Pod started with its flavor's node labels and its checks' podSetUpdates
merged in (a conflicting key is Kueue's error)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from controlplane.admission import pods
from controlplane.admission.checks import PodSetUpdateConflict

GATE = {"name": "kueue.x-k8s.io/admission"}


def pod(**spec: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "labels": {"app": "x"}},
            "spec": {"containers": [{"name": "main", "image": "i:1"}], **spec}}


def test_the_gate_is_added_once_and_removed_leaving_the_pods_own() -> None:
    gated = pod(schedulingGates=[{"name": "example.com/mine"}])
    pods.add_gate(gated)
    pods.add_gate(gated)
    assert gated["spec"]["schedulingGates"] == [{"name": "example.com/mine"}, GATE]
    assert pods.gated(gated)
    before = copy.deepcopy(gated)
    assert pods.without_gate(gated)["spec"]["schedulingGates"] == [{"name": "example.com/mine"}]
    assert gated == before
    only = pod()
    pods.add_gate(only)
    assert "schedulingGates" not in pods.without_gate(only)["spec"]
    assert not pods.gated(pod()) and not pods.is_pod({"apiVersion": "batch/v1", "kind": "Job"})


def test_a_started_pod_carries_its_flavor_and_its_checks_updates() -> None:
    queued = pod(schedulingGates=[GATE], nodeSelector={"disk": "ssd"})
    updates = [{"name": "budget", "state": "Ready", "podSetUpdates": [
        {"name": "main", "labels": {"team": "a"}, "tolerations": [{"key": "spot", "operator": "Exists"}]}]}]
    started = pods.start(queued, {"nvidia.com/gpu.product": "A100"}, updates)
    assert "schedulingGates" not in started["spec"]
    assert started["spec"]["nodeSelector"] == {"disk": "ssd", "nvidia.com/gpu.product": "A100"}
    assert started["spec"]["tolerations"] == [{"key": "spot", "operator": "Exists"}]
    assert started["metadata"] == {"name": "p", "labels": {"app": "x", "team": "a"}}


def test_a_check_contradicting_the_pod_is_kueues_conflict() -> None:
    queued = pod(schedulingGates=[GATE], nodeSelector={"zone": "z1"})
    updates = [{"name": "prov", "state": "Ready", "podSetUpdates": [{"name": "main", "nodeSelector": {"zone": "z2"}}]}]
    with pytest.raises(PodSetUpdateConflict, match="conflict for key=zone"):
        pods.start(queued, {}, updates)
