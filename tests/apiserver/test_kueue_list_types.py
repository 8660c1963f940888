"""Kueue's lists as its CRDs declare them (``tests/data/kueue_crd_list_types.txt``): the schema the
hub serves carries each ``x-kubernetes-list-type`` (with its map keys) and ``x-kubernetes-map-type``;
server-side apply merges a keyed list by its keys, each field manager owning its items, and
replaces an atomic one whole; a create or update that repeats a key or a set's value is refused
with kube's ``Duplicate value``. Karmada's kinds keep the types of the kube types their CRDs embed."""

from __future__ import annotations

import functools
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml
from aiohttp.test_utils import TestClient

from controlplane.apiserver.openapi.catalog import kind_schema
from controlplane.apiserver.openapi.kindschemas import KindSchemas
from controlplane.apiserver.openapi.models import model_json_schema
from controlplane.apiserver.openapi.upstream import DEFINITIONS_PREFIX, shared_definitions
from controlplane.hub import hub_registry
from tests.apiserver.test_kueue_crd_rules import webhook_causes

from .test_kueue_crd_fields import GROUP, served_at

Client = TestClient[Any, Any]
DATA = Path(__file__).resolve().parents[1] / "data" / "kueue_crd_list_types.txt"
APPLY = {"Content-Type": "application/apply-patch+yaml"}
NOW = "2026-01-01T00:00:00Z"
REGISTRY = functools.cache(hub_registry)


def upstream_markers() -> dict[tuple[str, str, str], str]:
    """(kind, version, path) -> ``map name``, ``set``, ``atomic`` or ``map-atomic``, as the data file lists them."""
    out: dict[tuple[str, str, str], str] = {}
    for line in DATA.read_text().splitlines():
        if line and not line.startswith("#"):
            kind, versions, path, *shape = line.split()
            for version in versions.split(","):
                out[(kind, version, path)] = " ".join(shape)
    return out


UPSTREAM = upstream_markers()


def marker(schema: Mapping[str, Any]) -> str | None:
    """A served node's list or map type in the data file's words (None: it declares none)."""
    if schema.get("x-kubernetes-map-type") == "atomic":
        return "map-atomic"
    list_type = schema.get("x-kubernetes-list-type")
    if list_type == "map":
        return f"map {','.join(schema.get('x-kubernetes-list-map-keys') or [])}"
    return str(list_type) if list_type else None


@pytest.mark.parametrize(("kind", "version", "path"), sorted(UPSTREAM))
def test_each_marker_of_kueues_crds_is_in_the_served_schema(kind: str, version: str, path: str) -> None:
    found = KindSchemas(REGISTRY()).schema_for((GROUP, version, kind))
    assert found is not None
    served = served_at(*found, path)
    assert not isinstance(served, str), served
    assert marker(served) == UPSTREAM[(kind, version, path)]


def _own_markers(node: Any, definitions: Mapping[str, Any], path: str, seen: frozenset[str]) -> Iterator[tuple[str, str]]:
    """The markers of a served Kueue kind's own definitions (kube's, a pod template's, are kube's)."""
    if not isinstance(node, Mapping):
        return
    ref = node.get("$ref")
    if isinstance(ref, str):
        name = ref.removeprefix(DEFINITIONS_PREFIX)
        if name in definitions and name not in seen:
            yield from _own_markers(definitions[name], definitions, path, seen | {name})
        return
    if (found := marker(node)) is not None:
        yield path, found
    for prop, sub in (node.get("properties") or {}).items():
        yield from _own_markers(sub, definitions, f"{path}.{prop}", seen)
    yield from _own_markers(node.get("items"), definitions, f"{path}[]", seen)


KINDS = sorted({(kind, version) for kind, version, _ in UPSTREAM})
#: Conditions the hub's kind has and Kueue's does not (README, "Fleet quotas"): keyed by type, as
#: every conditions list of Kueue's and kube's kinds is.
HUB_ONLY = {"Cohort": (".status.conditions",)}


@pytest.mark.parametrize(("kind", "version"), KINDS)
def test_the_served_schema_declares_no_list_type_kueues_crd_lacks(kind: str, version: str) -> None:
    rt = next(rt for rt in REGISTRY() if (rt.group, rt.version, rt.kind) == (GROUP, version, kind))
    served = kind_schema(rt, shared_definitions(), model_json_schema)
    found = dict(_own_markers(served.definitions[served.name], served.definitions, "", frozenset()))
    for path in HUB_ONLY.get(kind, ()):
        assert found.pop(path) == "map type"
    assert found == {path: shape for (k, v, path), shape in UPSTREAM.items() if (k, v) == (kind, version)}


# --- server-side apply ---------------------------------------------------------------------------

async def apply(hub: Client, url: str, body: dict[str, Any], manager: str, *, force: bool = False) -> Any:
    query = f"fieldManager={manager}" + ("&force=true" if force else "")
    return await hub.patch(f"{url}?{query}", data=yaml.safe_dump(body), headers=APPLY)


def owned(obj: dict[str, Any], manager: str, subresource: str = "") -> dict[str, Any]:
    entries = [e for e in obj["metadata"]["managedFields"] if e["manager"] == manager and e.get("subresource", "") == subresource]
    assert len(entries) == 1, obj["metadata"]["managedFields"]
    fields: dict[str, Any] = entries[0]["fieldsV1"]
    return fields


def workload(**status: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "apiVersion": f"{GROUP}/v1beta2", "kind": "Workload", "metadata": {"name": "w", "namespace": "default"},
        "spec": {"queueName": "q", "podSets": [{"name": "main", "count": 1, "template": {"spec": {"containers": [
            {"name": "c", "image": "i"}]}}}]},
    }
    return {**body, "status": status} if status else body


def condition(type_: str) -> dict[str, Any]:
    return {"type": type_, "status": "True", "reason": type_, "message": "", "lastTransitionTime": NOW}


def check(name: str, state: str) -> dict[str, Any]:
    return {"name": name, "state": state, "message": "", "lastTransitionTime": NOW}


WORKLOAD = f"/apis/{GROUP}/v1beta2/namespaces/default/workloads/w"


async def test_two_managers_each_apply_a_condition_and_a_check_of_a_workload_and_both_keep_theirs(hub: Client) -> None:
    """Two admission check controllers, as Kueue's run: each applies its own check's state and a
    condition of the status; the status holds both, each entry owned by its manager alone."""
    assert (await apply(hub, WORKLOAD, workload(), "kueue")).status == 201
    for manager, check_name, type_ in (("provisioning", "prov", "Provisioned"), ("multikueue", "mk", "Dispatched")):
        answer = await apply(hub, f"{WORKLOAD}/status", workload(conditions=[condition(type_)],
                                                                 admissionChecks=[check(check_name, "Ready")]), manager)
        assert answer.status == 200, await answer.text()
    stored = await (await hub.get(WORKLOAD)).json()
    assert [c["type"] for c in stored["status"]["conditions"]] == ["Provisioned", "Dispatched"]
    assert [c["name"] for c in stored["status"]["admissionChecks"]] == ["prov", "mk"]
    first, second = owned(stored, "provisioning", "status"), owned(stored, "multikueue", "status")
    assert set(first["f:status"]["f:conditions"]) == {'k:{"type":"Provisioned"}'}
    assert set(second["f:status"]["f:conditions"]) == {'k:{"type":"Dispatched"}'}
    assert set(first["f:status"]["f:admissionChecks"]) == {'k:{"name":"prov"}'}
    assert set(second["f:status"]["f:admissionChecks"]) == {'k:{"name":"mk"}'}
    # A manager that applies its status without its check gives up that item alone.
    answer = await apply(hub, f"{WORKLOAD}/status", workload(conditions=[condition("Provisioned")]), "provisioning")
    assert answer.status == 200, await answer.text()
    stored = await (await hub.get(WORKLOAD)).json()
    assert [c["name"] for c in stored["status"]["admissionChecks"]] == ["mk"]


async def test_a_pod_sets_template_merges_as_kubes_pod_template_with_its_key_defaults(hub: Client) -> None:
    """A pod set's template is kube's PodTemplateSpec, keyed as kube keys it: a container port
    applied without its protocol is keyed as TCP, as the CRD's ``default: TCP`` keys it."""
    body = workload()
    body["spec"]["podSets"][0]["template"]["spec"]["containers"][0]["ports"] = [{"containerPort": 8080}]
    answer = await apply(hub, WORKLOAD, body, "kueue")
    assert answer.status == 201, await answer.text()
    fields = owned(await answer.json(), "kueue")["f:spec"]["f:podSets"]['k:{"name":"main"}']
    container = fields["f:template"]["f:spec"]["f:containers"]['k:{"name":"c"}']
    assert set(container["f:ports"]) == {'k:{"containerPort":8080,"protocol":"TCP"}'}


CLUSTER_QUEUE = f"/apis/{GROUP}/v1beta2/clusterqueues/cq"


def cluster_queue(*flavors: str) -> dict[str, Any]:
    return {"apiVersion": f"{GROUP}/v1beta2", "kind": "ClusterQueue", "metadata": {"name": "cq"},
            "spec": {"resourceGroups": [{"coveredResources": ["nvidia.com/gpu"], "flavors": [
                {"name": name, "resources": [{"name": "nvidia.com/gpu", "nominalQuota": 8}]} for name in flavors]}]}}


async def test_a_cluster_queues_resource_groups_are_atomic_as_in_kueues_crd(hub: Client) -> None:
    """Kueue's ``spec.resourceGroups`` is ``+listType=atomic``: the flavors keyed inside it do not
    make it mergeable. A second manager's other flavors conflict with the first's; forced, they
    replace the list whole, and the list is the second manager's alone."""
    assert (await apply(hub, CLUSTER_QUEUE, cluster_queue("a100"), "platform")).status == 201
    conflict = await apply(hub, CLUSTER_QUEUE, cluster_queue("h100"), "team")
    assert conflict.status == 409, await conflict.text()
    assert (await conflict.json())["details"]["causes"] == [
        {"reason": "FieldManagerConflict", "message": 'conflict with "platform"', "field": ".spec.resourceGroups"}]
    assert (await apply(hub, CLUSTER_QUEUE, cluster_queue("h100"), "team", force=True)).status == 200
    stored = await (await hub.get(CLUSTER_QUEUE)).json()
    assert [f["name"] for f in stored["spec"]["resourceGroups"][0]["flavors"]] == ["h100"]
    assert owned(stored, "team")["f:spec"] == {"f:resourceGroups": {}}
    assert [entry["manager"] for entry in stored["metadata"]["managedFields"]] == ["team"]


async def test_two_managers_apply_the_usage_of_different_flavors_of_a_cluster_queue(hub: Client) -> None:
    """``status.flavorsReservation`` is keyed by flavor name: each writer keeps its flavor's entry."""
    assert (await apply(hub, CLUSTER_QUEUE, cluster_queue("a100", "h100"), "platform")).status == 201
    for manager, flavor in (("writer-a", "a100"), ("writer-h", "h100")):
        usage = {"flavorsReservation": [{"name": flavor, "resources": [{"name": "nvidia.com/gpu", "total": "2"}]}]}
        answer = await apply(hub, f"{CLUSTER_QUEUE}/status", {**cluster_queue(), "status": usage}, manager)
        assert answer.status == 200, await answer.text()
    stored = await (await hub.get(CLUSTER_QUEUE)).json()
    assert [f["name"] for f in stored["status"]["flavorsReservation"]] == ["a100", "h100"]
    assert set(owned(stored, "writer-h", "status")["f:status"]["f:flavorsReservation"]) == {'k:{"name":"h100"}'}


# --- duplicates ----------------------------------------------------------------------------------

async def test_a_status_repeating_a_condition_type_is_refused_as_kube_refuses_a_map_lists_duplicate(hub: Client) -> None:
    created = await hub.post(f"/apis/{GROUP}/v1beta2/namespaces/default/workloads", json=workload())
    assert created.status == 201, await created.text()
    stored = await created.json()
    stored["status"] = {"conditions": [condition("QuotaReserved"), condition("Evicted"), condition("QuotaReserved")]}
    answer = await hub.put(f"{WORKLOAD}/status", json=stored)
    status = await answer.json()
    assert answer.status == 422, status
    assert status["message"] == (
        'Workload.kueue.x-k8s.io "w" is invalid: status.conditions[2]: Duplicate value: '
        'map[string]interface {}{"type":"QuotaReserved"}'
    )
    assert status["details"]["causes"] == [{"reason": "FieldValueDuplicate", "field": "status.conditions[2]",
                                            "message": 'Duplicate value: map[string]interface {}{"type":"QuotaReserved"}'}]


async def test_evictions_repeating_a_reason_and_cause_are_refused_by_both_keys(hub: Client) -> None:
    """A list keyed by two fields: only an item repeating both is a duplicate, shown with both keys."""
    assert (await hub.post(f"/apis/{GROUP}/v1beta2/namespaces/default/workloads", json=workload())).status == 201
    stored = await (await hub.get(WORKLOAD)).json()
    evictions = [{"reason": "Preempted", "underlyingCause": "", "count": 1},
                 {"reason": "Preempted", "underlyingCause": "InCohort", "count": 1},
                 {"reason": "Preempted", "underlyingCause": "", "count": 2}]
    stored["status"] = {"schedulingStats": {"evictions": evictions}}
    answer = await hub.put(f"{WORKLOAD}/status", json=stored)
    assert answer.status == 422
    assert (await answer.json())["details"]["causes"] == [{
        "reason": "FieldValueDuplicate", "field": "status.schedulingStats.evictions[2]",
        "message": 'Duplicate value: map[string]interface {}{"reason":"Preempted", "underlyingCause":""}'}]


async def test_a_multikueue_config_repeating_a_cluster_is_refused_once_per_value(hub: Client) -> None:
    """A set: the first repeat of a value is reported, not each later one (kube's list-type check)."""
    body = {"apiVersion": f"{GROUP}/v1beta2", "kind": "MultiKueueConfig", "metadata": {"name": "c"},
            "spec": {"clusters": ["east", "east", "west", "east"]}}
    answer = await hub.post(f"/apis/{GROUP}/v1beta2/multikueueconfigs", json=body)
    assert answer.status == 422
    assert [(c["field"], c["message"]) for c in (await answer.json())["details"]["causes"]] == [
        ("spec.clusters[1]", 'Duplicate value: "east"')]


def _flavor(name: str) -> dict[str, Any]:
    return {"name": name, "resources": [{"name": "cpu", "nominalQuota": 1}]}


def _workload_spec(*names: str) -> dict[str, Any]:
    return {"podSets": [{"name": name, "count": 1, "template": {"spec": {"containers": [{"name": "c", "image": "i"}]}}}
                        for name in names]}


@pytest.mark.parametrize(("plural", "kind", "spec", "causes"), [
    ("clusterqueues", "ClusterQueue",
     {"resourceGroups": [{"coveredResources": ["cpu"], "flavors": [_flavor("a"), _flavor("b"), _flavor("a")]}]},
     [("spec.resourceGroups[0].flavors[2]", 'Duplicate value: map[string]interface {}{"name":"a"}')]),
    ("namespaces/default/workloads", "Workload", _workload_spec("main", "main"),
     [("spec.podSets[1]", 'Duplicate value: map[string]interface {}{"name":"main"}')]),
    ("provisioningrequestconfigs", "ProvisioningRequestConfig",
     {"provisioningClassName": "check-capacity.autoscaling.x-k8s.io", "managedResources": ["nvidia.com/gpu"] * 2,
      "podSetUpdates": {"nodeSelector": [{"key": "pool", "valueFromProvisioningClassDetail": "a"},
                                         {"key": "pool", "valueFromProvisioningClassDetail": "b"}]}},
     [("spec.managedResources[1]", 'Duplicate value: "nvidia.com/gpu"'),
      ("spec.podSetUpdates.nodeSelector[1]", 'Duplicate value: map[string]interface {}{"key":"pool"}')]),
])
async def test_a_repeated_key_is_refused_once_by_the_list_type_check(
    hub: Client, plural: str, kind: str, spec: dict[str, Any], causes: list[tuple[str, str]],
) -> None:
    """What the list-type check refuses is not refused a second time in other words (each cause's
    message ends as given)."""
    metadata = {"name": "x", **({"namespace": "default"} if plural.startswith("namespaces/") else {})}
    answer = await hub.post(f"/apis/{GROUP}/v1beta2/{plural}", json={
        "apiVersion": f"{GROUP}/v1beta2", "kind": kind, "metadata": metadata, "spec": spec})
    status = await answer.json()
    assert answer.status == 422, status
    found = [(c["field"], c["message"]) for c in status["details"]["causes"]]
    assert [field for field, _ in found] == [field for field, _ in causes]
    assert all(message.endswith(ending) for (_, message), (_, ending) in zip(found, causes, strict=True)), found


async def test_a_flavor_in_two_groups_is_no_lists_duplicate_but_kueues_webhook_refusal(hub: Client) -> None:
    spec = {"resourceGroups": [
        {"coveredResources": ["cpu"], "flavors": [_flavor("a")]},
        {"coveredResources": ["memory"], "flavors": [{"name": "a", "resources": [{"name": "memory", "nominalQuota": 1}]}]},
    ]}
    answer = await hub.post(f"/apis/{GROUP}/v1beta2/clusterqueues", json={
        "apiVersion": f"{GROUP}/v1beta2", "kind": "ClusterQueue", "metadata": {"name": "x"}, "spec": spec})
    assert webhook_causes(await answer.json(), "vclusterqueue.kb.io") == [
        'spec.resourceGroups[1].flavors[0].name: Duplicate value: "a"'
    ]


# --- Karmada: what its CRDs embed from kube ------------------------------------------------------

TAINT_POLICIES = "/apis/policy.karmada.io/v1alpha1/clustertaintpolicies"


def taint_policy(**labels: str) -> dict[str, Any]:
    return {"apiVersion": "policy.karmada.io/v1alpha1", "kind": "ClusterTaintPolicy", "metadata": {"name": "t"},
            "spec": {"targetClusters": {"labelSelector": {"matchLabels": labels}},
                     "taints": [{"key": "drain", "effect": "NoSchedule"}]}}


async def test_a_karmada_label_selector_is_one_value_as_kubes_label_selector_is(hub: Client) -> None:
    """Karmada's CRDs embed kube's LabelSelector with its ``x-kubernetes-map-type: atomic``: a second
    manager's other labels conflict with the first's whole selector instead of being merged in."""
    assert (await apply(hub, f"{TAINT_POLICIES}/t", taint_policy(tier="gold"), "platform")).status == 201
    conflict = await apply(hub, f"{TAINT_POLICIES}/t", taint_policy(region="eu"), "team")
    assert conflict.status == 409, await conflict.text()
    assert [c["field"] for c in (await conflict.json())["details"]["causes"]] == [".spec.targetClusters.labelSelector"]
    stored = await (await hub.get(f"{TAINT_POLICIES}/t")).json()
    assert owned(stored, "platform")["f:spec"]["f:targetClusters"] == {"f:labelSelector": {}}
