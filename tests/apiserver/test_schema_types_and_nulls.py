"""A custom resource's values are of their schema's JSON types, and its nulls are pruned, as
apiextensions-apiserver decodes and validates it: ``"3"`` for an integer, ``"true"`` for a boolean,
``1`` for a string are refused (422, ``must be of type integer: "string"``) in gpufed's, Karmada's
and Kueue's kinds alike, while an int-or-string takes both, an integer written ``3.0`` is the
integer ``3``, and a field set to ``null`` that its schema does not declare ``nullable`` is dropped
before the object is defaulted and validated (defaulted if it has a default, missing if it was
required). Over HTTP, on the hub's registry; the stored object is read back each time."""

from __future__ import annotations

import asyncio
import copy
from typing import Any

import pytest
from aiohttp.test_utils import TestClient
from pydantic import BaseModel, ConfigDict

from controlplane.apiserver.nullpruning import prune_model_nulls

Client = TestClient[Any, Any]

REBALANCERS = "/apis/apps.karmada.io/v1alpha1/workloadrebalancers"
POLICIES = "/apis/policy.gpufed.io/v1alpha1/namespaces/default/propagationpolicies"
KARMADA_POLICIES = "/apis/policy.karmada.io/v1alpha1/namespaces/default/propagationpolicies"
CLUSTER_QUEUES = "/apis/kueue.x-k8s.io/v1beta1/clusterqueues"
PROVISIONING = "/apis/kueue.x-k8s.io/v1beta1/provisioningrequestconfigs"
CLUSTERS = "/apis/cluster.gpufed.io/v1alpha1/clusters"
CRDS = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
TRAINERS = "/apis/ml.example.com/v1/namespaces/default/trainers"
TOPOLOGIES = "/apis/kueue.x-k8s.io/v1beta1/topologies"
MULTIKUEUE_CONFIGS = "/apis/kueue.x-k8s.io/v1beta2/multikueueconfigs"


def rebalancer(**spec: Any) -> dict[str, Any]:
    workloads = [{"apiVersion": "apps/v1", "kind": "Deployment", "name": "web", "namespace": "default"}]
    return {"apiVersion": "apps.karmada.io/v1alpha1", "kind": "WorkloadRebalancer",
            "metadata": {"name": "r"}, "spec": {"workloads": workloads, **spec}}


def policy(api_version: str = "policy.gpufed.io/v1alpha1", **spec: Any) -> dict[str, Any]:
    return {"apiVersion": api_version, "kind": "PropagationPolicy", "metadata": {"name": "p", "namespace": "default"},
            "spec": {"resourceSelectors": [{"apiVersion": "apps/v1", "kind": "Deployment"}], **spec}}


def weighted(weight: Any) -> dict[str, Any]:
    """A policy placement whose second static weight is ``weight``."""
    weights = [{"targetCluster": {"clusterNames": ["a"]}, "weight": 1},
               {"targetCluster": {"clusterNames": ["b"]}, "weight": weight}]
    return {"replicaScheduling": {"replicaSchedulingType": "Divided", "replicaDivisionPreference": "Weighted",
                                  "weightPreference": {"staticWeightList": weights}}}


def cluster_queue(nominal: Any, **spec: Any) -> dict[str, Any]:
    flavors = [{"name": "default", "resources": [{"name": "cpu", "nominalQuota": nominal}]}]
    return {"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "ClusterQueue", "metadata": {"name": "cq"},
            "spec": {"resourceGroups": [{"coveredResources": ["cpu"], "flavors": flavors}], **spec}}


def provisioning(**spec: Any) -> dict[str, Any]:
    return {"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "ProvisioningRequestConfig", "metadata": {"name": "p"},
            "spec": {"provisioningClassName": "check-capacity.autoscaling.x-k8s.io", **spec}}


def kueue_object(kind: str, spec: Any, *, version: str = "v1beta1") -> dict[str, Any]:
    return {"apiVersion": f"kueue.x-k8s.io/{version}", "kind": kind, "metadata": {"name": "k"}, "spec": spec}


def cluster(**spec: Any) -> dict[str, Any]:
    return {"apiVersion": "cluster.gpufed.io/v1alpha1", "kind": "Cluster", "metadata": {"name": "c"},
            "spec": {"provider": "aws", **spec}}


def type_invalid(field: str, actual: str, wanted: str) -> dict[str, str]:
    message = f'Invalid value: "{actual}": {field} in body must be of type {wanted}: "{actual}"'
    return {"reason": "FieldValueTypeInvalid", "message": message, "field": field}


@pytest.mark.parametrize(
    ("collection", "obj", "cause"),
    [
        (REBALANCERS, rebalancer(ttlSecondsAfterFinished="3"),
         type_invalid("spec.ttlSecondsAfterFinished", "string", "integer")),
        (REBALANCERS, rebalancer(ttlSecondsAfterFinished=True),
         type_invalid("spec.ttlSecondsAfterFinished", "boolean", "integer")),
        (POLICIES, policy(propagateDeps="true"), type_invalid("spec.propagateDeps", "string", "boolean")),
        (POLICIES, policy(propagateDeps=1), type_invalid("spec.propagateDeps", "integer", "boolean")),
        (KARMADA_POLICIES, policy("policy.karmada.io/v1alpha1", placement=weighted("2")),
         type_invalid("spec.placement.replicaScheduling.weightPreference.staticWeightList[1].weight", "string", "integer")),
        (PROVISIONING, provisioning(retryStrategy={"backoffLimitCount": "3"}),
         type_invalid("spec.retryStrategy.backoffLimitCount", "string", "integer")),
        (CLUSTER_QUEUES, cluster_queue(True),
         type_invalid("spec.resourceGroups[0].flavors[0].resources[0].nominalQuota", "boolean", "integer,string")),
        (CLUSTERS, cluster(tier="1"), type_invalid("spec.tier", "string", "integer")),
        (CLUSTERS, cluster(region=1), type_invalid("spec.region", "integer", "string")),
        # The kinds' own rules (Kueue's CEL and webhook) wait for a spec of the schema's type.
        (TOPOLOGIES, kueue_object("Topology", ["x"]), type_invalid("spec", "array", "object")),
        (MULTIKUEUE_CONFIGS, kueue_object("MultiKueueConfig", "x", version="v1beta2"),
         type_invalid("spec", "string", "object")),
        # As kube's hasBlockingErr: too many items, or a required field missing, leaves the CEL rules
        # ("must be unique", the hostname level last) unchecked.
        (TOPOLOGIES, kueue_object("Topology", {"levels": [{"nodeLabel": "rack"}] * 17}),
         {"reason": "FieldValueTooMany", "message": "Too many: 17: must have at most 16 items", "field": "spec.levels"}),
        (TOPOLOGIES, kueue_object("Topology", {"levels": [{"nodeLabel": "kubernetes.io/hostname"}, {}]}),
         {"reason": "FieldValueRequired", "message": "Required value", "field": "spec.levels[1].nodeLabel"}),
    ],
    ids=["karmada-int-string", "karmada-int-bool", "gpufed-bool-string", "gpufed-bool-int", "karmada-array-item",
         "kueue-nested-int", "kueue-int-or-string", "gpufed-int-string", "gpufed-string-int", "kueue-rules-spec-list",
         "kueue-rules-spec-string", "kueue-rules-after-too-many", "kueue-rules-after-required"],
)
async def test_a_value_of_another_json_type_is_refused_as_kube_refuses_it(
    hub: Client, collection: str, obj: dict[str, Any], cause: dict[str, str]
) -> None:
    await refused_with(hub, collection, obj, cause)


async def test_an_update_to_a_spec_of_another_type_is_refused_before_the_kinds_rules(hub: Client) -> None:
    created = await hub.post(TOPOLOGIES, json=kueue_object("Topology", {"levels": [{"nodeLabel": "kubernetes.io/hostname"}]}))
    assert created.status == 201, await created.text()
    updated = await hub.put(f"{TOPOLOGIES}/k", json={**await created.json(), "spec": True})
    status = await updated.json()
    assert updated.status == 422, status
    assert status["details"]["causes"] == [type_invalid("spec", "boolean", "object")]


async def refused_with(
    hub: Client, collection: str, obj: dict[str, Any], cause: dict[str, str], *also: dict[str, str]
) -> None:
    """A create of ``obj`` is kube's 422 Invalid with ``cause`` (and the causes ``also``) alone, and
    nothing is stored."""
    response = await hub.post(collection, json=obj)
    status = await response.json()
    assert response.status == 422, status
    assert status["reason"] == "Invalid"
    assert status["details"]["causes"] == [cause, *also]
    assert (await hub.get(f"{collection}/{obj['metadata']['name']}")).status == 404


@pytest.mark.parametrize("nominal", ["3", 3, "500m"])
async def test_an_int_or_string_takes_either_and_is_stored_as_sent(hub: Client, nominal: Any) -> None:
    response = await hub.post(CLUSTER_QUEUES, json=cluster_queue(nominal))
    assert response.status == 201, await response.text()
    stored = await (await hub.get(f"{CLUSTER_QUEUES}/cq")).json()
    assert stored["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["nominalQuota"] == nominal
    assert type(stored["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["nominalQuota"]) is type(nominal)


async def test_an_integer_written_with_a_zero_fraction_is_that_integer(hub: Client) -> None:
    response = await hub.post(KARMADA_POLICIES, json=policy("policy.karmada.io/v1alpha1", placement=weighted(2.0)))
    assert response.status == 201, await response.text()
    stored = await (await hub.get(f"{KARMADA_POLICIES}/p")).json()
    weight = stored["spec"]["placement"]["replicaScheduling"]["weightPreference"]["staticWeightList"][1]["weight"]
    assert weight == 2 and type(weight) is int
    # A fraction is no integer.
    refused = await hub.post(REBALANCERS, json=rebalancer(ttlSecondsAfterFinished=1.5))
    assert refused.status == 422
    assert (await refused.json())["details"]["causes"] == [
        type_invalid("spec.ttlSecondsAfterFinished", "number", "integer")
    ]


async def test_nulls_of_declared_fields_are_pruned_before_validation(hub: Client) -> None:
    sent = policy(propagateDeps=None, placement={"clusterAffinity": None, "spreadConstraints": None})
    sent["spec"]["resourceSelectors"][0].update(labelSelector=None, namespace=None)  # in an array item
    response = await hub.post(POLICIES, json=sent)
    assert response.status == 201, await response.text()
    stored = await (await hub.get(f"{POLICIES}/p")).json()
    assert "propagateDeps" not in stored["spec"]
    assert stored["spec"]["placement"] == {}
    # The selector's namespace is defaulted as if it had not been sent (Karmada's webhook sets the policy's).
    assert stored["spec"]["resourceSelectors"] == [{"apiVersion": "apps/v1", "kind": "Deployment", "namespace": "default"}]


async def test_a_null_with_a_default_is_defaulted_and_a_required_null_is_missing(hub: Client) -> None:
    response = await hub.post(CLUSTER_QUEUES, json=cluster_queue("3", queueingStrategy=None, stopPolicy=None))
    assert response.status == 201, await response.text()
    spec = (await (await hub.get(f"{CLUSTER_QUEUES}/cq")).json())["spec"]
    assert (spec["queueingStrategy"], spec["stopPolicy"]) == ("BestEffortFIFO", "None")

    refused = await hub.post(REBALANCERS, json=rebalancer(workloads=None))
    status = await refused.json()
    assert refused.status == 422, status
    assert status["details"]["causes"] == [
        {"reason": "FieldValueRequired", "message": "Required value", "field": "spec.workloads"}
    ]


async def test_an_update_prunes_nulls_too(hub: Client) -> None:
    assert (await hub.post(REBALANCERS, json=rebalancer(ttlSecondsAfterFinished=60))).status == 201
    current = await (await hub.get(f"{REBALANCERS}/r")).json()
    current["spec"]["ttlSecondsAfterFinished"] = None
    response = await hub.put(f"{REBALANCERS}/r", json=current)
    assert response.status == 200, await response.text()
    assert "ttlSecondsAfterFinished" not in (await (await hub.get(f"{REBALANCERS}/r")).json())["spec"]


TRAINER_CRD: dict[str, Any] = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": "trainers.ml.example.com"},
    "spec": {
        "group": "ml.example.com",
        "scope": "Namespaced",
        "names": {"plural": "trainers", "kind": "Trainer"},
        "versions": [{
            "name": "v1", "served": True, "storage": True,
            "schema": {"openAPIV3Schema": {"type": "object", "properties": {"spec": {"type": "object", "properties": {
                "model": {"type": "string"},
                "note": {"type": "string", "nullable": True},
                "workers": {"type": "integer", "default": 1},
                "size": {"x-kubernetes-int-or-string": True},
                "tags": {"type": "array", "items": {"type": "string"}},
                "options": {"type": "object", "additionalProperties": {"type": "string"}},
                "extra": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
            }}}}},
        }],
    },
}


async def _trainers_served(hub: Client) -> None:
    assert (await hub.post(CRDS, json=copy.deepcopy(TRAINER_CRD))).status == 201
    async with asyncio.timeout(10):  # until the CRD controller serves its kind
        while True:
            if (await hub.get(TRAINERS)).status == 200:
                return
            await asyncio.sleep(0.02)


def trainer(name: str, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "ml.example.com/v1", "kind": "Trainer", "metadata": {"name": name}, "spec": spec}


async def test_a_crds_nulls_are_pruned_unless_nullable(hub: Client) -> None:
    await _trainers_served(hub)
    sent = trainer("a", model=None, note=None, workers=None, size=None, options={"x": None, "y": "1"},
                   extra={"kept": None})
    response = await hub.post(TRAINERS, json=sent)
    assert response.status == 201, await response.text()
    spec = (await (await hub.get(f"{TRAINERS}/a")).json())["spec"]
    # note is nullable: kept; workers has a default: defaulted; a preserved field's null is its own.
    assert spec == {"note": None, "workers": 1, "options": {"y": "1"}, "extra": {"kept": None}}


async def test_a_crds_null_array_item_is_kept_and_refused(hub: Client) -> None:
    await _trainers_served(hub)
    response = await hub.post(TRAINERS, json=trainer("a", tags=["x", None]))
    status = await response.json()
    assert response.status == 422, status
    assert status["details"]["causes"] == [type_invalid("spec.tags[1]", "null", "string")]


@pytest.mark.parametrize("size", ["3", 3])
async def test_a_crds_int_or_string_takes_either(hub: Client, size: Any) -> None:
    await _trainers_served(hub)
    response = await hub.post(TRAINERS, json=trainer("a", size=size))
    assert response.status == 201, await response.text()
    assert (await (await hub.get(f"{TRAINERS}/a")).json())["spec"]["size"] == size
    refused = await hub.post(TRAINERS, json=trainer("b", workers="3"))
    assert (await refused.json())["details"]["causes"] == [type_invalid("spec.workers", "string", "integer")]


async def test_a_crds_integer_written_with_a_zero_fraction_is_that_integer(hub: Client) -> None:
    await _trainers_served(hub)
    response = await hub.post(TRAINERS, json=trainer("a", workers=3.0))
    assert response.status == 201, await response.text()
    spec = (await (await hub.get(f"{TRAINERS}/a")).json())["spec"]
    assert spec["workers"] == 3 and type(spec["workers"]) is int


async def test_a_built_in_kinds_string_for_an_integer_is_kubes_decoding_error(hub: Client) -> None:
    deployment = {
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "namespace": "default"},
        "spec": {"replicas": "3", "selector": {"matchLabels": {"app": "web"}}, "template": {
            "metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "web", "image": "nginx"}]}}},
    }
    response = await hub.post("/apis/apps/v1/namespaces/default/deployments", json=deployment)
    status = await response.json()
    assert response.status == 400, status
    assert status["message"] == (
        'Deployment in version "v1" cannot be handled as a Deployment: json: cannot unmarshal string into Go '
        "struct field DeploymentSpec.spec.replicas of type int32"
    )
    # A null is Go's zero value: no replicas, defaulted to 1.
    deployment["spec"]["replicas"] = None
    created = await hub.post("/apis/apps/v1/namespaces/default/deployments", json=deployment)
    assert created.status == 201, await created.text()
    assert (await created.json())["spec"]["replicas"] == 1


class _Leaf(BaseModel):
    n: int | None = None


class _Tree(BaseModel):
    model_config = ConfigDict(extra="allow")
    name: str | None = None
    children: list[_Tree] | None = None
    labels: dict[str, str] | None = None
    free: dict[str, Any] | None = None
    anything: Any = None
    leaf: _Leaf | None = None


def test_a_models_nulls_are_pruned_where_it_declares_a_field() -> None:
    obj = {"name": None, "children": [{"name": None, "children": None, "leaf": {"n": None}}, None],
           "labels": {"a": None, "b": "x"}, "free": {"k": None}, "anything": {"k": None}, "leaf": None,
           "unknown": None}
    prune_model_nulls(obj, _Tree)
    # Declared fields lose their nulls at any depth, a map's declared values too; an array's null
    # item, an open value's nulls and an undeclared field's (the model keeps extras) stay.
    assert obj == {"children": [{"leaf": {}}, None], "labels": {"b": "x"}, "free": {"k": None},
                   "anything": {"k": None}, "unknown": None}
