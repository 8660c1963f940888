"""The compact utilization encoding, and the hub's reader of it giving back what was encoded."""

from __future__ import annotations

import json
from typing import Any

import pytest

from controlplane.apis.utilization import (
    NodeUtilization,
    PodAllocation,
    encode_utilization,
    encoded_size_at_least,
    expand_utilization,
    node_entries,
)

A100 = "NVIDIA-A100-SXM4-80GB"
H100 = "NVIDIA-H100-80GB-HBM3"
T = "2024-05-01T00:00:00Z"


def whole(
    gpu: int, utilization: float | None = 0.0, pod: str | None = None, ns: str = "ml"
) -> dict[str, Any]:
    device: dict[str, Any] = {"gpu": gpu, "uuid": f"GPU-{gpu}"}
    if utilization is not None:
        device["utilization"] = utilization
    if pod is not None:
        device.update(pod=pod, namespace=ns)
    return device


def mig(
    gpu: int, instance: int, profile: str, utilization: float = 0.0, pod: str | None = None
) -> dict[str, Any]:
    device = whole(gpu, utilization, pod)
    device.update(profile=profile, instance=instance)
    return device


def rs_pod(name: str, deployment: str, resources: dict[str, int], ns: str = "ml") -> PodAllocation:
    return PodAllocation(ns, name, resources, "Deployment", deployment)


def node(
    name: str,
    devices: list[dict[str, Any]],
    pods: tuple[PodAllocation, ...] = (),
    *,
    product: str = A100,
    ready: bool = True,
    schedulable: bool = True,
    replicas: int = 1,
    labels: dict[str, str] | None = None,
) -> NodeUtilization:
    return NodeUtilization(
        name, product, ready, schedulable, replicas, labels or {"pool": "a"}, devices, pods
    )


GPU1 = {"nvidia.com/gpu": 1}


@pytest.mark.parametrize(
    ("nodes", "expected"),
    [
        pytest.param(
            [
                node(
                    "n1",
                    [whole(0, 0.912, "web-7d4-abcde"), whole(1, 0.0)],
                    (rs_pod("web-7d4-abcde", "web", GPU1),),
                )
            ],
            {
                "pods": {"group": [0], "name": [""]},
                "podGroups": {
                    "namespace": [0],
                    "kind": [0],
                    "name": ["web"],
                    "request": [0],
                    "podPrefix": ["-7d4-abcde"],
                    "labels": [-1],
                },
                "devices": {"pod": [0, -1], "utilization": [91, 0]},
                "layouts": [{"gpu": [0, 1]}],
            },
            id="a ReplicaSet's pod under its Deployment, prefix continuing the Deployment's name",
        ),
        pytest.param(
            [
                node(
                    "n1",
                    [whole(0, 0.5, "web-7d4-aaaaa"), whole(1, 0.5, "web-7d4-bbbbb")],
                    (rs_pod("web-7d4-aaaaa", "web", GPU1), rs_pod("web-7d4-bbbbb", "web", GPU1)),
                ),
                node(
                    "n2", [whole(0, 1.0, "web-7d4-ccccc"), whole(1)], (rs_pod("web-7d4-ccccc", "web", GPU1),)
                ),
            ],
            {
                "pods": {"group": [0, 0, 0], "name": ["aaaaa", "bbbbb", "ccccc"]},
                "podGroups": {
                    "namespace": [0],
                    "kind": [0],
                    "name": ["web"],
                    "request": [0],
                    "podPrefix": ["-7d4-"],
                    "labels": [-1],
                },
                "devices": {"pod": [0, 1, 0, -1], "utilization": [50, 50, 100, 0]},
                "layouts": [{"gpu": [0, 1]}],
            },
            id="pods of one ReplicaSet on two nodes share a group and one layout",
        ),
        pytest.param(
            [
                node(
                    "m1",
                    [mig(0, 1, "3g.40gb", 0.25, "solo"), mig(0, 2, "1g.10gb"), {"gpu": 1, "instance": 3}],
                    (PodAllocation("ml", "solo", {"nvidia.com/mig-3g.40gb": 1}),),
                    product=H100,
                )
            ],
            {
                "pods": {"group": [0], "name": [""]},
                "podGroups": {
                    "namespace": [0],
                    "kind": [-1],
                    "name": [None],
                    "request": [0],
                    "podPrefix": ["solo"],
                    "labels": [-1],
                },
                "devices": {"pod": [0, -1, -1], "utilization": [25, 0, None]},
                "layouts": [{"gpu": [0, 0, 1], "profile": ["3g.40gb", "1g.10gb", ""]}],
            },
            id="MIG instances, a bare pod, an instance without profile or utilization",
        ),
        pytest.param(
            [node("n1", [whole(0, 0.3, "ghost", ns="other")])],
            {
                "pods": {"group": [0], "name": [""]},
                "podGroups": {
                    "namespace": [0],
                    "kind": [-1],
                    "name": [None],
                    "request": [0],
                    "podPrefix": ["ghost"],
                    "labels": [-1],
                },
                "devices": {"pod": [0], "utilization": [30]},
                "layouts": [{"gpu": [0]}],
            },
            id="a pod only DCGM knows is still its device's holder",
        ),
    ],
)
def test_encoding(nodes: list[NodeUtilization], expected: dict[str, Any]) -> None:
    encoded = encode_utilization(nodes, sample_time=T)
    assert {key: encoded[key] for key in expected} == expected
    assert encoded["version"] == 2 and encoded["sampleTime"] == T


def test_nodes_without_devices_are_left_out_and_tables_are_shared() -> None:
    nodes = [
        node("a", [whole(0)], labels={"pool": "x"}),
        node("b", [], (rs_pod("p-1", "p", GPU1),)),
        node("c", [whole(0)], labels={"pool": "x"}, ready=False, schedulable=False, replicas=4, product=H100),
    ]
    encoded = encode_utilization(nodes, sample_time=None)
    assert encoded["nodes"] == {
        "name": ["a", "c"],
        "product": [0, 1],
        "labels": [0, 0],
        "ready": [1, 0],
        "schedulable": [1, 0],
        "sharedReplicas": [1, 4],
        "layout": [0, 0],
        "podCount": [0, 0],
    }
    assert encoded["products"] == [A100, H100]
    assert encoded["labelSets"] == [{"pool": "x"}]
    assert encoded["pods"] == {"group": [], "name": []}


ENCODED_CASES = [
        pytest.param(
            [
                node(
                    "n1",
                    [
                        whole(0, 0.42, "train-5f6-x1"),
                        whole(1, 0.42, "train-5f6-x1"),
                        whole(2),
                        whole(3, 0.07, "job-q"),
                    ],
                    (
                        rs_pod("train-5f6-x1", "train", {"nvidia.com/gpu": 2}),
                        PodAllocation("ml", "job-q", GPU1, "Job", "job"),
                        rs_pod("waiting-5f6-zz", "waiting", GPU1),
                    ),
                    labels={"pool": "a", "zone": "z1"},
                ),
                node(
                    "m1",
                    [mig(0, 1, "2g.20gb", 0.7, "infer-1"), mig(0, 2, "1g.10gb")],
                    (PodAllocation("ml", "infer-1", {"nvidia.com/mig-2g.20gb": 1}, "StatefulSet", "infer"),),
                    product=H100,
                    schedulable=False,
                ),
            ],
            id="whole GPUs and MIG",
        ),
        pytest.param(
            [
                node(
                    "s1",
                    [whole(0, 0.6, "a-1"), whole(0, 0.6, "b-1"), whole(1, 0.0)],
                    (
                        PodAllocation("ml", "a-1", {"nvidia.com/gpu.shared": 1}),
                        PodAllocation("ml", "b-1", {"nvidia.com/gpu.shared": 1}),
                    ),
                    replicas=4,
                )
            ],
            id="time-sliced shares",
        ),
]


@pytest.mark.parametrize("nodes", ENCODED_CASES)
def test_the_hub_reads_back_what_was_encoded(nodes: list[NodeUtilization]) -> None:
    expanded = expand_utilization(encode_utilization(nodes, sample_time=T))
    assert [entry["name"] for entry in expanded] == [n.name for n in nodes]
    for entry, original in zip(expanded, nodes, strict=True):
        assert (entry["product"], entry["ready"], entry["schedulable"], entry["sharedReplicas"]) == (
            original.product,
            original.ready,
            original.schedulable,
            original.shared_replicas,
        )
        assert entry["labels"] == dict(original.labels)
        assert [
            (d["gpu"], d.get("profile"), d.get("pod"), d.get("namespace"), d.get("utilization"))
            for d in entry["devices"]
        ] == [
            (d["gpu"], d.get("profile"), d.get("pod"), d.get("namespace"), d.get("utilization"))
            for d in original.devices
        ]
        assert entry["pods"] == [
            {
                "pod": p.name,
                "namespace": p.namespace,
                "resources": dict(p.resources),
                **({"owner": {"kind": p.owner_kind, "name": p.owner_name}} if p.owner_kind else {}),
            }
            for p in sorted(original.pods, key=lambda p: (p.namespace, p.name))
        ]


def test_the_original_encoding_is_still_read() -> None:
    """An agent that writes the per-node object list (no ``version``) reports to this hub too."""
    original = {
        "sampleTime": T,
        "nodes": [
            {
                "name": "n1",
                "devices": [{"gpu": 0, "uuid": "GPU-0", "pod": "p", "namespace": "ml", "utilization": 0.5}],
                "pods": [{"pod": "p", "namespace": "ml", "resources": GPU1}],
            }
        ],
    }
    assert expand_utilization(original) == original["nodes"]


@pytest.mark.parametrize(
    ("garbled", "names"),
    [
        pytest.param(
            {"version": 2, "nodes": {"name": ["n1"], "layout": [5]}}, ["n1"], id="layout out of range"
        ),
        pytest.param({"version": 2, "nodes": "not columns", "devices": [1, 2]}, [], id="wrong types"),
    ],
)
def test_a_garbled_report_loses_only_what_is_garbled(garbled: dict[str, Any], names: list[str]) -> None:
    expanded = expand_utilization(garbled)
    assert [entry["name"] for entry in expanded] == names
    assert all(entry["devices"] == [] for entry in expanded)


def test_the_aggregated_report_carries_the_per_device_encoding_while_small() -> None:
    """Version 3 reports are read per device from their ``perDevice`` field (the pod views); a
    large member's report leaves it out, and the per-device readers see no node."""
    nodes = [node("n1", [whole(0, 0.5, "web-7d4-abcde")], (rs_pod("web-7d4-abcde", "web", GPU1),))]
    per_device = encode_utilization(nodes, sample_time=T)
    expected = expand_utilization(per_device)
    assert expected and expand_utilization({"version": 3, "perDevice": per_device}) == expected
    assert expand_utilization({"version": 3, "perDevice": None}) == []


#: Cases the encoding treats specially: a device naming a pod the node's list lacks, a MIG
#: instance the exporter gave no profile, utilizations out of range, unknown or not numbers,
#: a node without devices (left out), an unknown product, a pod without owner name, labels out
#: of order, a share count under 1.
ODD_NODES = [
    node(
        "z-node",
        [
            {"gpu": 0, "uuid": "GPU-0", "pod": "stranger-1", "namespace": "other", "utilization": 1.7},
            {"gpu": 0, "uuid": "GPU-0", "instance": 3, "utilization": float("nan")},
            {"gpu": 1, "uuid": "GPU-1", "profile": "1g.10gb", "instance": 4, "utilization": True},
            {"gpu": 2, "uuid": "GPU-2", "pod": "solo", "utilization": -0.2},
            {"gpu": "3", "uuid": "GPU-3", "utilization": "0.5"},
        ],
        (PodAllocation("ml", "solo", {"nvidia.com/gpu": 1}, "Deployment", None),
         PodAllocation("ml", "idle-1", {}, None, None)),
        product="",
        labels={"zone": "z2", "pool": "b"},
    ),
    node("empty", []),
    node("a-node", [whole(0, 0.333, "web-7d4-abcde"), whole(1, None)], (rs_pod("web-7d4-abcde", "web", GPU1),), replicas=0),
]


@pytest.mark.parametrize("nodes", [*ENCODED_CASES, ODD_NODES])
def test_the_entries_the_agent_builds_are_those_the_hub_reads_back(nodes: list[NodeUtilization]) -> None:
    """The agent builds its report from :func:`node_entries`; the hub's pod views read the
    per-device encoding: both must see the same devices, pods and rounding."""
    expected = expand_utilization(encode_utilization(nodes, sample_time=T))
    built = node_entries(nodes)
    assert built == expected
    assert [type(v) for e in built for d in e["devices"] for v in d.values()] == [
        type(v) for e in expected for d in e["devices"] for v in d.values()
    ]


#: The encoding at its most compact: every device held by the node's first pod, at 0 %.
DENSE_NODES = [
    node(f"n{i}", [whole(gpu, 0.0, "p") for gpu in range(8)], (PodAllocation("ml", "p", {"nvidia.com/gpu": 8}),))
    for i in range(50)
]


@pytest.mark.parametrize("nodes", [*ENCODED_CASES, ODD_NODES, DENSE_NODES])
def test_the_size_bound_is_never_above_the_encoded_size(nodes: list[NodeUtilization]) -> None:
    """A report whose bound is over the budget is not encoded at all: the bound must hold for
    the most compact encoding too (two one-digit numbers per device)."""
    encoded = json.dumps(encode_utilization(nodes, sample_time=T), separators=(",", ":"))
    assert 0 < encoded_size_at_least(nodes) <= len(encoded)


def test_the_size_bound_of_a_dense_report_is_near_its_encoded_size() -> None:
    """Loose enough never to be above the size, close enough to spare large members the encoding."""
    encoded = json.dumps(encode_utilization(DENSE_NODES, sample_time=T), separators=(",", ":"))
    assert encoded_size_at_least(DENSE_NODES) >= 0.75 * len(encoded)


def test_a_groups_pods_carry_the_labels_they_all_have() -> None:
    """A group's labels are kept once, as the labels all its pods have (a StatefulSet pod's own
    name label is not one of them); a pod whose labels the agent does not know has none."""
    web = {"app": "web", "pod-template-hash": "7d4"}
    nodes = [
        node("n1", [whole(0, 0.5, "web-7d4-aaaaa"), whole(1, 0.5, "web-7d4-bbbbb")], (
            PodAllocation("ml", "web-7d4-aaaaa", GPU1, "Deployment", "web", labels=web),
            PodAllocation("ml", "web-7d4-bbbbb", GPU1, "Deployment", "web", labels={**web, "canary": "yes"}),
        )),
        node("n2", [whole(0, 0.2, "db-0"), whole(1, 0.2, "db-1"), whole(2, 0.1, "ghost")], (
            PodAllocation("ml", "db-0", GPU1, "StatefulSet", "db",
                          labels={"app": "db", "statefulset.kubernetes.io/pod-name": "db-0"}),
            PodAllocation("ml", "db-1", GPU1, "StatefulSet", "db",
                          labels={"app": "db", "statefulset.kubernetes.io/pod-name": "db-1"}),
        )),
    ]
    encoded = encode_utilization(nodes, sample_time=T)
    assert sorted(map(json.dumps, encoded["podLabelSets"])) == sorted(map(json.dumps, [{"app": "db"}, web]))
    expanded = expand_utilization(encoded)
    labels = {pod["pod"]: pod.get("labels") for entry in expanded for pod in entry["pods"]}
    assert labels == {"web-7d4-aaaaa": web, "web-7d4-bbbbb": web, "db-0": {"app": "db"}, "db-1": {"app": "db"},
                      "ghost": None}
    assert node_entries(nodes) == expanded
