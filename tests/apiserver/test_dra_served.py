"""resource.k8s.io/v1 (Dynamic Resource Allocation) on the hub, as kube-apiserver serves it: DeviceClass,
ResourceClaim (with status), ResourceClaimTemplate and ResourceSlice, over HTTP on a real etcd and
with the real kubectl (NVIDIA's DRA examples applied unchanged).

Before, a ResourceClaimTemplate could not be applied (``no matches for kind "ResourceClaimTemplate"
in version "resource.k8s.io/v1"``), so a workload asking for GPUs through DRA could not be federated."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from aiohttp.test_utils import TestClient

from controlplane.apiserver.auth.rbac.policy import cluster_roles

from .test_kube_validation import hub, hub_kubeconfig  # noqa: F401 (fixtures)
from .test_real_clients import kubectl, needs_kubectl

Client = TestClient[Any, Any]
EXAMPLES = Path(__file__).parents[2] / "examples" / "dra"
TABLE = "application/json;as=Table;v=v1;g=meta.k8s.io"
GROUP = "/apis/resource.k8s.io/v1"
CLASSES = f"{GROUP}/deviceclasses"
CLAIMS = f"{GROUP}/namespaces/default/resourceclaims"
TEMPLATES = f"{GROUP}/namespaces/default/resourceclaimtemplates"
SLICES = f"{GROUP}/resourceslices"


def claim(name: str, *requests: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": name},
            "spec": {"devices": {"requests": list(requests)}}}


async def causes(response: Any) -> list[tuple[str, str]]:
    assert response.status == 422, await response.text()
    body = await response.json()
    assert body["kind"] == "Status" and body["reason"] == "Invalid"
    return [(c["field"], c["message"]) for c in body["details"]["causes"]]


async def test_discovery_lists_the_group_with_kubes_scopes(hub: Client) -> None:  # noqa: F811
    listed = await (await hub.get(GROUP)).json()
    scopes = {r["name"]: r["namespaced"] for r in listed["resources"]}
    assert scopes == {
        "deviceclasses": False, "resourceclaims": True, "resourceclaims/status": True,
        "resourceclaimtemplates": True, "resourceslices": False,
    }


async def test_a_claim_is_defaulted_to_one_device_exact_count(hub: Client) -> None:  # noqa: F811
    created = await hub.post(CLAIMS, json=claim("one", {"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com"}}))
    assert created.status == 201, await created.text()
    exactly = (await created.json())["spec"]["devices"]["requests"][0]["exactly"]
    assert exactly == {"deviceClassName": "gpu.nvidia.com", "allocationMode": "ExactCount", "count": 1}
    table = await (await hub.get(CLAIMS, headers={"Accept": TABLE})).json()
    assert [c["name"] for c in table["columnDefinitions"]] == ["Name", "State", "Age"]
    assert table["rows"][0]["cells"][:2] == ["one", "pending"]


async def test_a_template_is_defaulted_under_its_claim_spec(hub: Client) -> None:  # noqa: F811
    template = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate", "metadata": {"name": "t"},
                "spec": {"spec": {"devices": {"requests": [{"name": "gpu", "firstAvailable": [
                    {"name": "big", "deviceClassName": "gpu.nvidia.com"},
                    {"name": "all", "deviceClassName": "mig.nvidia.com", "allocationMode": "All"},
                ]}]}}}}
    created = await hub.post(TEMPLATES, json=template)
    assert created.status == 201, await created.text()
    subs = (await created.json())["spec"]["spec"]["devices"]["requests"][0]["firstAvailable"]
    assert subs[0] == {"name": "big", "deviceClassName": "gpu.nvidia.com", "allocationMode": "ExactCount", "count": 1}
    assert subs[1] == {"name": "all", "deviceClassName": "mig.nvidia.com", "allocationMode": "All"}
    changed = await hub.patch(f"{TEMPLATES}/t", json={"spec": {"spec": {"devices": {"requests": []}}}},
                              headers={"Content-Type": "application/merge-patch+json"})
    assert [field for field, _ in await causes(changed)] == ["spec"]
    assert "field is immutable" in (await changed.json())["message"]


@pytest.mark.parametrize(("request_", "expected"), [
    ({"name": "gpu"}, ("spec.devices.requests[0]", "Required value: exactly one of `exactly` or `firstAvailable` is required")),
    ({"name": "gpu", "exactly": {"deviceClassName": "c"}, "firstAvailable": [{"name": "a", "deviceClassName": "c"}]},
     ("spec.devices.requests[0]",
      "Invalid value: null: exactly one of `exactly` or `firstAvailable` is required, but multiple fields are set")),
    ({"name": "gpu", "exactly": {}}, ("spec.devices.requests[0].exactly.deviceClassName", "Required value")),
    ({"name": "gpu", "exactly": {"deviceClassName": "c", "allocationMode": "Some"}},
     ("spec.devices.requests[0].exactly.allocationMode",
      'Unsupported value: "Some": supported values: "All", "ExactCount"')),
    ({"name": "gpu", "exactly": {"deviceClassName": "c", "count": -1}},
     ("spec.devices.requests[0].exactly.count", "Invalid value: -1: must be greater than zero")),
    ({"name": "gpu", "exactly": {"deviceClassName": "c", "allocationMode": "All", "count": 2}},
     ("spec.devices.requests[0].exactly.count", "Invalid value: 2: must not be specified when allocationMode is 'All'")),
    ({"name": "GPU_0", "exactly": {"deviceClassName": "c"}},
     ("spec.devices.requests[0].name", 'Invalid value: "GPU_0": a lowercase RFC 1123 label must consist of lower case '
      "alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or "
      "'123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')")),
    ({"name": "gpu", "exactly": {"deviceClassName": "c", "selectors": [{"cel": {"expression": "x" * 10241}}]}},
     ("spec.devices.requests[0].exactly.selectors[0].cel.expression", "Too long: may not be more than 10240 bytes")),
    ({"name": "gpu", "exactly": {"deviceClassName": "c", "selectors": [{}]}},
     ("spec.devices.requests[0].exactly.selectors[0].cel", "Required value")),
])
async def test_kubes_messages_for_a_bad_request(hub: Client, request_: dict[str, Any], expected: tuple[str, str]) -> None:  # noqa: F811
    assert expected in await causes(await hub.post(CLAIMS, json=claim("bad", request_)))


async def test_request_names_are_unique(hub: Client) -> None:  # noqa: F811
    twice = {"name": "gpu", "exactly": {"deviceClassName": "c"}}
    assert ("spec.devices.requests[1].name", 'Duplicate value: "gpu"') in await causes(
        await hub.post(CLAIMS, json=claim("bad", twice, twice)))


async def test_a_claims_status_is_written_through_its_subresource_only(hub: Client) -> None:  # noqa: F811
    assert (await hub.post(CLAIMS, json=claim("c", {"name": "gpu", "exactly": {"deviceClassName": "c"}}))).status == 201
    allocation = {"allocation": {"devices": {"results": [
        {"request": "gpu", "driver": "gpu.nvidia.com", "pool": "node-1", "device": "gpu-0"}]}}}
    ignored = await hub.patch(f"{CLAIMS}/c", json={"status": allocation},
                              headers={"Content-Type": "application/merge-patch+json"})
    assert ignored.status == 200 and "allocation" not in (await ignored.json()).get("status", {})
    written = await hub.patch(f"{CLAIMS}/c/status", json={"status": allocation},
                              headers={"Content-Type": "application/merge-patch+json"})
    assert written.status == 200, await written.text()
    table = await (await hub.get(CLAIMS, headers={"Accept": TABLE})).json()
    assert table["rows"][0]["cells"][1] == "allocated"


async def test_device_classes_and_slices_are_cluster_scoped(hub: Client) -> None:  # noqa: F811
    for document in yaml.safe_load_all((EXAMPLES / "deviceclasses.yaml").read_text()):
        created = await hub.post(CLASSES, json=document)
        assert created.status == 201, await created.text()
    names = [item["metadata"]["name"] for item in (await (await hub.get(CLASSES)).json())["items"]]
    assert names == ["gpu.nvidia.com", "mig.nvidia.com"]
    bad = {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": "x"},
           "spec": {"selectors": [{"cel": {"expression": ""}}]}}
    assert ("spec.selectors[0].cel.expression", "Required value") in await causes(await hub.post(CLASSES, json=bad))
    no_pool = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": "s"},
               "spec": {"driver": "gpu.nvidia.com", "nodeName": "n1", "pool": {"name": "n1"}}}
    assert ("spec.pool.resourceSliceCount", "Invalid value: 0: must be greater than zero") in await causes(
        await hub.post(SLICES, json=no_pool))


def test_edit_and_view_aggregate_claims_as_kubes_bootstrap_roles() -> None:
    roles = {role["metadata"]["name"]: role["rules"] for role in cluster_roles()}
    edit = [r for r in roles["system:aggregate-to-edit"] if r["apiGroups"] == ["resource.k8s.io"]]
    view = [r for r in roles["system:aggregate-to-view"] if r["apiGroups"] == ["resource.k8s.io"]]
    assert [r["resources"] for r in edit] == [["resourceclaims", "resourceclaimtemplates"]]
    assert "create" in edit[0]["verbs"]
    assert [r["resources"] for r in view] == [["resourceclaims", "resourceclaims/status", "resourceclaimtemplates"]]
    assert sorted(view[0]["verbs"]) == ["get", "list", "watch"]


@needs_kubectl
async def test_kubectl_applies_nvidias_examples_unchanged_and_explains_claims(hub_kubeconfig: Path) -> None:  # noqa: F811
    for example in ("deviceclasses.yaml", "gpu-test-count.yaml", "deployment-h100.yaml"):
        code, out, err = await kubectl(hub_kubeconfig, "apply", "-f", str(EXAMPLES / example))
        assert code == 0, err
    code, out, err = await kubectl(hub_kubeconfig, "get", "resourceclaimtemplate", "double-gpu", "-n", "gpu-test1",
                                   "-o", "json")
    assert code == 0, err
    exactly = json.loads(out)["spec"]["spec"]["devices"]["requests"][0]["exactly"]
    assert exactly == {"deviceClassName": "gpu.nvidia.com", "allocationMode": "ExactCount", "count": 2}
    code, out, err = await kubectl(hub_kubeconfig, "explain", "resourceclaim.spec.devices.requests.exactly.count")
    assert code == 0, err
    assert "GROUP:      resource.k8s.io" in out and "count" in out
    code, out, err = await kubectl(hub_kubeconfig, "api-resources", "--api-group=resource.k8s.io", "-o", "name")
    assert code == 0, err
    assert out.split() == ["deviceclasses.resource.k8s.io", "resourceclaims.resource.k8s.io",
                           "resourceclaimtemplates.resource.k8s.io", "resourceslices.resource.k8s.io"]
