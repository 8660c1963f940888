"""Every field of Kueue's CRDs is declared, with a compatible type, by the schema the hub serves for
the kind and version: server-side apply and ``fieldValidation=Strict`` refuse what the schema does
not declare, so a field Kueue has and the hub lacks would refuse Kueue's YAML.

The upstream fields are ``tests/data/kueue_crd_fields.txt`` (made from Kueue's CRD YAML by
``tests/data/kueue_crd_fields.py``)."""

from __future__ import annotations

import importlib.util
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml
from aiohttp.test_utils import TestClient

from controlplane.apiserver.openapi.kindschemas import KindSchemas
from controlplane.apiserver.openapi.upstream import INT_OR_STRING, QUANTITY
from controlplane.hub import hub_registry

Schema = Mapping[str, Any]
Resolve = Callable[[str], Schema | None]
FIELDS = Path(__file__).resolve().parents[1] / "data" / "kueue_crd_fields.txt"
GROUP = "kueue.x-k8s.io"


#: An ``x-kubernetes-validations`` line's "type": the rest of the line is the rule's message.
CEL = "x-kubernetes-validations"


def upstream_lines() -> list[tuple[str, str, str, str, str]]:
    """Each line as ``(kind, version, path, type, rest)``: ``rest`` the rules after the type, or
    a CEL rule's message."""
    out = []
    for line in FIELDS.read_text().splitlines():
        if line and not line.startswith("#"):
            kind, version, path, type_, *rest = line.split(maxsplit=4)
            out.append((kind, version, path, type_, rest[0] if rest else ""))
    return out


def upstream_fields() -> dict[tuple[str, str], list[tuple[str, str]]]:
    out: dict[tuple[str, str], list[tuple[str, str]]] = {}
    for kind, version, path, type_, _ in upstream_lines():
        if type_ != CEL:
            out.setdefault((kind, version), []).append((path, type_))
    return out


UPSTREAM = upstream_fields()
#: A pod set's topology assignment in a Workload's status: ``levels`` and ``domains`` at v1beta1,
#: ``levels`` and ``slices`` at v1beta2.
TOPOLOGY_ASSIGNMENT = ".status.admission.podSetAssignments[].topologyAssignment"
#: Where the hub's served schema differs from the CRD on purpose, and why (README, "Fleet quotas").
DELIBERATE = {
    # Kueue's later v1beta2 drops it for admissionChecksStrategy, as the hub's v1beta2 does.
    ("ClusterQueue", "v1beta2", ".spec.admissionChecks"),
    ("ClusterQueue", "v1beta2", ".spec.admissionChecks[]"),
}


def _resolved(schema: Schema, resolve: Resolve) -> Schema:
    """``schema`` with its ``$ref`` (or single ``allOf``) followed; a reference to kube's
    Quantity or IntOrString stands for ``int-or-string``."""
    while True:
        ref = schema.get("$ref") or (schema["allOf"][0].get("$ref") if len(schema.get("allOf") or ()) == 1 else None)
        if ref is None:
            return schema
        if ref.endswith((QUANTITY, INT_OR_STRING)):
            return {"format": "int-or-string", "type": "string"}
        schema = resolve(ref) or {}


def served_type(schema: Schema) -> str:
    if schema.get("format") == "int-or-string" or schema.get("x-kubernetes-int-or-string"):
        return "int-or-string"
    return str(schema.get("type", "object"))


def served_at(root: Schema, resolve: Resolve, path: str) -> Schema | str:
    """The served schema of ``path`` (``.spec.a[].b{}``), ``"open"`` under a field the schema
    keeps as written, or the message of why it is not declared."""
    schema = _resolved(root, resolve)
    rest = "" if path == "." else path
    while rest:
        if schema.get("x-kubernetes-preserve-unknown-fields"):
            return "open"
        if rest.startswith("[]"):
            step, rest, child = "[]", rest[2:], schema.get("items")
        elif rest.startswith("{}"):
            step, rest, child = "{}", rest[2:], schema.get("additionalProperties")
        else:
            name = rest[1:].split(".")[0].split("[")[0].split("{")[0]
            step, rest = name, rest[1 + len(name):]
            child = (schema.get("properties") or {}).get(name)
        if not isinstance(child, Mapping):
            return f"{path}: {step} is not declared"
        # A default beside a reference is the field's own (an object's ``default: {}``).
        schema = {**_resolved(child, resolve), **({"default": child["default"]} if "default" in child else {})}
    return schema


def discrepancies(kind: str, version: str) -> list[str]:
    found = KindSchemas(hub_registry()).schema_for((GROUP, version, kind))
    assert found is not None, f"{kind} {version} is not served with a schema"
    root, resolve = found
    out = []
    for path, type_ in UPSTREAM[(kind, version)]:
        if (kind, version, path) in DELIBERATE:
            continue
        served = served_at(root, resolve, path)
        if isinstance(served, str):
            if served != "open":
                out.append(served)
        elif served_type(served) != type_:
            out.append(f"{path}: {served_type(served)}, Kueue's CRD says {type_}")
    return out


@pytest.mark.parametrize(("kind", "version"), sorted(UPSTREAM))
def test_every_field_of_kueues_crd_is_declared_with_its_type(kind: str, version: str) -> None:
    assert discrepancies(kind, version) == []


@pytest.mark.parametrize(("kind", "version", "path"), sorted(DELIBERATE))
def test_each_deliberate_difference_is_still_one(kind: str, version: str, path: str) -> None:
    """The list of deliberate differences names only fields the hub does leave out."""
    assert path in dict(UPSTREAM[(kind, version)])
    found = KindSchemas(hub_registry()).schema_for((GROUP, version, kind))
    assert found is not None
    served = served_at(*found, path)
    assert isinstance(served, str) and served != "open", served


def test_the_walk_finds_an_undeclared_field_and_a_wrong_type() -> None:
    """The check itself: a made-up field and a type Kueue's CRD does not have are reported."""
    found = KindSchemas(hub_registry()).schema_for((GROUP, "v1beta2", "LocalQueue"))
    assert found is not None
    root, resolve = found
    assert served_at(root, resolve, ".spec.clusterQueu") == ".spec.clusterQueu: clusterQueu is not declared"
    served = served_at(root, resolve, ".spec.clusterQueue")
    assert not isinstance(served, str) and served_type(served) == "string"


APPLY = {"Content-Type": "application/apply-patch+yaml"}


async def _apply(hub: TestClient[Any, Any], url: str, body: dict[str, Any]) -> Any:
    return await hub.patch(f"{url}?fieldManager=tester&fieldValidation=Strict", data=yaml.safe_dump(body), headers=APPLY)


@pytest.mark.parametrize("version", ["v1beta1", "v1beta2"])
async def test_a_cluster_queue_with_kueues_newer_fields_applies_strictly(hub: TestClient[Any, Any], version: str) -> None:
    """``excludeResourcePrefixes`` and more than 16 flavors in a group, as Kueue's CRD allows."""
    flavors = [{"name": f"f{i}", "resources": [{"name": "cpu", "nominalQuota": 1}]} for i in range(20)]
    body = {"apiVersion": f"{GROUP}/{version}", "kind": "ClusterQueue", "metadata": {"name": "cq"},
            "spec": {"excludeResourcePrefixes": ["ephemeral-storage", "example.com"],
                     "resourceGroups": [{"coveredResources": ["cpu"], "flavors": flavors}]}}
    url = f"/apis/{GROUP}/{version}/clusterqueues/cq"
    answer = await _apply(hub, url, body)
    assert answer.status == 201, await answer.text()
    stored = await (await hub.get(url)).json()
    assert stored["spec"]["excludeResourcePrefixes"] == ["ephemeral-storage", "example.com"]
    assert len(stored["spec"]["resourceGroups"][0]["flavors"]) == 20


async def test_an_excluded_resource_prefix_listed_twice_is_refused_as_a_sets_duplicate(hub: TestClient[Any, Any]) -> None:
    """``+listType=set``: a create is refused by kube's list-type check, an apply already by
    structured-merge-diff's typing of the applied object (as kube-apiserver words it)."""
    body = {"apiVersion": f"{GROUP}/v1beta2", "kind": "ClusterQueue", "metadata": {"name": "cq"},
            "spec": {"excludeResourcePrefixes": ["example.com", "hugepages-", "example.com"]}}
    created = await hub.post(f"/apis/{GROUP}/v1beta2/clusterqueues", json=body)
    status = await created.json()
    assert created.status == 422, status
    assert status["message"] == (
        'ClusterQueue.kueue.x-k8s.io "cq" is invalid: spec.excludeResourcePrefixes[2]: Duplicate value: "example.com"'
    )
    applied = await _apply(hub, f"/apis/{GROUP}/v1beta2/clusterqueues/cq", body)
    assert applied.status == 422
    assert (await applied.json())["message"] == (
        "failed to create typed patch object (/cq; kueue.x-k8s.io/v1beta2, Kind=ClusterQueue): "
        '.spec.excludeResourcePrefixes: duplicate entries for key [="example.com"]'
    )


async def test_a_local_queues_flavors_status_applies_strictly_at_v1beta1_which_alone_has_it(
    hub: TestClient[Any, Any],
) -> None:
    """The ``status.flavors`` Kueue's v1beta1 LocalQueue controller writes (its ClusterQueue's
    flavors); v1beta2 has no such field, and reads the queue without it, as Kueue converts it."""
    url = f"/apis/{GROUP}/v1beta1/namespaces/default/localqueues/q"
    queue = {"apiVersion": f"{GROUP}/v1beta1", "kind": "LocalQueue", "metadata": {"name": "q", "namespace": "default"},
             "spec": {"clusterQueue": "cq"}}
    assert (await _apply(hub, url, queue)).status == 201
    flavors = [{"name": "a100", "resources": ["nvidia.com/gpu"], "nodeLabels": {"gpu": "a100"},
                "nodeTaints": [{"key": "gpu", "value": "a100", "effect": "NoSchedule"}]}]
    answer = await _apply(hub, f"{url}/status", {**queue, "status": {"flavors": flavors}})
    assert answer.status == 200, await answer.text()
    assert (await (await hub.get(url)).json())["status"]["flavors"] == flavors
    assert "flavors" not in (await (await hub.get(url.replace("v1beta1", "v1beta2"))).json())["status"]


async def test_an_admission_checks_retry_delay_is_v1beta1s_alone(hub: TestClient[Any, Any]) -> None:
    """Kueue's v1beta2 AdmissionCheck has no ``retryDelayMinutes``: refused there, defaulted and
    read at v1beta1 only."""
    url = f"/apis/{GROUP}/v1beta2/admissionchecks/ac"
    check = {"apiVersion": f"{GROUP}/v1beta2", "kind": "AdmissionCheck", "metadata": {"name": "ac"},
             "spec": {"controllerName": "example.com/check"}}
    refused = await _apply(hub, url, {**check, "spec": {**check["spec"], "retryDelayMinutes": 5}})
    assert refused.status == 422
    assert (await refused.json())["message"].endswith(".spec.retryDelayMinutes: field not declared in schema")
    assert (await _apply(hub, url, check)).status == 201
    assert (await (await hub.get(url)).json())["spec"] == {"controllerName": "example.com/check"}
    old = await (await hub.get(url.replace("v1beta2", "v1beta1"))).json()
    assert old["spec"] == {"controllerName": "example.com/check", "retryDelayMinutes": 15}


async def test_a_workloads_status_as_kueues_scheduler_and_multikueue_write_it_applies_strictly(
    hub: TestClient[Any, Any],
) -> None:
    """Topology assignments, scheduling stats, MultiKueue's cluster names and the time admitted
    before (v1beta2's ``accumulatedPastExecutionTimeSeconds``, v1beta1's
    ``accumulatedPastExexcutionTimeSeconds``) are kept as written and read in either version."""
    url = f"/apis/{GROUP}/v1beta2/namespaces/default/workloads/w"
    workload = {"apiVersion": f"{GROUP}/v1beta2", "kind": "Workload", "metadata": {"name": "w", "namespace": "default"},
                "spec": {"podSets": [{"name": "main", "count": 2, "topologyRequest": {"podSetSliceSize": 2},
                                      "template": {"spec": {"containers": [{"name": "c", "image": "i"}]}}}]}}
    assert (await _apply(hub, url, workload)).status == 201
    status = {
        "accumulatedPastExecutionTimeSeconds": 30,
        "schedulingStats": {"evictions": [{"reason": "Preempted", "underlyingCause": "", "count": 1}]},
        "nominatedClusterNames": ["worker-1"],
        "unhealthyNodes": [{"name": "node-3"}],
    }
    answer = await _apply(hub, f"{url}/status", {**workload, "status": status})
    assert answer.status == 200, await answer.text()
    assert {k: v for k, v in (await (await hub.get(url)).json())["status"].items() if k in status} == status
    old = (await (await hub.get(url.replace("v1beta2", "v1beta1"))).json())["status"]
    assert (old["accumulatedPastExexcutionTimeSeconds"], "accumulatedPastExecutionTimeSeconds" in old) == (30, False)
    admitted = {"clusterName": "worker-1", "admission": {"clusterQueue": "cq", "podSetAssignments": [
        {"name": "main", "count": 2, "flavors": {"cpu": "f"}, "delayedTopologyRequest": "Ready",
         "topologyAssignment": {"levels": ["rack"], "slices": [
             {"domainCount": 1, "valuesPerLevel": [{"universal": "r1"}], "podCounts": {"universal": 2}}]}}]}}
    answer = await _apply(hub, f"{url}/status", {**workload, "status": admitted})
    assert answer.status == 200, await answer.text()
    assert (await (await hub.get(url)).json())["status"]["admission"] == admitted["admission"]


def test_the_list_is_written_from_crd_yaml_as_its_script_says() -> None:
    """``kueue_crd_fields.py`` writes a CRD's fields in the list's form (items, map values,
    int-or-string, a pod template not walked) with their rules (required fields, enum, default,
    bounds, a pattern but a quantity's, and each CEL rule's message on a line of its own)."""
    spec = importlib.util.spec_from_file_location("kueue_crd_fields", FIELDS.with_suffix(".py"))
    assert spec is not None and spec.loader is not None
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    crd = yaml.safe_load("""
spec:
  names: {kind: Workload}
  versions:
  - name: v1beta2
    schema:
      openAPIV3Schema:
        properties:
          apiVersion: {type: string}
          spec:
            type: object
            required: [podSets]
            properties:
              active: {type: boolean, default: true}
              podSets:
                type: array
                minItems: 1
                maxItems: 8
                items:
                  type: object
                  x-kubernetes-validations:
                  - {rule: "has(self.name)", message: "a pod set's\\n  name is needed"}
                  properties:
                    name: {type: string, default: main, maxLength: 63, pattern: "^[a-z]+$"}
                    template: {type: object, properties: {spec: {type: object}}}
          status:
            type: object
            properties:
              resourceRequests:
                type: array
                items:
                  properties:
                    resources: {type: object, additionalProperties: {x-kubernetes-int-or-string: true, pattern: "^q$"}}
              state: {type: string, enum: [Pending, Admitted]}
""")
    assert list(script.lines(crd)) == [
        "Workload v1beta2 . object",
        "Workload v1beta2 .spec object required=podSets",
        "Workload v1beta2 .spec.active boolean default=true",
        "Workload v1beta2 .spec.podSets array minItems=1 maxItems=8",
        "Workload v1beta2 .spec.podSets[] object",
        "Workload v1beta2 .spec.podSets[] x-kubernetes-validations a pod set's name is needed",
        'Workload v1beta2 .spec.podSets[].name string default="main" maxLength=63 pattern=^[a-z]+$',
        "Workload v1beta2 .spec.podSets[].template object",
        "Workload v1beta2 .status object",
        "Workload v1beta2 .status.resourceRequests array",
        "Workload v1beta2 .status.resourceRequests[] object",
        "Workload v1beta2 .status.resourceRequests[].resources object",
        "Workload v1beta2 .status.resourceRequests[].resources{} int-or-string",
        "Workload v1beta2 .status.state string enum=Pending,Admitted",
    ]
    listed = {line for line in FIELDS.read_text().splitlines() if line and not line.startswith("#")}
    assert "Workload v1beta1 .spec.podSets[].template object" in listed
