"""Kueue's objects to the admission core and back: pod sets read by the interpreter, a
ClusterQueue's quotas and activity, the admitted flavor split into cluster and node labels, and
the placement constraint the detector adds."""

from __future__ import annotations

from typing import Any

import pytest

from controlplane.admission import objects as adm
from controlplane.admission.core import Admitted, Preemption, PreemptionPolicy
from controlplane.admission.core.quota import FlavorFungibility, WhenCanBorrow, WhenCanPreempt
from controlplane.controllers.admissiongate import constrain_placement

GPU = "nvidia.com/gpu"


def pytorchjob() -> dict[str, Any]:
    def role(replicas: int, gpus: int) -> dict[str, Any]:
        return {"replicas": replicas, "template": {"spec": {"containers": [
            {"name": "pytorch", "image": "x", "resources": {"limits": {GPU: str(gpus)}, "requests": {"cpu": "2"}}}]}}}

    return {
        "apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob",
        "metadata": {"name": "ft", "namespace": "ml", "labels": {"kueue.x-k8s.io/queue-name": "team-a"}},
        "spec": {"pytorchReplicaSpecs": {"Master": role(1, 1), "Worker": role(3, 2)}},
    }


def test_a_multi_role_workload_gets_a_pod_set_per_role() -> None:
    job = pytorchjob()
    assert adm.queue_name(job) == "team-a"
    pod_sets = adm.pod_sets(job)
    assert pod_sets is not None
    assert [(p["name"], p["count"]) for p in pod_sets] == [("master", 1), ("worker", 3)]
    requests = adm.pod_set_requests({"spec": {"podSets": pod_sets}})
    assert [(r.name, r.count, r.per_pod[GPU], r.per_pod["cpu"]) for r in requests] == [
        ("master", 1, 1, 2000), ("worker", 3, 2, 2000),
    ]


def test_pod_sets_come_in_kueues_role_order_whatever_the_jobs() -> None:
    """Kueue's ``OrderedReplicaTypes``: a TFJob's Chief, Master, PS, Worker, Evaluator, whichever
    order the job writes its replica specs in."""
    def role(replicas: int) -> dict[str, Any]:
        return {"replicas": replicas, "template": {"spec": {"containers": [{"name": "tensorflow", "image": "x"}]}}}

    job = {
        "apiVersion": "kubeflow.org/v1", "kind": "TFJob", "metadata": {"name": "tf", "namespace": "ml"},
        "spec": {"tfReplicaSpecs": {"Evaluator": role(1), "Worker": role(4), "PS": role(2), "Chief": role(1)}},
    }
    pod_sets = adm.pod_sets(job)
    assert pod_sets is not None
    assert [(p["name"], p["count"]) for p in pod_sets] == [("chief", 1), ("ps", 2), ("worker", 4), ("evaluator", 1)]


def test_a_kind_without_interpreter_has_no_pod_sets() -> None:
    assert adm.pod_sets({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}}) is None


# SHA-1 over "<Kind>\n<group>\n<name>\n<uid>", worked out apart from the code under test
# (`printf 'kind\ngroup\nowner\nuid' | sha1sum` → 2aabfae8c5...): Kueue's own test vector
# (jobframework TestGetWorkloadNameForOwnerWithGVK, "RegularInput"), a Job, and a core-group Pod.
@pytest.mark.parametrize(
    ("name", "uid", "kind", "group", "expected"),
    [
        ("owner", "uid", "kind", "group", "kind-owner-2aabf"),
        ("train", "6f1b4a2e-8d3c-4b5a-9e7f-0a1b2c3d4e5f", "Job", "batch", "job-train-75aad"),
        ("sample-pod", "0d5e2c1a-3b4f-4a6e-8c7d-9e0f1a2b3c4d", "Pod", "", "pod-sample-pod-72a39"),
    ],
)
def test_workload_names_are_kueues(name: str, uid: str, kind: str, group: str, expected: str) -> None:
    assert adm.workload_name(name, uid, kind=kind, group=group) == expected


def test_a_long_name_keeps_kueues_prefix_and_a_hash_of_the_whole_name() -> None:
    # Kueue's "InputThatResultsInTrimmedPrefix": the prefix is cut to 247 characters, the hash
    # (`python3 -c` sha1 of "kind\ngroup\n" + "a"*247 + "\nuid": e93ce...) is of the full name.
    owner = "a" * 247
    assert adm.workload_name(owner, "uid", kind="kind", group="group") == "kind-" + "a" * 242 + "-e93ce"
    assert len(adm.workload_name("x" * 300, "u", kind="Deployment", group="apps")) == 253


def test_the_name_follows_the_owners_uid_group_and_kind() -> None:
    job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "train", "uid": "6f1b4a2e-8d3c-4b5a-9e7f-0a1b2c3d4e5f"}}
    assert adm.workload_name_of(job) == "job-train-75aad"
    again = {**job, "metadata": {"name": "train", "uid": "another"}}
    assert adm.workload_name_of(again) != "job-train-75aad"
    assert adm.workload_name_of({**job, "apiVersion": "example.com/v1"}) != "job-train-75aad"


def test_a_workload_is_found_by_its_owner_whatever_its_name() -> None:
    job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "train", "namespace": "ml", "uid": "u1"}}
    owner = {"apiVersion": "batch/v1", "kind": "Job", "name": "train", "uid": "u1", "controller": True}
    legacy = {"metadata": {"name": "job-train", "namespace": "ml", "ownerReferences": [owner]}}
    assert adm.controller_owner(legacy) == ("batch", "Job", "train", "u1")
    assert adm.queues_for(legacy, job)
    assert not adm.queues_for(legacy, {**job, "metadata": {**job["metadata"], "uid": "u2"}})  # another incarnation
    assert not adm.queues_for(legacy, {**job, "apiVersion": "example.com/v1"})
    assert not adm.queues_for(legacy, {**job, "metadata": {**job["metadata"], "namespace": "other"}})


def cq(**spec: Any) -> dict[str, Any]:
    base = {"resourceGroups": [{"coveredResources": [GPU], "flavors": [
        {"name": "a100", "resources": [{"name": GPU, "nominalQuota": "8", "borrowingLimit": 2, "lendingLimit": "4"}]}]}]}
    return {"metadata": {"name": "team-a"}, "spec": {**base, **spec}}


@pytest.mark.parametrize(
    ("spec", "flavors", "inactive"),
    [
        ({}, {"a100": {}}, None),
        ({"stopPolicy": "Hold"}, {"a100": {}}, "stopPolicy is Hold"),
        ({}, {}, "ResourceFlavor a100 not found"),
    ],
)
def test_cluster_queue(spec: dict[str, Any], flavors: dict[str, dict[str, str]], inactive: str | None) -> None:
    queue = adm.cluster_queue(cq(cohort="c", **spec), flavors)
    assert queue.inactive_reason == inactive
    quota = queue.quota(("a100", GPU))
    assert quota is not None and (quota.nominal, quota.borrowing_limit, quota.lending_limit, quota.guaranteed) == (8, 2, 4, 4)


def test_preemption_policies_and_what_preemption_reads_of_an_admitted_workload() -> None:
    policies = {"withinClusterQueue": "LowerPriority", "reclaimWithinCohort": "Any",
                "borrowWithinCohort": {"policy": "LowerPriority", "maxPriorityThreshold": 100}}
    assert adm.cluster_queue(cq(preemption=policies), {"a100": {}}).preemption == Preemption(
        PreemptionPolicy.LOWER_PRIORITY, PreemptionPolicy.ANY, PreemptionPolicy.LOWER_PRIORITY, 100,
    )
    assert adm.cluster_queue(cq(), {"a100": {}}).preemption == Preemption()
    workload = {
        "metadata": {"name": "job-a", "namespace": "ml", "creationTimestamp": "2026-01-01T00:00:00Z"},
        "spec": {"priority": 7},
        "status": {
            "admission": {"clusterQueue": "team-a", "podSetAssignments": [
                {"name": "main", "flavors": {GPU: "a100"}, "resourceUsage": {GPU: "4"}, "count": 4}]},
            "conditions": [{"type": "QuotaReserved", "status": "True", "lastTransitionTime": "2026-01-01T00:01:00Z"}],
        },
    }
    assert adm.admitted_of(workload) == Admitted(
        "ml/job-a", "team-a", {("a100", GPU): 4}, 7, "2026-01-01T00:00:00Z", "2026-01-01T00:01:00Z",
    )


@pytest.mark.parametrize(
    ("fungibility", "expected"),
    [
        ({}, FlavorFungibility(WhenCanBorrow.BORROW, WhenCanPreempt.TRY_NEXT_FLAVOR)),
        ({"whenCanBorrow": "Borrow", "whenCanPreempt": "Preempt"}, FlavorFungibility(WhenCanBorrow.BORROW, WhenCanPreempt.PREEMPT)),
        # Kueue's newer name of both (v1beta2's only one; v1beta1 takes either).
        ({"whenCanBorrow": "MayStopSearch", "whenCanPreempt": "MayStopSearch"},
         FlavorFungibility(WhenCanBorrow.BORROW, WhenCanPreempt.PREEMPT)),
        ({"whenCanBorrow": "TryNextFlavor", "whenCanPreempt": "TryNextFlavor"},
         FlavorFungibility(WhenCanBorrow.TRY_NEXT_FLAVOR, WhenCanPreempt.TRY_NEXT_FLAVOR)),
    ],
)
def test_flavor_fungibility_names(fungibility: dict[str, str], expected: FlavorFungibility) -> None:
    assert adm.cluster_queue(cq(flavorFungibility=fungibility), {"a100": {}}).fungibility == expected


def test_namespace_selector_absent_selects_none() -> None:
    assert not adm.namespace_allowed(cq(), {"team": "a"})
    assert adm.namespace_allowed(cq(namespaceSelector={}), {"team": "a"})
    assert not adm.namespace_allowed(cq(namespaceSelector={"matchLabels": {"team": "b"}}), {"team": "a"})


def test_flavor_labels_split_into_cluster_and_node_labels() -> None:
    admission = {"clusterQueue": "team-a", "podSetAssignments": [{"name": "main", "flavors": {GPU: "a100", "cpu": "a100"}}]}
    flavors = {"a100": {"tier": "onprem", "nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB"}}
    assert adm.flavor_constraints(admission, flavors, {"tier", "region"}) == (
        {"tier": "onprem"}, {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB"},
    )


@pytest.mark.parametrize(
    ("placement", "expected"),
    [
        (None, {"clusterAffinity": {"labelSelector": {"matchLabels": {"tier": "onprem"}}}}),
        (
            {"clusterAffinity": {"labelSelector": {"matchLabels": {"region": "eu"}}}},
            {"clusterAffinity": {"labelSelector": {"matchLabels": {"region": "eu", "tier": "onprem"}}}},
        ),
        (
            {"clusterAffinities": [{"affinityName": "a", "clusterNames": ["x"]}, {"affinityName": "b"}]},
            {"clusterAffinities": [
                {"affinityName": "a", "clusterNames": ["x"], "labelSelector": {"matchLabels": {"tier": "onprem"}}},
                {"affinityName": "b", "labelSelector": {"matchLabels": {"tier": "onprem"}}},
            ]},
        ),
    ],
)
def test_the_admitted_flavor_constrains_the_placement(placement: dict[str, Any] | None, expected: dict[str, Any]) -> None:
    spec: dict[str, Any] = {} if placement is None else {"placement": placement}
    constrain_placement(spec, {"tier": "onprem"})
    assert spec["placement"] == expected
    untouched: dict[str, Any] = {}
    constrain_placement(untouched, {})
    assert untouched == {}


def batch_job(parallelism: int, annotations: dict[str, str] | None = None, completions: int | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"parallelism": parallelism, "template": {"spec": {"containers": [
        {"name": "main", "image": "x", "resources": {"requests": {GPU: "1"}}}]}}}
    if completions is not None:
        spec["completions"] = completions
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j", "namespace": "ml", "annotations": annotations or {}},
            "spec": spec}


@pytest.mark.parametrize(("value", "min_count"), [
    ("2", 2), ("+1", 1), ("3", 3),
    # What Kueue's Job webhook rejects (not below parallelism, not positive, not an int) allows nothing.
    ("4", None), ("0", None), ("-1", None), ("two", None), (" 2", None), ("1_0", None), ("9" * 40, None),
])
def test_job_min_parallelism_is_the_pod_sets_min_count(value: str, min_count: int | None) -> None:
    pod_sets = adm.pod_sets(batch_job(4, {"kueue.x-k8s.io/job-min-parallelism": value}))
    assert pod_sets is not None
    assert pod_sets[0].get("minCount") == min_count
    assert adm.pod_set_requests({"spec": {"podSets": pod_sets}})[0].min_count == min_count


def test_a_partially_admitted_job_runs_the_admitted_count_and_gets_its_own_back() -> None:
    min_parallelism = {"kueue.x-k8s.io/job-min-parallelism": "2"}
    job = batch_job(4, min_parallelism, completions=8)
    assert adm.set_job_count(job, 3)
    assert (job["spec"]["parallelism"], job["spec"]["completions"]) == (3, 8)
    assert adm.set_job_count(job, 4) and job["spec"]["parallelism"] == 4
    assert not adm.set_job_count(job, 4)
    synced = batch_job(4, {**min_parallelism, "kueue.x-k8s.io/job-completions-equal-parallelism": "true"}, completions=4)
    assert adm.set_job_count(synced, 3) and (synced["spec"]["parallelism"], synced["spec"]["completions"]) == (3, 3)
    # Without the annotation the Job is not Kueue's to resize.
    plain = batch_job(4)
    assert not adm.set_job_count(plain, 3) and plain["spec"]["parallelism"] == 4
    assert not adm.set_job_count(job, None)
    wl = {"spec": {"podSets": [{"name": "main", "count": 4, "minCount": 2}]},
          "status": {"admission": {"clusterQueue": "q", "podSetAssignments": [{"name": "main", "count": 3}]}}}
    assert (adm.pod_count(wl, admitted=True), adm.pod_count(wl, admitted=False)) == (3, 4)
