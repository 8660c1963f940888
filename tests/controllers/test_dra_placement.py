"""A Deployment whose pods get GPUs through a DRA ResourceClaimTemplate, on the in-process hub: the
GPUs its claims ask for (and the model its CEL selector pins) decide where it can run, and with
``propagateDeps`` its template goes to exactly those clusters."""

from __future__ import annotations

from typing import Any

from controlplane.apiserver.objects import ObjectStore
from controlplane.controllers.manager import ControllerManager

from .fleet import A100, deployment, eventually, node_shape, put_cluster, settled
from .test_dependencies import NS, binding_of, create, manifest, policy, works_in

H100_LABEL = "NVIDIA-H100-80GB-HBM3"
H100_SELECTOR = "device.attributes['gpu.nvidia.com'].productName == 'NVIDIA H100 80GB HBM3'"


def claim_template(name: str, *, count: int, selector: str | None = None) -> dict[str, Any]:
    exactly: dict[str, Any] = {"deviceClassName": "gpu.nvidia.com", "count": count}
    if selector:
        exactly["selectors"] = [{"cel": {"expression": selector}}]
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
            "metadata": {"name": name, "namespace": NS},
            "spec": {"spec": {"devices": {"requests": [{"name": "gpu", "exactly": exactly}]}}}}


def claiming(name: str, template: str) -> dict[str, Any]:
    """A one-replica Deployment whose pod asks for GPUs only through the claim template ``template``."""
    workload = deployment(name, replicas=1)
    pod = workload["spec"]["template"]["spec"]
    pod["resourceClaims"] = [{"name": "gpu", "resourceClaimTemplateName": template}]
    pod["containers"][0]["resources"] = {"requests": {"cpu": "1"}, "claims": [{"name": "gpu"}]}
    return workload


async def fleet(objects: ObjectStore, manager: ControllerManager) -> None:
    await put_cluster(objects, "small", node_shape(4, gpus=2, product=A100))
    await put_cluster(objects, "big", node_shape(2, gpus=8, product=A100))
    await put_cluster(objects, "hopper", node_shape(1, gpus=8, product=H100_LABEL))
    await settled(manager)


async def test_a_claim_template_deployment_lands_where_its_gpus_fit_and_its_template_goes_with_it(
    objects: ObjectStore, manager: ControllerManager
) -> None:
    await fleet(objects, manager)
    await create(objects, policy("llm", clusters=["small", "big"]))
    await create(objects, claiming("llm", "four-gpus"))  # before its template, as kubectl may apply them
    early = await eventually(lambda: binding_of(objects, "llm-deployment"), what="the binding")
    assert "nvidia.com/gpu" not in early["spec"]["replicaRequirements"]["resourceRequest"]  # nothing to count yet
    await create(objects, claim_template("four-gpus", count=4))  # counted once it arrives

    async def counted() -> dict[str, Any] | None:
        bound = await binding_of(objects, "llm-deployment")
        asked = bound["spec"]["replicaRequirements"]["resourceRequest"] if bound is not None else {}
        return bound if asked.get("nvidia.com/gpu") == "4" else None

    # Placed before the template came, it may sit anywhere: once counted it is decided again.
    await eventually(counted, what="the binding asking the template's 4 GPUs")
    await works_in(objects, "llm-deployment", {"big"})  # no node of "small" has 4 GPUs
    works = await works_in(objects, "four-gpus-resourceclaimtemplate", {"big"})
    sent = manifest(works["big"])
    assert sent["kind"] == "ResourceClaimTemplate" and sent["spec"]["spec"]["devices"]["requests"][0]["exactly"]["count"] == 4
    deployment_sent = manifest((await works_in(objects, "llm-deployment", {"big"}))["big"])
    container = deployment_sent["spec"]["template"]["spec"]["containers"][0]
    assert "nvidia.com/gpu" not in str(container["resources"])  # the member gets the pod as written


async def test_a_product_selector_pins_the_model(objects: ObjectStore, manager: ControllerManager) -> None:
    await fleet(objects, manager)
    await create(objects, claim_template("one-h100", count=1, selector=H100_SELECTOR))
    await create(objects, policy("llm", clusters=["small", "big", "hopper"]))
    await create(objects, claiming("llm", "one-h100"))

    await works_in(objects, "llm-deployment", {"hopper"})
    bound = await binding_of(objects, "llm-deployment")
    assert bound is not None and bound["spec"]["replicaRequirements"]["nodeSelector"] == {
        "nvidia.com/gpu.product": H100_LABEL
    }
    await works_in(objects, "one-h100-resourceclaimtemplate", {"hopper"})


async def test_a_claim_every_replica_shares_counts_once_per_cluster(objects: ObjectStore, manager: ControllerManager) -> None:
    """Three replicas name one ResourceClaim of 6 GPUs (not a template): one set of devices for all
    of them in a cluster, allocated on one node. Charged per replica (18 GPUs, 6 per node) no
    cluster holds the three; held once, a node of "big" holds the claim and the three replicas
    beside it. The binding asks no GPU per replica and says what the replicas share."""
    await fleet(objects, manager)
    claim = claim_template("pool", count=6)
    claim.update(kind="ResourceClaim", spec=claim["spec"]["spec"])
    await create(objects, claim)
    workload = claiming("llm", "pool")
    workload["spec"]["replicas"] = 3
    workload["spec"]["template"]["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimName": "pool"}]
    await create(objects, policy("llm", clusters=["small", "big"]))
    await create(objects, workload)

    await works_in(objects, "llm-deployment", {"big"})  # no node of "small" has 6 GPUs
    bound = await binding_of(objects, "llm-deployment")
    assert bound is not None
    requirements = bound["spec"]["replicaRequirements"]
    assert "nvidia.com/gpu" not in requirements["resourceRequest"]
    assert requirements["sharedResourceRequest"] == {"nvidia.com/gpu": "6"}
    assert [(c["name"], c.get("replicas")) for c in bound["spec"]["clusters"]] == [("big", 3)]


def device_class(name: str, *expressions: str) -> dict[str, Any]:
    return {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": name},
            "spec": {"selectors": [{"cel": {"expression": e}} for e in expressions]}}


NVIDIA_GPU = "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'gpu'"


async def test_a_device_class_of_the_hubs_own_pins_what_its_selectors_pin(
    objects: ObjectStore, manager: ControllerManager
) -> None:
    """A claim template asks for 1 device of a DeviceClass the hub holds whose selectors pin NVIDIA's
    whole GPUs of the H100 model: it counts as an H100 GPU, so it lands on "hopper". A class whose
    selectors gpufed does not read counts nothing and the workload gets a Warning saying which."""
    await fleet(objects, manager)
    await create(objects, device_class("h100.example.com", NVIDIA_GPU, H100_SELECTOR))
    template = claim_template("one-h100", count=1)
    template["spec"]["spec"]["devices"]["requests"][0]["exactly"]["deviceClassName"] = "h100.example.com"
    await create(objects, template)
    await create(objects, policy("llm", clusters=["small", "big", "hopper"], selects="llm"))
    await create(objects, claiming("llm", "one-h100"))

    await works_in(objects, "llm-deployment", {"hopper"})
    bound = await binding_of(objects, "llm-deployment")
    assert bound is not None
    requirements = bound["spec"]["replicaRequirements"]
    assert requirements["nodeSelector"] == {"nvidia.com/gpu.product": H100_LABEL}
    assert requirements["resourceRequest"]["nvidia.com/gpu"] == "1"

    await create(objects, device_class("either.example.com", f"{NVIDIA_GPU} || device.driver == 'x'"))
    unread = claim_template("either", count=2)
    unread["spec"]["spec"]["devices"]["requests"][0]["exactly"]["deviceClassName"] = "either.example.com"
    await create(objects, unread)
    await create(objects, policy("other", clusters=["small", "big"], selects="other"))
    await create(objects, claiming("other", "either"))

    async def warned() -> str | None:
        events = (await objects.list(objects.registry.require("v1", "Event"), namespace=NS)).items
        return next((e["message"] for e in events if e["reason"] == "DeviceClassNotRead"
                     and e["involvedObject"]["name"] == "other"), None)

    message = await eventually(warned, what="the Warning about the class")
    assert message.startswith("DeviceClass either.example.com: selector ") and "not counted in placement" in message
    other = await binding_of(objects, "other-deployment")
    assert other is not None and "nvidia.com/gpu" not in other["spec"]["replicaRequirements"]["resourceRequest"]


def _shared_claim(name: str, count: int) -> dict[str, Any]:
    claim = claim_template(name, count=count)
    claim.update(kind="ResourceClaim", spec=claim["spec"]["spec"])
    return claim


async def test_a_role_whose_pods_share_a_claim_carries_it(objects: ObjectStore, manager: ControllerManager) -> None:
    """A JobSet's "workers" name a ResourceClaim of 4 GPUs, its "driver" does not: the binding's
    component of the workers carries the claim as what they share (the one of the driver nothing),
    as its top-level requirements do, so a cluster is judged for the role that holds it."""
    await fleet(objects, manager)
    await create(objects, _shared_claim("pool", 4))
    pod = {"resourceClaims": [{"name": "pool", "resourceClaimName": "pool"}], "restartPolicy": "Never",
           "containers": [{"name": "w", "image": "train:1", "resources": {"requests": {"cpu": "1"}, "claims": [{"name": "pool"}]}}]}
    plain = {"restartPolicy": "Never", "containers": [{"name": "d", "image": "train:1", "resources": {"requests": {"cpu": "1"}}}]}
    jobset = {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet", "metadata": {"name": "train", "namespace": NS},
              "spec": {"replicatedJobs": [
                  {"name": "driver", "replicas": 1, "template": {"spec": {"template": {"spec": plain}}}},
                  {"name": "workers", "replicas": 2, "template": {"spec": {"template": {"spec": pod}}}}]}}
    selecting = policy("train", clusters=["small", "big"])
    selecting["spec"]["resourceSelectors"] = [{"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet"}]
    await create(objects, selecting)
    await create(objects, jobset)

    async def counted() -> dict[str, Any] | None:
        bound = await binding_of(objects, "train-jobset")
        return bound if bound is not None and bound["spec"].get("components") else None

    bound = await eventually(counted, what="the binding with its roles")
    roles = {c["name"]: c["replicaRequirements"] for c in bound["spec"]["components"]}
    assert roles["workers"]["sharedResourceRequest"] == {"nvidia.com/gpu": "4"}
    assert "sharedResourceRequest" not in roles["driver"]
    assert bound["spec"]["replicaRequirements"]["sharedResourceRequest"] == {"nvidia.com/gpu": "4"}
