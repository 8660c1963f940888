"""``gpufed waste --by namespace,workload``: rows are hub workloads (``gpu/Deployment/infer-weighted``),
never the raw pods the DCGM exporter names, from the agent's report through the hub's accounting."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from controlplane.apis.timestamps import format_time
from controlplane.reports.accounting import Accumulator
from controlplane.reports.report import render_table, to_json
from controlplane.reports.resource import report_from_json
from controlplane.reports.snapshot import sample_from_cluster_statuses
from member_agent import capacity

from .fleetobjects import A100, T0, k8s_node


def _pod(name: str, *, phase: str, owner: dict[str, Any], labels: dict[str, str]) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": "gpu", "labels": labels, "ownerReferences": [owner]},
        "spec": {"nodeName": "n1", "containers": [{"name": "c", "resources": {"limits": {"nvidia.com/gpu": 1}}}]},
        "status": {"phase": phase},
    }


def test_rows_by_workload_name_the_owning_workload_of_running_and_just_finished_pods() -> None:
    replica_set = {"kind": "ReplicaSet", "name": "infer-weighted-56fd5b7d5", "controller": True}
    pods = [
        _pod("infer-weighted-56fd5b7d5-9rdjm", phase="Succeeded", owner=replica_set,
             labels={"pod-template-hash": "56fd5b7d5"}),
        _pod("infer-weighted-56fd5b7d5-x2x7q", phase="Running", owner=replica_set,
             labels={"pod-template-hash": "56fd5b7d5"}),
        _pod("bert-master-0", phase="Running", owner={"kind": "PyTorchJob", "name": "bert", "controller": True},
             labels={"training.kubeflow.org/job-name": "bert",
                     "training.kubeflow.org/operator-name": "pytorchjob-controller"}),
    ]
    devices = {"n1": [
        {"gpu": i, "uuid": f"GPU-{i}", "pod": p["metadata"]["name"], "namespace": "gpu", "utilization": 0.5}
        for i, p in enumerate(pods)
    ]}
    accumulator = Accumulator()
    for minute in range(0, 11):
        now = T0 + timedelta(minutes=minute)
        status = capacity.summarize(
            [k8s_node("n1", 4)], [capacity.trim_pod(p) for p in pods], now=format_time(now),
            utilization=devices, utilization_time=format_time(now),
        )
        cluster = {"metadata": {"name": "a"}, "spec": {"pricing": {A100: 1.0}}, "status": status}
        accumulator.add(sample_from_cluster_statuses([cluster], [], [], now=now))
    report = accumulator.query(T0, T0 + timedelta(minutes=10), by=["namespace", "workload"])

    keys = {(g.key["namespace"], g.key["workload"]) for g in report.groups}
    assert keys == {("gpu", "Deployment/infer-weighted"), ("gpu", "PyTorchJob/bert"), (None, None)}
    text = render_table(report_from_json(to_json(report)))
    rows = text.split("BY NAMESPACE, WORKLOAD", 1)[1].splitlines()
    assert any(row.startswith("gpu/Deployment/infer-weighted ") for row in rows), text
    assert any(row.startswith("gpu/PyTorchJob/bert ") for row in rows), text
    assert "Pod/" not in text


def _work(cluster: str, *manifests: tuple[str, str]) -> dict[str, Any]:
    return {
        "metadata": {"name": "w", "namespace": f"gpufed-es-{cluster}"},
        "spec": {"workload": {"manifests": [
            {"apiVersion": "v1", "kind": kind, "metadata": {"name": name, "namespace": "gpu"}} for kind, name in manifests
        ]}},
    }


def test_a_pod_the_agent_never_saw_goes_under_the_propagated_workload_named_like_it() -> None:
    """The exporter names pods the agent's cache does not have (yet, or any more): the hub puts
    them under the workload its Works propagated to that cluster whose pods are named so."""
    names = ["infer-weighted-56fd5b7d5-9rdjm", "infer-56fd5b7d5-abcde", "train-0", "etl-x7k2p", "stray-pod",
             "tf-ps-1", "tf-chief-0", "jax-worker-3"]
    devices = {"n1": [{"gpu": i, "uuid": f"GPU-{i}", "pod": name, "namespace": "gpu", "utilization": 0.5}
                      for i, name in enumerate(names)]}
    status = capacity.summarize([k8s_node("n1", 8)], [], now=format_time(T0), utilization=devices,
                                utilization_time=format_time(T0))
    cluster = {"metadata": {"name": "a"}, "spec": {"pricing": {A100: 1.0}}, "status": status}
    works = [_work("a", ("Deployment", "infer-weighted"), ("Deployment", "infer"), ("StatefulSet", "train"),
                   ("Job", "etl"), ("TFJob", "tf"), ("JAXJob", "jax")),
             _work("b", ("Deployment", "stray"))]  # another cluster's workload: not this pod's
    sample = sample_from_cluster_statuses([cluster], [], works, now=T0)
    holders = {d.allocated_to.pod: d.allocated_to.workload for d in sample.clusters[0].nodes[0].devices
               if d.allocated_to}
    assert holders == {
        "infer-weighted-56fd5b7d5-9rdjm": "Deployment/infer-weighted",  # the longest name that fits
        "infer-56fd5b7d5-abcde": "Deployment/infer",
        "train-0": "StatefulSet/train",
        "etl-x7k2p": "Job/etl",
        "stray-pod": "Pod/stray-pod",  # nothing propagated here is named like it
        "tf-ps-1": "TFJob/tf",  # a role of the kind, lower case, and its index
        "tf-chief-0": "TFJob/tf",
        "jax-worker-3": "JAXJob/jax",
    }
