"""Kueue's conversion between ``kueue.x-k8s.io/v1beta2`` and the v1beta1 form the hub stores, rule by
rule as Kueue's ``apis/kueue/v1beta1/*_conversion.go`` converts: each pair is the stored (v1beta1)
object and the v1beta2 one it is served as, and each converts into the other."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from controlplane.apis import kueue_conversion as convert

Obj = dict[str, Any]
V1B1 = "kueue.x-k8s.io/v1beta1"
V1B2 = "kueue.x-k8s.io/v1beta2"
ANNOTATION = convert.V1BETA2_FIELDS_ANNOTATION


def cq(api_version: str, spec: Obj, **meta: Any) -> Obj:
    return {"apiVersion": api_version, "kind": "ClusterQueue", "metadata": {"name": "cq", **meta}, "spec": spec}


def wl(api_version: str, **spec: Any) -> Obj:
    return {
        "apiVersion": api_version, "kind": "Workload", "metadata": {"name": "w", "namespace": "ns"},
        "spec": {"podSets": [{"name": "main", "count": 1, "template": {}}], "queueName": "q", **spec},
    }


def lq(api_version: str, status: Obj) -> Obj:
    return {"apiVersion": api_version, "kind": "LocalQueue", "metadata": {"name": "q", "namespace": "ns"},
            "spec": {"clusterQueue": "cq"}, "status": status}


CONCURRENT = {"migration": {"mode": "TryPreferredFlavors", "constraints": {"lastAcceptableFlavorName": "spot"}}}
USAGE = [{"name": "a100", "resources": [{"name": "nvidia.com/gpu", "total": "4"}]}]

#: (what the rule is, stored v1beta1 object, the same object served at v1beta2)
ROUND_TRIPS = [
    ("cohort is cohortName", cq(V1B1, {"cohort": "research"}), cq(V1B2, {"cohortName": "research"})),
    ("no cohort", cq(V1B1, {"queueingStrategy": "StrictFIFO"}), cq(V1B2, {"queueingStrategy": "StrictFIFO"})),
    (
        "Borrow and Preempt are MayStopSearch",
        cq(V1B1, {"flavorFungibility": {"whenCanBorrow": "Borrow", "whenCanPreempt": "Preempt"}}),
        cq(V1B2, {"flavorFungibility": {"whenCanBorrow": "MayStopSearch", "whenCanPreempt": "MayStopSearch"}}),
    ),
    (
        "TryNextFlavor stays",
        cq(V1B1, {"flavorFungibility": {"whenCanBorrow": "TryNextFlavor", "whenCanPreempt": "TryNextFlavor"}}),
        cq(V1B2, {"flavorFungibility": {"whenCanBorrow": "TryNextFlavor", "whenCanPreempt": "TryNextFlavor"}}),
    ),
    (
        "v1beta2-only fields travel in an annotation",
        cq(V1B1, {"cohort": "c", "flavorFungibility": {"whenCanBorrow": "TryNextFlavor", "whenCanPreempt": "TryNextFlavor"}},
           annotations={"team": "a", ANNOTATION: '{"concurrentAdmissionPolicy":{"migration":{"constraints":'
                                                  '{"lastAcceptableFlavorName":"spot"},"mode":"TryPreferredFlavors"}},'
                                                  '"flavorFungibility":{"preference":"PreemptionOverBorrowing"}}'}),
        cq(V1B2, {"cohortName": "c", "concurrentAdmissionPolicy": CONCURRENT, "flavorFungibility": {
            "whenCanBorrow": "TryNextFlavor", "whenCanPreempt": "TryNextFlavor", "preference": "PreemptionOverBorrowing"}},
           annotations={"team": "a"}),
    ),
    (
        "admissionChecksStrategy stays",
        cq(V1B1, {"admissionChecksStrategy": {"admissionChecks": [{"name": "prov", "onFlavors": ["a100"]}]}}),
        cq(V1B2, {"admissionChecksStrategy": {"admissionChecks": [{"name": "prov", "onFlavors": ["a100"]}]}}),
    ),
    ("flavorUsage is flavorsUsage", lq(V1B1, {"flavorUsage": USAGE, "pendingWorkloads": 1}),
     lq(V1B2, {"flavorsUsage": USAGE, "pendingWorkloads": 1})),
    (
        "a WorkloadPriorityClass source is a priorityClassRef",
        wl(V1B1, priorityClassSource="kueue.x-k8s.io/workloadpriorityclass", priorityClassName="high", priority=100),
        wl(V1B2, priorityClassRef={"group": "kueue.x-k8s.io", "kind": "WorkloadPriorityClass", "name": "high"}, priority=100),
    ),
    (
        "a PriorityClass source is a priorityClassRef",
        wl(V1B1, priorityClassSource="scheduling.k8s.io/priorityclass", priorityClassName="prod", priority=7),
        wl(V1B2, priorityClassRef={"group": "scheduling.k8s.io", "kind": "PriorityClass", "name": "prod"}, priority=7),
    ),
    ("no priority class", wl(V1B1, priority=0), wl(V1B2, priority=0)),
]

FROM_STORAGE = {
    "ClusterQueue": convert.cluster_queue_to_v1beta2,
    "LocalQueue": convert.local_queue_to_v1beta2,
    "Workload": convert.workload_to_v1beta2,
}
TO_STORAGE = {
    "ClusterQueue": convert.cluster_queue_to_v1beta1,
    "LocalQueue": convert.local_queue_to_v1beta1,
    "Workload": convert.workload_to_v1beta1,
}


@pytest.mark.parametrize(("rule", "stored", "served"), ROUND_TRIPS, ids=[r[0] for r in ROUND_TRIPS])
def test_round_trip(rule: str, stored: Obj, served: Obj) -> None:
    before = copy.deepcopy((stored, served))
    assert FROM_STORAGE[stored["kind"]](stored) == served
    assert TO_STORAGE[served["kind"]](served) == stored
    assert (stored, served) == before  # the inputs are not changed


#: (what the rule is, v1beta1 object, v1beta2 object): one way, as Kueue converts.
ONE_WAY = [
    (
        "v1beta1's admissionChecks become strategy rules for every flavor",
        cq(V1B1, {"admissionChecks": ["prov", "multikueue"]}),
        cq(V1B2, {"admissionChecksStrategy": {"admissionChecks": [{"name": "prov"}, {"name": "multikueue"}]}}),
    ),
    (
        "a priorityClassName without a source has no v1beta2 form",
        wl(V1B1, priorityClassName="high", priority=5),
        wl(V1B2, priority=5),
    ),
    (
        "an annotation that is not JSON is ignored and not served",
        cq(V1B1, {"cohort": "c"}, annotations={ANNOTATION: "{not json"}),
        cq(V1B2, {"cohortName": "c"}),
    ),
]


@pytest.mark.parametrize(("rule", "v1beta1", "v1beta2"), ONE_WAY, ids=[r[0] for r in ONE_WAY])
def test_served_at_v1beta2(rule: str, v1beta1: Obj, v1beta2: Obj) -> None:
    assert FROM_STORAGE[v1beta1["kind"]](v1beta1) == v1beta2


def test_a_v1beta2_write_without_the_extra_fields_drops_a_stale_annotation() -> None:
    served = cq(V1B2, {"cohortName": "c"}, annotations={ANNOTATION: '{"concurrentAdmissionPolicy":{}}'})
    assert convert.cluster_queue_to_v1beta1(served) == cq(V1B1, {"cohort": "c"})


@pytest.mark.parametrize("kind", ["ResourceFlavor", "WorkloadPriorityClass", "Cohort"])
def test_the_kinds_with_the_same_fields_change_their_api_version_alone(kind: str) -> None:
    obj = {"apiVersion": V1B1, "kind": kind, "metadata": {"name": "x"}, "spec": {"nodeLabels": {"a": "b"}}}
    assert convert.to_version(V1B2)(obj) == {**obj, "apiVersion": V1B2}
