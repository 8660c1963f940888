"""What a pod's DRA claims ask of NVIDIA GPUs (controlplane.apis.dra): the count the hub places by and
the simulated member schedules by, the model and MIG profile a CEL selector pins, what an allocated
claim holds, and the claim templates and claims a pod template depends on."""

from __future__ import annotations

from typing import Any

import pytest

from controlplane.apis.dra import (
    ALL_DEVICES_ESTIMATE,
    ClaimedGpus,
    DeviceSelection,
    allocated_devices,
    claim_spec_gpus,
    class_selection,
    pod_claimed_gpus,
    pod_claimed_resources,
    product_of_selector,
    profile_of_selector,
    unread_classes,
    with_claimed_gpus,
)
from controlplane.interpreter import interpreter_for
from controlplane.interpreter.dependencies import Dependency, pod_template_dependencies
from controlplane.interpreter.shape import malformed

H100 = "device.attributes['gpu.nvidia.com'].productName == 'NVIDIA H100 80GB HBM3'"
MIG_3G = 'device.attributes["gpu.nvidia.com"].profile == "3g.40gb"'


def spec(*requests: dict[str, Any]) -> dict[str, Any]:
    return {"devices": {"requests": list(requests)}}


def exactly(name: str = "gpu", **fields: Any) -> dict[str, Any]:
    return {"name": name, "exactly": {"deviceClassName": "gpu.nvidia.com", **fields}}


@pytest.mark.parametrize(("claim", "expected"), [
    (spec(exactly()), ClaimedGpus(1)),
    (spec(exactly(count=2)), ClaimedGpus(2)),
    (spec(exactly(allocationMode="ExactCount", count=4)), ClaimedGpus(4)),
    (spec(exactly(allocationMode="All")), ClaimedGpus(ALL_DEVICES_ESTIMATE)),
    (spec(exactly("a", count=2), exactly("b", count=3)), ClaimedGpus(5)),
    (spec({"name": "mig", "exactly": {"deviceClassName": "mig.nvidia.com", "count": 2}}), ClaimedGpus(0)),
    (spec({"name": "mig", "exactly": {"deviceClassName": "mig.nvidia.com", "count": 2,
                                      "selectors": [{"cel": {"expression": f"{MIG_3G} && {H100}"}}]}}),
     ClaimedGpus(0, "NVIDIA H100 80GB HBM3", {"3g.40gb": 2})),
    (spec({"name": "nic", "exactly": {"deviceClassName": "dranet.net", "count": 2}}), ClaimedGpus(0)),
    (spec({"name": "gpu", "firstAvailable": [
        {"name": "nic", "deviceClassName": "dranet.net"},
        {"name": "two", "deviceClassName": "gpu.nvidia.com", "count": 2},
    ]}), ClaimedGpus(2)),
    (spec(exactly(selectors=[{"cel": {"expression": H100}}])), ClaimedGpus(1, "NVIDIA H100 80GB HBM3")),
    (None, ClaimedGpus(0)),
], ids=["default-one", "count", "exact-count", "all", "two-requests", "mig-profile-open", "mig-profile",
        "other-class", "first-available", "product", "absent"])
def test_a_claim_counts_its_whole_gpus(claim: dict[str, Any] | None, expected: ClaimedGpus) -> None:
    assert claim_spec_gpus(claim) == expected


@pytest.mark.parametrize(("expression", "product"), [
    (H100, "NVIDIA H100 80GB HBM3"),
    ('"NVIDIA A100-SXM4-80GB" == device.attributes["gpu.nvidia.com"].productName', "NVIDIA A100-SXM4-80GB"),
    (f"device.driver == 'gpu.nvidia.com' && {H100}", "NVIDIA H100 80GB HBM3"),
    (f"{H100} || device.attributes['gpu.nvidia.com'].productName == 'NVIDIA A100'", None),
    ("device.attributes['gpu.nvidia.com'].productName in ['NVIDIA H100 80GB HBM3']", None),
    ("device.attributes['gpu.nvidia.com'].productName.startsWith('NVIDIA H100')", None),
    ("device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('40Gi')) >= 0", None),
])
def test_only_the_simple_equality_pins_the_model(expression: str, product: str | None) -> None:
    assert product_of_selector(expression) == product


def deployment(*claims: dict[str, Any], limits: dict[str, str] | None = None) -> dict[str, Any]:
    container: dict[str, Any] = {"name": "main", "image": "vllm:1", "resources": {"claims": [{"name": "gpu"}]}}
    if limits:
        container["resources"]["limits"] = limits
    return {
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "llm", "namespace": "default"},
        "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "llm"}}, "template": {
            "metadata": {"labels": {"app": "llm"}},
            "spec": {"resourceClaims": list(claims), "containers": [container]},
        }},
    }


TEMPLATES = {
    ("ResourceClaimTemplate", "one-h100"): spec(exactly(selectors=[{"cel": {"expression": H100}}])),
    ("ResourceClaimTemplate", "four"): spec(exactly(count=4)),
    ("ResourceClaim", "shared"): spec(exactly(count=2)),
}


def lookup(kind: str, name: str) -> dict[str, Any] | None:
    return TEMPLATES.get((kind, name))


def test_the_interpreter_counts_claimed_gpus_as_it_counts_device_plugin_ones() -> None:
    workload = deployment({"name": "gpu", "resourceClaimTemplateName": "one-h100"},
                          {"name": "more", "resourceClaimTemplateName": "four"},
                          {"name": "shared", "resourceClaimName": "shared"}, limits={"nvidia.com/gpu": "1"})
    interpreter = interpreter_for("apps/v1", "Deployment")
    assert interpreter is not None
    requirements = interpreter.replica_requirements(with_claimed_gpus(workload, lookup))
    assert requirements.gpu_resources == {"nvidia.com/gpu": 8}  # 1 + 4 + 2 claimed, 1 by the device plugin
    assert requirements.node_selector_map == {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}
    assert workload["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"] == {"nvidia.com/gpu": "1"}


def test_a_claim_not_known_yet_counts_nothing_and_a_pod_without_claims_is_unchanged() -> None:
    assert pod_claimed_gpus({"resourceClaims": [{"name": "x", "resourceClaimTemplateName": "later"}]}, lookup) == ClaimedGpus(0)
    plain = deployment(limits={"nvidia.com/gpu": "2"})
    plain["spec"]["template"]["spec"].pop("resourceClaims")
    assert with_claimed_gpus(plain, lookup) == plain


def test_a_pod_template_depends_on_its_claim_templates_and_claims() -> None:
    template = deployment({"name": "gpu", "resourceClaimTemplateName": "one-h100"},
                          {"name": "shared", "resourceClaimName": "shared"})["spec"]["template"]
    assert sorted(pod_template_dependencies(template)) == [
        Dependency("ResourceClaim", "shared", "resource.k8s.io/v1"),
        Dependency("ResourceClaimTemplate", "one-h100", "resource.k8s.io/v1"),
    ]


def test_a_claim_template_reads_as_a_well_formed_object() -> None:
    template = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate", "metadata": {"name": "t"},
                "spec": {"spec": TEMPLATES[("ResourceClaimTemplate", "four")]}}
    assert malformed(template) is None


def test_a_mig_profile_selector_reads_as_the_product_selector_does() -> None:
    assert profile_of_selector(MIG_3G) == "3g.40gb"
    assert profile_of_selector(f"device.driver == 'gpu.nvidia.com' && {MIG_3G}") == "3g.40gb"
    assert profile_of_selector(f"{MIG_3G} || device.attributes['gpu.nvidia.com'].profile == '1g.10gb'") is None
    assert profile_of_selector(H100) is None


def allocated(claim_spec: dict[str, Any], *results: dict[str, Any]) -> dict[str, Any]:
    return {"spec": claim_spec, "status": {"allocation": {"devices": {"results": list(results)}}}}


def result(device: str, request: str = "gpu", driver: str = "gpu.nvidia.com", **extra: Any) -> dict[str, Any]:
    return {"request": request, "driver": driver, "pool": "node-1", "device": device, **extra}


@pytest.mark.parametrize(("claim", "expected"), [
    (allocated(spec(exactly(allocationMode="All")), result("gpu-0"), result("gpu-1"), result("gpu-2")), {"nvidia.com/gpu": 3}),
    (allocated(spec(exactly()), result("gpu-vfio-0")), {"nvidia.com/gpu": 1}),
    (allocated(spec({"name": "mig", "exactly": {"deviceClassName": "mig.nvidia.com", "count": 3}}),
               result("gpu-0-mig-1g10gb-19-0", "mig"), result("gpu-0-mig-1g10gb-19-1", "mig"),
               result("gpu-1-mig-1g10gb-me-20-6", "mig")),
     {"nvidia.com/mig-1g.10gb": 2, "nvidia.com/mig-1g.10gb+me": 1}),
    (allocated(spec(exactly()), result("nic-0", driver="dra.net"), result("gpu-3", adminAccess=True)), {}),
    (allocated(spec({"name": "gpu", "firstAvailable": [
        {"name": "big", "deviceClassName": "gpu.nvidia.com", "count": 2},
        {"name": "slice", "deviceClassName": "mig.nvidia.com", "selectors": [{"cel": {"expression": MIG_3G}}]},
    ]}), result("gpu-7", "gpu/big")), {"nvidia.com/gpu": 1}),
    (allocated(spec(exactly()), result("h100-a", "gpu")), {"nvidia.com/gpu": 1}),
], ids=["all-on-a-3-gpu-node", "passed-through", "mig-by-name", "other-driver-and-admin-access", "first-available",
        "unknown-name-by-class"])
def test_an_allocated_claim_counts_the_devices_it_holds(claim: dict[str, Any], expected: dict[str, int]) -> None:
    held = allocated_devices(claim)
    assert held is not None and held.resources() == expected


def test_a_claim_not_allocated_holds_nothing_yet() -> None:
    assert allocated_devices({"spec": spec(exactly(count=2))}) is None


def test_a_mig_claim_reads_as_its_profiles_device_plugin_request() -> None:
    templates = {("ResourceClaimTemplate", "slice"): spec({"name": "mig", "exactly": {
        "deviceClassName": "mig.nvidia.com", "selectors": [{"cel": {"expression": MIG_3G}}]}})}
    workload = deployment({"name": "mig", "resourceClaimTemplateName": "slice"})
    interpreter = interpreter_for("apps/v1", "Deployment")
    assert interpreter is not None
    requirements = interpreter.replica_requirements(with_claimed_gpus(workload, lambda k, n: templates.get((k, n))))
    assert requirements.gpu_resources == {"nvidia.com/mig-3g.40gb": 1}


def test_a_pod_on_a_member_counts_its_claims_allocation_else_their_requests() -> None:
    member = {
        ("ResourceClaimTemplate", "two"): {"spec": {"spec": spec(exactly(count=2))}},
        ("ResourceClaim", "p-gpu-ab12c"): allocated(spec(exactly(count=2)), result("gpu-4"), result("gpu-5")),
        ("ResourceClaim", "shared"): {"spec": spec(exactly(count=1))},
    }
    pod = {"metadata": {"namespace": "ml"}, "spec": {"resourceClaims": [
        {"name": "gpu", "resourceClaimTemplateName": "two"},
        {"name": "none", "resourceClaimTemplateName": "two"},
        {"name": "later", "resourceClaimTemplateName": "two"},
        {"name": "shared", "resourceClaimName": "shared"},
    ]}, "status": {"resourceClaimStatuses": [{"name": "gpu", "resourceClaimName": "p-gpu-ab12c"}, {"name": "none"}]}}
    seen: list[tuple[str, str]] = []

    def lookup(kind: str, namespace: str, name: str) -> dict[str, Any] | None:
        seen.append((kind, namespace))
        return member.get((kind, name))

    # 2 allocated, "none" needs no claim, "later" counts its template's 2 before its claim is made, 1 shared.
    assert pod_claimed_resources(pod, lookup) == {"nvidia.com/gpu": 5}
    # Claims and templates in the pod's namespace; the class of a request not allocated, cluster-wide.
    assert set(seen) == {("ResourceClaimTemplate", "ml"), ("ResourceClaim", "ml"), ("DeviceClass", "")}


def device_class(*expressions: str) -> dict[str, Any]:
    """A DeviceClass's spec with one CEL selector per expression."""
    return {"selectors": [{"cel": {"expression": e}} for e in expressions]}


NVIDIA_GPU = "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'gpu'"
NVIDIA_MIG = "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'mig'"


@pytest.mark.parametrize(("selectors", "expected"), [
    ((NVIDIA_GPU,), DeviceSelection("gpu.nvidia.com", "gpu")),
    ((NVIDIA_MIG, MIG_3G), DeviceSelection("gpu.nvidia.com", "mig", profile="3g.40gb")),
    ((f'"gpu" == device.attributes["gpu.nvidia.com"].type && {H100}',),
     DeviceSelection("gpu.nvidia.com", "gpu", "NVIDIA H100 80GB HBM3")),
    (("device.driver == 'dra.net' && device.attributes['dra.net'].rdma == true",), DeviceSelection("dra.net")),
    (("device.driver == 'gpu.nvidia.com'",),
     DeviceSelection(unread="selectors do not pin device.attributes['gpu.nvidia.com'].type (gpu or mig)")),
    ((f"{NVIDIA_GPU} || {NVIDIA_MIG}",), DeviceSelection(unread=f"selector {NVIDIA_GPU + ' || ' + NVIDIA_MIG!r} "
                                                                 "is not a conjunction gpufed reads")),
    ((NVIDIA_GPU, "device.attributes['gpu.nvidia.com'].productName.startsWith('NVIDIA H')"),
     DeviceSelection(unread="selector term \"device.attributes['gpu.nvidia.com'].productName.startsWith('NVIDIA H')\" "
                            "is not one gpufed reads")),
    ((NVIDIA_GPU, NVIDIA_MIG), DeviceSelection(unread="selectors ask type to be both 'gpu' and 'mig'")),
    ((), DeviceSelection(unread="selectors pin neither device.driver nor device.attributes['gpu.nvidia.com'].type")),
], ids=["nvidia-gpu", "nvidia-mig-profile", "model", "another-driver", "type-open", "either", "other-function",
        "contradiction", "every-device"])
def test_a_device_class_is_read_for_what_its_selectors_pin_or_said_unread(
    selectors: tuple[str, ...], expected: DeviceSelection
) -> None:
    assert class_selection(device_class(*selectors)) == expected


def test_a_request_counts_what_its_device_class_selects() -> None:
    """A class of the hub's own pins the model; a class the hub holds whose selectors it cannot read
    counts nothing and says so; NVIDIA's names are read as NVIDIA publishes them when the hub holds no
    class of that name, and a class the hub neither holds nor knows counts nothing."""
    classes = {
        "h100.example.com": device_class(NVIDIA_GPU, H100),
        "fast.example.com": device_class(f"{NVIDIA_GPU} || {NVIDIA_MIG}"),
        "gpu.nvidia.com": device_class(NVIDIA_MIG, MIG_3G),  # the hub's own class of that name wins
    }

    def asking(device_class_name: str, count: int = 2) -> dict[str, Any]:
        return spec({"name": "r", "exactly": {"deviceClassName": device_class_name, "count": count}})

    assert claim_spec_gpus(asking("h100.example.com"), classes.get) == ClaimedGpus(2, "NVIDIA H100 80GB HBM3")
    unread = claim_spec_gpus(asking("fast.example.com"), classes.get)
    assert unread.resources() == {} and unread.unread[0].startswith("DeviceClass fast.example.com: selector ")
    assert claim_spec_gpus(asking("gpu.nvidia.com"), classes.get) == ClaimedGpus(0, None, {"3g.40gb": 2})
    assert claim_spec_gpus(asking("gpu.nvidia.com")) == ClaimedGpus(2)
    assert claim_spec_gpus(asking("mig.nvidia.com"), classes.get) == ClaimedGpus(0)  # profile open
    assert claim_spec_gpus(asking("unknown.example.com"), classes.get) == ClaimedGpus(0)
    pod = {"resourceClaims": [{"name": "a", "resourceClaimTemplateName": "t"}], "containers": [{"name": "c"}]}
    assert unread_classes({"spec": pod}, lambda kind, name: asking("fast.example.com"), classes.get) == unread.unread
