"""Kueue's conversion between ``kueue.x-k8s.io/v1beta2`` and the v1beta1 form the hub stores, rule by
rule as Kueue's ``apis/kueue/v1beta1/*_conversion.go`` converts: each pair is the stored (v1beta1)
object and the v1beta2 one it is served as, and each converts into the other."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from controlplane.apis import kueue_conversion as convert
from controlplane.apis import kueue_rules
from controlplane.apis import kueue_topology_assignment as topology

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


# --- a pod set's topology assignment: v1beta1's domains, v1beta2's slices ---------------------


def _domains(levels: list[str], *domains: tuple[list[str], int]) -> Obj:
    return {"levels": levels, "domains": [{"values": values, "count": count} for values, count in domains]}


def _sliced(levels: list[str], count: int, pods: Obj, *per_level: Obj) -> Obj:
    return {
        "levels": levels,
        "slices": [{"domainCount": count, "valuesPerLevel": list(per_level), "podCounts": pods}],
    }


def _roots(*roots: str, **ends: str) -> Obj:
    return {"individual": {**ends, "roots": list(roots)}}


#: (case, v1beta1 assignment, v1beta2 assignment): Kueue's own cases of its conversion
#: (pkg/util/tas/tas_assignment_test.go, the v1beta2 field names of its CRD at 01ed66fd).
TOPOLOGY_ROUND_TRIPS = [
    ("no domain: no slice", _domains(["a", "b"]), {"levels": ["a", "b"], "slices": []}),
    (
        "one domain: universal values and count",
        _domains(["a", "b"], (["a1", "b1"], 1)),
        _sliced(["a", "b"], 1, {"universal": 1}, {"universal": "a1"}, {"universal": "b1"}),
    ),
    (
        "same counts, a common prefix",
        _domains(["a", "b"], (["a1", "b1"], 1), (["a2", "b2"], 1)),
        _sliced(["a", "b"], 2, {"universal": 1}, _roots("1", "2", prefix="a"), _roots("1", "2", prefix="b")),
    ),
    (
        "different counts, a common prefix and suffix",
        _domains(["a", "b"], (["p.a1.s", "p.b1.s"], 1), (["p.a2.s", "p.b2.s"], 2)),
        _sliced(
            ["a", "b"],
            2,
            {"individual": [1, 2]},
            _roots("1", "2", prefix="p.a", suffix=".s"),
            _roots("1", "2", prefix="p.b", suffix=".s"),
        ),
    ),
    (
        "a universal value beside individual ones",
        _domains(["a", "b"], (["a1", "x"], 1), (["a1", "y"], 2)),
        _sliced(["a", "b"], 2, {"individual": [1, 2]}, {"universal": "a1"}, _roots("x", "y")),
    ),
    (
        "a prefix as long as the shortest value",
        _domains(["a"], (["a123"], 1), (["a12"], 1), (["a1"], 1), (["a13"], 1)),
        _sliced(["a"], 4, {"universal": 1}, _roots("23", "2", "", "3", prefix="a1")),
    ),
    (
        "a suffix as long as the shortest value",
        _domains(["a"], (["123b"], 1), (["23b"], 1), (["3b"], 1), (["13b"], 1)),
        _sliced(["a"], 4, {"universal": 1}, _roots("12", "2", "", "1", suffix="3b")),
    ),
    (
        "an overlapping prefix and suffix: the prefix is shortened",
        _domains(["a"], (["abacacada"], 1), (["abacada"], 1)),
        _sliced(["a"], 2, {"universal": 1}, _roots("ac", "", prefix="ab", suffix="acada")),
    ),
    (
        "a prefix shortened to nothing is left out",
        _domains(["a"], (["ababa"], 1), (["aba"], 1)),
        _sliced(["a"], 2, {"universal": 1}, _roots("ab", "", suffix="aba")),
    ),
]


@pytest.mark.parametrize(
    ("case", "domains", "slices"), TOPOLOGY_ROUND_TRIPS, ids=[c[0] for c in TOPOLOGY_ROUND_TRIPS]
)
def test_a_topology_assignment_round_trip(case: str, domains: Obj, slices: Obj) -> None:
    def admitted(api_version: str, topology: Obj) -> Obj:
        assignment = {"name": "main", "count": 2, "topologyAssignment": topology}
        return {
            **wl(api_version),
            "status": {"admission": {"clusterQueue": "cq", "podSetAssignments": [assignment]}},
        }

    stored, served = admitted(V1B1, domains), admitted(V1B2, slices)
    before = copy.deepcopy((stored, served))
    assert convert.workload_to_v1beta2(stored) == served
    assert convert.workload_to_v1beta1(served) == stored
    assert (stored, served) == before


def test_slices_read_back_as_kueues_one_slice_encoding_of_their_domains() -> None:
    """Kueue's conversion keeps the domains, not how they were sliced (Examples 4 and 3 of its CRD)."""
    nodes = ["block-1-rack-1-node-1", "block-1-rack-1-node-2", "block-1-rack-2-node-1"]
    two_slices = {
        "levels": ["kubernetes.io/hostname"],
        "slices": [
            {
                "domainCount": 2,
                "valuesPerLevel": [_roots("1", "2", prefix="block-1-rack-1-node-")],
                "podCounts": {"universal": 1},
            },
            {"domainCount": 1, "valuesPerLevel": [{"universal": nodes[2]}], "podCounts": {"universal": 1}},
        ],
    }
    stored = topology.domains_from_slices(two_slices)
    assert stored == _domains(["kubernetes.io/hostname"], *(([node], 1) for node in nodes))
    assert topology.slices_from_domains(stored) == _sliced(
        ["kubernetes.io/hostname"],
        3,
        {"universal": 1},
        _roots("1-node-1", "1-node-2", "2-node-1", prefix="block-1-rack-"),
    )


def test_a_domain_with_more_or_fewer_values_than_levels_converts_one_per_level() -> None:
    """Kueue's conversion reads one value per level: extra ones are not carried; a missing one (of
    a domain stored before the hub refused such domains at v1beta1) is ""."""
    written = _domains(["zone", "rack"], (["z1", "r1", "n1"], 1), (["z1"], 1))
    assert topology.slices_from_domains(written) == _sliced(
        ["zone", "rack"], 2, {"universal": 1}, {"universal": "z1"}, _roots("r1", "")
    )


def test_values_are_compressed_byte_by_byte_as_go_compares_strings() -> None:
    """Go indexes a string's bytes: "gpu-é" and "gpu-è" (C3 A9, C3 A8) share the byte C3, which
    Kueue takes into the prefix; the pieces cut from the two characters are not UTF-8 and Go's JSON
    encoder writes each as U+FFFD. Characters that share no byte compress as characters would."""
    written = _domains(["kubernetes.io/hostname"], (["gpu-é"], 1), (["gpu-è"], 1))
    assert topology.slices_from_domains(written) == _sliced(
        ["kubernetes.io/hostname"], 2, {"universal": 1}, _roots("\ufffd", "\ufffd", prefix="gpu-\ufffd")
    )
    # A three-byte character cut after two bytes: each byte left alone is one U+FFFD, as Go writes it.
    written = _domains(["h"], (["n€1"], 1), (["n₮1"], 1))  # E2 82 AC and E2 82 AE
    assert topology.slices_from_domains(written) == _sliced(
        ["h"], 2, {"universal": 1}, _roots("\ufffd", "\ufffd", prefix="n\ufffd\ufffd", suffix="1")
    )
    written = _domains(["h"], (["nœud-1"], 1), (["nœud-2"], 1))
    assert topology.slices_from_domains(written) == _sliced(
        ["h"], 2, {"universal": 1}, _roots("1", "2", prefix="nœud-")
    )


def test_a_v1beta1_domain_with_fewer_values_than_levels_is_refused_unless_kept_as_stored() -> None:
    """Kueue's conversion reads one value per level and fails on a domain with fewer (its CRD and
    webhook do not check): the hub refuses such a domain at v1beta1, at its values; an update that
    keeps the assignment as stored is not refused again (ratcheted)."""
    short = _domains(["zone", "rack"], (["z1", "r1"], 1), (["z1"], 1), (["z2", "r2", "n2"], 1))
    written = _admitted(V1B1, short)
    assert [(c.field, c.message) for c in kueue_rules.workload(written, None)] == [
        (
            "status.admission.podSetAssignments[0].topologyAssignment.domains[1].values",
            'Invalid value: []string{"z1"}: must have a value for each of the assignment\'s 2 levels',
        )
    ]
    relabeled = copy.deepcopy(written)
    relabeled["metadata"]["labels"] = {"team": "a"}
    assert kueue_rules.workload(relabeled, written) == []
    changed = copy.deepcopy(written)
    _stored_topologies(changed)[0]["domains"][0]["count"] = 2
    assert [c.field for c in kueue_rules.workload(changed, written)] == [
        "status.admission.podSetAssignments[0].topologyAssignment.domains[1].values"
    ]


def _admitted(api_version: str, *topologies: Obj) -> Obj:
    assignments = [{"name": f"p{i}", "count": 1, "topologyAssignment": t} for i, t in enumerate(topologies)]
    return {
        **wl(api_version),
        "status": {"admission": {"clusterQueue": "cq", "podSetAssignments": assignments}},
    }


def _stored_topologies(obj: Obj) -> list[Obj]:
    return [a["topologyAssignment"] for a in obj["status"]["admission"]["podSetAssignments"]]


def test_a_converted_topology_assignment_shares_nothing_with_the_original() -> None:
    """The assignments are converted, not copied: what the conversion returns is still the caller's own."""
    served = _admitted(V1B2, _sliced(["rack"], 1, {"universal": 1}, {"universal": "r1"}))
    stored = convert.workload_to_v1beta1(served)
    _stored_topologies(stored)[0]["levels"].append("zone")
    back = convert.workload_to_v1beta2(stored)
    _stored_topologies(back)[0]["levels"].append("block")
    assert _stored_topologies(served)[0]["levels"] == ["rack"]
    assert _stored_topologies(stored)[0]["levels"] == ["rack", "zone"]


#: Slices the rules refuse whatever their size, and ones whose domains are far over the bound: the
#: conversion lists no domain of them (validation refuses them), however many they would be.
UNEXPANDED = {
    "200 levels (p2's)": {
        "levels": ["l"] * 200,
        "slices": [{"domainCount": 10**9, "podCounts": {"universal": 1}, "valuesPerLevel": []}],
    },
    "17 levels": _sliced(["l"] * 17, 10**9, {"universal": 1}, *[{"universal": "a"}] * 17),
    "fewer values per level than levels": _sliced(["a", "b"], 10**9, {"universal": 1}, {"universal": "a"}),
    "no domainCount": {"levels": ["a"], "slices": [{"valuesPerLevel": [{"universal": "a"}]}]},
    "a domainCount of 10**9 (over the bytes)": _sliced(["a"], 10**9, {"universal": 1}, {"universal": "a"}),
}


@pytest.mark.parametrize("shape", UNEXPANDED)
def test_slices_the_rules_refuse_are_not_expanded(shape: str, monkeypatch: pytest.MonkeyPatch) -> None:
    def expanded(assignment: Obj) -> Any:
        raise AssertionError("the slices were read domain by domain")

    monkeypatch.setattr(topology, "_domains", expanded)
    assert topology.domains_from_slices(UNEXPANDED[shape])["domains"] == []
    assert (
        _stored_topologies(convert.workload_to_v1beta1(_admitted(V1B2, UNEXPANDED[shape])))[0]["domains"]
        == []
    )


def _at_bytes(extra: int, total: int = topology.MAX_DOMAIN_BYTES) -> Obj:
    """One level, ``total`` / 32 domains of one pod whose values are 6 characters (one of them 6 +
    ``extra``): each domain is ``{"values":["abcdef"],"count":1}`` and a comma, 32 bytes, so
    ``total`` + ``extra`` in all."""
    count = total // 32
    roots = ["abcdef"] * (count - 1) + ["abcdef" + "g" * extra]
    return _sliced(["kubernetes.io/hostname"], count, {"universal": 1}, _roots(*roots))


def test_the_v1beta1_size_is_counted_from_the_slices_as_each_domains_json_and_a_comma() -> None:
    at_bound = _at_bytes(0)
    domains = topology.domains_from_slices(at_bound)["domains"]
    assert len(domains) == 32768
    assert sum(len(json.dumps(d, separators=(",", ":"))) + 1 for d in domains) == topology.MAX_DOMAIN_BYTES
    assert topology.v1beta1_bytes(at_bound) == topology.MAX_DOMAIN_BYTES
    mixed = _sliced(
        ["zone", "rack"], 2, {"individual": [1, 12]}, {"universal": "z1"}, _roots("1", "22", prefix="r-")
    )
    domains = topology.domains_from_slices(mixed)["domains"]
    assert topology.v1beta1_bytes(mixed) == sum(
        len(json.dumps(d, separators=(",", ":"))) + 1 for d in domains
    )


def test_the_conversion_lists_at_most_3_mib_of_domains_per_workload() -> None:
    """More than a v1beta1 write carries (the hub reads bodies of at most 3 MiB) is never listed;
    up to that it is, for the rules to refuse (over 1 MiB) or to ratchet (kept as stored)."""
    most = topology.MAX_CONVERTED_BYTES
    assert most == 3 << 20
    assert topology.fit([_at_bytes(0, most)])
    assert len(topology.domains_from_slices(_at_bytes(1))["domains"]) == topology.MAX_DOMAIN_BYTES // 32
    assert not topology.fit([_at_bytes(1, most)])
    assert topology.domains_from_slices(_at_bytes(1, most))["domains"] == []
    half = _sliced(["rack"], 1, {"universal": 1}, {"universal": "r"})
    # Two pod sets together over the bound: neither is expanded, though each alone would be.
    stored = convert.workload_to_v1beta1(_admitted(V1B2, _at_bytes(0, most), half))
    assert [t["domains"] for t in _stored_topologies(stored)] == [[], []]


def test_assignments_kept_as_stored_are_not_counted_against_the_1_mib() -> None:
    """A Workload stored through v1beta1 with more than 1 MiB of domains can be written at v1beta2
    (kube's ratcheting of unchanged values): the bound holds for the assignments a write changes."""
    big, small = _at_bytes(1), _sliced(["rack"], 1, {"universal": 1}, {"universal": "r"})
    stored = _admitted(V1B2, big, small)
    assert [c.field for c in kueue_rules.topology_assignments(stored, None)] == [
        "status.admission.podSetAssignments[0].topologyAssignment.slices"
    ]
    relabeled = copy.deepcopy(stored)
    relabeled["metadata"]["labels"] = {"team": "a"}
    assert kueue_rules.topology_assignments(relabeled, stored) == []
    small_changed = _admitted(V1B2, big, _sliced(["rack"], 1, {"universal": 2}, {"universal": "r"}))
    assert kueue_rules.topology_assignments(small_changed, stored) == []
    big_changed = copy.deepcopy(stored)
    _stored_topologies(big_changed)[0]["slices"][0]["valuesPerLevel"][0]["individual"]["roots"][0] = "abcdeg"
    assert [c.field for c in kueue_rules.topology_assignments(big_changed, stored)] == [
        "status.admission.podSetAssignments[0].topologyAssignment.slices"
    ]
    # Correlated by pod set name, as the list's map key: the same assignment under another pod set is a change.
    renamed = copy.deepcopy(stored)
    renamed["status"]["admission"]["podSetAssignments"][0]["name"] = "other"
    assert [c.field for c in kueue_rules.topology_assignments(renamed, stored)] == [
        "status.admission.podSetAssignments[0].topologyAssignment.slices"
    ]


def test_the_rules_refuse_the_pod_set_whose_slices_cross_the_workloads_1_mib() -> None:
    one = _sliced(["rack"], 1, {"universal": 1}, {"universal": "r"})
    causes = kueue_rules.topology_assignments(_admitted(V1B2, one, _at_bytes(0), one))
    assert [(c.field, c.message.split(":")[:2]) for c in causes] == [
        ("status.admission.podSetAssignments[1].topologyAssignment.slices", ["Invalid value", " 1048603"])
    ]
    assert kueue_rules.topology_assignments(_admitted(V1B2, _at_bytes(0))) == []
