"""Kueue's pod groups as pure functions: the role hash (Kueue's annotation wins; Pods of one shape
share one, whatever the spelling of their quantities, and another request or port is another
role), the group's pod sets by role in name order, Kueue's words for a group it cannot make a
Workload for, when a group has finished, which Pods are excess, and whether a Workload still
matches its group."""

from __future__ import annotations

from typing import Any

import pytest

from controlplane.admission import matching, podgroups

GPU = "nvidia.com/gpu"


def member(name: str, *, requests: dict[str, str] | None = None, total: str = "3", phase: str | None = None,
           ports: list[dict[str, Any]] | None = None, queue: str = "lq", created: str = "2026-01-01T00:00:00Z") -> dict[str, Any]:
    container: dict[str, Any] = {"name": "main", "image": "i:1", "resources": {"requests": requests or {GPU: "1"}}}
    if ports:
        container["ports"] = ports
    pod: dict[str, Any] = {"apiVersion": "v1", "kind": "Pod", "metadata": {
        "name": name, "namespace": "ns", "creationTimestamp": created,
        "labels": {"kueue.x-k8s.io/queue-name": queue, "kueue.x-k8s.io/pod-group-name": "grp"},
        "annotations": {"kueue.x-k8s.io/pod-group-total-count": total}}, "spec": {"containers": [container]}}
    if phase:
        pod["status"] = {"phase": phase}
    return pod


@pytest.mark.parametrize(("a", "b", "same"), [
    ({"requests": {"cpu": "1", "memory": "1Gi"}}, {"requests": {"memory": "1024Mi", "cpu": "1000m"}}, True),
    ({"requests": {GPU: "1"}}, {"requests": {GPU: "2"}}, False),
    ({"ports": [{"containerPort": 80, "protocol": "TCP"}]}, {"ports": [{"containerPort": 81, "protocol": "TCP"}]}, False),
    ({}, {"total": "4", "queue": "other"}, True),  # neither the count nor the queue is the Pod's shape
])
def test_pods_of_one_shape_share_a_role(a: dict[str, Any], b: dict[str, Any], same: bool) -> None:
    assert (podgroups.role_hash(member("a", **a)) == podgroups.role_hash(member("b", **b))) is same


def test_the_role_hash_is_kueues_eight_hex_digits_and_its_annotation_wins() -> None:
    computed = podgroups.role_hash(member("a"))
    assert len(computed) == 8 and int(computed, 16) >= 0
    annotated = member("a")
    annotated["metadata"]["annotations"]["kueue.x-k8s.io/role-hash"] = "given"
    assert podgroups.role_hash(annotated) == "given"


def test_pod_sets_count_each_roles_runnable_pods_in_name_order() -> None:
    pods = [member("s1"), member("b", requests={GPU: "2"}), member("s2"), member("f", phase="Failed")]
    sets = podgroups.pod_sets(pods)
    small, big = podgroups.role_hash(pods[0]), podgroups.role_hash(pods[1])
    assert [(p["name"], p["count"]) for p in sets] == sorted([(small, 2), (big, 1)])  # the failed Pod does not count


@pytest.mark.parametrize(("pods", "why"), [
    ([member("a"), member("b")], "'grp' group has fewer runnable pods than expected"),
    ([member("a"), member("b"), member("c", phase="Failed")], "'grp' group has fewer runnable pods than expected"),
    ([member("a"), member("b", queue="x"), member("c")], "pods 'a' and 'b' has different queue names: lq!=x"),
    ([member("a"), member("b", total="4"), member("c")],
     "pods 'a' and 'b' has different 'kueue.x-k8s.io/pod-group-total-count' values: 3!=4"),
    ([member("a"), member("b"), member("c")], None),
])
def test_kueues_words_for_a_group_it_cannot_make_a_workload_for(pods: list[dict[str, Any]], why: str | None) -> None:
    assert podgroups.not_composable("grp", pods) == why


def test_a_group_finishes_when_its_total_count_has_succeeded() -> None:
    assert podgroups.finished_message([member("a", phase="Succeeded"), member("b", phase="Succeeded"), member("c")]) is None
    assert podgroups.finished_message([member(n, phase="Succeeded") for n in "abc"]) == "Pods succeeded: 3/3."


def test_the_excess_pods_are_the_gated_and_newest_ones() -> None:
    running = member("old", created="2026-01-01T00:00:00Z")
    newer = member("newer", created="2026-01-02T00:00:00Z")
    gated = member("gated", created="2025-12-01T00:00:00Z")
    gated["spec"]["schedulingGates"] = [{"name": "kueue.x-k8s.io/admission"}]
    assert [p["metadata"]["name"] for p in podgroups.excess([gated, newer, running], 1)] == ["newer", "gated"]


def test_a_workload_matches_its_group_while_it_has_every_role_and_enough_pods() -> None:
    pods = [member("a"), member("b")]
    workload = {"spec": {"podSets": podgroups.pod_sets(pods)}, "status": {}}
    assert matching.group_equivalent(podgroups.pod_sets(pods), workload)
    assert matching.group_equivalent(podgroups.pod_sets(pods[:1]), workload)  # a Pod short: replaced later
    assert not matching.group_equivalent(podgroups.pod_sets([*pods, member("c")]), workload)  # more than it counts
    assert not matching.group_equivalent(podgroups.pod_sets([member("x", requests={GPU: "4"})]), workload)  # another role
