"""The member scheduler core: filters, scoring, gangs, device assignment and kube's messages."""

from __future__ import annotations

from typing import Any

import pytest

from controlplane.apis.pods import pod_requests
from simulator.nodes import build_inventory, build_nodes
from simulator.profile import parse_fleet
from simulator.scheduling.cluster_state import ClusterState
from simulator.scheduling.filtering import fit_error_message, missing_claim, missing_claim_message
from simulator.scheduling.model import PodRequest, Scoring
from simulator.scheduling.reading import pod_request

A100_MIG = {
    "name": "a100-mig",
    "count": 8,
    "cpu": 96,
    "memoryGiB": 1024,
    "gpu": {
        "product": "NVIDIA-A100-SXM4-80GB",
        "count": 8,
        "mig": {"strategy": "mixed", "layout": ["3g.40gb", "2g.20gb", "1g.10gb", "1g.10gb"]},
    },
}
A100_WHOLE = {
    "name": "a100-whole",
    "count": 4,
    "cpu": 96,
    "memoryGiB": 1024,
    "labels": {"pool": "whole"},
    "gpu": {"product": "NVIDIA-A100-SXM4-80GB", "count": 8},
}


def _state(
    *groups: dict[str, Any], scoring: Scoring = Scoring.LEAST_ALLOCATED, seed: int = 1
) -> ClusterState:
    profile = parse_fleet({"clusters": [{"name": "c", "nodeGroups": list(groups)}]}).clusters[0]
    state = ClusterState(scoring=scoring, seed=seed)
    inventory = build_inventory(profile)
    for node in build_nodes(profile):
        state.add_node(node, inventory[node["metadata"]["name"]])
    return state


def _pod(name: str, limits: dict[str, Any] | None = None, **spec: Any) -> dict[str, Any]:
    meta = spec.pop("metadata", {})
    container: dict[str, Any] = {"name": "main", "image": "x"}
    if limits:
        container["resources"] = {"limits": limits}
    return {
        "metadata": {"name": name, "namespace": "default", **meta},
        "spec": {"containers": [container], **spec},
    }


def _req(name: str, limits: dict[str, Any] | None = None, **spec: Any) -> PodRequest:
    return pod_request(_pod(name, limits, **spec))


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ({"containers": [{"resources": {"limits": {"nvidia.com/gpu": 2}}}]}, {"nvidia.com/gpu": 2}),
        (
            {
                "containers": [
                    {"resources": {"requests": {"cpu": "500m", "memory": "1Gi"}}},
                    {"resources": {"requests": {"cpu": "1"}, "limits": {"cpu": "2"}}},
                ]
            },
            {"cpu": 1500, "memory": 2**30},
        ),
        (
            {
                "initContainers": [{"resources": {"requests": {"cpu": "4"}}}],
                "containers": [{"resources": {"requests": {"cpu": "1"}}}],
            },
            {"cpu": 4000},
        ),
        ({"containers": [{"name": "x"}]}, {}),
    ],
)
def test_pod_requests(spec: dict[str, Any], expected: dict[str, int]) -> None:
    assert pod_requests(spec) == expected


def test_mig_pod_binds_to_mig_node_with_a_mig_device() -> None:
    state = _state(A100_MIG, A100_WHOLE)
    result = state.schedule([_req("p", {"nvidia.com/mig-1g.10gb": 1})])
    assert not result.unschedulable
    (binding,) = result.bindings
    assert "a100-mig" in binding.node
    (device,) = binding.devices
    assert device.mig is not None and device.mig.profile == "1g.10gb"
    assert device.share == pytest.approx(1 / 7)


@pytest.mark.parametrize(
    ("pods", "message"),
    [
        (
            [_req("big", {"nvidia.com/mig-3g.40gb": 9})],
            "0/12 nodes are available: 12 Insufficient nvidia.com/mig-3g.40gb.",
        ),
        (
            [_req("sel", {"nvidia.com/gpu": 1}, nodeSelector={"pool": "nope"})],
            "0/12 nodes are available: 12 node(s) didn't match Pod's node affinity/selector.",
        ),
        (
            [_req("mix", {"nvidia.com/gpu": 9})],
            "0/12 nodes are available: 12 Insufficient nvidia.com/gpu.",
        ),
        (
            [_req("two", {"nvidia.com/gpu": 1, "cpu": "200"})],
            "0/12 nodes are available: 12 Insufficient cpu, 8 Insufficient nvidia.com/gpu.",
        ),
        (
            [
                _req(
                    "aff",
                    {"nvidia.com/mig-3g.40gb": 9},
                    affinity={
                        "nodeAffinity": {
                            "requiredDuringSchedulingIgnoredDuringExecution": {
                                "nodeSelectorTerms": [
                                    {"matchExpressions": [{"key": "pool", "operator": "DoesNotExist"}]}
                                ]
                            }
                        }
                    },
                )
            ],
            "0/12 nodes are available: 4 node(s) didn't match Pod's node affinity/selector, "
            "8 Insufficient nvidia.com/mig-3g.40gb.",
        ),
    ],
)
def test_unschedulable_messages(pods: list[PodRequest], message: str) -> None:
    state = _state(A100_MIG, A100_WHOLE)
    result = state.schedule(pods)
    assert not result.bindings
    assert [u.message for u in result.unschedulable] == [message]


def test_taints_tolerations_and_cordon() -> None:
    tainted = {
        **A100_WHOLE,
        "name": "tainted",
        "count": 2,
        "taints": [{"key": "gpu", "value": "a100", "effect": "NoSchedule"}],
    }
    cordoned = {**A100_WHOLE, "name": "cordoned", "count": 1, "unschedulable": True}
    soft = {**A100_WHOLE, "name": "soft", "count": 0}
    state = _state(tainted, cordoned, soft)
    result = state.schedule([_req("p", {"nvidia.com/gpu": 1})])
    assert result.unschedulable[0].message == (
        "0/3 nodes are available: 1 node(s) were unschedulable, 2 node(s) had untolerated taint {gpu: a100}."
    )
    tolerant = _req("q", {"nvidia.com/gpu": 1}, tolerations=[{"key": "gpu", "operator": "Exists"}])
    result = state.schedule([tolerant])
    assert result.bindings and "tainted" in result.bindings[0].node
    wrong_value = _req(
        "r",
        {"nvidia.com/gpu": 1},
        tolerations=[{"key": "gpu", "operator": "Equal", "value": "h100", "effect": "NoSchedule"}],
    )
    assert state.schedule([wrong_value]).unschedulable


def test_not_ready_node_is_tainted() -> None:
    profile = parse_fleet({"clusters": [{"name": "c", "nodeGroups": [A100_WHOLE]}]}).clusters[0]
    state = ClusterState()
    for index, node in enumerate(build_nodes(profile)):
        if index == 0:
            node["status"]["conditions"][-1]["status"] = "False"
        state.add_node(node)
    result = state.schedule(
        [
            _req(
                "p",
                {"nvidia.com/gpu": 8, "cpu": "1"},
                nodeSelector={"kubernetes.io/hostname": "c-a100-whole-0"},
            )
        ]
    )
    assert (
        "1 node(s) had untolerated taint {node.kubernetes.io/not-ready: }" in result.unschedulable[0].message
    )


@pytest.mark.parametrize(
    ("operator", "values", "matches"),
    [
        ("In", ["whole", "x"], 4),
        ("NotIn", ["whole"], 8),
        ("Exists", [], 4),
        ("DoesNotExist", [], 8),
    ],
)
def test_node_affinity_operators(operator: str, values: list[str], matches: int) -> None:
    state = _state(A100_MIG, A100_WHOLE)
    pod = _req(
        "p",
        {"cpu": "1"},
        affinity={
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [
                        {"matchExpressions": [{"key": "pool", "operator": operator, "values": values}]}
                    ]
                }
            }
        },
    )
    feasible, _ = state.feasible_nodes(pod)
    assert len(feasible) == matches


def test_gt_lt_and_match_fields() -> None:
    state = _state(A100_MIG, A100_WHOLE)
    pod = _req(
        "p",
        {"cpu": "1"},
        affinity={
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [
                        {
                            "matchExpressions": [
                                {"key": "nvidia.com/mig-1g.10gb.count", "operator": "Gt", "values": ["15"]}
                            ]
                        },
                        {
                            "matchFields": [
                                {"key": "metadata.name", "operator": "In", "values": ["c-a100-whole-2"]}
                            ]
                        },
                    ]
                }
            }
        },
    )
    names = {n.name for n in state.feasible_nodes(pod)[0]}
    assert names == {f"c-a100-mig-{i}" for i in range(8)} | {"c-a100-whole-2"}


@pytest.mark.parametrize(
    ("scoring", "expect_spread"),
    [(Scoring.LEAST_ALLOCATED, True), (Scoring.MOST_ALLOCATED, False), (Scoring.BEST_FIT, False)],
)
def test_scoring_spreads_or_packs(scoring: Scoring, expect_spread: bool) -> None:
    state = _state(A100_WHOLE, scoring=scoring)
    result = state.schedule([_req(f"p{i}", {"nvidia.com/gpu": 1, "cpu": "1"}) for i in range(4)])
    nodes = {b.node for b in result.bindings}
    assert len(result.bindings) == 4
    assert (len(nodes) == 4) is expect_spread
    if not expect_spread:
        assert len(nodes) == 1


def test_best_fit_prefers_the_fullest_node() -> None:
    state = _state(A100_WHOLE, scoring=Scoring.BEST_FIT)
    first = state.schedule(
        [_req("six", {"nvidia.com/gpu": 6}, nodeSelector={"kubernetes.io/hostname": "c-a100-whole-1"})]
    )
    assert first.bindings[0].node == "c-a100-whole-1"
    second = state.schedule([_req("two", {"nvidia.com/gpu": 2})])
    assert second.bindings[0].node == "c-a100-whole-1"


@pytest.mark.parametrize(
    ("group", "limits", "expected"),
    [
        # left = (cpu left / 128,000) * 0.5 + (GPU thousandths left / 8,000) * 0.5; score = int((1 - left) * 100)
        (A100_WHOLE, {"cpu": "1", "nvidia.com/gpu": 1}, 19),  # 95,000 and 7,000 left: 0.8086
        (A100_WHOLE, {"cpu": "32", "nvidia.com/gpu": 8}, 75),  # 64,000 and 0 left: 0.25
        (A100_WHOLE, {"cpu": "96"}, 50),  # no CPU left, every GPU: 0.5
        (A100_WHOLE, {"cpu": "500m", "memory": "1Gi"}, 12),  # 95,500 and 8,000 left: 0.873
        # a MIG GPU is 429 + 286 + 143 + 143 = 1,001 thousandths; the 3g slice is 429
        (A100_MIG, {"nvidia.com/mig-3g.40gb": 1}, 15),  # 96,000 and 7,579 left: 0.8487
        (A100_MIG, {"cpu": "8", "nvidia.com/mig-1g.10gb": 2}, 17),  # 88,000 and 7,722 left: 0.8264
    ],
)
def test_best_fit_scores_cpu_and_gpu_left_as_the_fgd_paper(
    group: dict[str, Any], limits: dict[str, Any], expected: int
) -> None:
    state = _state(group, scoring=Scoring.BEST_FIT)
    pod = _req("p", limits)
    node = state.nodes[sorted(state.nodes)[0]]
    assert state.score_nodes(pod, [node]) == [expected]


def test_best_fit_weighs_cpu_with_gpus() -> None:
    """The pod goes where it leaves least room in CPU and GPU together, not fewest GPUs alone."""
    state = _state(A100_WHOLE, scoring=Scoring.BEST_FIT)
    setup = [
        _req(name, limits, nodeSelector={"kubernetes.io/hostname": node})
        for name, node, limits in (
            ("gpus", "c-a100-whole-0", {"nvidia.com/gpu": 6, "cpu": "6"}),  # 2 GPUs, 90 cores left
            ("cpus", "c-a100-whole-1", {"nvidia.com/gpu": 4, "cpu": "94"}),  # 4 GPUs, 2 cores left
            ("full2", "c-a100-whole-2", {"nvidia.com/gpu": 8}),
            ("full3", "c-a100-whole-3", {"nvidia.com/gpu": 8}),
        )
    ]
    assert len(state.schedule(setup).bindings) == 4
    pod = _req("one", {"nvidia.com/gpu": 1, "cpu": "1"})
    # c-a100-whole-0: 89,000 / 128,000 * 0.5 + 1,000 / 8,000 * 0.5 = 0.41 -> 58
    # c-a100-whole-1:  1,000 / 128,000 * 0.5 + 3,000 / 8,000 * 0.5 = 0.19 -> 80
    nodes = [state.nodes["c-a100-whole-0"], state.nodes["c-a100-whole-1"]]
    assert state.score_nodes(pod, nodes) == [58, 80]
    assert state.schedule([pod]).bindings[0].node == "c-a100-whole-1"


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_random_scoring_is_reproducible(seed: int) -> None:
    pods = [_req(f"p{i}", {"nvidia.com/gpu": 1}) for i in range(10)]
    runs = []
    for _ in range(2):
        state = _state(A100_WHOLE, scoring=Scoring.RANDOM, seed=seed)
        runs.append([b.node for b in state.schedule(pods).bindings])
    assert runs[0] == runs[1]
    assert len(runs[0]) == 10


def _gang_pod(name: str, job: str, gpus: int, *, kind: str = "PyTorchJob") -> PodRequest:
    return pod_request(
        _pod(
            name,
            {"nvidia.com/gpu": gpus},
            metadata={
                "ownerReferences": [
                    {"kind": kind, "name": job, "controller": True, "uid": "u", "apiVersion": "v"}
                ]
            },
        )
    )


def test_gang_binds_all_or_nothing() -> None:
    state = _state(A100_WHOLE)
    # Four nodes of 8 GPUs: a 1+3 x 8 gang fits exactly, a 1+4 x 8 gang does not fit at all.
    fits = [_gang_pod(f"ok-{i}", "ok", 8) for i in range(4)]
    result = state.schedule(fits)
    assert len(result.bindings) == 4 and not result.unschedulable
    assert len({b.node for b in result.bindings}) == 4
    for binding in result.bindings:
        state.release(binding.pod_key)
    too_big = [_gang_pod(f"big-{i}", "big", 8, kind="MPIJob") for i in range(5)]
    result = state.schedule(too_big)
    assert not result.bindings
    assert len(result.unschedulable) == 5
    assert not state.allocations  # the partial placement was rolled back
    assert all("Insufficient nvidia.com/gpu" in u.message for u in result.unschedulable)


def test_pod_group_label_waits_for_min_member() -> None:
    state = _state(A100_WHOLE)
    meta = {
        "labels": {"scheduling.x-k8s.io/pod-group": "g1"},
        "annotations": {"scheduling.x-k8s.io/min-member": "3"},
    }
    pods = [pod_request(_pod(f"m{i}", {"nvidia.com/gpu": 1}, metadata=meta)) for i in range(2)]
    result = state.schedule(pods)
    assert not result.bindings
    assert "has 2 of the 3 pods" in result.unschedulable[0].message
    pods.append(pod_request(_pod("m2", {"nvidia.com/gpu": 1}, metadata=meta)))
    assert len(state.schedule(pods).bindings) == 3


def test_release_returns_devices_and_capacity() -> None:
    state = _state(A100_WHOLE)
    pin = {"kubernetes.io/hostname": "c-a100-whole-0"}
    first = state.schedule([_req("a", {"nvidia.com/gpu": 8}, nodeSelector=pin)]).bindings[0]
    assert len({d.id for d in first.devices}) == 8
    assert state.schedule([_req("b", {"nvidia.com/gpu": 1}, nodeSelector=pin)]).unschedulable
    state.release("default/a")
    again = state.schedule([_req("b", {"nvidia.com/gpu": 1}, nodeSelector=pin)]).bindings[0]
    assert again.devices[0].id == first.devices[0].id


def test_assume_takes_named_devices() -> None:
    state = _state(A100_WHOLE)
    inventory = state.nodes["c-a100-whole-0"].inventory
    assert inventory is not None
    wanted = inventory.devices["nvidia.com/gpu"][5].id
    allocation = state.assume(_req("a", {"nvidia.com/gpu": 1}), "c-a100-whole-0", [wanted])
    assert [d.id for d in allocation.devices] == [wanted]
    assert state.nodes["c-a100-whole-0"].free("nvidia.com/gpu") == 7


def test_too_many_pods() -> None:
    state = _state({**A100_WHOLE, "count": 1, "maxPods": 2})
    result = state.schedule([_req(f"p{i}", {"cpu": "1"}) for i in range(3)])
    assert len(result.bindings) == 2
    assert result.unschedulable[0].message == "0/1 nodes are available: 1 Too many pods."


@pytest.mark.parametrize(
    ("count", "reasons", "message"),
    [
        (0, {}, "no nodes available to schedule pods"),
        (
            3,
            {"Insufficient cpu": 2, "Insufficient memory": 1},
            "0/3 nodes are available: 1 Insufficient memory, 2 Insufficient cpu.",
        ),
        (12, {"b": 10, "a": 2}, "0/12 nodes are available: 10 b, 2 a."),
    ],
)
def test_fit_error_message_sorts_like_kube(count: int, reasons: dict[str, int], message: str) -> None:
    assert fit_error_message(count, reasons) == message


@pytest.mark.parametrize(
    ("existing", "expected"),
    [(set(), "data"), ({"data"}, "cache"), ({"data", "cache"}, None)],
)
def test_the_first_missing_claim_fails_the_pod(existing: set[str], expected: str | None) -> None:
    pod = pod_request(
        {
            "metadata": {"name": "p", "namespace": "ml"},
            "spec": {
                "containers": [{"name": "c", "image": "i"}],
                "volumes": [
                    {"name": "a", "persistentVolumeClaim": {"claimName": "data"}},
                    {"name": "b", "emptyDir": {}},
                    {"name": "c", "persistentVolumeClaim": {"claimName": "cache"}},
                ],
            },
        }
    )
    assert missing_claim(pod, existing) == expected


def test_a_missing_claim_reads_as_kube_scheduler_says_it() -> None:
    assert missing_claim_message(6, "data") == (
        '0/6 nodes are available: persistentvolumeclaim "data" not found. '
        "preemption: 0/6 nodes are available: 6 Preemption is not helpful for scheduling."
    )
