"""Kueue's CRD validations, field for field: each required field, enum, default and bound
(lengths, item counts, minimum, pattern) ``tests/data/kueue_crd_fields.txt`` lists is published
in the schema the hub serves for the kind and version, as kube publishes a CRD's, and each
``x-kubernetes-validations`` rule refuses what it refuses, in kube's words."""

from __future__ import annotations

import copy
import importlib.util
import re
from typing import Any

import pytest
from aiohttp.test_utils import TestClient

from controlplane.apiserver.openapi.kindschemas import KindSchemas
from controlplane.hub import hub_registry
from tests.apiserver.test_kueue_crd_fields import (
    CEL,
    FIELDS,
    GROUP,
    TOPOLOGY_ASSIGNMENT,
    served_at,
    upstream_lines,
)

_spec = importlib.util.spec_from_file_location("kueue_crd_fields", FIELDS.with_suffix(".py"))
assert _spec is not None and _spec.loader is not None
SCRIPT = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(SCRIPT)

Key = tuple[str, str, str]
#: The kinds and versions whose lines carry their CRD's rules (the others list types only).
WITH_RULES = {(k, v) for k, v, _, t, rest in upstream_lines() if rest and t != CEL}
#: Each field of those: ``(kind, version, path) -> rules`` ("" for none), as the script writes them.
RULES: dict[Key, str] = {
    (k, v, p): rest for k, v, p, t, rest in upstream_lines() if (k, v) in WITH_RULES and t != CEL
}
#: Every CEL rule: ``(kind, version, path, message)``.
CEL_RULES = sorted((k, v, p, rest) for k, v, p, t, rest in upstream_lines() if t == CEL)

#: A DNS subdomain: the pattern of Kueue's object names.
DNS = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
#: Where the served schema differs from the CRD's on purpose: the rules it serves, and why.
DELIBERATE: dict[Key, tuple[str, str]] = {
    # Kueue's later v1beta2 (clusterqueue_types.go at 6c1018375751de7ee3f3a6897129c3fc4d6659b6)
    # has only the new names; v1beta1 keeps Borrow and Preempt, which the hub converts.
    ("ClusterQueue", "v1beta2", ".spec.flavorFungibility.whenCanBorrow"): (
        'enum=MayStopSearch,TryNextFlavor default="MayStopSearch"',
        "v1beta2 without the deprecated Borrow",
    ),
    ("ClusterQueue", "v1beta2", ".spec.flavorFungibility.whenCanPreempt"): (
        'enum=MayStopSearch,TryNextFlavor default="TryNextFlavor"',
        "v1beta2 without the deprecated Preempt",
    ),
    # Dropped by the later v1beta2 for admissionChecksStrategy (as in test_kueue_crd_fields).
    ("ClusterQueue", "v1beta2", ".spec.admissionChecks[]"): ("", "not served at v1beta2"),
    # The hub stores v1beta1 in the older names its conversion writes (Borrow, Preempt), which
    # Kueue's v1beta1 before 0.15 reads too; MayStopSearch is the same policy.
    ("ClusterQueue", "v1beta1", ".spec.flavorFungibility.whenCanBorrow"): (
        'enum=MayStopSearch,TryNextFlavor,Borrow default="Borrow"',
        "v1beta1 defaults to the older name",
    ),
    # Without a spec an AdmissionCheck names no controller to decide it: refused, where Kueue's
    # CRD takes it and the check never becomes Active.
    ("AdmissionCheck", "v1beta1", "."): ("required=spec", "an AdmissionCheck needs its spec"),
    # Kueue's Go client reads the value as an int32 (the CRD's format); the hub refuses what it
    # could not read, where kube stores it.
    # One model serves both versions; its pattern refuses an empty name as v1beta2's minLength does.
    ("ProvisioningRequestConfig", "v1beta1", ".spec.provisioningClassName"): (
        "minLength=1 maxLength=253 pattern=" + DNS,
        "one model for both versions",
    ),
    # Kueue's later Topology versions take 16 levels (v1beta1 topology_types.go at e03267fd); the
    # hub serves the one bound at every version.
    ("Topology", "v1alpha1", ".spec.levels"): ("minItems=1 maxItems=16", "16 levels at every version"),
    # Without a spec a Workload asks for no pods: refused, where Kueue's CRD takes it (and its
    # webhook, which checks the pod sets, would find none).
    # v1beta2's CRD also takes a spec without podSets (its minItems bounds only a given list).
    **{
        ("Workload", version, "."): ("required=spec", "a Workload needs its pod sets")
        for version in ("v1beta1", "v1beta2")
    },
    ("Workload", "v1beta2", ".spec"): ("required=podSets", "a Workload needs its pod sets"),
    # The hub stores a Workload as v1beta1, whose admission needs both (v1beta2's CRD needs neither).
    ("Workload", "v1beta2", ".status.admission"): (
        "required=clusterQueue,podSetAssignments",
        "stored as v1beta1",
    ),
    # A v1beta1 Workload's status takes the bounds of Kueue's first v1beta2 types (workload_types.go
    # at 57d3e218, whose assignment was v1beta1's levels and domains): a topology assignment's 16
    # levels (as a Topology's, above) and 100000 domains.
    **{
        ("Workload", "v1beta1", f"{TOPOLOGY_ASSIGNMENT}.{path}"): (
            "minItems=1 maxItems=16",
            "16 levels at every version",
        )
        for path in ("levels", "domains[].values")
    },
    ("Workload", "v1beta1", f"{TOPOLOGY_ASSIGNMENT}.domains"): (
        "maxItems=100000",
        "v1beta2's bound at both versions",
    ),
    # The int32 range of INT32_RANGE, above a minimum of 0 the CRD sets.
    **{
        ("Workload", version, f".status.admissionChecks[].{path}"): (
            "minimum=0 maximum=2147483647",
            "an int32",
        )
        for version in ("v1beta1", "v1beta2")
        for path in ("requeueAfterSeconds", "retryCount")
    },
    # Kueue's later MultiKueueConfig takes 20 clusters (v1beta2 multikueue_types.go at 182a1ee6);
    # the hub serves the one bound at both versions.
    ("MultiKueueConfig", "v1beta1", ".spec.clusters"): (
        "minItems=1 maxItems=20",
        "20 clusters at both versions",
    ),
}
#: Lines the list takes from Kueue's Go types (the header says which): their types only.
GO_TYPES = {("ClusterQueue", "v1beta2", ".spec.flavorFungibility.preference")}
#: A status condition is kube's ``metav1.Condition``, served as kube's own definition (its
#: required fields, without the CRD's bounds) and checked as the hub's controllers write it.
CONDITIONS = ".status.conditions[]"


#: An integer's int32 range: Kueue's Go client reads the CRD's ``format: int32`` fields as int32s,
#: and the hub refuses what it could not read, where kube stores it (a deliberate difference of
#: every such field, a WorkloadPriorityClass's value and a retry strategy's counts among them).
INT32_RANGE = "minimum=-2147483648 maximum=2147483647"


def served_rules(kind: str, version: str, path: str) -> str:
    found = KindSchemas(hub_registry()).schema_for((GROUP, version, kind))
    assert found is not None
    served = served_at(*found, path)
    if isinstance(served, str):
        return ""
    rules = str(SCRIPT.rules(dict(served))).strip()
    if (
        served.get("type") == "integer"
        and INT32_RANGE in rules
        and "minimum=" not in RULES.get((kind, version, path), "")
    ):
        rules = " ".join(rules.replace(INT32_RANGE, "").split())
    return rules


def rule_cases() -> list[Key]:
    return sorted(key for key in RULES if not key[2].startswith(CONDITIONS) and key not in GO_TYPES)


@pytest.mark.parametrize(("kind", "version", "path"), rule_cases())
def test_the_served_schema_publishes_the_crds_rules(kind: str, version: str, path: str) -> None:
    expected = DELIBERATE.get((kind, version, path), (RULES[(kind, version, path)], ""))[0]
    assert served_rules(kind, version, path) == expected


@pytest.mark.parametrize(("kind", "version", "path"), sorted(DELIBERATE))
def test_each_deliberate_difference_names_a_listed_rule(kind: str, version: str, path: str) -> None:
    assert RULES[(kind, version, path)] != DELIBERATE[(kind, version, path)][0]


def test_a_condition_is_served_as_kubes_with_its_required_fields() -> None:
    for kind, version, path in sorted(RULES):
        if path == CONDITIONS:
            assert served_rules(kind, version, path) == RULES[(kind, version, path)], (kind, version)


Obj = dict[str, Any]
Client = TestClient[Any, Any]
RESOURCES = {
    "ResourceFlavor": "resourceflavors",
    "Topology": "topologies",
    "ProvisioningRequestConfig": "provisioningrequestconfigs",
    "ClusterQueue": "clusterqueues",
    "LocalQueue": "namespaces/default/localqueues",
    "AdmissionCheck": "admissionchecks",
    "WorkloadPriorityClass": "workloadpriorityclasses",
    "Workload": "namespaces/default/workloads",
    "MultiKueueCluster": "multikueueclusters",
    "Cohort": "cohorts",
    "MultiKueueConfig": "multikueueconfigs",
}
#: A valid object of each kind, which a test changes at one field.
VALID: dict[str, Obj] = {
    "ClusterQueue": {"spec": {}},
    "LocalQueue": {"metadata": {"namespace": "default"}, "spec": {"clusterQueue": "cq"}},
    "AdmissionCheck": {"spec": {"controllerName": "example.com/check"}},
    "WorkloadPriorityClass": {"value": 100},
    "ResourceFlavor": {"spec": {}},
    "ProvisioningRequestConfig": {"spec": {"provisioningClassName": "check-capacity.autoscaling.x-k8s.io"}},
    "Topology": {"spec": {"levels": [{"nodeLabel": "example.com/rack"}]}},
    "MultiKueueCluster": {"spec": {"kubeConfig": {"location": "worker-1"}}},
    "Cohort": {"spec": {}},
    "MultiKueueConfig": {"spec": {"clusters": ["worker-1"]}},
    "Workload": {
        "metadata": {"namespace": "default"},
        "spec": {
            "queueName": "q",
            "podSets": [{"count": 2, "template": {"spec": {"containers": [{"name": "c"}]}}}],
        },
    },
}


#: Where a version's valid object differs from the kind's.
VALID_AT: dict[tuple[str, str], Obj] = {
    ("MultiKueueCluster", "v1beta2"): {"spec": {"clusterSource": {"kubeConfig": {"location": "worker-1"}}}},
}
#: A v1beta2 priority class reference (of a WorkloadPriorityClass, or a pod PriorityClass).
WPC_REF = {"group": "kueue.x-k8s.io", "kind": "WorkloadPriorityClass", "name": "low"}
POD_PRIORITY_REF = {"group": "scheduling.k8s.io", "kind": "PriorityClass", "name": "low"}
VALID_AT[("Workload", "v1beta2")] = {
    **VALID["Workload"],
    "spec": {**VALID["Workload"]["spec"], "priorityClassRef": WPC_REF, "priority": 1},
}


def valid(kind: str, version: str, name: str = "x", **fields: Any) -> Obj:
    base = copy.deepcopy(VALID_AT.get((kind, version), VALID[kind]))
    return {
        "apiVersion": f"{GROUP}/{version}",
        "kind": kind,
        **base,
        **fields,
        "metadata": {**base.get("metadata", {}), "name": name},
    }


def placed(obj: Obj, path: str, value: Any) -> Obj:
    """``obj`` with ``value`` at ``path`` (``.spec.a.b``), its parents made."""
    *parents, leaf = path.strip(".").split(".")
    here = obj
    for name in parents:
        here = here.setdefault(name, {})
    here[leaf] = value
    return obj


#: A Kueue webhook's field errors, aggregated (kube's ``utilerrors`` text: ``[a, b]`` for several).
_WEBHOOK_ERRORS = re.compile(r", (?=(?:spec|status|metadata)[.\[])")


def webhook_causes(status: Obj, webhook: str) -> list[str]:
    """The field errors of a Kueue webhook's refusal (``admission webhook "<webhook>" denied the
    request: <errors>``, 403 Forbidden, as controller-runtime answers a validator's errors)."""
    assert status["code"] == 403 and status["reason"] == "Forbidden", status
    prefix = f'admission webhook "{webhook}" denied the request: '
    assert status["message"].startswith(prefix), status
    text = status["message"][len(prefix) :]
    several = text.startswith("[") and text.endswith("]")
    return _WEBHOOK_ERRORS.split(text[1:-1]) if several else [text]


async def refused(hub: Client, obj: Obj, old: Obj | None = None, *, webhook: str | None = None) -> list[str]:
    """The causes (``field: message``) of the refusal of ``obj``'s create (or of its update,
    after ``old`` is created): a 422's, or with ``webhook`` the errors that Kueue webhook's 403
    gives."""
    url = f"/apis/{GROUP}/{obj['apiVersion'].split('/')[1]}/{RESOURCES[obj['kind']]}"
    if old is not None:
        created = await hub.post(url, json=old)
        assert created.status == 201, await created.text()
        obj["metadata"]["resourceVersion"] = (await created.json())["metadata"]["resourceVersion"]
        answer = await hub.put(f"{url}/{obj['metadata']['name']}", json=obj)
    else:
        answer = await hub.post(url, json=obj)
    status = await answer.json()
    if webhook is not None:
        return webhook_causes(status, webhook)
    assert answer.status == 422, status
    return [f"{c['field']}: {c['message']}" for c in status["details"]["causes"]]


def _group(covered: list[str], *quotas: Obj) -> list[Obj]:
    return [{"coveredResources": covered, "flavors": [{"name": "f", "resources": list(quotas)}]}]


TAINT_EFFECTS = "supported taint effect values: 'NoSchedule', 'PreferNoSchedule', 'NoExecute'"
#: Per CEL rule of the list, ``(spec written, spec before it or None, field, its type)``: a
#: write the rule refuses, and the field and type kube names.
CEL_EXAMPLES: dict[tuple[str, str, str], tuple[Obj, Obj | None, str, str]] = {
    ("ClusterQueue", ".spec", "borrowingLimit must be nil when cohort is empty"): (
        {"resourceGroups": _group(["cpu"], {"name": "cpu", "nominalQuota": 4, "borrowingLimit": 2})},
        None,
        "spec",
        "object",
    ),
    ("ClusterQueue", ".spec.preemption", "reclaimWithinCohort=Never and borrowWithinCohort.Policy!=Never"): (
        {"preemption": {"borrowWithinCohort": {"policy": "LowerPriority"}}},
        None,
        "spec.preemption",
        "object",
    ),
    (
        "ClusterQueue",
        ".spec.resourceGroups[]",
        "flavors must have the same number of resources as the coveredResources",
    ): (
        {"resourceGroups": _group(["cpu", "memory"], {"name": "cpu", "nominalQuota": 4})},
        None,
        "spec.resourceGroups[0]",
        "object",
    ),
    ("LocalQueue", ".spec.clusterQueue", "field is immutable"): (
        {"clusterQueue": "other"},
        {"clusterQueue": "cq"},
        "spec.clusterQueue",
        "string",
    ),
    ("AdmissionCheck", ".spec.controllerName", "field is immutable"): (
        {"controllerName": "example.com/other"},
        {"controllerName": "example.com/check"},
        "spec.controllerName",
        "string",
    ),
    ("ResourceFlavor", ".spec", "at least one nodeLabel is required when topology is set"): (
        {"topologyName": "dc", "nodeLabels": {}},
        None,
        "spec",
        "object",
    ),
    ("ResourceFlavor", ".spec", "resourceFlavorSpec are immutable when topologyName is set"): (
        {"topologyName": "dc", "nodeLabels": {"a": "2"}},
        {"topologyName": "dc", "nodeLabels": {"a": "1"}},
        "spec",
        "object",
    ),
    ("ResourceFlavor", ".spec.nodeTaints", TAINT_EFFECTS): (
        {"nodeTaints": [{"key": "gpu", "effect": "Sometimes"}]},
        None,
        "spec.nodeTaints",
        "array",
    ),
    (
        "ResourceFlavor",
        ".spec.tolerations",
        "operator must be Exists when 'key' is empty, which means 'match all values and all keys'",
    ): ({"tolerations": [{"operator": "Equal", "value": "v"}]}, None, "spec.tolerations", "array"),
    ("ResourceFlavor", ".spec.tolerations", "effect must be 'NoExecute' when 'tolerationSeconds' is set"): (
        {"tolerations": [{"key": "k", "effect": "NoSchedule", "tolerationSeconds": 5}]},
        None,
        "spec.tolerations",
        "array",
    ),
    ("ResourceFlavor", ".spec.tolerations", "supported toleration values: 'Equal'(default), 'Exists'"): (
        {"tolerations": [{"key": "k", "operator": "In"}]},
        None,
        "spec.tolerations",
        "array",
    ),
    ("ResourceFlavor", ".spec.tolerations", "a value must be empty when 'operator' is 'Exists'"): (
        {"tolerations": [{"key": "k", "operator": "Exists", "value": "v"}]},
        None,
        "spec.tolerations",
        "array",
    ),
    ("ResourceFlavor", ".spec.tolerations", TAINT_EFFECTS): (
        {"tolerations": [{"key": "k", "effect": "Sometimes"}]},
        None,
        "spec.tolerations",
        "array",
    ),
    ("Topology", ".spec.levels", "field is immutable"): (
        {"levels": [{"nodeLabel": "example.com/block"}]},
        {"levels": [{"nodeLabel": "example.com/rack"}]},
        "spec.levels",
        "array",
    ),
    ("Topology", ".spec.levels", "must be unique"): (
        {"levels": [{"nodeLabel": "example.com/rack"}, {"nodeLabel": "example.com/rack"}]},
        None,
        "spec.levels",
        "array",
    ),
    (
        "Cohort",
        ".spec.resourceGroups[]",
        "flavors must have the same number of resources as the coveredResources",
    ): (
        {"resourceGroups": _group(["cpu", "memory"], {"name": "cpu", "nominalQuota": 4})},
        None,
        "spec.resourceGroups[0]",
        "object",
    ),
    (
        "MultiKueueCluster",
        ".spec.clusterSource",
        "exactly one of the fields in [kubeConfig clusterProfileRef] must be set",
    ): (
        {"clusterSource": {"kubeConfig": {"location": "w"}, "clusterProfileRef": {"name": "w"}}},
        None,
        "spec.clusterSource",
        "object",
    ),
    (
        "Topology",
        ".spec.levels",
        "the kubernetes.io/hostname label can only be used at the lowest level of topology",
    ): (
        {"levels": [{"nodeLabel": "kubernetes.io/hostname"}, {"nodeLabel": "example.com/rack"}]},
        None,
        "spec.levels",
        "array",
    ),
}


def _condition(kind: str) -> Obj:
    return {
        "type": kind,
        "status": "True",
        "reason": kind,
        "message": "",
        "lastTransitionTime": "2026-01-01T00:00:00Z",
    }


def _reserved(*assigned: str, admitted: bool = False) -> Obj:
    """A Workload's status holding quota for the pod sets ``assigned`` (and admitted)."""
    conditions = [_condition("QuotaReserved"), *([_condition("Admitted")] if admitted else [])]
    assignments = [{"name": name, "flavors": {"cpu": "f"}, "count": 2} for name in assigned]
    return {"conditions": conditions, "admission": {"clusterQueue": "cq", "podSetAssignments": assignments}}


def _tolerations(*tolerations: Obj) -> Obj:
    update = {"name": "main", "tolerations": list(tolerations)}
    check = {"name": "c", "state": "Pending", "message": "", "lastTransitionTime": "2026-01-01T00:00:00Z"}
    return {"admissionChecks": [{**check, "podSetUpdates": [update]}]}


CHECK_TOLERATIONS = "status.admissionChecks[0].podSetUpdates[0].tolerations"
#: Per CEL rule of a Workload, its cases: ``(spec it is created with, status written then, the
#: write the rule refuses: ("spec", fields) or ("status", status), field kube names, its type)``.
WORKLOAD_CEL_EXAMPLES: dict[tuple[str, str], list[tuple[Obj, Obj | None, tuple[str, Obj], str, str]]] = {
    (".", "podSetAssignments must have the same number of podSets as the spec"): [
        ({}, None, ("status", _reserved("main", "other")), "<nil>", "object"),
    ],
    (".", "field is immutable"): [
        (
            {},
            _reserved("main"),
            ("spec", {"priorityClassSource": "scheduling.k8s.io/priorityclass"}),
            "<nil>",
            "object",
        ),
        (
            {"priorityClassName": "low", "priority": 1},
            _reserved("main"),
            ("spec", {"priorityClassName": "high", "priority": 1}),
            "<nil>",
            "object",
        ),
        ({}, _reserved("main"), ("spec", {"queueName": "other"}), "<nil>", "object"),
    ],
    (".", "maximumExecutionTimeSeconds is immutable while admitted"): [
        (
            {"maximumExecutionTimeSeconds": 60},
            _reserved("main", admitted=True),
            ("spec", {"maximumExecutionTimeSeconds": 120}),
            "<nil>",
            "object",
        ),
    ],
    (".spec", "priority should not be nil when priorityClassName is set"): [
        ({"priorityClassName": "low"}, None, ("create", {}), "spec", "object"),
    ],
    (".spec", "priority should not be nil when priorityClassRef is set"): [
        ({"priority": None}, None, ("create", {}), "spec", "object"),
    ],
    (".spec.priorityClassRef", "only the PriorityClass kind is allowed for the scheduling.k8s.io group"): [
        (
            {"priorityClassRef": {**POD_PRIORITY_REF, "kind": "WorkloadPriorityClass"}},
            None,
            ("create", {}),
            "spec.priorityClassRef",
            "object",
        ),
    ],
    (
        ".spec.priorityClassRef",
        "only the WorkloadPriorityClass kind is allowed for the kueue.x-k8s.io group",
    ): [
        (
            {"priorityClassRef": {**WPC_REF, "kind": "PriorityClass"}},
            None,
            ("create", {}),
            "spec.priorityClassRef",
            "object",
        ),
    ],
    (".", "priorityClassRef is immutable while workload quota reserved"): [
        ({}, _reserved("main"), ("spec", {"priorityClassRef": None}), "<nil>", "object"),
    ],
    **{
        (".", f"priorityClassRef.{field} is immutable while workload quota reserved"): [
            ({}, _reserved("main"), ("spec", {"priorityClassRef": POD_PRIORITY_REF}), "<nil>", "object"),
        ]
        for field in ("group", "kind")
    },
    (
        ".",
        "priorityClassRef.name is immutable for scheduling.k8s.io/priorityclass while workload quota reserved",
    ): [
        (
            {"priorityClassRef": POD_PRIORITY_REF},
            _reserved("main"),
            ("spec", {"priorityClassRef": {**POD_PRIORITY_REF, "name": "high"}}),
            "<nil>",
            "object",
        ),
    ],
    (".", "queueName is immutable while workload quota reserved"): [
        ({}, _reserved("main"), ("spec", {"queueName": "other"}), "<nil>", "object"),
    ],
    (".", "maximumExecutionTimeSeconds is immutable while workload quota reserved"): [
        (
            {"maximumExecutionTimeSeconds": 60},
            _reserved("main", admitted=True),
            ("spec", {"maximumExecutionTimeSeconds": 120}),
            "<nil>",
            "object",
        ),
    ],
    (".status", "clusterName is immutable once set"): [
        ({}, {"clusterName": "worker-1"}, ("status", {"clusterName": "worker-2"}), "status", "object"),
    ],
    (".status", "clusterName and nominatedClusterNames are mutually exclusive"): [
        (
            {},
            None,
            ("status", {"clusterName": "worker-1", "nominatedClusterNames": ["worker-2"]}),
            "status",
            "object",
        ),
    ],
    (".spec.podSets[]", "minCount should be positive and less or equal to count"): [
        (
            {"podSets": [{"count": 2, "minCount": 3, "template": {}}]},
            None,
            ("create", {}),
            "spec.podSets[0]",
            "object",
        ),
    ],
}
#: A flavor's toleration rules are a check's too, with the same examples.
WORKLOAD_CEL_EXAMPLES.update(
    {
        (".status.admissionChecks[].podSetUpdates[].tolerations", message): [
            ({}, None, ("status", _tolerations(*spec["tolerations"])), CHECK_TOLERATIONS, "array")
        ]
        for (_, path, message), (spec, _, _, _) in CEL_EXAMPLES.items()
        if path == ".spec.tolerations"
    }
)


def _assigned(levels: list[str], *slices: Obj) -> Obj:
    """A Workload's v1beta2 status whose pod set is assigned ``slices`` of a topology of ``levels``."""
    topology = {"levels": levels, "slices": list(slices)}
    assignment = {"name": "main", "flavors": {"cpu": "f"}, "count": 2, "topologyAssignment": topology}
    return {"admission": {"clusterQueue": "cq", "podSetAssignments": [assignment]}}


def _slice(count: int, pods: Obj, *per_level: Obj) -> Obj:
    return {"domainCount": count, "podCounts": pods, "valuesPerLevel": list(per_level)}


#: A v1beta2 topology assignment's node and one of its slices, as kube names them.
ASSIGNED = "status.admission.podSetAssignments[0].topologyAssignment"
SLICE = f"{ASSIGNED}.slices[0]"
EXACTLY_ONE = "exactly one of the fields in [universal individual] must be set"
#: The rules of a v1beta2 topology assignment (its levels and slices), each refusing a status write.
WORKLOAD_CEL_EXAMPLES.update(
    {
        (
            TOPOLOGY_ASSIGNMENT,
            "valuesPerLevel must have the same length as the number of levels in this TopologyAssignment",
        ): [
            (
                {},
                None,
                (
                    "status",
                    _assigned(
                        ["rack"], _slice(1, {"universal": 2}, {"universal": "b1"}, {"universal": "r1"})
                    ),
                ),
                ASSIGNED,
                "object",
            )
        ],
        (f"{TOPOLOGY_ASSIGNMENT}.slices[]", "podCounts.individual must have length equal to domainCount"): [
            (
                {},
                None,
                (
                    "status",
                    _assigned(
                        ["rack"], _slice(2, {"individual": [2]}, {"individual": {"roots": ["r1", "r2"]}})
                    ),
                ),
                SLICE,
                "object",
            )
        ],
        (
            f"{TOPOLOGY_ASSIGNMENT}.slices[]",
            "valuesPerLevel.individual, if set, must have roots of length equal to domainCount of this "
            "TopologyAssignmentSlice",
        ): [
            (
                {},
                None,
                (
                    "status",
                    _assigned(["rack"], _slice(2, {"universal": 1}, {"individual": {"roots": ["r1"]}})),
                ),
                SLICE,
                "object",
            )
        ],
        (f"{TOPOLOGY_ASSIGNMENT}.slices[].podCounts", EXACTLY_ONE): [
            (
                {},
                None,
                ("status", _assigned(["rack"], _slice(1, pods, {"universal": "r1"}))),
                f"{SLICE}.podCounts",
                "object",
            )
            for pods in ({"universal": 2, "individual": [2]}, {})
        ],
        (f"{TOPOLOGY_ASSIGNMENT}.slices[].valuesPerLevel[]", EXACTLY_ONE): [
            (
                {},
                None,
                ("status", _assigned(["rack"], _slice(1, {"universal": 2}, values))),
                f"{SLICE}.valuesPerLevel[0]",
                "object",
            )
            for values in ({"universal": "r1", "individual": {"roots": ["r1"]}}, {})
        ],
    }
)


#: Where an example of a Workload's rule fails another rule too, all it fails, in the CRD's order
#: (a reference's group changes with its kind, or the kind would not be its group's).
REFUSED_TOGETHER: dict[tuple[str, str], list[str]] = {
    (".", f"priorityClassRef.{field} is immutable while workload quota reserved"): [
        f'<nil>: Invalid value: "object": priorityClassRef.{both} is immutable while workload quota reserved'
        for both in ("group", "kind")
    ]
    for field in ("group", "kind")
}


def test_every_cel_rule_of_the_list_has_an_example() -> None:
    examples = {*CEL_EXAMPLES, *(("Workload", path, message) for path, message in WORKLOAD_CEL_EXAMPLES)}
    assert {(kind, path, message) for kind, _, path, message in CEL_RULES} == examples


def workload_cel_cases() -> list[tuple[str, str, str, int]]:
    """Each Workload rule of each version, with each of its examples."""
    return [
        (version, path, message, i)
        for kind, version, path, message in CEL_RULES
        if kind == "Workload"
        for i in range(len(WORKLOAD_CEL_EXAMPLES[(path, message)]))
    ]


@pytest.mark.parametrize(("version", "path", "message", "case"), workload_cel_cases())
async def test_each_workload_cel_rule_refuses_in_kubes_words(
    hub: Client, version: str, path: str, message: str, case: int
) -> None:
    """A Workload's rules, on its create, a spec update or a status write after its quota is
    reserved (kube checks a CRD's rules on a status write too), each version's in its own form: a
    v1beta2 write names v1beta2's fields, in v1beta2's words."""
    spec, before, (write, fields), field, shown = WORKLOAD_CEL_EXAMPLES[(path, message)][case]
    url = f"/apis/{GROUP}/{version}/namespaces/default/workloads"
    obj = valid("Workload", version)
    obj["spec"].update(spec)
    obj["spec"] = {name: value for name, value in obj["spec"].items() if value is not None}
    if write == "create":
        causes = await refused(hub, obj)
    else:
        created = await hub.post(url, json=obj)
        assert created.status == 201, await created.text()
        stored = await created.json()
        if before is not None:
            answer = await hub.put(f"{url}/x/status", json={**stored, "status": before})
            assert answer.status == 200, await answer.text()
            stored = await answer.json()
        if write == "status":
            answer = await hub.put(f"{url}/x/status", json={**stored, "status": fields})
        else:
            answer = await hub.put(f"{url}/x", json={**stored, "spec": {**stored["spec"], **fields}})
        status = await answer.json()
        assert answer.status == 422, status
        causes = [f"{c['field']}: {c['message']}" for c in status["details"]["causes"]]
    cause = f'{field}: Invalid value: "{shown}": {message}'
    assert cause in causes
    assert causes == REFUSED_TOGETHER.get((path, message), [cause])


@pytest.mark.parametrize(
    ("kind", "version", "path", "message"), [rule for rule in CEL_RULES if rule[0] != "Workload"]
)
async def test_each_cel_rule_refuses_in_kubes_words(
    hub: Client, kind: str, version: str, path: str, message: str
) -> None:
    spec, before, field, shown = CEL_EXAMPLES[(kind, path, message)]
    obj = valid(kind, version, spec=spec)
    old = valid(kind, version, spec=before) if before is not None else None
    assert f'{field}: Invalid value: "{shown}": {message}' in await refused(hub, obj, old)


@pytest.mark.parametrize("version", ["v1beta1", "v1beta2"])
async def test_a_lending_limit_of_a_queue_without_a_cohort_is_refused_as_kueues_webhook_does(
    hub: Client, version: str
) -> None:
    """The CRD's rule is of borrowing limits only; Kueue's webhook refuses a lending limit, at
    the limit; with a borrowing limit too, the failed rule alone answers (kube calls no webhook)."""
    lending = {"name": "cpu", "nominalQuota": 4, "lendingLimit": "2"}
    obj = valid("ClusterQueue", version, spec={"resourceGroups": _group(["cpu"], lending)})
    assert await refused(hub, obj, webhook="vclusterqueue.kb.io") == [
        'spec.resourceGroups[0].flavors[0].resources[0].lendingLimit: Invalid value: "2": must be nil when cohort is empty',
    ]
    both = valid(
        "ClusterQueue",
        version,
        name="y",
        spec={"resourceGroups": _group(["cpu"], {**lending, "borrowingLimit": 1})},
    )
    assert await refused(hub, both) == [
        'spec: Invalid value: "object": borrowingLimit must be nil when cohort is empty'
    ]


@pytest.mark.parametrize("version", ["v1alpha1", "v1beta1", "v1beta2"])
async def test_a_root_cohorts_limits_are_refused_as_kueues_webhook_does(hub: Client, version: str) -> None:
    """Kueue's Cohort CRD has no rule of limits; its webhook (``validateLimit``, ``isCohort``)
    refuses each limit of a Cohort without a parent, in its words, at the limit."""
    limits = {"name": "cpu", "nominalQuota": 4, "borrowingLimit": "1000m", "lendingLimit": 2}
    obj = valid("Cohort", version, spec={"resourceGroups": _group(["cpu"], limits)})
    quota = "spec.resourceGroups[0].flavors[0].resources[0]"
    assert await refused(hub, obj, webhook="vcohort.kb.io") == [
        f'{quota}.borrowingLimit: Invalid value: "1": must be nil when parent is empty',
        f'{quota}.lendingLimit: Invalid value: "2": must be nil when parent is empty',
    ]
    parent = "parent" if version == "v1alpha1" else "parentName"
    child = valid("Cohort", version, name="y", spec={parent: "x", "resourceGroups": _group(["cpu"], limits)})
    created = await hub.post(f"/apis/{GROUP}/{version}/cohorts", json=child)
    assert created.status == 201, await created.text()


@pytest.mark.parametrize("kind", ["ClusterQueue", "Cohort"])
async def test_negative_quotas_are_refused_as_kueues_webhook_does(hub: Client, kind: str) -> None:
    """The CRD takes any quantity; Kueue's webhook (``validateResourceQuantity``) refuses one
    below 0 in apimachinery's words, shown as Go prints the Quantity."""
    parent = {"cohort": "c"} if kind == "ClusterQueue" else {"parentName": "c"}
    negative = {"name": "cpu", "nominalQuota": "-1000m", "borrowingLimit": -2, "lendingLimit": "-3"}
    obj = valid(kind, "v1beta1", spec={**parent, "resourceGroups": _group(["cpu"], negative)})
    quota = "spec.resourceGroups[0].flavors[0].resources[0]"
    webhook = "vclusterqueue.kb.io" if kind == "ClusterQueue" else "vcohort.kb.io"
    assert await refused(hub, obj, webhook=webhook) == [
        f'{quota}.nominalQuota: Invalid value: "-1": must be greater than or equal to 0',
        f'{quota}.borrowingLimit: Invalid value: "-2": must be greater than or equal to 0',
        f'{quota}.lendingLimit: Invalid value: "-3": must be greater than or equal to 0',
    ]


@pytest.mark.parametrize("kind", ["ClusterQueue", "Cohort"])
async def test_a_fair_sharing_weight_below_0_or_collapsing_is_refused_as_kueues_webhook_does(
    hub: Client, kind: str
) -> None:
    """Kueue's ``validateFairSharing``: at ``spec.fairSharing``, the weight as Go prints it."""
    webhook = "vclusterqueue.kb.io" if kind == "ClusterQueue" else "vcohort.kb.io"
    negative = valid(kind, "v1beta1", spec={"fairSharing": {"weight": "-500m"}})
    assert await refused(hub, negative, webhook=webhook) == [
        'spec.fairSharing: Invalid value: "-500m": must be greater than or equal to 0'
    ]
    tiny = valid(kind, "v1beta1", name="t", spec={"fairSharing": {"weight": "1n"}})
    assert await refused(hub, tiny, webhook=webhook) == [
        'spec.fairSharing: Invalid value: "1n": When not 0, weight must be > 10e-9'
    ]
    for name, weight in (("zero", "0"), ("small", "2n")):
        taken = valid(kind, "v1beta1", name=name, spec={"fairSharing": {"weight": weight}})
        answer = await hub.post(f"/apis/{GROUP}/v1beta1/{RESOURCES[kind]}", json=taken)
        assert answer.status == 201, await answer.text()


@pytest.mark.parametrize("version", ["v1beta1", "v1beta2"])
async def test_a_lending_limit_above_the_nominal_quota_is_refused_as_kueues_webhook_does(
    hub: Client, version: str
) -> None:
    """Kueue's webhook (``validateLendingLimit``): a lending limit may not exceed its quota's
    ``nominalQuota``, in a cohort or not (then both refusals), shown as Kueue's Quantity prints it."""
    cohort = "cohort" if version == "v1beta1" else "cohortName"
    above = {"name": "cpu", "nominalQuota": "1", "lendingLimit": "2000m"}
    obj = valid("ClusterQueue", version, spec={cohort: "c", "resourceGroups": _group(["cpu"], above)})
    limit = "spec.resourceGroups[0].flavors[0].resources[0].lendingLimit"
    assert await refused(hub, obj, webhook="vclusterqueue.kb.io") == [
        f'{limit}: Invalid value: "2": must be less than or equal to the nominalQuota'
    ]
    alone = valid("ClusterQueue", version, name="z", spec={"resourceGroups": _group(["cpu"], above)})
    assert await refused(hub, alone, webhook="vclusterqueue.kb.io") == [
        f'{limit}: Invalid value: "2": must be nil when cohort is empty',
        f'{limit}: Invalid value: "2": must be less than or equal to the nominalQuota',
    ]
    equal = valid(
        "ClusterQueue",
        version,
        name="w",
        spec={cohort: "c", "resourceGroups": _group(["cpu"], {**above, "lendingLimit": "1000m"})},
    )
    created = await hub.post(f"/apis/{GROUP}/{version}/clusterqueues", json=equal)
    assert created.status == 201, await created.text()


@pytest.mark.parametrize("version", ["v1beta1", "v1beta2"])
async def test_a_flavors_node_labels_and_taints_are_checked_as_kueues_webhook_does(
    hub: Client, version: str
) -> None:
    """Kueue's ResourceFlavor webhook: ``nodeLabels`` by kube's ``ValidateLabels``, each taint's key
    and value as a label's, and no two taints of one key and effect (once the CRD's rules pass)."""
    spec = {
        "nodeLabels": {"a/b/c": "x y"},
        "nodeTaints": [
            {"key": "k k", "effect": "NoSchedule"},
            {"key": "gpu", "value": "-bad", "effect": "NoSchedule"},
            {"key": "gpu", "value": "two", "effect": "NoSchedule"},
            {"key": "gpu", "effect": "NoExecute"},
        ],
    }
    qualified = (
        "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with "
        "an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is "
        "'([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"
    )
    value = (
        "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must "
        "start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used "
        "for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"
    )
    assert await refused(
        hub, valid("ResourceFlavor", version, spec=spec), webhook="vresourceflavor.kb.io"
    ) == [
        'spec.nodeLabels: Invalid value: "a/b/c": a qualified name must consist of alphanumeric characters, '
        "'-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  "
        "or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]') with an "
        "optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')",
        f'spec.nodeLabels: Invalid value: "x y": {value}',
        f'spec.nodeTaints[0].key: Invalid value: "k k": {qualified}',
        f'spec.nodeTaints[1].value: Invalid value: "-bad": {value}',
        'spec.nodeTaints[2]: Duplicate value: v1.Taint{Key:"gpu", Value:"two", Effect:"NoSchedule", '
        "TimeAdded:(*v1.Time)(nil)}: taints must be unique by key and effect pair",
    ]


@pytest.mark.parametrize("version", ["v1beta1", "v1beta2"])
async def test_resource_groups_are_checked_as_kueues_webhook_checks_them(hub: Client, version: str) -> None:
    """Kueue's ``validateResourceGroups``, group by group: covered resources qualified names and
    each once across the groups, quotas named as the covered resources in order, a flavor once
    across the groups; a Cohort's resource groups alike."""
    groups = [
        {
            "coveredResources": ["cpu", "a/b/c"],
            "flavors": [
                {
                    "name": "f",
                    "resources": [
                        {"name": "memory", "nominalQuota": 1},
                        {"name": "a/b/c", "nominalQuota": 1},
                    ],
                }
            ],
        },
        {
            "coveredResources": ["cpu"],
            "flavors": [{"name": "f", "resources": [{"name": "cpu", "nominalQuota": 1}]}],
        },
    ]
    qualified = (
        "a qualified name must consist of alphanumeric characters, '-', '_' or '.', and must start and end with "
        "an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is "
        "'([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]') with an optional DNS subdomain prefix and '/' "
        "(e.g. 'example.com/MyName')"
    )
    expected = [
        f'spec.resourceGroups[0].coveredResources[1]: Invalid value: "a/b/c": {qualified}',
        'spec.resourceGroups[0].flavors[0].resources[0].name: Invalid value: "memory": must match the name in '
        "coveredResources",
        'spec.resourceGroups[1].coveredResources[0]: Duplicate value: "cpu"',
        'spec.resourceGroups[1].flavors[0].name: Duplicate value: "f"',
    ]
    cluster_queue = valid("ClusterQueue", version, spec={"resourceGroups": groups})
    assert await refused(hub, cluster_queue, webhook="vclusterqueue.kb.io") == expected
    assert (
        await refused(hub, valid("Cohort", version, spec={"resourceGroups": groups}), webhook="vcohort.kb.io")
        == expected
    )


def enum_cases() -> list[tuple[str, str, str, list[str]]]:
    out = []
    for (kind, version, path), rules in sorted(RULES.items()):
        served = DELIBERATE.get((kind, version, path), (rules, ""))[0]
        enum = next((rule.split("=", 1)[1] for rule in served.split() if rule.startswith("enum=")), None)
        if enum is not None and "[]" not in path:
            out.append((kind, version, path, enum.split(",")))
    return out


@pytest.mark.parametrize(("kind", "version", "path", "values"), enum_cases())
async def test_a_value_out_of_an_enum_is_refused_in_kubes_words(
    hub: Client,
    kind: str,
    version: str,
    path: str,
    values: list[str],
) -> None:
    supported = ", ".join(f'"{value}"' for value in values)
    obj = placed(valid(kind, version), path, "Foo")
    assert await refused(hub, obj) == [f'{path[1:]}: Unsupported value: "Foo": supported values: {supported}']


@pytest.mark.parametrize(
    ("kind", "version", "spec", "cause"),
    [
        (
            "ClusterQueue",
            "v1beta1",
            {"cohort": "Team_A"},
            f"spec.cohort: Invalid value: \"Team_A\": spec.cohort in body should match '{DNS}'",
        ),
        (
            "ClusterQueue",
            "v1beta2",
            {"cohortName": "x" * 254},
            "spec.cohortName: Too long: may not be more than 253 bytes",
        ),
        (
            "ClusterQueue",
            "v1beta1",
            {"admissionChecks": ["c" * 317]},
            "spec.admissionChecks[0]: Too long: may not be more than 316 bytes",
        ),
        (
            "ClusterQueue",
            "v1beta2",
            {"admissionChecksStrategy": {"admissionChecks": [{"name": "c", "onFlavors": ["A100"]}]}},
            'spec.admissionChecksStrategy.admissionChecks[0].onFlavors[0]: Invalid value: "A100": '
            f"spec.admissionChecksStrategy.admissionChecks[0].onFlavors[0] in body should match '{DNS}'",
        ),
        (
            "ClusterQueue",
            "v1beta1",
            {
                "resourceGroups": [
                    {"coveredResources": ["cpu"], "flavors": [{"name": "f", "resources": [{"name": "cpu"}]}]}
                ]
            },
            "spec.resourceGroups[0].flavors[0].resources[0].nominalQuota: Required value",
        ),
        (
            "LocalQueue",
            "v1beta1",
            {"clusterQueue": "Team_A"},
            f"spec.clusterQueue: Invalid value: \"Team_A\": spec.clusterQueue in body should match '{DNS}'",
        ),
        (
            "AdmissionCheck",
            "v1beta1",
            {"controllerName": "c", "parameters": {"apiGroup": "g", "kind": "K", "name": "n" * 64}},
            "spec.parameters.name: Too long: may not be more than 63 bytes",
        ),
        (
            "ProvisioningRequestConfig",
            "v1beta2",
            {"provisioningClassName": "c", "parameters": {"zone": "z" * 256}},
            "spec.parameters.zone: Too long: may not be more than 255 bytes",
        ),
    ],
)
async def test_what_the_crd_bounds_is_refused_in_kubes_words(
    hub: Client, kind: str, version: str, spec: Obj, cause: str
) -> None:
    assert await refused(hub, valid(kind, version, spec=spec)) == [cause]


@pytest.mark.parametrize("version", ["v1beta1", "v1beta2"])
async def test_a_status_flavor_usage_needs_its_resources_and_a_local_queue_holds_sixteen(
    hub: Client, version: str
) -> None:
    """``flavorsUsage[].resources`` is required; a LocalQueue's usage has at most 16 flavors
    (a ClusterQueue's 64), as Kueue's CRDs say."""
    usage = "flavorUsage" if version == "v1beta1" else "flavorsUsage"
    queue = valid("LocalQueue", version, name="q")
    url = f"/apis/{GROUP}/{version}/namespaces/default/localqueues/q"
    assert (await hub.post(url.rsplit("/", 1)[0], json=queue)).status == 201
    stored = await (await hub.get(url)).json()
    flavors = [{"name": f"f{i}", "resources": []} for i in range(17)]
    answer = await hub.put(f"{url}/status", json={**stored, "status": {usage: flavors}})
    assert answer.status == 422
    assert [c["message"] for c in (await answer.json())["details"]["causes"]] == [
        "Too many: 17: must have at most 16 items"
    ]
    answer = await hub.put(
        f"{url}/status", json={**stored, "status": {"flavorsReservation": [{"name": "f"}]}}
    )
    assert answer.status == 422
    causes = (await answer.json())["details"]["causes"]
    assert [(c["field"], c["message"]) for c in causes] == [
        ("status.flavorsReservation[0].resources", "Required value")
    ]


@pytest.mark.parametrize(
    ("spec", "cause"),
    [
        (
            {"topologyName": "dc"},
            'spec: Invalid value: "object": no such key: nodeLabels evaluating rule: '
            "at least one nodeLabel is required when topology is set",
        ),
        (
            {"tolerations": [{"value": "v"}]},
            'spec.tolerations: Invalid value: "array": no such key: operator evaluating rule: '
            "operator must be Exists when 'key' is empty, which means 'match all values and all keys'",
        ),
        (
            {"tolerations": [{"key": "k", "tolerationSeconds": 5}]},
            'spec.tolerations: Invalid value: "array": no such key: effect evaluating rule: '
            "effect must be 'NoExecute' when 'tolerationSeconds' is set",
        ),
    ],
)
async def test_a_rule_reading_a_missing_field_is_an_evaluation_error_in_kubes_words(
    hub: Client, spec: Obj, cause: str
) -> None:
    """kube's CEL validator reports a rule that reads an absent field (``self.nodeLabels.size()``
    without ``nodeLabels``) as ``no such key: <field> evaluating rule: <message>``
    (apiextensions-apiserver ``schema/cel/validation.go``), not as the rule's own failure."""
    assert await refused(hub, valid("ResourceFlavor", "v1beta2", spec=spec)) == [cause]
