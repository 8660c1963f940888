"""Every file in policies/examples/ applied to an in-process hub, with its documented outcome.

Each example file holds a policy and a sample workload it selects. A test applies the file's
documents through the ObjectStore (as ``kubectl apply -f`` would) to a hub whose controller
manager runs over the example fleet (``fleet.py``: on-prem A100s with whole GPUs and MIG
slices, cloud H100s, spot L4s), then checks what the file's comments promise on the
ResourceBinding and the Works: which clusters, how many replicas, which GPU shape and image
each cluster's manifest carries, a gang whole in one cluster or waiting with a reason.

Tests register the files they exercise with :func:`covers`; ``test_every_example_is_covered``
fails for a file no test exercises, so a new example needs a test. Every policy document in
every file must also validate without warnings and round-trip unchanged.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import pytest
import yaml

from controlplane.apiserver.objects import ObjectStore
from controlplane.controllers.manager import ControllerManager
from controlplane.interpreter import interpreter_for
from policies.matching import select_policy
from policies.models import ClusterPropagationPolicy, PropagationPolicy
from policies.override_models import POLICY_KINDS
from policies.validation import validate_policy

from .fleet import (
    A100,
    CLOUD_H100,
    CLOUD_L4_SPOT,
    FLEET,
    H100,
    LATER,
    MIG_3G,
    ONPREM,
    SPOT_TAINT,
    apply_documents,
    apply_example,
    condition,
    eventually,
    example_files,
    explanation,
    get_or_none,
    load_example,
    manifest_of,
    node_shape,
    only,
    placed,
    report_capacity,
    rt,
    scheduled_binding,
    settled,
    works_matching,
    works_of,
)

pytestmark = pytest.mark.waiting

F = TypeVar("F", bound=Callable[..., Any])

COVERED: dict[str, list[str]] = {}
"""Example file name -> the tests that apply it."""


def covers(*files: str) -> Callable[[F], F]:
    """Record that the decorated test applies ``files`` (names in policies/examples/)."""

    def mark(test: F) -> F:
        for name in files:
            COVERED.setdefault(name, []).append(test.__name__)
        return test

    return mark


# --- reading manifests ------------------------------------------------------------------


def deployment_replicas(manifest: dict[str, Any]) -> int:
    return int(manifest["spec"]["replicas"])


def pytorchjob_pods(manifest: dict[str, Any]) -> int:
    return sum(int(role["replicas"]) for role in manifest["spec"]["pytorchReplicaSpecs"].values())


def containers(manifest: dict[str, Any]) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = manifest["spec"]["template"]["spec"]["containers"]
    return found


def images(manifest: dict[str, Any]) -> list[str]:
    return [str(c["image"]) for c in containers(manifest)]


def gpu_limits(manifest: dict[str, Any]) -> dict[str, str]:
    """The GPU-like limits of the (single) container."""
    [container] = containers(manifest)
    limits = container["resources"]["limits"]
    return {k: str(v) for k, v in limits.items() if k == "nvidia.com/gpu" or k.startswith("nvidia.com/mig-")}


def reasons_of(binding: dict[str, Any], cluster: str) -> str:
    return " | ".join(explanation(binding)[cluster]["reasons"])


async def set_replicas(objects: ObjectStore, workload: dict[str, Any], replicas: int) -> None:
    resource = rt(objects, str(workload["apiVersion"]), str(workload["kind"]))
    current = await objects.get(
        resource, namespace=workload["metadata"]["namespace"], name=workload["metadata"]["name"]
    )
    scaled = copy.deepcopy(current)
    scaled["spec"]["replicas"] = replicas
    await objects.update(resource, scaled)


# --- the files themselves ---------------------------------------------------------------

EXAMPLES = example_files()


def test_every_example_is_covered() -> None:
    on_disk = {p.name for p in EXAMPLES}
    assert on_disk, "policies/examples/ holds no example"
    assert sorted(on_disk - set(COVERED)) == [], "example files that no test applies"
    assert sorted(set(COVERED) - on_disk) == [], "tests name example files that do not exist"


def _as_applied(doc: dict[str, Any]) -> dict[str, Any]:
    """The document as kubectl would send it: namespaced objects get the context namespace."""
    out = copy.deepcopy(doc)
    if out.get("kind") not in ("Namespace", "ClusterPropagationPolicy", "ClusterOverridePolicy"):
        out["metadata"].setdefault("namespace", "default")
    return out


@pytest.mark.parametrize("path", EXAMPLES, ids=[p.name for p in EXAMPLES])
def test_example_is_valid_and_its_policy_selects_its_workload(path: Path) -> None:
    docs = load_example(path.name)
    policies = [d for d in docs if d.get("kind") in POLICY_KINDS]
    assert policies, "an example holds at least one policy"
    for doc in policies:
        result = validate_policy(doc)
        assert result.ok, result.errors
        assert result.warnings == ()
        assert result.policy is not None
        assert result.policy.model_dump(by_alias=True, exclude_none=True) == doc
    workloads = [d for d in docs if interpreter_for(str(d.get("apiVersion")), str(d.get("kind"))) is not None]
    assert workloads, "an example holds a sample workload"
    propagation = []
    for doc in policies:
        parsed = validate_policy(_as_applied(doc)).policy
        if isinstance(parsed, PropagationPolicy | ClusterPropagationPolicy):
            propagation.append(parsed)
    for workload in workloads:
        match = select_policy(_as_applied(workload), propagation)
        assert match is not None, (
            f"no policy in {path.name} selects {workload['kind']} {workload['metadata']['name']}"
        )


DOCS = Path(__file__).resolve().parents[2] / "docs" / "policies.md"
DOC_EXAMPLE = re.compile(r"<!-- example: (?P<name>[\w.-]+) -->\s*```yaml\n(?P<yaml>.*?)```", re.DOTALL)


def test_docs_show_every_example_as_it_is() -> None:
    shown = {m["name"]: list(yaml.safe_load_all(m["yaml"])) for m in DOC_EXAMPLE.finditer(DOCS.read_text())}
    assert sorted(shown) == sorted(p.name for p in EXAMPLES), "docs/policies.md needs one section per example"
    for name, docs in shown.items():
        assert [d for d in docs if d is not None] == load_example(name), (
            f"docs/policies.md shows {name} differently"
        )


# --- one test per example ---------------------------------------------------------------


@covers("on-prem-first-cloud-burst.yaml")
async def test_on_prem_first_then_cloud_burst_and_shrink_most_expensive_first(
    objects: ObjectStore, manager: ControllerManager
) -> None:
    docs = await apply_example(objects, "on-prem-first-cloud-burst.yaml")
    workload = only(docs, "Deployment")

    binding = await scheduled_binding(objects, workload)
    assert placed(binding) == {ONPREM: 8, CLOUD_L4_SPOT: 6, CLOUD_H100: 2}
    assert condition(binding, "Scheduled")["status"] == "True"  # type: ignore[index]
    why = explanation(binding)
    assert (why[ONPREM]["tier"], why[CLOUD_L4_SPOT]["tier"], why[CLOUD_H100]["tier"]) == (0, 1, 1)
    assert why[CLOUD_L4_SPOT]["pricePerGpuHour"] < why[CLOUD_H100]["pricePerGpuHour"]
    await works_matching(objects, workload, {ONPREM: 8, CLOUD_L4_SPOT: 6, CLOUD_H100: 2}, deployment_replicas)

    await set_replicas(objects, workload, 10)
    await works_matching(objects, workload, {ONPREM: 8, CLOUD_L4_SPOT: 2}, deployment_replicas)


@covers("inference-split-by-available-gpus.yaml")
async def test_inference_split_by_available_gpus(objects: ObjectStore, manager: ControllerManager) -> None:
    docs = await apply_example(objects, "inference-split-by-available-gpus.yaml")
    workload = only(docs, "Deployment")

    binding = await scheduled_binding(objects, workload)
    # Available one-GPU replicas 8 (on-prem whole A100s) : 16 (H100s); 12 replicas -> 4 : 8.
    assert placed(binding) == {ONPREM: 4, CLOUD_H100: 8}
    assert not explanation(binding)[CLOUD_L4_SPOT]["chosen"]
    assert SPOT_TAINT in reasons_of(binding, CLOUD_L4_SPOT)
    await works_matching(objects, workload, {ONPREM: 4, CLOUD_H100: 8}, deployment_replicas)


@covers("training-gang-whole.yaml")
@pytest.mark.parametrize(
    ("workers", "expected"),
    [
        pytest.param(3, {CLOUD_H100: 4}, id="as-written-whole-in-cloud-h100"),
        pytest.param(7, {}, id="bigger-than-any-cluster-waits"),
    ],
)
async def test_training_gang_kept_whole_or_waiting(
    objects: ObjectStore, manager: ControllerManager, workers: int, expected: dict[str, int]
) -> None:
    docs = load_example("training-gang-whole.yaml")
    job = only(docs, "PyTorchJob")
    job["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"] = workers
    await apply_documents(objects, docs)

    binding = await scheduled_binding(objects, job)
    assert binding["spec"]["gang"] is True
    assert placed(binding) == expected
    scheduled = condition(binding, "Scheduled")
    assert scheduled is not None
    why = explanation(binding)
    if expected:
        assert scheduled["status"] == "True"
        # On-prem is cheaper but holds only 2 of the 4 pods at once: the gang is not split.
        assert not why[ONPREM]["chosen"]
        assert "gang does not fit: Worker needs 3 pod(s), 2 fit even alone" in reasons_of(binding, ONPREM)
        works = await works_matching(objects, job, expected, pytorchjob_pods)
        roles = manifest_of(works[CLOUD_H100])["spec"]["pytorchReplicaSpecs"]
        assert (roles["Master"]["replicas"], roles["Worker"]["replicas"]) == (1, 3)
        return
    assert (scheduled["status"], scheduled["reason"]) == ("False", "NeverFits")
    assert not any(entry["chosen"] for entry in why.values())
    assert "gang does not fit" in reasons_of(binding, CLOUD_H100)
    assert "gang does not fit" in reasons_of(binding, ONPREM)
    assert SPOT_TAINT in reasons_of(binding, CLOUD_L4_SPOT)

    async def failed_scheduling() -> list[dict[str, Any]] | None:
        events = (await objects.list(rt(objects, "v1", "Event"), namespace="ml")).items
        return [
            e
            for e in events
            if e["reason"] == "FailedScheduling" and e["involvedObject"]["name"] == "llm-finetune"
        ]

    await eventually(failed_scheduling, what="a FailedScheduling Event on the job")
    await settled(manager)
    assert await works_of(objects, job) == {}

    # cloud-h100's agent reports two more nodes: now all 8 pods fit there at once.
    await report_capacity(objects, CLOUD_H100, [node_shape(4, product=H100, gpus=8)], report_time=LATER)
    works = await works_matching(objects, job, {CLOUD_H100: 8}, pytorchjob_pods)
    roles = manifest_of(works[CLOUD_H100])["spec"]["pytorchReplicaSpecs"]
    assert (roles["Master"]["replicas"], roles["Worker"]["replicas"]) == (1, 7)
    assert condition(await scheduled_binding(objects, job), "Scheduled")["status"] == "True"  # type: ignore[index]


DATACENTER_ONLY = {
    "replicaSchedulingType": "Divided",
    "replicaDivisionPreference": "TieredOverflow",
    "tieredOverflow": {
        "tiers": [
            {
                "name": "datacenter",
                "clusterAffinity": {
                    "fieldSelector": {
                        "matchExpressions": [{"key": "provider", "operator": "In", "values": ["onprem"]}]
                    }
                },
            }
        ]
    },
}


@covers("training-gang-whole.yaml")
async def test_training_gang_stays_within_the_policy_tiers(
    objects: ObjectStore, manager: ControllerManager
) -> None:
    docs = load_example("training-gang-whole.yaml")
    only(docs, "PropagationPolicy")["spec"]["placement"]["replicaScheduling"] = DATACENTER_ONLY
    job = only(docs, "PyTorchJob")
    await apply_documents(objects, docs)

    binding = await scheduled_binding(objects, job)
    # Only onprem-a100 is in a listed tier, and it holds 2 of the 4 pods: the gang must wait.
    assert placed(binding) == {}
    assert condition(binding, "Scheduled")["status"] == "False"  # type: ignore[index]
    assert "tieredOverflow.tiers" in reasons_of(binding, CLOUD_H100)


@covers("training-gang-whole.yaml")
async def test_a_cpu_only_role_keeps_its_template_when_the_gang_takes_an_alternative_shape(
    objects: ObjectStore, manager: ControllerManager
) -> None:
    docs = load_example("training-gang-whole.yaml")
    only(docs, "PropagationPolicy")["spec"]["gpuShapes"] = {
        "alternatives": [
            {"name": "h100-pair", "resources": {"nvidia.com/gpu": 2}, "nodeSelector": {"nvidia.com/gpu.product": H100}}
        ]
    }
    job = only(docs, "PyTorchJob")
    roles = job["spec"]["pytorchReplicaSpecs"]
    # A CPU-only Master, and 6 Workers on MIG slices: more than onprem-a100's 4 slices hold.
    roles["Master"]["template"]["spec"]["containers"][0]["resources"] = {
        "requests": {"cpu": "4", "memory": "16Gi"},
        "limits": {"memory": "16Gi"},
    }
    roles["Worker"]["replicas"] = 6
    roles["Worker"]["template"]["spec"]["containers"][0]["resources"] = {
        "requests": {"cpu": "8", "memory": "64Gi"},
        "limits": {MIG_3G: 1, "memory": "64Gi"},
    }
    await apply_documents(objects, docs)

    binding = await scheduled_binding(objects, job)
    assert placed(binding) == {CLOUD_H100: 7}
    assert "h100-pair" in reasons_of(binding, CLOUD_H100)
    works = await works_matching(objects, job, {CLOUD_H100: 7}, pytorchjob_pods)
    cloud = manifest_of(works[CLOUD_H100])["spec"]["pytorchReplicaSpecs"]
    master, worker = cloud["Master"]["template"]["spec"], cloud["Worker"]["template"]["spec"]
    assert "nodeSelector" not in master
    assert master["containers"][0]["resources"] == {"requests": {"cpu": "4", "memory": "16Gi"}, "limits": {"memory": "16Gi"}}
    assert worker["nodeSelector"] == {"nvidia.com/gpu.product": H100}
    assert worker["containers"][0]["resources"]["limits"] == {"nvidia.com/gpu": "2", "memory": "64Gi"}


@covers("gpu-model-pinning.yaml")
async def test_gpu_model_pin_beats_tier_and_price(objects: ObjectStore, manager: ControllerManager) -> None:
    docs = await apply_example(objects, "gpu-model-pinning.yaml")
    workload = only(docs, "Deployment")

    binding = await scheduled_binding(objects, workload)
    assert placed(binding) == {CLOUD_H100: 4}
    for cluster in (ONPREM, CLOUD_L4_SPOT):
        assert not explanation(binding)[cluster]["chosen"]
        assert f"match nodeSelector nvidia.com/gpu.product={H100}" in reasons_of(binding, cluster)
    works = await works_matching(objects, workload, {CLOUD_H100: 4}, deployment_replicas)
    assert manifest_of(works[CLOUD_H100])["spec"]["template"]["spec"]["nodeSelector"] == {
        "nvidia.com/gpu.product": H100
    }


@covers("gpu-model-pinning.yaml")
async def test_re_pinning_the_gpu_model_moves_the_replicas(
    objects: ObjectStore, manager: ControllerManager
) -> None:
    docs = await apply_example(objects, "gpu-model-pinning.yaml")
    workload = only(docs, "Deployment")
    await works_matching(objects, workload, {CLOUD_H100: 4}, deployment_replicas)

    deployments = rt(objects, "apps/v1", "Deployment")
    current = await objects.get(deployments, namespace="ml", name="fp8-serving")
    current["spec"]["template"]["spec"]["nodeSelector"] = {"nvidia.com/gpu.product": A100}
    await objects.update(deployments, current)

    async def re_pinned() -> dict[str, Any] | None:
        binding = await scheduled_binding(objects, workload)
        pinned = binding["spec"]["replicaRequirements"]["nodeSelector"].get("nvidia.com/gpu.product") == A100
        return binding if pinned else None

    binding = await eventually(re_pinned, what="the binding to carry the A100 pin")
    # 2 GPUs per replica, 4 free A100s on each of onprem-a100's two whole-GPU nodes: all 4 fit there.
    assert placed(binding) == {ONPREM: 4}
    assert f"match nodeSelector nvidia.com/gpu.product={A100}" in reasons_of(binding, CLOUD_H100)


@covers("mig-shape-alternatives.yaml")
async def test_mig_slices_on_prem_whole_gpu_alternative_in_the_cloud(
    objects: ObjectStore, manager: ControllerManager
) -> None:
    docs = await apply_example(objects, "mig-shape-alternatives.yaml")
    workload = only(docs, "Deployment")

    binding = await scheduled_binding(objects, workload)
    onprem_slices = FLEET[ONPREM]["shapes"][1]["free"][MIG_3G]
    assert placed(binding) == {ONPREM: onprem_slices, CLOUD_H100: 6 - onprem_slices}
    assert "h100-whole" in reasons_of(binding, CLOUD_H100) and "(alternative)" in reasons_of(
        binding, CLOUD_H100
    )
    works = await works_matching(objects, workload, {ONPREM: 4, CLOUD_H100: 2}, deployment_replicas)

    onprem, cloud = manifest_of(works[ONPREM]), manifest_of(works[CLOUD_H100])
    assert gpu_limits(onprem) == {MIG_3G: "1"}
    assert "nodeSelector" not in onprem["spec"]["template"]["spec"]
    assert gpu_limits(cloud) == {"nvidia.com/gpu": "1"}
    [container] = containers(cloud)
    assert container["resources"]["requests"]["nvidia.com/gpu"] == "1"
    assert container["resources"]["limits"]["memory"] == "32Gi"  # only the GPU request is rewritten
    assert cloud["spec"]["template"]["spec"]["nodeSelector"] == {"nvidia.com/gpu.product": H100}
    hub = await get_or_none(objects, "apps/v1", "Deployment", "ml", "whisper-asr")
    assert hub is not None and gpu_limits(hub) == {MIG_3G: "1"}  # the hub's template is untouched


@covers("mig-shape-alternatives.yaml")
async def test_removing_the_shape_alternatives_takes_the_cloud_replicas_back(
    objects: ObjectStore, manager: ControllerManager
) -> None:
    docs = await apply_example(objects, "mig-shape-alternatives.yaml")
    workload = only(docs, "Deployment")
    await works_matching(objects, workload, {ONPREM: 4, CLOUD_H100: 2}, deployment_replicas)

    policy_rt = rt(objects, "policy.gpufed.io/v1alpha1", "PropagationPolicy")
    policy = await objects.get(policy_rt, namespace="ml", name="asr-shapes")
    del policy["spec"]["gpuShapes"]
    await objects.update(policy_rt, policy)
    await settled(manager, settle=0.3)

    # Only the MIG request is acceptable now, and only onprem-a100 has 3g.40gb slices.
    async def re_decided() -> dict[str, Any] | None:
        binding = await scheduled_binding(objects, workload)
        return binding if placed(binding) == {ONPREM: 4} else None

    binding = await eventually(re_decided, what="cloud-h100 dropped from the binding", seconds=2.0)
    assert condition(binding, "Scheduled")["reason"] == "Unschedulable"  # type: ignore[index]


@covers("per-cloud-image-override.yaml")
async def test_per_cloud_image_override(objects: ObjectStore, manager: ControllerManager) -> None:
    docs = await apply_example(objects, "per-cloud-image-override.yaml")
    workload = only(docs, "Deployment")
    original = images(workload)

    binding = await scheduled_binding(objects, workload)
    assert placed(binding) == {ONPREM: 2, CLOUD_H100: 2, CLOUD_L4_SPOT: 2}

    async def overridden() -> dict[str, list[str]] | None:
        works = await works_of(objects, workload)
        got = {name: images(manifest_of(w)) for name, w in works.items()}
        return (
            got if len(got) == 3 and got[CLOUD_H100] != original and got[CLOUD_L4_SPOT] != original else None
        )

    assert await eventually(overridden, what="three Works, the cloud ones with their registries") == {
        ONPREM: original,
        CLOUD_H100: ["123456789012.dkr.ecr.us-east-1.amazonaws.com/ml/embedder:1.4.2"],
        CLOUD_L4_SPOT: ["us-central1-docker.pkg.dev/acme-ml/mirror/ml/embedder:1.4.2"],
    }
    hub = await get_or_none(objects, "apps/v1", "Deployment", "ml", "embedder")
    assert hub is not None and images(hub) == original


@covers("karmada-policy-as-is.yaml")
async def test_karmada_policy_applies_as_is(objects: ObjectStore, manager: ControllerManager) -> None:
    docs = await apply_example(objects, "karmada-policy-as-is.yaml")
    workload = only(docs, "Deployment")
    workload["metadata"]["namespace"] = "default"  # where kubectl's context put it

    stored = await get_or_none(
        objects, "policy.karmada.io/v1alpha1", "PropagationPolicy", "default", "nginx-propagation"
    )
    # Stored as Karmada stores it: its CRD's defaults and its webhook's selector namespace.
    sent = only(docs, "PropagationPolicy")["spec"]
    assert stored is not None and stored["spec"] == {
        **sent,
        "resourceSelectors": [{**sent["resourceSelectors"][0], "namespace": "default"}],
        "conflictResolution": "Abort",
        "preemption": "Never",
        "priority": 0,
        "schedulerName": "default-scheduler",
    }
    binding = await scheduled_binding(objects, workload)
    assert binding["spec"]["policy"] == {
        "kind": "PropagationPolicy",
        "name": "nginx-propagation",
        "namespace": "default",
    }
    assert placed(binding) == {ONPREM: 1, CLOUD_H100: 2}
    assert not explanation(binding)[CLOUD_L4_SPOT]["chosen"]
    assert "clusterNames" in reasons_of(binding, CLOUD_L4_SPOT)

    works = await works_matching(objects, workload, {ONPREM: 1, CLOUD_H100: 2}, deployment_replicas)

    async def overridden() -> dict[str, list[str]] | None:
        works = await works_of(objects, workload)
        got = {name: images(manifest_of(w)) for name, w in works.items()}
        return got if got.get(CLOUD_H100) != ["nginx:1.25"] else None

    got = await eventually(overridden, what="the registry override in cloud-h100's Work")
    assert got == {ONPREM: ["nginx:1.25"], CLOUD_H100: ["fictional.registry.us/nginx:1.25"]}
    assert set(works) == {ONPREM, CLOUD_H100}


@covers("inference-with-config.yaml")
async def test_inference_config_follows_the_deployment_to_its_clusters(
    objects: ObjectStore, manager: ControllerManager
) -> None:
    docs = await apply_example(objects, "inference-with-config.yaml")
    workload = only(docs, "Deployment")
    config, token = only(docs, "ConfigMap"), only(docs, "Secret")

    binding = await scheduled_binding(objects, workload)
    assert placed(binding) == {ONPREM: 8, CLOUD_H100: 4}
    await works_matching(objects, workload, {ONPREM: 8, CLOUD_H100: 4}, deployment_replicas)

    async def dependency_works(obj: dict[str, Any], expected: set[str]) -> dict[str, dict[str, Any]]:
        async def probe() -> dict[str, dict[str, Any]] | None:
            works = await works_of(objects, obj)
            return works if set(works) == expected else None

        return await eventually(probe, what=f"{obj['kind']} {obj['metadata']['name']} in exactly {sorted(expected)}")

    config_works = await dependency_works(config, {ONPREM, CLOUD_H100})
    assert manifest_of(config_works[CLOUD_H100])["data"] == config["data"]
    await dependency_works(token, {ONPREM, CLOUD_H100})

    await set_replicas(objects, workload, 8)
    await works_matching(objects, workload, {ONPREM: 8}, deployment_replicas)
    await dependency_works(config, {ONPREM})
    await dependency_works(token, {ONPREM})
