"""`gpufed get` and `gpufed logs`: the pure parts (table merging, workload ownership)."""

from __future__ import annotations

from typing import Any

import pytest

from gpufed.commands.events import about, timeline
from gpufed.commands.get import CLUSTER_ANNOTATION, name_lines, objects_of, render
from gpufed.memberproxy import Resource, no_pods, owned_by, print_unreached

COLUMNS = [
    {"name": "Name", "priority": 0},
    {"name": "Ready", "priority": 0},
    {"name": "IP", "priority": 1},
]


def _table(*rows: tuple[str, str, str, str]) -> dict[str, Any]:
    return {
        "columnDefinitions": COLUMNS,
        "rows": [{"cells": [n, r, ip], "object": {"metadata": {"namespace": ns}}} for ns, n, r, ip in rows],
    }


def test_tables_of_several_clusters_share_one_header_with_cluster_first() -> None:
    lines = render(
        [("a", _table(("ml", "p-1", "1/1", "10.0.0.1"))), ("bb", _table(("ml", "p-2", "0/1", "10.0.0.2")))],
        wide=False, all_namespaces=False,
    )
    assert [line.split() for line in lines] == [["CLUSTER", "NAME", "READY"], ["a", "p-1", "1/1"], ["bb", "p-2", "0/1"]]
    wide = render([("a", _table(("ml", "p-1", "1/1", "10.0.0.1")))], wide=True, all_namespaces=True)
    assert [line.split() for line in wide] == [["CLUSTER", "NAMESPACE", "NAME", "READY", "IP"],
                                                ["a", "ml", "p-1", "1/1", "10.0.0.1"]]
    assert render([("a", _table())], wide=False, all_namespaces=False) == []


DEPLOYMENTS = Resource(path="/apis/apps/v1", plural="deployments", kind="Deployment", namespaced=True)
PODS = Resource(path="/api/v1", plural="pods", kind="Pod", namespaced=True)


def test_objects_of_a_members_list_carry_their_kind_and_the_cluster_they_came_from() -> None:
    """A list's items have no apiVersion/kind (kube leaves them out); -o json|yaml puts them back,
    and names the member in an annotation, next to the object's own annotations."""
    listing = {"kind": "DeploymentList", "items": [
        {"metadata": {"name": "web", "annotations": {"a": "1"}}, "spec": {"replicas": 2}},
        {"metadata": {"name": "api"}},
    ]}
    found = objects_of("onprem", DEPLOYMENTS, listing)
    assert [(o["apiVersion"], o["kind"], o["metadata"]["name"]) for o in found] == [
        ("apps/v1", "Deployment", "web"), ("apps/v1", "Deployment", "api")]
    assert found[0]["metadata"]["annotations"] == {"a": "1", CLUSTER_ANNOTATION: "onprem"}
    assert found[0]["spec"] == {"replicas": 2}
    assert listing["items"][0]["metadata"]["annotations"] == {"a": "1"}  # the answer is not changed
    one = objects_of("cloud", PODS, {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}})
    assert [(o["apiVersion"], o["metadata"]["annotations"]) for o in one] == [("v1", {CLUSTER_ANNOTATION: "cloud"})]


def test_name_lines_are_the_cluster_then_kubectls_kind_and_name() -> None:
    found = [("onprem", DEPLOYMENTS, {"metadata": {"name": "web"}}), ("cloud", PODS, {"metadata": {"name": "p-1"}})]
    assert name_lines(found) == ["onprem deployment.apps/web", "cloud pod/p-1"]


def _pod(kind: str, name: str) -> dict[str, Any]:
    return {"metadata": {"ownerReferences": [{"kind": kind, "name": name}]}}


def test_workload_pods_are_found_by_ownership() -> None:
    assert owned_by(_pod("PyTorchJob", "train"), "PyTorchJob", "train")
    assert owned_by(_pod("ReplicaSet", "llm-serving-7d9f8c6b5"), "Deployment", "llm-serving")
    assert not owned_by(_pod("ReplicaSet", "llm-7d9f8c6b5"), "Deployment", "llm-serving")
    assert not owned_by(_pod("Job", "train"), "PyTorchJob", "train")
    assert not owned_by({"metadata": {}}, "Deployment", "x")


def _event(kind: str, name: str, at: str, reason: str = "Scheduled") -> dict[str, Any]:
    return {"involvedObject": {"kind": kind, "name": name}, "lastTimestamp": at, "type": "Normal",
            "reason": reason, "message": f"about {name}"}


def test_events_about_a_workload_its_replicasets_and_its_pods_merge_oldest_first() -> None:
    pods = {"infer-7d9f8c6b5-abcde"}
    assert about(_event("Deployment", "infer", ""), "Deployment", "infer", pods)
    assert about(_event("ReplicaSet", "infer-7d9f8c6b5", ""), "Deployment", "infer", pods)
    assert about(_event("Pod", "infer-7d9f8c6b5-abcde", ""), "Deployment", "infer", pods)
    assert not about(_event("Pod", "other-1", ""), "Deployment", "infer", pods)
    assert not about(_event("Deployment", "infer2", ""), "Deployment", "infer", pods)
    lines = timeline([
        ("c1", _event("Pod", "infer-7d9f8c6b5-abcde", "2026-01-01T00:00:05Z")),
        ("hub", _event("Deployment", "infer", "2026-01-01T00:00:01Z")),
    ])
    assert [line.split()[:2] for line in lines] == [["TIME", "CLUSTER"], ["2026-01-01T00:00:01Z", "hub"],
                                                    ["2026-01-01T00:00:05Z", "c1"]]
    assert timeline([]) == []


def test_a_pod_not_found_is_worded_as_kube_words_it_and_a_workload_without_pods_by_its_name() -> None:
    assert str(no_pods("train-0", "ml")) == 'pods "train-0" not found in namespace "ml" on the clusters searched'
    assert str(no_pods("pod/train-0", "ml")) == 'pods "train-0" not found in namespace "ml" on the clusters searched'
    assert str(no_pods("deploy/web", "ml")) == 'deploy/web has no pods in namespace "ml" on the clusters searched'


def test_clusters_that_could_not_be_asked_are_one_stderr_line_each(capsys: pytest.CaptureFixture[str]) -> None:
    print_unreached({"a": "connection refused", "b": "the cluster is not ready"})
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err == "cluster a: connection refused\ncluster b: the cluster is not ready\n"
