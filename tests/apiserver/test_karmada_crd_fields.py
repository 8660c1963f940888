"""Karmada's YAML applies unchanged: every field of Karmada's CRDs (``tests/data/karmada_crd_fields.txt``,
path by path) is declared by the schema the hub serves for the kind, with a type, an enum and
requirements that take what the CRD takes, and the CRD's defaults and bounds (formats, patterns,
lengths, minimums, maximums, list sizes) but for the differences named here; server-side apply
with ``fieldValidation=Strict`` of the fields the hub lacked before stores them."""

from __future__ import annotations

import re
from typing import Any

import pytest
import yaml
from aiohttp.test_utils import TestClient

from controlplane.apiserver.openapi.catalog import SchemaCatalog
from controlplane.apiserver.openapi.upstream import UpstreamDefinitions
from controlplane.apiserver.resources import Registry
from policies.taint_policy import MatchCondition, conditions_match

from .karmada_crd_fields import DATA, OPEN, Field, ServedSchema, crd_lines, upstream_kinds
from .test_openapi import catalog, registry, upstream  # noqa: F401 (fixtures: the hub's registry and schemas)

Client = TestClient[Any, Any]
APPLY = {"Content-Type": "application/apply-patch+yaml"}
#: Where the hub's schema deliberately differs from the CRD's (README, *Karmada's CRDs, field for field*).
DELIBERATE = {
    ("WorkloadRebalancer", "status.observedWorkloads[].result: enum ['Successful', 'Failed'] lacks ['<any>']"),
}
_QUANTITY = r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$"
_PROPAGATION_BOUNDS = {
    # Newer karmada-webhook refuses an alias that is not a qualified name, "" among them.
    "spec.failover.application.statePreservation.rules[].aliasLabelName: minLength 1, which the CRD does not have",
}
_OVERRIDE_BOUNDS = {  # the hub's own (README): not loosened
    f"spec.{where}overriders.plaintext[].path: minLength 1, which the CRD does not have" for where in ("", "overrideRules[].")
}
#: Where the hub's defaults and bounds differ from the CRD's, by kind (README, *Karmada's CRDs,
#: field for field*): each is compared, so one that goes or comes fails the test.
VALUE_DIFFERENCES: dict[str, set[str]] = {
    "PropagationPolicy": _PROPAGATION_BOUNDS,
    "ClusterPropagationPolicy": _PROPAGATION_BOUNDS,
    "OverridePolicy": _OVERRIDE_BOUNDS,
    "ClusterOverridePolicy": _OVERRIDE_BOUNDS,
    # Served as kube's Quantity (an int-or-string, as kube publishes it); the hub parses each value
    # as kube's Quantity parser, which takes what the pattern takes.
    "FederatedResourceQuota": {
        f"{path}: pattern unset where the CRD has {_QUANTITY!r}"
        for path in ("spec.overall{}", "spec.staticAssignments[].hard{}", "status.aggregatedStatus[].hard{}",
                     "status.aggregatedStatus[].used{}", "status.overall{}", "status.overallUsed{}")
    },
    # int32's range; karmada-webhook refuses more (pkg/webhook/multiclusterservice/validating.go:
    # IsValidPortNum, 1 to 65535).
    "MultiClusterService": {
        "spec.ports[].port: maximum '2147483648 (exclusive)', which the CRD does not have",
        "spec.ports[].port: minimum -2147483648, which the CRD does not have",
    },
}
#: Subtrees the hub's schema keeps open where the CRD declares fields (known; not yet typed).
KEPT_OPEN = {"CronFederatedHPA": "status.executionHistories[].", "MultiClusterService": "status.loadBalancer."}
KINDS = re.findall(r"^\[kind (\S+) (\w+)", DATA.read_text(), re.MULTILINE)


def test_the_list_covers_every_kind_served_under_a_karmada_group(registry: Registry) -> None:  # noqa: F811
    served = {(rt.api_version, rt.kind) for rt in registry if rt.group.endswith(".karmada.io")}
    assert set(KINDS) == served


@pytest.mark.parametrize(("group_version", "kind"), KINDS, ids=[kind for _, kind in KINDS])
def test_every_field_of_karmadas_crd_is_declared_with_its_type(
    registry: Registry, upstream: UpstreamDefinitions, catalog: SchemaCatalog,  # noqa: F811
    group_version: str, kind: str,
) -> None:
    fields = upstream_kinds(upstream.definitions)[(group_version, kind)]
    rt = next(rt for rt in registry if (rt.api_version, rt.kind) == (group_version, kind))
    served = ServedSchema(catalog.kind(rt).name, catalog.definitions([rt]))
    problems = [p for f in fields for p in served.problems(f) if (kind, p) not in DELIBERATE]
    assert len(fields) >= 19
    assert problems == []
    assert {d for f in fields for d in served.value_differences(f)} == VALUE_DIFFERENCES.get(kind, set())
    # Compared path by path: none of the CRD's fields is taken only because a parent keeps anything.
    taken_open = [f.path for f in fields if served.node(f.path) is OPEN]
    assert [path for path in taken_open if not path.startswith(KEPT_OPEN.get(kind, "\0"))] == []


def test_the_comparison_finds_what_a_schema_gets_wrong() -> None:
    """The comparison itself: an undeclared field, another type, a narrower enum, an extra requirement."""
    definitions = {"K": {"type": "object", "properties": {"spec": {"type": "object", "required": ["a", "b"], "properties": {
        "a": {"type": "integer"}, "b": {"type": "string", "enum": ["x"]}, "open": {"type": "object",
                                                                            "x-kubernetes-preserve-unknown-fields": True}}}}}}
    served = ServedSchema("K", definitions)
    assert served.problems(Field("spec.c", "string")) == ["spec.c: not declared"]
    assert served.problems(Field("spec.a", "string")) == ["spec.a: integer where the CRD has string"]
    assert served.problems(Field("spec.b", "string", enum=("x", "y"))) == ["spec.b: enum ['x'] lacks ['y']"]
    assert served.problems(Field("spec", "object", required=("a",))) == ["spec: requires ['b'], which the CRD does not"]
    assert served.problems(Field("spec.open.anything[].deep", "integer")) == []
    assert served.problems(Field("spec.a", "integer")) == []


def test_the_comparison_finds_a_default_or_bound_the_schema_publishes_otherwise() -> None:
    definitions = {"K": {"type": "object", "properties": {"spec": {"type": "object", "properties": {
        "n": {"type": "integer", "default": 3, "minimum": 0, "exclusiveMinimum": True},
        "s": {"type": "string", "maxLength": 8}, "q": {"type": "string", "format": "int-or-string"}}}}}}
    served = ServedSchema("K", definitions)
    assert served.value_differences(Field("spec.n", "integer", default="3", bounds=(("maximum", 32), ("minimum", 0)))) == [
        "spec.n: maximum unset where the CRD has 32", "spec.n: minimum '0 (exclusive)' where the CRD has 0"]
    assert served.value_differences(Field("spec.n", "integer", default="4")) == [
        "spec.n: default 3 where the CRD has 4", "spec.n: minimum '0 (exclusive)', which the CRD does not have"]
    assert served.value_differences(Field("spec.s", "string", bounds=(("maxLength", 8),))) == []
    assert served.value_differences(Field("spec.s", "string", default="x", bounds=(("maxLength", 8),))) == [
        "spec.s: default unset where the CRD has 'x'"]
    assert served.value_differences(Field("spec.q", "int-or-string")) == []


def test_a_crds_schema_gives_the_lists_lines() -> None:
    schema = {"type": "object", "required": ["spec"], "properties": {
        "apiVersion": {"type": "string"}, "metadata": {"type": "object"},
        "spec": {"type": "object", "required": ["n"], "properties": {
            "n": {"type": "integer", "format": "int32", "default": 3, "minimum": 0, "maximum": 32},
            "mode": {"type": "string", "enum": ["A", "B"], "default": "A"},
            "on": {"type": "boolean", "default": False}, "name": {"type": "string", "minLength": 1, "maxLength": 32},
            "hard": {"type": "object", "additionalProperties": {"x-kubernetes-int-or-string": True}},
            "items": {"type": "array", "items": {"x-kubernetes-preserve-unknown-fields": True}}}}}}
    assert list(crd_lines(schema)) == [
        "spec object required=n", "spec.n integer default=3 format=int32 maximum=32 minimum=0",
        "spec.mode string enum=A,B default=A", "spec.on boolean default=false", "spec.name string maxLength=32 minLength=1",
        "spec.hard object",
        "spec.hard{} int-or-string", "spec.items array", "spec.items[] any",
    ]


async def apply(api: Client, url: str, body: dict[str, Any]) -> Any:
    return await api.patch(f"{url}?fieldManager=karmada&fieldValidation=Strict", data=yaml.safe_dump(body), headers=APPLY)


async def test_a_multi_cluster_ingress_status_with_karmadas_fields_applies(hub: Client) -> None:
    """``status.serviceLocations`` and ``status.trafficBlockClusters`` (Karmada's additions to an
    Ingress's status) are declared: the status subresource takes them under Strict and keeps them."""
    url = "/apis/networking.karmada.io/v1alpha1/namespaces/default/multiclusteringresses/web"
    body: dict[str, Any] = {
        "apiVersion": "networking.karmada.io/v1alpha1", "kind": "MultiClusterIngress",
        "metadata": {"name": "web", "namespace": "default"},
        "spec": {"defaultBackend": {"service": {"name": "web", "port": {"number": 80}}}},
    }
    answer = await apply(hub, url, body)
    assert answer.status == 201, await answer.text()
    status = {"loadBalancer": {"ingress": [{"ip": "10.0.0.9"}]},
              "serviceLocations": [{"name": "web", "clusters": ["m1", "m2"]}], "trafficBlockClusters": ["m2"]}
    answer = await apply(hub, url + "/status", {**body, "status": status})
    assert answer.status == 200, await answer.text()
    assert (await (await hub.get(url)).json())["status"] == status


async def test_a_taint_policy_with_an_operator_karmada_does_not_know_applies(hub: Client) -> None:
    """Karmada's CRD takes any operator string and its controller never matches one it does not
    know: the hub stores the policy as written and never matches it either."""
    url = "/apis/policy.karmada.io/v1alpha1/clustertaintpolicies/odd"
    body = {"apiVersion": "policy.karmada.io/v1alpha1", "kind": "ClusterTaintPolicy", "metadata": {"name": "odd"},
            "spec": {"addOnConditions": [{"conditionType": "Ready", "operator": "Exists", "statusValues": ["False"]}],
                     "taints": [{"key": "odd", "effect": "NoSchedule"}]}}
    answer = await apply(hub, url, body)
    assert answer.status == 201, await answer.text()
    assert (await answer.json())["spec"]["addOnConditions"][0]["operator"] == "Exists"
    ready = [{"type": "Ready", "status": "True"}]
    unknown = MatchCondition.model_validate({"conditionType": "Ready", "operator": "Exists", "statusValues": ["False"]})
    assert not conditions_match(ready, [unknown])
    assert conditions_match(ready, [MatchCondition.model_validate({**unknown.model_dump(by_alias=True), "operator": "NotIn"})])


async def test_a_cron_rule_outside_the_crds_bounds_is_refused_in_kubes_words(hub: Client) -> None:
    """The CRD's history limits (0 or 1 to 32) and rule names (1 to 32 bytes) are checked by its
    schema, before Karmada's webhook, with kube's words for a CRD's bounds."""
    url = "/apis/autoscaling.karmada.io/v1alpha1/namespaces/default/cronfederatedhpas"
    rule = {"schedule": "0 22 * * *", "targetReplicas": 1}
    body = {"apiVersion": "autoscaling.karmada.io/v1alpha1", "kind": "CronFederatedHPA",
            "metadata": {"name": "night", "namespace": "default"},
            "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
                     "rules": [{**rule, "name": "n" * 33, "failedHistoryLimit": 33, "successfulHistoryLimit": 0},
                               {**rule, "name": ""}]}}
    answer = await hub.post(url, json=body)
    assert answer.status == 422, await answer.text()
    assert [(c["field"], c["message"]) for c in (await answer.json())["details"]["causes"]] == [
        ("spec.rules[0].name", "Too long: may not be more than 32 bytes"),
        ("spec.rules[0].failedHistoryLimit",
         "Invalid value: 33: spec.rules[0].failedHistoryLimit in body should be less than or equal to 32"),
        ("spec.rules[0].successfulHistoryLimit",
         "Invalid value: 0: spec.rules[0].successfulHistoryLimit in body should be greater than or equal to 1"),
        ("spec.rules[1].name", 'Invalid value: "": spec.rules[1].name in body should be at least 1 chars long'),
    ]
    body["spec"]["rules"] = [{**rule, "name": "n" * 32, "failedHistoryLimit": 0, "successfulHistoryLimit": 32}]
    answer = await hub.post(url, json=body)
    assert answer.status == 201, await answer.text()


async def test_a_state_preservation_without_rules_applies(hub: Client) -> None:
    """Karmada's CRD requires ``rules`` but takes an empty list (its controller preserves nothing
    then) and any ``jsonPath`` (karmada-webhook checks only the alias); the hub, which carries no
    state over yet, stores them as written."""
    url = "/apis/policy.karmada.io/v1alpha1/namespaces/default/propagationpolicies/stateful"
    body = {"apiVersion": "policy.karmada.io/v1alpha1", "kind": "PropagationPolicy",
            "metadata": {"name": "stateful", "namespace": "default"},
            "spec": {"resourceSelectors": [{"apiVersion": "apps/v1", "kind": "StatefulSet", "name": "db"}],
                     "propagateDeps": True,
                     "failover": {"application": {"decisionConditions": {}, "statePreservation": {"rules": []}}}}}
    answer = await apply(hub, url, body)
    assert answer.status == 201, await answer.text()
    assert (await answer.json())["spec"]["failover"]["application"]["statePreservation"] == {"rules": []}
    rules = [{"aliasLabelName": "example.com/epoch", "jsonPath": ""}]
    body["spec"]["failover"]["application"]["statePreservation"] = {"rules": rules}
    answer = await apply(hub, url, body)
    assert answer.status == 200, await answer.text()
    assert (await answer.json())["spec"]["failover"]["application"]["statePreservation"] == {"rules": rules}
