"""The merge of the members' ``metrics.k8s.io`` answers (pure)."""

from __future__ import annotations

from typing import Any

import pytest

from controlplane.apiserver.proxy.resourcemetrics import (
    CLUSTER_ANNOTATION,
    annotated,
    merge_items,
    placed_clusters,
)


def _pod(name: str, namespace: str = "ml", *, cpu: str = "250000000n", memory: str = "1024Ki") -> dict[str, Any]:
    return {
        "kind": "PodMetrics", "apiVersion": "metrics.k8s.io/v1beta1",
        "metadata": {"name": name, "namespace": namespace, "labels": {"app": name}},
        "timestamp": "2026-01-01T00:00:00Z", "window": "30s",
        "containers": [{"name": "main", "usage": {"cpu": cpu, "memory": memory}},
                       {"name": "side", "usage": {"cpu": "5m", "memory": "1Mi"}}],
    }


def _list(*items: dict[str, Any]) -> dict[str, Any]:
    return {"kind": "PodMetricsList", "apiVersion": "metrics.k8s.io/v1beta1", "metadata": {}, "items": list(items)}


def test_annotated_names_the_member_and_keeps_other_annotations() -> None:
    item = _pod("a")
    item["metadata"]["annotations"] = {"keep": "me"}
    out = annotated(item, "sim-a")
    assert out["metadata"]["annotations"] == {"keep": "me", CLUSTER_ANNOTATION: "sim-a"}
    assert out["metadata"]["labels"] == {"app": "a"} and out["containers"] == item["containers"]
    assert item["metadata"]["annotations"] == {"keep": "me"}  # the member's answer is not changed


@pytest.mark.parametrize(
    ("answers", "expected"),
    [
        ([], []),
        ([("sim-b", _list(_pod("z"), _pod("a", "other"))), ("sim-a", _list(_pod("m")))],
         [("ml", "m", "sim-a"), ("ml", "z", "sim-b"), ("other", "a", "sim-b")]),
        # The same name on two members is listed once per member.
        ([("sim-b", _list(_pod("same"))), ("sim-a", _list(_pod("same")))],
         [("ml", "same", "sim-a"), ("ml", "same", "sim-b")]),
        ([("sim-a", {"kind": "PodMetricsList", "items": None})], []),
    ],
)
def test_merge_items_orders_by_namespace_name_and_member(
    answers: list[tuple[str, dict[str, Any]]], expected: list[tuple[str, str, str]]
) -> None:
    merged = merge_items(answers)
    assert [(i["metadata"]["namespace"], i["metadata"]["name"], i["metadata"]["annotations"][CLUSTER_ANNOTATION])
            for i in merged] == expected


@pytest.mark.parametrize(
    ("pod", "expected"),
    [("infer-7c9f-x2k", ["sim-a", "sim-b"]), ("infer", ["sim-a", "sim-b"]), ("inference-0", ["sim-c"]),
     ("train-0", [])],
)
def test_placed_clusters_come_from_the_binding_whose_workload_prefixes_the_pod(pod: str, expected: list[str]) -> None:
    bindings = [
        {"spec": {"resource": {"kind": "Deployment", "name": "infer"},
                  "clusters": [{"name": "sim-b", "replicas": 1}, {"name": "sim-a", "replicas": 1}]}},
        {"spec": {"resource": {"kind": "StatefulSet", "name": "inference"}, "clusters": [{"name": "sim-c"}]}},
        {"spec": {"resource": {"kind": "Job", "name": ""}, "clusters": [{"name": "sim-z"}]}},
    ]
    assert placed_clusters(bindings, pod) == expected
