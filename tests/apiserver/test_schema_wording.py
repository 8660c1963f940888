"""A modelled kind's schema refusals read as kube-apiserver words a CRD's (kube-openapi's
structural-schema validator wrapped in ``field.TypeInvalid``/``field.Invalid``): one table per
kind of refusal over a Karmada, a Kueue and a gpufed kind, and one Status end to end."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel

from controlplane.apis.apps_karmada_v1alpha1 import WorkloadRebalancer
from controlplane.apis.cluster_v1alpha1 import Cluster
from controlplane.apis.kueue_provisioning import ProvisioningRequestConfig
from controlplane.apiserver import errors
from controlplane.apiserver.objects import ObjectStore
from controlplane.apiserver.validation import check_model
from controlplane.hub import hub_registry
from controlplane.storage import MemoryStore

_DNS_SUBDOMAIN = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"


def rebalancer(**spec: Any) -> dict[str, Any]:
    workloads = [{"apiVersion": "apps/v1", "kind": "Deployment", "name": "web", "namespace": "default"}]
    return {"apiVersion": "apps.karmada.io/v1alpha1", "kind": "WorkloadRebalancer",
            "metadata": {"name": "r"}, "spec": {"workloads": workloads, **spec}}


def provisioning(**spec: Any) -> dict[str, Any]:
    return {"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "ProvisioningRequestConfig",
            "metadata": {"name": "p"}, "spec": {"provisioningClassName": "check-capacity.autoscaling.x-k8s.io", **spec}}


def cluster(**spec: Any) -> dict[str, Any]:
    return {"apiVersion": "cluster.gpufed.io/v1alpha1", "kind": "Cluster",
            "metadata": {"name": "c"}, "spec": {"provider": "aws", **spec}}


def causes(model: type[BaseModel], obj: dict[str, Any]) -> list[dict[str, str]]:
    return [cause.to_dict() for cause in check_model(obj, model).causes]


TYPE = "FieldValueTypeInvalid"
INVALID = "FieldValueInvalid"


@pytest.mark.parametrize(
    ("model", "obj", "field", "message"),
    [
        (WorkloadRebalancer, rebalancer(ttlSecondsAfterFinished="soon"), "spec.ttlSecondsAfterFinished",
         'Invalid value: "string": spec.ttlSecondsAfterFinished in body must be of type integer: "string"'),
        (WorkloadRebalancer, rebalancer(ttlSecondsAfterFinished=1.5), "spec.ttlSecondsAfterFinished",
         'Invalid value: "number": spec.ttlSecondsAfterFinished in body must be of type integer: "number"'),
        (WorkloadRebalancer, rebalancer(workloads=[{"apiVersion": "v1", "kind": 3, "name": "x"}]),
         "spec.workloads[0].kind",
         'Invalid value: "integer": spec.workloads[0].kind in body must be of type string: "integer"'),
        (WorkloadRebalancer, rebalancer(workloads={"kind": "Deployment"}), "spec.workloads",
         'Invalid value: "object": spec.workloads in body must be of type array: "object"'),
        (ProvisioningRequestConfig, provisioning(parameters=["a"]), "spec.parameters",
         'Invalid value: "array": spec.parameters in body must be of type object: "array"'),
        (ProvisioningRequestConfig, provisioning(retryStrategy="often"), "spec.retryStrategy",
         'Invalid value: "string": spec.retryStrategy in body must be of type object: "string"'),
        (ProvisioningRequestConfig, provisioning(provisioningClassName=True), "spec.provisioningClassName",
         'Invalid value: "boolean": spec.provisioningClassName in body must be of type string: "boolean"'),
        (Cluster, cluster(tier=[1]), "spec.tier",
         'Invalid value: "array": spec.tier in body must be of type integer: "array"'),
        (Cluster, cluster(provider=None), "spec.provider",
         'Invalid value: "null": spec.provider in body must be of type string: "null"'),
        (Cluster, cluster(unschedulable="maybe"), "spec.unschedulable",
         'Invalid value: "string": spec.unschedulable in body must be of type boolean: "string"'),
    ],
)
def test_type_mismatch(model: type[BaseModel], obj: dict[str, Any], field: str, message: str) -> None:
    assert causes(model, obj) == [{"reason": TYPE, "message": message, "field": field}]


@pytest.mark.parametrize(
    ("model", "obj", "field", "message"),
    [
        (ProvisioningRequestConfig, provisioning(provisioningClassName="Check_Capacity"), "spec.provisioningClassName",
         f"Invalid value: \"Check_Capacity\": spec.provisioningClassName in body should match '{_DNS_SUBDOMAIN}'"),
        (ProvisioningRequestConfig, provisioning(podSetUpdates={"nodeSelector": [
            {"key": "-bad", "valueFromProvisioningClassDetail": "x"}]}), "spec.podSetUpdates.nodeSelector[0].key",
         None),
    ],
)
def test_pattern(model: type[BaseModel], obj: dict[str, Any], field: str, message: str | None) -> None:
    (found,) = causes(model, obj)
    assert (found["reason"], found["field"]) == (INVALID, field)
    if message is None:
        assert found["message"].startswith(f'Invalid value: "-bad": {field} in body should match \'^')
    else:
        assert found["message"] == message


@pytest.mark.parametrize(
    ("model", "obj", "field", "message"),
    [
        (ProvisioningRequestConfig, provisioning(retryStrategy={"backoffLimitCount": 2**31}),
         "spec.retryStrategy.backoffLimitCount",
         "Invalid value: 2147483648: spec.retryStrategy.backoffLimitCount in body should be less than or equal to 2147483647"),
        (ProvisioningRequestConfig, provisioning(retryStrategy={"backoffMaxSeconds": -(2**31) - 1}),
         "spec.retryStrategy.backoffMaxSeconds",
         "Invalid value: -2147483649: spec.retryStrategy.backoffMaxSeconds in body should be greater than or equal to -2147483648"),
        (Cluster, cluster(tier=-2), "spec.tier",
         "Invalid value: -2: spec.tier in body should be greater than or equal to 0"),
    ],
)
def test_bounds(model: type[BaseModel], obj: dict[str, Any], field: str, message: str) -> None:
    assert causes(model, obj) == [{"reason": INVALID, "message": message, "field": field}]


@pytest.mark.parametrize(
    ("error", "message"),
    [
        ({"type": "greater_than", "ctx": {"gt": 0}, "input": 0}, "Invalid value: 0: f in body should be greater than 0"),
        ({"type": "less_than", "ctx": {"lt": 1.5}, "input": 2.0}, "Invalid value: 2: f in body should be less than 1.5"),
        ({"type": "multiple_of", "ctx": {"multiple_of": 4}, "input": 6},
         "Invalid value: 6: f in body should be a multiple of 4"),
        ({"type": "datetime_parsing", "ctx": {"error": "x"}, "input": "yesterday"},
         'Invalid value: "yesterday": f in body must be of type date-time: "yesterday"'),
    ],
)
def test_keywords_no_modelled_kind_uses_yet(error: dict[str, Any], message: str) -> None:
    """Exclusive bounds, ``multipleOf`` and ``format: date-time`` as kube words them, for a model
    that declares them (none of the hub's kinds does today)."""
    from controlplane.apiserver.schemawording import schema_cause

    cause = schema_cause(error, "f")
    assert cause is not None
    reason = TYPE if error["type"] == "datetime_parsing" else INVALID
    assert cause.to_dict() == {"reason": reason, "message": message, "field": "f"}


async def test_status_of_a_type_mismatch() -> None:
    registry = hub_registry()
    async with MemoryStore() as memory:
        objects = ObjectStore(memory, registry)
        await objects.bootstrap()
        rt = registry.require("cluster.gpufed.io/v1alpha1", "Cluster")
        with pytest.raises(errors.Invalid) as caught:
            await objects.create(rt, cluster(tier="first"))
    status = caught.value.to_status()
    assert status["message"] == (
        'Cluster.cluster.gpufed.io "c" is invalid: spec.tier: Invalid value: "string": '
        'spec.tier in body must be of type integer: "string"'
    )
    assert status["details"]["causes"] == [{
        "reason": TYPE, "field": "spec.tier",
        "message": 'Invalid value: "string": spec.tier in body must be of type integer: "string"',
    }]
