"""A StatefulSet's RollingUpdate partition divided over the members that run its parts, and the
health of a member's partitioned rollout.

The hub's ``replicas - partition`` updated pods are what ``kubectl rollout status`` waits for on
the hub; the members' parts of the partition must add up to it, for every split.
"""

from __future__ import annotations

from typing import Any

import pytest

from controlplane.apis.work_v1alpha1 import Health
from controlplane.controllers.works import render_manifest
from controlplane.interpreter import interpreter_for
from controlplane.interpreter.statefulset import divide_partition
from policies.affinity import ClusterView

H, U = Health.HEALTHY, Health.UNHEALTHY
STS = interpreter_for("apps/v1", "StatefulSet")


def statefulset(replicas: int, partition: int | None, *, strategy: str = "RollingUpdate") -> dict[str, Any]:
    update: dict[str, Any] = {"type": strategy}
    if partition is not None:
        update["rollingUpdate"] = {"partition": partition}
    return {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": {"name": "db", "namespace": "ml"},
        "spec": {
            "replicas": replicas,
            "updateStrategy": update,
            "template": {"spec": {"containers": [{"name": "db", "image": "db:2"}]}},
        },
    }


@pytest.mark.parametrize(
    ("replicas", "partition", "split", "parts"),
    [
        pytest.param(4, 2, {"east": 2, "west": 2}, {"east": 2, "west": 0}, id="half-kept-in-the-first-member"),
        pytest.param(4, 3, {"east": 2, "west": 2}, {"east": 2, "west": 1}, id="canary-in-the-last-member"),
        pytest.param(4, 1, {"west": 2, "east": 2}, {"east": 1, "west": 0}, id="cluster-name-order-not-split-order"),
        pytest.param(4, 0, {"east": 2, "west": 2}, {"east": 0, "west": 0}, id="partition-0"),
        pytest.param(4, 4, {"east": 3, "west": 1}, {"east": 3, "west": 1}, id="partition-equal-to-replicas"),
        pytest.param(4, 9, {"east": 3, "west": 1}, {"east": 3, "west": 1}, id="partition-above-replicas"),
        pytest.param(5, 2, {"a": 0, "b": 3, "c": 2}, {"a": 0, "b": 2, "c": 0}, id="a-member-with-0-replicas"),
        pytest.param(7, 4, {"a": 3, "b": 2, "c": 2}, {"a": 3, "b": 1, "c": 0}, id="three-members"),
        pytest.param(4, 2, {"east": 4, "west": 4}, {"east": 2, "west": 2}, id="duplicated-keeps-it"),
        pytest.param(4, 3, {"east": 4}, {"east": 3}, id="one-member"),
    ],
)
def test_the_members_update_replicas_minus_partition_pods_in_all(
    replicas: int, partition: int, split: dict[str, int], parts: dict[str, int]
) -> None:
    assert divide_partition(partition, split, replicas=replicas) == parts
    hub = statefulset(replicas, partition)
    manifests = {
        cluster: render_manifest(
            hub, interpreter=STS, replicas=share, shape=None, rules=(), cluster=ClusterView(name=cluster), split=split
        ).manifest
        for cluster, share in split.items()
    }
    for cluster, manifest in manifests.items():
        assert manifest["spec"]["replicas"] == split[cluster]
        assert manifest["spec"]["updateStrategy"]["rollingUpdate"]["partition"] == parts[cluster]
    if sum(split.values()) == replicas:
        updated = sum(max(0, m["spec"]["replicas"] - parts[c]) for c, m in manifests.items())
        assert updated == max(0, replicas - partition)
    assert hub["spec"]["updateStrategy"]["rollingUpdate"]["partition"] == partition  # the hub's object stays


@pytest.mark.parametrize(
    "hub",
    [
        pytest.param(statefulset(4, None), id="no-partition"),
        pytest.param(statefulset(4, None, strategy="OnDelete"), id="on-delete"),
    ],
)
def test_a_statefulset_without_a_partition_reaches_members_as_it_is(hub: dict[str, Any]) -> None:
    split = {"east": 2, "west": 2}
    rendered = render_manifest(
        hub, interpreter=STS, replicas=2, shape=None, rules=(), cluster=ClusterView(name="west"), split=split
    ).manifest
    assert rendered["spec"]["updateStrategy"] == hub["spec"]["updateStrategy"]


@pytest.mark.parametrize(
    ("spec", "status", "health"),
    [
        pytest.param(
            statefulset(2, 2)["spec"], {"replicas": 2, "readyReplicas": 2, "currentReplicas": 2}, H,
            id="every-pod-kept",
        ),
        pytest.param(
            statefulset(3, 1)["spec"], {"replicas": 3, "readyReplicas": 3, "updatedReplicas": 2}, H,
            id="the-pods-above-the-partition-updated",
        ),
        pytest.param(
            statefulset(3, 1)["spec"], {"replicas": 3, "readyReplicas": 3, "updatedReplicas": 1}, U,
            id="still-rolling-above-the-partition",
        ),
        pytest.param(
            statefulset(3, 1)["spec"], {"replicas": 3, "readyReplicas": 2, "updatedReplicas": 2}, U,
            id="a-pod-not-ready",
        ),
        pytest.param(
            statefulset(2, 5)["spec"], {"replicas": 2, "readyReplicas": 2}, H, id="partition-above-replicas",
        ),
        pytest.param(
            statefulset(2, 0)["spec"], {"replicas": 2, "readyReplicas": 2, "updatedReplicas": 1}, U,
            id="partition-0-wants-all",
        ),
        pytest.param(
            statefulset(2, None, strategy="OnDelete")["spec"], {"replicas": 2, "readyReplicas": 2}, H,
            id="on-delete-awaits-no-update",
        ),
    ],
)
def test_a_partitioned_member_is_healthy_once_the_pods_above_its_partition_are_updated(
    spec: dict[str, Any], status: dict[str, Any], health: Health
) -> None:
    assert STS.health_of({"apiVersion": "apps/v1", "kind": "StatefulSet", "spec": spec, "status": status}) is health
