"""Per-replica requirements from pod templates, and their binding-spec round trip."""

from __future__ import annotations

from typing import Any

import pytest

from controlplane.apis.pods import FrozenTaint, FrozenToleration, untolerated
from controlplane.interpreter.requirements import NodeSelectorRequirement, ReplicaRequirements, requirements

GI = 2**30


def container(
    requests: dict[str, str] | None = None, limits: dict[str, str] | None = None, **extra: Any
) -> dict[str, Any]:
    resources: dict[str, Any] = {}
    if requests:
        resources["requests"] = requests
    if limits:
        resources["limits"] = limits
    return {"name": "c", "resources": resources, **extra}


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ({"containers": [container({"cpu": "500m", "memory": "1Gi"})]}, {"cpu": 500, "memory": GI}),
        # Limits fill missing requests (extended resources are usually given as limits only).
        (
            {"containers": [container(limits={"nvidia.com/gpu": "2", "cpu": "2"})]},
            {"cpu": 2000, "nvidia.com/gpu": 2},
        ),
        ({"containers": [container({"cpu": "1"}, {"cpu": "4"})]}, {"cpu": 1000}),
        # Containers add up.
        (
            {
                "containers": [
                    container({"nvidia.com/mig-1g.10gb": "1"}),
                    container({"nvidia.com/mig-1g.10gb": "1", "cpu": "1"}),
                ]
            },
            {"cpu": 1000, "nvidia.com/mig-1g.10gb": 2},
        ),
        # A one-shot init container counts when it is the peak.
        (
            {"containers": [container({"cpu": "1"})], "initContainers": [container({"cpu": "3"})]},
            {"cpu": 3000},
        ),
        # A sidecar (restartable init container) adds to the app containers.
        (
            {
                "containers": [container({"cpu": "1"})],
                "initContainers": [container({"cpu": "1"}, restartPolicy="Always")],
            },
            {"cpu": 2000},
        ),
        ({"containers": [container({"cpu": "1"})], "overhead": {"cpu": "250m"}}, {"cpu": 1250}),
        ({"containers": [container()]}, {}),
    ],
)
def test_requests(spec: dict[str, Any], expected: dict[str, int]) -> None:
    assert requirements({"spec": spec}).resource_map == expected
    assert requirements(spec).resource_map == expected  # a bare pod spec works too


def test_selectors_affinity_tolerations_priority() -> None:
    template = {
        "spec": {
            "containers": [container(limits={"nvidia.com/gpu": "1"})],
            "nodeSelector": {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"},
            "affinity": {
                "nodeAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {
                        "nodeSelectorTerms": [
                            {
                                "matchExpressions": [
                                    {"key": "nvidia.com/gpu.memory", "operator": "Gt", "values": ["40000"]}
                                ]
                            }
                        ]
                    },
                    "preferredDuringSchedulingIgnoredDuringExecution": [
                        {
                            "weight": 1,
                            "preference": {"matchExpressions": [{"key": "x", "operator": "Exists"}]},
                        }
                    ],
                }
            },
            "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
            "priorityClassName": "high",
        }
    }
    req = requirements(template)
    assert req.node_selector_map == {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}
    [term] = req.node_affinity  # preferred terms do not filter
    assert term.expressions == (NodeSelectorRequirement("nvidia.com/gpu.memory", "Gt", ("40000",)),)
    assert req.tolerations == (FrozenToleration(key="nvidia.com/gpu", operator="Exists", effect="NoSchedule"),)
    assert req.priority_class_name == "high"
    assert ReplicaRequirements.from_spec(req.to_spec()) == req
    assert hash(ReplicaRequirements.from_spec(req.to_spec())) == hash(req)


def test_binding_spec_form_uses_quantity_strings() -> None:
    req = ReplicaRequirements.build({"cpu": 1500, "memory": 4 * GI, "nvidia.com/gpu": 1})
    assert req.to_spec()["resourceRequest"] == {"cpu": "1500m", "memory": "4Gi", "nvidia.com/gpu": "1"}


@pytest.mark.parametrize(
    ("operator", "values", "labels", "matches"),
    [
        ("In", ("a", "b"), {"k": "a"}, True),
        ("In", ("a",), {}, False),
        ("NotIn", ("a",), {"k": "b"}, True),
        ("NotIn", ("a",), {}, True),
        ("NotIn", ("a",), {"k": "a"}, False),
        ("Exists", (), {"k": ""}, True),
        ("DoesNotExist", (), {"k": "x"}, False),
        ("Gt", ("40000",), {"k": "81559"}, True),
        ("Gt", ("40000",), {"k": "40000"}, False),
        ("Lt", ("8",), {"k": "4"}, True),
        ("Lt", ("8",), {"k": "many"}, False),
    ],
)
def test_node_selector_operators(
    operator: str, values: tuple[str, ...], labels: dict[str, str], matches: bool
) -> None:
    assert NodeSelectorRequirement("k", operator, values).matches(labels) is matches


@pytest.mark.parametrize(
    ("toleration", "taint", "tolerated"),
    [
        (FrozenToleration(key="gpu", operator="Exists"), FrozenTaint("gpu", "x", "NoSchedule"), True),
        (FrozenToleration(key="gpu", value="x"), FrozenTaint("gpu", "x", "NoExecute"), True),
        (FrozenToleration(key="gpu", value="y"), FrozenTaint("gpu", "x", "NoSchedule"), False),
        (
            FrozenToleration(key="gpu", operator="Exists", effect="NoExecute"),
            FrozenTaint("gpu", "x", "NoSchedule"),
            False,
        ),
        (FrozenToleration(operator="Exists"), FrozenTaint("anything", "", "NoSchedule"), True),
    ],
)
def test_tolerations(toleration: FrozenToleration, taint: FrozenTaint, tolerated: bool) -> None:
    assert (untolerated([taint], [toleration]) == ()) is tolerated


def test_prefer_no_schedule_never_blocks() -> None:
    assert untolerated([FrozenTaint("spot", "", "PreferNoSchedule")], []) == ()


def test_with_gpu_shape_swaps_only_gpu_resources() -> None:
    req = ReplicaRequirements.build({"cpu": 1000, "nvidia.com/gpu": 1})
    assert req.with_gpu_shape({"nvidia.com/mig-3g.40gb": 1}).resource_map == {
        "cpu": 1000,
        "nvidia.com/mig-3g.40gb": 1,
    }
    cpu_only = ReplicaRequirements.build({"cpu": 1000})
    assert cpu_only.with_gpu_shape({"nvidia.com/gpu": 1}) is cpu_only
