"""Rendering one cluster's manifest with an alternative GPU shape: only GPU pod templates change."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from controlplane.apis.kube import defaulting
from controlplane.controllers.workloads import without_server_fields
from controlplane.controllers.works import ChosenShape, render_manifest
from controlplane.interpreter import interpreter_for
from controlplane.interpreter.customized import Customization, CustomizedInterpreter
from policies.affinity import ClusterView

H100 = "NVIDIA-H100-80GB-HBM3"
PRODUCT = "nvidia.com/gpu.product"
MIG_3G = "nvidia.com/mig-3g.40gb"
SHAPE = ChosenShape({"nvidia.com/gpu": 2}, {PRODUCT: H100})
STEERED = {"weight": 1, "preference": {"matchExpressions": [{"key": PRODUCT, "operator": "NotIn", "values": ["Tesla-T4"]}]}}
OWN = {"weight": 40, "preference": {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}}


def template(limits: dict[str, Any], **spec: Any) -> dict[str, Any]:
    return {"spec": {"containers": [{"name": "main", "image": "img", "resources": {"limits": limits}}], **spec}}


def deployment(pod: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "d", "namespace": "ml"},
        "spec": {"replicas": 2, "template": pod},
    }


def pytorchjob(master: dict[str, Any], worker: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {"name": "j", "namespace": "ml"},
        "spec": {
            "pytorchReplicaSpecs": {
                "Master": {"replicas": 1, "template": master},
                "Worker": {"replicas": 3, "template": worker},
            }
        },
    }


def pod_specs(manifest: dict[str, Any]) -> list[dict[str, Any]]:
    if manifest["kind"] == "Deployment":
        return [manifest["spec"]["template"]["spec"]]
    roles = manifest["spec"]["pytorchReplicaSpecs"]
    return [roles["Master"]["template"]["spec"], roles["Worker"]["template"]["spec"]]


@pytest.mark.parametrize(
    ("workload", "selectors", "limits"),
    [
        pytest.param(
            deployment(template({MIG_3G: 1})),
            [{PRODUCT: H100}],
            [{"nvidia.com/gpu": "2"}],
            id="gpu-deployment",
        ),
        pytest.param(
            deployment(template({MIG_3G: 1}, nodeSelector={"zone": "a"})),
            [{"zone": "a", PRODUCT: H100}],
            [{"nvidia.com/gpu": "2"}],
            id="merged-with-its-own-selector",
        ),
        pytest.param(
            pytorchjob(template({"memory": "1Gi"}), template({MIG_3G: 1})),
            [None, {PRODUCT: H100}],
            [{"memory": "1Gi"}, {"nvidia.com/gpu": "2"}],
            id="cpu-only-master-untouched",
        ),
        pytest.param(
            pytorchjob(template({"nvidia.com/gpu": 1}), template({MIG_3G: 1})),
            [{PRODUCT: H100}, {PRODUCT: H100}],
            [{"nvidia.com/gpu": "2"}, {"nvidia.com/gpu": "2"}],
            id="every-gpu-role",
        ),
    ],
)
def test_the_shape_rewrites_only_gpu_pod_templates(
    workload: dict[str, Any], selectors: list[dict[str, str] | None], limits: list[dict[str, str]]
) -> None:
    interpreter = interpreter_for(workload["apiVersion"], workload["kind"])
    rendered = render_manifest(
        workload, interpreter=interpreter, replicas=4, shape=SHAPE, rules=(), cluster=ClusterView(name="cloud")
    )
    specs = pod_specs(rendered.manifest)
    assert [spec.get("nodeSelector") for spec in specs] == selectors
    assert [spec["containers"][0]["resources"]["limits"] for spec in specs] == limits


def test_a_job_reaches_the_member_without_the_hubs_generated_selector() -> None:
    """The hub's Job carries the selector and labels kube generated from the hub's uid; a member
    generates its own from its own uid and would refuse a template labelled with another."""
    job: dict[str, Any] = {
        "apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "train", "namespace": "ml", "uid": "hub-uid"},
        "spec": {"template": {"metadata": {"labels": {"team": "ml"}}, **template({"nvidia.com/gpu": "1"})}},
    }
    defaulter = defaulting.for_kind("batch", "Job")
    assert defaulter is not None
    defaulter(job)
    assert job["spec"]["template"]["metadata"]["labels"]["batch.kubernetes.io/controller-uid"] == "hub-uid"
    rendered = render_manifest(
        job, interpreter=interpreter_for("batch/v1", "Job"), replicas=1, shape=None, rules=(),
        cluster=ClusterView(name="cloud"),
    ).manifest
    assert "selector" not in rendered["spec"]
    assert rendered["spec"]["template"]["metadata"]["labels"] == {"team": "ml"}
    assert rendered["metadata"]["labels"] == {"team": "ml"}
    assert rendered["spec"]["manualSelector"] is False and rendered["spec"]["backoffLimit"] == 6


def test_exported_objects_reach_the_member_without_what_their_old_cluster_gave_them() -> None:
    """``kubectl get -o yaml`` from a running cluster carries its Service address and the Job's
    TTL; the Work carries neither (the member allocates its own address; the hub honours the TTL)."""
    service: dict[str, Any] = {
        "apiVersion": "v1", "kind": "Service", "metadata": {"name": "web", "namespace": "ml", "uid": "u"},
        "spec": {"clusterIP": "10.96.4.7", "clusterIPs": ["10.96.4.7"], "ports": [{"port": 80}]},
    }
    job: dict[str, Any] = {
        "apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "train", "namespace": "ml"},
        "spec": {"ttlSecondsAfterFinished": 60, "template": template({"nvidia.com/gpu": "1"})},
    }
    view = ClusterView(name="cloud")
    rendered_service = render_manifest(service, interpreter=None, replicas=0, shape=None, rules=(), cluster=view)
    rendered_job = render_manifest(
        job, interpreter=interpreter_for("batch/v1", "Job"), replicas=1, shape=None, rules=(), cluster=view
    )
    assert rendered_service.manifest["spec"] == {"ports": [{"port": 80}]}
    assert "ttlSecondsAfterFinished" not in rendered_job.manifest["spec"]
    assert service["spec"]["clusterIP"] == "10.96.4.7" and job["spec"]["ttlSecondsAfterFinished"] == 60


def test_a_customized_native_kind_keeps_its_gpu_shape_rendering() -> None:
    """A ResourceInterpreterCustomization of Deployment (here: replicaRevision) changes its hook
    only: the chosen GPU shape still rewrites the pod template and pins its node selector."""
    revise = "function ReviseReplica(obj, n) obj.spec.replicas = n; obj.metadata.labels = {revised = 'yes'}; return obj end"
    custom = Customization("deploy", "apps/v1", "Deployment", {"replicaRevision": revise})
    interpreter = CustomizedInterpreter(custom, interpreter_for("apps/v1", "Deployment"))
    rendered = render_manifest(
        deployment(template({"nvidia.com/gpu": "1"})), interpreter=interpreter, replicas=3, shape=SHAPE, rules=(),
        cluster=ClusterView(name="cloud"),
    )
    manifest = rendered.manifest
    assert manifest["spec"]["replicas"] == 3 and manifest["metadata"]["labels"] == {"revised": "yes"}
    [spec] = pod_specs(manifest)
    assert spec["nodeSelector"] == {PRODUCT: H100}
    assert spec["containers"][0]["resources"]["limits"] == {"nvidia.com/gpu": "2"}


def test_the_member_copy_drops_server_fields_and_shares_nothing_with_the_hub_object() -> None:
    stored: dict[str, Any] = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {
            "name": "web", "namespace": "default", "uid": "u-1", "resourceVersion": "7", "generation": 2,
            "labels": {"app": "web"},
            "annotations": {
                "kubectl.kubernetes.io/last-applied-configuration": "{}", "gpufed.io/retain-replicas-by-hpa": "true",
                "team": "a",
            },
            "managedFields": [{"manager": "kubectl", "fieldsV1": {"f:spec": {}}}],
            "finalizers": ["gpufed.io/propagation"],
        },
        "spec": {"replicas": 2, "template": {"spec": {"containers": [{"name": "c", "image": "i"}]}}},
        "status": {"replicas": 2},
    }
    before = copy.deepcopy(stored)
    out = without_server_fields(stored)
    assert out == {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "default", "labels": {"app": "web"}, "annotations": {"team": "a"}},
        "spec": {"replicas": 2, "template": {"spec": {"containers": [{"name": "c", "image": "i"}]}}},
    }
    out["metadata"]["labels"]["x"] = "y"
    out["spec"]["template"]["spec"]["containers"][0]["image"] = "j"
    assert stored == before


def test_a_quota_goes_to_members_without_the_hubs_count() -> None:
    """Each member's quota controller counts its own namespace: the hub's status.used stays on the hub."""
    stored = {
        "apiVersion": "v1", "kind": "ResourceQuota",
        "metadata": {"name": "q", "namespace": "team", "uid": "u-2", "resourceVersion": "9"},
        "spec": {"hard": {"requests.nvidia.com/gpu": "8"}},
        "status": {"hard": {"requests.nvidia.com/gpu": "8"}, "used": {"requests.nvidia.com/gpu": "3"}},
    }
    assert without_server_fields(stored) == {
        "apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "q", "namespace": "team"},
        "spec": {"hard": {"requests.nvidia.com/gpu": "8"}},
    }


def steered_to_c(workload: dict[str, Any]) -> Any:
    """``workload`` (a PyTorchJob of 4 workers) as cluster c's Work renders it, steered off the T4."""
    return render_manifest(
        workload,
        interpreter=interpreter_for("kubeflow.org/v1", "PyTorchJob"),
        replicas=4,
        shape=None,
        rules=(),
        cluster=ClusterView(name="c"),
        steering=("Tesla-T4",),
    )


@pytest.mark.parametrize(
    ("affinity", "expected"),
    [
        pytest.param(None, {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [STEERED]}}, id="none"),
        pytest.param(
            {"nodeAffinity": None, "podAffinity": {"x": 1}},
            {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [STEERED]}, "podAffinity": {"x": 1}},
            id="null-node-affinity",
        ),
        pytest.param(
            {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [OWN]}},
            {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [OWN, STEERED]}},
            id="after-the-users-own",
        ),
    ],
)
def test_steering_adds_its_term_to_gpu_templates_only(affinity: dict[str, Any] | None, expected: dict[str, Any]) -> None:
    master = template({"memory": "1Gi"})
    worker = template({"nvidia.com/gpu": 1}, affinity=copy.deepcopy(affinity))
    workload = pytorchjob(master, worker)
    before = copy.deepcopy(workload)
    rendered = steered_to_c(workload)
    master_spec, worker_spec = pod_specs(rendered.manifest)
    assert "affinity" not in master_spec
    assert worker_spec["affinity"] == expected
    assert workload == before  # the hub's object is not touched


def test_a_workload_without_gpu_templates_gets_the_steering_term_in_every_template() -> None:
    # Rare node steering reaches replicas without GPUs (scheduler/core/rarenodes.py).
    workload = pytorchjob(template({"memory": "1Gi"}), template({"cpu": "4"}))
    rendered = steered_to_c(workload)
    for spec in pod_specs(rendered.manifest):
        assert spec["affinity"] == {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [STEERED]}}
