"""Karmada's FederatedResourceQuota served by the hub (``policy.karmada.io/v1alpha1``): Karmada's
sample is stored with its quantities as kube stores them; its validating webhook's refusals come
back as kube answers a webhook's denial, in Karmada's words; the CRD's schema (required fields) is
a 422; discovery lists the kind with its status subresource and kubectl applies and lists it."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml
from aiohttp.test_utils import TestClient

from controlplane.apis.quantity import CRD_PATTERN
from controlplane.apiserver.kinds.core import core_resources
from controlplane.apiserver.kinds.gpufed import gpufed_resources
from controlplane.apiserver.kinds.workloads import workload_resources
from controlplane.apiserver.resources import Registry

from .karmada_crd_fields import DATA
from .test_real_clients import kubeconfig, kubectl, needs_kubectl, server_url  # noqa: F401 (fixtures)

COLLECTION = "/apis/policy.karmada.io/v1alpha1/namespaces/default/federatedresourcequotas"
WEBHOOK = 'admission webhook "federatedresourcequota.karmada.io" denied the request: '
#: Karmada's sample (docs: "Deploy a simple FederatedResourceQuota"), in the default namespace.
SAMPLE: dict[str, Any] = {
    "apiVersion": "policy.karmada.io/v1alpha1",
    "kind": "FederatedResourceQuota",
    "metadata": {"name": "test", "namespace": "default"},
    "spec": {
        "overall": {"cpu": 100},
        "staticAssignments": [
            {"clusterName": "member1", "hard": {"cpu": 20}},
            {"clusterName": "member2", "hard": {"cpu": 50}},
            {"clusterName": "member3", "hard": {"cpu": 30}},
        ],
    },
}


@pytest.fixture
def api_registry() -> Registry:
    return Registry(core_resources(), workload_resources(), gpufed_resources())


def _with(**spec: Any) -> dict[str, Any]:
    obj = copy.deepcopy(SAMPLE)
    obj["spec"].update(spec)
    return obj


async def test_karmadas_sample_is_stored_with_kubes_quantities(api: TestClient[Any, Any]) -> None:
    created = await api.post(COLLECTION, json=SAMPLE)
    assert created.status == 201, await created.text()
    stored = await (await api.get(f"{COLLECTION}/test")).json()
    assert stored["spec"] == {
        "overall": {"cpu": "100"},
        "staticAssignments": [
            {"clusterName": "member1", "hard": {"cpu": "20"}},
            {"clusterName": "member2", "hard": {"cpu": "50"}},
            {"clusterName": "member3", "hard": {"cpu": "30"}},
        ],
    }
    status = {"overall": {"cpu": "100"}, "overallUsed": {"cpu": "1500m"},
              "aggregatedStatus": [{"clusterName": "member1", "hard": {"cpu": "20"}, "used": {"cpu": "1.5"}}]}
    written = await api.put(f"{COLLECTION}/test/status", json={**stored, "status": status})
    assert written.status == 200, await written.text()
    assert (await written.json())["status"]["aggregatedStatus"][0]["used"] == {"cpu": "1500m"}


@pytest.mark.parametrize(
    ("spec", "name", "message"),
    [
        ({"overall": {"cpu": 40}}, "test",
         'spec.overall[cpu]: Invalid value: "40": overall is less than assignments'),
        ({"overall": {"cpu": 100, "memory": "-1Gi"}}, "test",
         '[spec.overall[memory]: Invalid value: "-1Gi": must be greater than or equal to 0, '
         'spec.overall[memory]: Invalid value: "-1Gi": overall is less than assignments]'),
        ({"overall": {"cpu": 100, "pods": "1.5"}}, "test",
         'spec.overall[pods]: Invalid value: "1500m": must be an integer'),
        ({"overall": {"cpu": 100, "gpu": 1}}, "test",
         '[spec.overall[gpu]: Invalid value: "gpu": must be a standard resource type or fully qualified, '
         'spec.overall[gpu]: Invalid value: "gpu": must be a standard resource for quota]'),
        ({"overall": {"cpu": 100, "storage": "1Gi"}}, "test",
         'spec.overall[storage]: Invalid value: "storage": must be a standard resource for quota'),
        ({"staticAssignments": [{"clusterName": "member1", "hard": {"cpu": 20, "memory": "1Gi"}}]}, "test",
         'spec.staticAssignments[0].hard[memory]: Invalid value: "memory": assignment resourceName is not exist in overall'),
        ({"staticAssignments": [{"clusterName": "Member_1", "hard": {"cpu": 20}}]}, "test",
         'spec.staticAssignments[0].clusterName: Invalid value: "Member_1": a lowercase RFC 1123 label must consist of '
         "lower case alphanumeric characters or '-', and must start and end with an alphanumeric character "
         "(e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')"),
        ({"staticAssignments": [{"clusterName": "c" * 49, "hard": {"cpu": 20}}]}, "test",
         f'spec.staticAssignments[0].clusterName: Invalid value: "{"c" * 49}": must be no more than 48 characters'),
        ({"staticAssignments": [{"clusterName": "member1", "hard": {"cpu": 20}},
                                {"clusterName": "member1", "hard": {"cpu": 30}}]}, "test",
         'spec.staticAssignments[1].clusterName: Duplicate value: "member1"'),
        ({}, "q" * 64, f'metadata.name: Invalid value: "{"q" * 64}": must be no more than 63 characters'),
    ],
    ids=["overall-below-assignments", "negative", "not-integer", "not-qualified", "not-for-quota",
         "not-in-overall", "cluster-name", "cluster-name-length", "cluster-twice", "name-length"],
)
async def test_karmadas_webhook_refuses(api: TestClient[Any, Any], spec: dict[str, Any], name: str, message: str) -> None:
    obj = _with(**spec)
    obj["metadata"]["name"] = name
    refused = await api.post(COLLECTION, json=obj)
    assert refused.status == 403  # controller-runtime's admission.Denied
    assert (await refused.json())["reason"] == "Forbidden"
    assert (await refused.json())["message"] == WEBHOOK + message
    assert (await api.get(f"{COLLECTION}/{name}")).status == 404


@pytest.mark.parametrize("validation", ["Warn", "Ignore"])
async def test_an_unknown_field_does_not_get_past_the_webhook(api: TestClient[Any, Any], validation: str) -> None:
    """kube's decoding drops an unknown field before the webhook, which still judges the rest."""
    obj = _with(overall={"cpu": -1})
    obj["spec"]["overal"] = {"cpu": 1}
    refused = await api.post(f"{COLLECTION}?fieldValidation={validation}", json=obj)
    assert refused.status == 403, await refused.text()
    assert (await refused.json())["message"] == WEBHOOK + (
        '[spec.overall[cpu]: Invalid value: "-1": must be greater than or equal to 0, '
        'spec.overall[cpu]: Invalid value: "-1": overall is less than assignments]'
    )
    assert (await api.get(f"{COLLECTION}/test")).status == 404


async def test_an_update_is_refused_too(api: TestClient[Any, Any]) -> None:
    stored = await (await api.post(COLLECTION, json=SAMPLE)).json()
    stored["spec"]["overall"] = {"cpu": "99"}
    refused = await api.put(f"{COLLECTION}/test", json=stored)
    assert refused.status == 403
    assert (await refused.json())["message"] == WEBHOOK + 'spec.overall[cpu]: Invalid value: "99": overall is less than assignments'


@pytest.mark.parametrize(
    ("spec", "field"),
    [({"overall": None}, "spec.overall"),
     ({"staticAssignments": [{"hard": {"cpu": 1}}]}, "spec.staticAssignments[0].clusterName"),
     ({"overall": {"cpu": "lots"}}, "spec.overall.cpu")],
)
async def test_the_schema_is_a_422(api: TestClient[Any, Any], spec: dict[str, Any], field: str) -> None:
    obj = _with(**spec)
    if obj["spec"].get("overall") is None:
        del obj["spec"]["overall"]
    refused = await api.post(COLLECTION, json=obj)
    assert refused.status == 422, await refused.text()
    causes = (await refused.json())["details"]["causes"]
    assert field in [c.get("field") for c in causes], causes


async def test_a_string_that_is_no_quantity_is_refused_by_the_crds_pattern(api: TestClient[Any, Any]) -> None:
    """Karmada's CRD types ``spec.overall`` values as controller-gen types a ``resource.Quantity``
    (int-or-string with a pattern): kube refuses a string that is no quantity by the pattern, once."""
    refused = await api.post(COLLECTION, json=_with(overall={"cpu": "abc"}, staticAssignments=[]))
    assert refused.status == 422, await refused.text()
    assert (await refused.json())["message"] == (
        'FederatedResourceQuota.policy.karmada.io "test" is invalid: spec.overall.cpu: Invalid value: "abc": '
        f"spec.overall.cpu in body should match '{CRD_PATTERN}'"
    )


def test_the_quantity_pattern_is_the_crds() -> None:
    crd_line = next(line for line in DATA.read_text().splitlines() if line.startswith("spec.overall{} "))
    assert crd_line.split("pattern=", 1)[1] == CRD_PATTERN


async def test_discovery_lists_the_kind(api: TestClient[Any, Any]) -> None:
    listed = await (await api.get("/apis/policy.karmada.io/v1alpha1")).json()
    by_name = {r["name"]: r for r in listed["resources"]}
    quota = by_name["federatedresourcequotas"]
    assert (quota["kind"], quota["namespaced"], quota["singularName"]) == (
        "FederatedResourceQuota", True, "federatedresourcequota"
    )
    assert quota["categories"] == ["karmada-io"]
    assert "federatedresourcequotas/status" in by_name
    assert "federatedresourcequotas" not in {
        r["name"] for r in (await (await api.get("/apis/policy.gpufed.io/v1alpha1")).json())["resources"]
    }


@needs_kubectl
async def test_kubectl_applies_and_lists_karmadas_sample(kubeconfig: Path) -> None:  # noqa: F811
    code, out, err = await kubectl(kubeconfig, "apply", "-f", "-", stdin=yaml.safe_dump(SAMPLE))
    assert code == 0, err
    assert "federatedresourcequota.policy.karmada.io/test created" in out
    code, out, err = await kubectl(kubeconfig, "get", "federatedresourcequotas", "-n", "default")
    assert code == 0, err
    assert out.split("\n")[0].split() == ["NAME", "AGE"]
    assert out.split("\n")[1].split()[0] == "test"
    bad = copy.deepcopy(SAMPLE)
    bad["metadata"]["name"] = "over"
    bad["spec"]["overall"] = {"cpu": 10}
    code, out, err = await kubectl(kubeconfig, "apply", "-f", "-", stdin=yaml.safe_dump(bad))
    assert code != 0, out
    assert WEBHOOK + 'spec.overall[cpu]: Invalid value: "10": overall is less than assignments' in err, err


async def test_openapi_describes_the_kind(api: TestClient[Any, Any]) -> None:
    doc = await (await api.get("/openapi/v3/apis/policy.karmada.io/v1alpha1")).json()
    schemas = doc["components"]["schemas"]
    assert "spec" in schemas["io.karmada.policy.v1alpha1.FederatedResourceQuota"]["required"]
    spec = schemas["io.karmada.policy.v1alpha1.FederatedResourceQuotaSpec"]
    assert spec["required"] == ["overall"]
    assert set(spec["properties"]) == {"overall", "staticAssignments"}
    paths = doc["paths"]
    assert "/apis/policy.karmada.io/v1alpha1/namespaces/{namespace}/federatedresourcequotas/{name}/status" in paths
