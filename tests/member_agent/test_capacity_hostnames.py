"""The capacity report names, per node shape, the nodes whose GPUs are partly held by pods: the
nodes the hub's packing hints prefer (``nodeShapes[].hostnames``)."""

from __future__ import annotations

from member_agent import capacity

from .test_capacity import A100, NOW, node, pod


def test_shapes_name_their_nodes_whose_gpus_are_partly_held() -> None:
    """A half-used 8-GPU node is named; an empty one, a full one and a node whose pods hold only
    CPU are not (the hub's packing hints prefer the named ones)."""
    nodes = [node(name, resources={"nvidia.com/gpu": "8"}, labels=A100) for name in ("empty", "full", "half", "cpu")]
    pods = [
        pod("a", "half", requests={"nvidia.com/gpu": "4"}),
        pod("b", "full", requests={"nvidia.com/gpu": "8"}),
        pod("c", "cpu", requests={"cpu": "2"}),
    ]
    shapes = capacity.summarize(nodes, pods, now=NOW)["nodeShapes"]
    named = {s["free"]["nvidia.com/gpu"]: s.get("hostnames") for s in shapes}
    assert named == {8: None, 0: None, 4: ["half"]}


def test_a_shape_names_at_most_32_nodes_in_name_order() -> None:
    nodes = [node(f"n{i:02}", resources={"nvidia.com/gpu": "8"}, labels=A100) for i in range(40)]
    pods = [pod(f"p{i}", f"n{i:02}", requests={"nvidia.com/gpu": "1"}) for i in reversed(range(40))]
    (shape,) = capacity.summarize(nodes, pods, now=NOW)["nodeShapes"]
    assert shape["count"] == 40
    assert shape["hostnames"] == [f"n{i:02}" for i in range(32)]
