"""Karmada's YAML applies unchanged: every field of Karmada's CRDs (``tests/data/karmada_crd_fields.txt``,
path by path) is declared by the schema the hub serves for the kind, with a type, an enum and
requirements that take what the CRD takes; server-side apply with ``fieldValidation=Strict`` of
the fields the hub lacked before stores them."""

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


def test_a_crds_schema_gives_the_lists_lines() -> None:
    schema = {"type": "object", "required": ["spec"], "properties": {
        "apiVersion": {"type": "string"}, "metadata": {"type": "object"},
        "spec": {"type": "object", "required": ["n"], "properties": {
            "n": {"type": "integer"}, "mode": {"type": "string", "enum": ["A", "B"]},
            "hard": {"type": "object", "additionalProperties": {"x-kubernetes-int-or-string": True}},
            "items": {"type": "array", "items": {"x-kubernetes-preserve-unknown-fields": True}}}}}}
    assert list(crd_lines(schema)) == [
        "spec object required=n", "spec.n integer", "spec.mode string enum=A,B", "spec.hard object",
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
