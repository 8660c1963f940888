"""Kueue's pod groups as pure functions, beyond the group's making: the role hash of a Pod with
affinity, spread constraints, tolerations and resource claims (each a ``corev1`` struct, encoded
in Go's field order), the group's ``reclaimablePods`` and the quota they release, its
``WaitingForReplacementPods`` condition, and what the serving, fast-admission and
retriable-in-group annotations change."""

from __future__ import annotations

import hashlib
from typing import Any

import pytest

from controlplane.admission import objects as adm
from controlplane.admission import podgroups

from .test_pod_groups import GPU, member

SERVING = "kueue.x-k8s.io/pod-group-serving"
FAST = "kueue.x-k8s.io/pod-group-fast-admission"
RETRIABLE = "kueue.x-k8s.io/retriable-in-group"


def annotated(pod: dict[str, Any], **annotations: str) -> dict[str, Any]:
    pod["metadata"]["annotations"].update({k.replace("_", "-"): v for k, v in annotations.items()})
    return pod


def test_the_role_hash_encodes_affinity_spread_tolerations_and_claims_as_kueues_go_structs() -> None:
    """Fields given out of Go's order (and a ``tolerationSeconds`` of 0, a pointer Go keeps);
    the expected text is Kueue's ``json.Marshal`` of its ``SpecShape``, written out by hand."""
    pod = {"metadata": {"name": "p", "annotations": {}}, "spec": {
        "containers": [{"name": "c", "image": "i", "resources": {"requests": {"cpu": "1"}}}],
        "affinity": {
            "podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
                {"podAffinityTerm": {"topologyKey": "zone", "labelSelector": {"matchLabels": {"b": "2", "a": "1"}}}, "weight": 5}]},
            "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                {"matchExpressions": [{"values": ["x"], "operator": "In", "key": "k"}]}]}},
        },
        "topologySpreadConstraints": [{"whenUnsatisfiable": "DoNotSchedule", "topologyKey": "zone", "maxSkew": 1, "minDomains": 2}],
        "resourceClaims": [{"resourceClaimTemplateName": "t", "name": "gpu"}],
        "tolerations": [{"tolerationSeconds": 0, "key": "k", "effect": "NoExecute", "operator": "Exists"}],
    }}
    go = (
        '{"spec":{'
        '"affinity":{"nodeAffinity":{"requiredDuringSchedulingIgnoredDuringExecution":{"nodeSelectorTerms":'
        '[{"matchExpressions":[{"key":"k","operator":"In","values":["x"]}]}]}},'
        '"podAntiAffinity":{"preferredDuringSchedulingIgnoredDuringExecution":'
        '[{"weight":5,"podAffinityTerm":{"labelSelector":{"matchLabels":{"a":"1","b":"2"}},"topologyKey":"zone"}}]}},'
        '"containers":[{"ports":null,"resources":{"requests":{"cpu":"1"}}}],'
        '"initContainers":null,"nodeSelector":null,"overhead":null,"priority":null,'
        '"resourceClaims":[{"name":"gpu","resourceClaimTemplateName":"t"}],'
        '"runtimeClassName":null,'
        '"tolerations":[{"key":"k","operator":"Exists","effect":"NoExecute","tolerationSeconds":0}],'
        '"topologySpreadConstraints":[{"maxSkew":1,"topologyKey":"zone","whenUnsatisfiable":"DoNotSchedule","minDomains":2}]'
        '}}'
    )
    assert podgroups.role_hash(pod) == hashlib.sha256(go.encode()).hexdigest()[:8]


def test_reclaimable_pods_count_each_roles_succeeded_pods_and_none_in_a_serving_group() -> None:
    pods = [member("a", phase="Succeeded"), member("b", phase="Succeeded"), member("c", phase="Failed"),
            member("big", requests={GPU: "2"}, phase="Succeeded"), member("d")]
    small, big = podgroups.role_hash(pods[0]), podgroups.role_hash(pods[3])
    assert podgroups.reclaimable_pods(pods, is_serving=False) == sorted(
        [{"name": small, "count": 2}, {"name": big, "count": 1}], key=lambda r: str(r["name"]))
    assert podgroups.reclaimable_pods(pods, is_serving=True) == []
    assert podgroups.serving([annotated(member("a"), **{SERVING: "true"})])
    assert not podgroups.serving([annotated(member("a"), **{SERVING: "True"})])


def test_an_admitted_workloads_usage_leaves_out_its_reclaimable_pods() -> None:
    """Kueue's ``totalRequestsFromAdmission``: a pod set's usage scaled down to its count less
    its reclaimable Pods."""
    wl = {"metadata": {"name": "grp", "namespace": "ns"}, "spec": {"podSets": [{"name": "r", "count": 3}]},
          "status": {"admission": {"clusterQueue": "cq", "podSetAssignments": [
              {"name": "r", "count": 3, "flavors": {GPU: "a100"}, "resourceUsage": {GPU: "6"}}]}}}
    admitted = adm.admitted_of(wl)
    assert admitted is not None and admitted.usage == {("a100", GPU): 6}
    wl["status"]["reclaimablePods"] = [{"name": "r", "count": 2}]
    admitted = adm.admitted_of(wl)
    assert admitted is not None and admitted.usage == {("a100", GPU): 2}


def _wl(*conditions: dict[str, Any]) -> dict[str, Any]:
    return {"metadata": {"generation": 2}, "status": {"conditions": list(conditions)}}


WAITING = {"type": "WaitingForReplacementPods", "status": "True", "reason": "PodsFailed", "message": "Some Failed pods need replacement"}


@pytest.mark.parametrize(("wl", "absent", "want"), [
    (_wl(), 0, None),
    (_wl(), 1, {**WAITING, "observedGeneration": 2}),
    (_wl(WAITING), 2, None),
    (_wl(WAITING), 0, {"type": "WaitingForReplacementPods", "status": "False", "reason": "PodsReady",
                       "message": "No pods need replacement", "observedGeneration": 2}),
    (_wl({"type": "Evicted", "status": "True", "reason": "Preempted", "message": "Preempted to accommodate a workload"}), 1,
     {"type": "WaitingForReplacementPods", "status": "True", "reason": "Preempted",
      "message": "Preempted to accommodate a workload", "observedGeneration": 2}),
])
def test_kueues_waiting_for_replacement_pods_condition(wl: dict[str, Any], absent: int, want: dict[str, Any] | None) -> None:
    assert podgroups.replacement_condition(wl, absent) == want


def test_a_serving_group_never_finishes_and_a_not_retriable_one_finishes_once_none_runs() -> None:
    done = [member(n, phase="Succeeded") for n in "abc"]
    assert podgroups.finished_message(done) == "Pods succeeded: 3/3."
    assert podgroups.finished_message([annotated(p, **{SERVING: "true"}) for p in done]) is None
    failed = [member("a", phase="Failed"), member("b", phase="Succeeded"), member("c", phase="Running")]
    assert podgroups.finished_message(failed) is None
    annotated(failed[0], **{RETRIABLE: "false"})
    assert podgroups.finished_message(failed) is None  # c still runs
    failed[2]["status"]["phase"] = "Succeeded"
    assert podgroups.finished_message(failed) == "Pods succeeded: 2/3."
    del failed[0]["metadata"]["annotations"][RETRIABLE]
    assert podgroups.finished_message(failed) is None  # the failed Pod waits for its replacement


def test_fast_admission_makes_the_workload_from_the_first_runnable_pod_for_the_total_count() -> None:
    first = annotated(member("a"), **{FAST: "true"})
    assert podgroups.not_composable("grp", [first]) is None
    assert podgroups.not_composable("grp", [member("a")]) == "'grp' group has fewer runnable pods than expected"
    [pod_set] = podgroups.pod_sets_fast([member("f", phase="Failed", requests={GPU: "2"}), first], 3)
    assert (pod_set["name"], pod_set["count"]) == (podgroups.role_hash(first), 3)
