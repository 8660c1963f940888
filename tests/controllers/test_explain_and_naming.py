"""Pure pieces of the federation loop: Work names, conditions, and what `gpufed explain` prints."""

from __future__ import annotations

from typing import Any

import pytest

from controlplane.apiserver.objects import ObjectStore
from controlplane.controllers.manager import ControllerManager
from controlplane.controllers.workloads import with_condition
from controlplane.controllers.works import WORK_NAME_MAX_LENGTH, work_name
from gpufed.commands.explain import parse_target, render_explanation, resolve_kind

from .fleet import A100, deployment, eventually, node_shape, propagation_policy, put_cluster, settled


@pytest.mark.parametrize(
    ("namespace", "name", "kind", "expected"),
    [
        ("default", "train", "Deployment", "default-train-deployment"),
        ("ml", "bert", "PyTorchJob", "ml-bert-pytorchjob"),
    ],
)
def test_short_work_names_are_readable(namespace: str, name: str, kind: str, expected: str) -> None:
    assert work_name(namespace, name, kind) == expected


@pytest.mark.parametrize("name", ["a" * 60, "x" * 200, "model.v2-" + "y" * 80])
def test_long_work_names_are_cut_hashed_and_distinct(name: str) -> None:
    short = work_name("team-research", name, "Deployment")
    other = work_name("team-research", name + "z", "Deployment")
    assert len(short) <= WORK_NAME_MAX_LENGTH and short != other
    assert short[0].isalnum() and short[-1].isalnum()
    assert short.startswith("team-research-")


@pytest.mark.parametrize(
    ("old_status", "new_status", "expected_time"),
    [("True", "True", "T0"), ("True", "False", "T1"), (None, "True", "T1")],
)
def test_condition_transition_time_moves_only_on_status_change(
    old_status: str | None, new_status: str, expected_time: str
) -> None:
    existing = [{"type": "Other", "status": "True"}]
    if old_status:
        existing.append({"type": "Scheduled", "status": old_status, "reason": "A", "lastTransitionTime": "T0"})
    out = with_condition(existing, {"type": "Scheduled", "status": new_status, "reason": "B"}, now="T1")
    assert out[0] == {"type": "Other", "status": "True"}
    assert out[-1] == {"type": "Scheduled", "status": new_status, "reason": "B", "lastTransitionTime": expected_time}


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("deployment", ("apps/v1", "Deployment", "deployments")),
        ("deploy", ("apps/v1", "Deployment", "deployments")),
        ("PyTorchJob", ("kubeflow.org/v1", "PyTorchJob", "pytorchjobs")),
        ("jobs.batch", ("batch/v1", "Job", "jobs")),
    ],
)
def test_explain_resolves_kinds_as_kubectl_does(text: str, expected: tuple[str, str, str]) -> None:
    assert resolve_kind(text) == expected


@pytest.mark.parametrize("target", ["deployment", "/train", "deployment/"])
def test_explain_rejects_targets_without_kind_and_name(target: str) -> None:
    with pytest.raises(ValueError, match="KIND/NAME"):
        parse_target(target)


def test_explain_of_an_unclaimed_workload_shows_why() -> None:
    workload: dict[str, Any] = {
        "kind": "Deployment",
        "metadata": {"name": "train", "namespace": "default"},
        "status": {"conditions": [{"type": "Propagated", "status": "False", "reason": "NoPolicyMatched", "message": "no policy"}]},
    }
    text = render_explanation(workload, None)
    assert "Propagated:  False (NoPolicyMatched): no policy" in text


def test_explain_shows_priority_and_dependencies_when_the_policy_asks_for_them() -> None:
    workload: dict[str, Any] = {"kind": "Deployment", "metadata": {"name": "web", "namespace": "default"}}
    binding: dict[str, Any] = {
        "spec": {"policy": {"kind": "PropagationPolicy", "namespace": "default", "name": "p"}, "replicas": 1,
                 "schedulePriority": {"priority": 1000}},
        "status": {"conditions": [
            {"type": "SchedulePriorityResolved", "status": "True", "reason": "PriorityClassResolved",
             "message": "PriorityClass urgent"},
            {"type": "DependenciesPropagated", "status": "False", "reason": "DependencyMissing",
             "message": "ConfigMap cfg is referenced by the pod template but not on the hub"},
        ]},
    }
    lines = render_explanation(workload, binding).splitlines()
    assert "Priority:    1000, True (PriorityClassResolved): PriorityClass urgent" in lines
    assert "Depends on:  False (DependencyMissing): ConfigMap cfg is referenced by the pod template but not on the hub" in lines
    plain = render_explanation(workload, {"spec": binding["spec"], "status": {}})
    assert "Priority:" not in plain and "Depends on:" not in plain


async def test_explain_shows_every_cluster_with_its_reasons(objects: ObjectStore, manager: ControllerManager) -> None:
    await put_cluster(objects, "onprem", node_shape(2, gpus=1, product="NVIDIA-H100-80GB-HBM3", extra={"nvidia.com/mig-3g.40gb": 1}))
    await put_cluster(objects, "cloud", node_shape(1, gpus=0, extra={"nvidia.com/mig-3g.40gb": 8}), provider="aws", pricing={A100: 4.1})
    await settled(manager)
    await objects.create(objects.registry.require("policy.gpufed.io/v1alpha1", "PropagationPolicy"), propagation_policy("mig"))
    workload = deployment("infer", replicas=2)
    workload["spec"]["template"]["spec"]["containers"][0]["resources"] = {"limits": {"nvidia.com/mig-3g.40gb": "4"}}
    await objects.create(objects.registry.require("apps/v1", "Deployment"), workload)
    binding_rt = objects.registry.require("work.gpufed.io/v1alpha1", "ResourceBinding")

    async def explained() -> dict[str, Any] | None:
        found = (await objects.list(binding_rt, namespace="default")).items
        return found[0] if found and (found[0].get("status") or {}).get("explanation") else None

    binding = await eventually(explained, what="an explained binding")
    hub = await objects.get(objects.registry.require("apps/v1", "Deployment"), namespace="default", name="infer")
    text = render_explanation(hub, binding)
    assert "Policy:      PropagationPolicy default/mig" in text
    assert "Per replica: nvidia.com/mig-3g.40gb=4" in text
    rows = {line.split()[0]: line for line in text.splitlines()[6:] if line and not line.startswith(" ")}
    assert rows["cloud"].split()[1:4] == ["yes", "2", "1"]
    assert rows["onprem"].split()[1:3] == ["no", "0"]
    assert "insufficient nvidia.com/mig-3g.40gb: need 4, 1 free" in rows["onprem"]


def test_explain_shows_each_roles_request_for_a_job_of_several_roles() -> None:
    from controlplane.interpreter import interpreter_for

    container = {"name": "c", "image": "x"}
    mpijob = {
        "apiVersion": "kubeflow.org/v2beta1", "kind": "MPIJob", "metadata": {"name": "m", "namespace": "default"},
        "spec": {"mpiReplicaSpecs": {
            "Launcher": {"replicas": 1, "template": {"spec": {"containers": [
                {**container, "resources": {"requests": {"cpu": "1"}}}]}}},
            "Worker": {"replicas": 2, "template": {"spec": {"containers": [
                {**container, "resources": {"limits": {"nvidia.com/gpu": "4"}, "requests": {"cpu": "8"}}}]}}},
        }},
    }
    interpreter = interpreter_for("kubeflow.org/v2beta1", "MPIJob")
    assert interpreter is not None
    binding: dict[str, Any] = {
        "spec": {
            "policy": {"kind": "PropagationPolicy", "namespace": "default", "name": "p"}, "gang": True,
            "replicas": interpreter.replicas(mpijob),
            "replicaRequirements": interpreter.replica_requirements(mpijob).to_spec(),
            "components": [component.to_spec() for component in interpreter.components(mpijob)],
        },
        "status": {},
    }
    lines = render_explanation(mpijob, binding).splitlines()
    assert "Per replica:" not in "\n".join(lines)  # the workers' shape is not every pod's
    at = lines.index("Per role:    Launcher x1: cpu=1")
    assert lines[at + 1] == "             Worker x2: cpu=8, nvidia.com/gpu=4"
    plain = {"spec": {**binding["spec"], "components": None}, "status": {}}
    assert "Per replica: cpu=8, nvidia.com/gpu=4" in render_explanation(mpijob, plain).splitlines()
