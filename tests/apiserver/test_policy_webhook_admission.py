"""karmada-webhook's validating admission of the policy kinds (``pkg/util/validation/validation.go``,
``pkg/webhook/{propagation,clusterpropagation,override,clusteroverride}policy/validating.go``): what it
refuses beyond the CRDs' schemas is refused with its words, as kube answers a webhook's denial
(403 Forbidden, ``admission webhook "<webhook>" denied the request: <errors>``), in both groups."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from aiohttp.test_utils import TestClient

from controlplane.apiserver.kinds.core import core_resources
from controlplane.apiserver.kinds.gpufed import gpufed_resources
from controlplane.apiserver.kinds.workloads import workload_resources
from controlplane.apiserver.resources import Registry

from .test_policy_name_length import collection

GROUPS = ["policy.karmada.io", "policy.gpufed.io"]
QUALIFIED_NAME = (
    "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an "
    "alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is "
    "'([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"
)
SELECTOR = {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"}


@pytest.fixture
def api_registry() -> Registry:
    return Registry(core_resources(), workload_resources(), gpufed_resources())


def body(group: str, kind: str, spec: dict[str, Any], name: str = "p") -> dict[str, Any]:
    return {"apiVersion": f"{group}/v1alpha1", "kind": kind, "metadata": {"name": name}, "spec": spec}


async def refused(api: TestClient[Any, Any], group: str, kind: str, spec: dict[str, Any]) -> str:
    """The 403's message of a create that must be refused, checking nothing was stored."""
    answer = await api.post(collection(group, kind), json=body(group, kind, spec))
    status = await answer.json()
    assert answer.status == 403, status
    assert (status["code"], status["reason"]) == (403, "Forbidden")
    assert (await api.get(f"{collection(group, kind)}/p")).status == 404
    message: str = status["message"]
    return message


PROPAGATION_REFUSALS = [
    pytest.param(
        {
            "resourceSelectors": [SELECTOR],
            "placement": {"clusterAffinities": [{"affinityName": "group 1", "clusterNames": ["m1"]}]},
        },
        f'spec.placement.clusterAffinities[0]: Invalid value: "group 1": {QUALIFIED_NAME}',
        id="affinity-name",
    ),
    pytest.param(
        {
            "resourceSelectors": [SELECTOR],
            "placement": {
                "spreadConstraints": [
                    {"spreadByField": "region", "maxGroups": 2},
                    {"spreadByField": "region", "maxGroups": 1},
                    {"spreadByField": "cluster", "minGroups": 2},
                ]
            },
        },
        "spec.placement.spreadConstraints: Invalid value: []v1alpha1.SpreadConstraint{"
        'v1alpha1.SpreadConstraint{SpreadByField:"region", SpreadByLabel:"", MaxGroups:2, MinGroups:1}, '
        'v1alpha1.SpreadConstraint{SpreadByField:"region", SpreadByLabel:"", MaxGroups:1, MinGroups:1}, '
        'v1alpha1.SpreadConstraint{SpreadByField:"cluster", SpreadByLabel:"", MaxGroups:0, MinGroups:2}}: '
        "multiple region spread constraints are not allowed",
        id="spread-field-twice",
    ),
    pytest.param(
        {
            "resourceSelectors": [
                SELECTOR,
                {"apiVersion": "v1", "kind": "ConfigMap"},
                {"apiVersion": "v1", "kind": "Secret", "name": ""},
            ],
            "preemption": "Always",
        },
        '[spec.resourceSelectors[1].name: Invalid value: "": name cannot be empty if preemption is Always, the '
        "empty name may cause unexpected resources preemption, spec.resourceSelectors[2].name: Invalid value: "
        '"": name cannot be empty if preemption is Always, the empty name may cause unexpected resources preemption]',
        id="preemption-without-names",
    ),
    pytest.param(
        {
            "resourceSelectors": [SELECTOR],
            "placement": {
                "clusterAffinity": {"clusterNames": ["m1"]},
                "clusterAffinities": [{"affinityName": "a", "clusterNames": ["m2"]}],
            },
        },
        'spec.placement: Invalid value: {"clusterAffinities":[{"affinityName":"a","clusterNames":["m2"]}],'
        '"clusterAffinity":{"clusterNames":["m1"]}}: clusterAffinities cannot co-exist with clusterAffinity',
        id="affinity-and-affinities",
    ),
    pytest.param(
        {
            "resourceSelectors": [SELECTOR],
            "placement": {"clusterAffinities": [{"affinityName": "a"}, {"affinityName": "a"}]},
        },
        'spec.placement.clusterAffinities: Invalid value: [{"affinityName":"a"},{"affinityName":"a"}]: '
        "each affinity term in a policy must have a unique name",
        id="affinity-name-twice",
    ),
    pytest.param(
        {
            "resourceSelectors": [SELECTOR],
            "placement": {
                "spreadConstraints": [
                    {"spreadByField": "region", "spreadByLabel": "zone", "maxGroups": 1, "minGroups": 2}
                ]
            },
        },
        '[spec.placement.spreadConstraints[0]: Invalid value: v1alpha1.SpreadConstraint{SpreadByField:"region", '
        'SpreadByLabel:"zone", MaxGroups:1, MinGroups:2}: spreadByLabel should not co-exist with spreadByField, '
        'spec.placement.spreadConstraints[0]: Invalid value: v1alpha1.SpreadConstraint{SpreadByField:"region", '
        'SpreadByLabel:"zone", MaxGroups:1, MinGroups:2}: maxGroups lower than minGroups is not allowed, '
        "spec.placement.spreadConstraints: Invalid value: []v1alpha1.SpreadConstraint{v1alpha1.SpreadConstraint{"
        'SpreadByField:"region", SpreadByLabel:"zone", MaxGroups:1, MinGroups:2}}: the cluster spread constraint must '
        "be enabled in one of the constraints in case of SpreadByField is enabled]",
        id="spread-constraint-rules",
    ),
    pytest.param(
        {
            "resourceSelectors": [SELECTOR],
            "suspension": {"dispatching": True, "dispatchingOnClusters": {"clusterNames": ["m1"]}},
        },
        'spec.suspension.suspension: Invalid value: {"dispatching":true,"dispatchingOnClusters":{"clusterNames":'
        '["m1"]}}: suspension dispatching cannot co-exist with dispatchingOnClusters.clusterNames',
        id="suspension",
    ),
    pytest.param(
        {
            "resourceSelectors": [SELECTOR],
            "propagateDeps": True,
            "failover": {
                "application": {"decisionConditions": {}, "purgeMode": "Never", "gracePeriodSeconds": 30},
            },
        },
        "spec.failover.application.gracePeriodSeconds: Invalid value: 30: only takes effect when purgeMode is graciously",
        id="grace-period-without-gracious-purge",
    ),
    pytest.param(
        {
            "resourceSelectors": [SELECTOR],
            "propagateDeps": True,
            "failover": {
                "application": {"decisionConditions": {"tolerationSeconds": -1}, "gracePeriodSeconds": 0}
            },
            "placement": {
                "spreadConstraints": [{"spreadByField": "cluster", "minGroups": -2, "maxGroups": -1}]
            },
        },
        '[spec.placement.spreadConstraints[0]: Invalid value: v1alpha1.SpreadConstraint{SpreadByField:"cluster", '
        'SpreadByLabel:"", MaxGroups:-1, MinGroups:-2}: minGroups lower than 0 is not allowed, '
        'spec.placement.spreadConstraints[0]: Invalid value: v1alpha1.SpreadConstraint{SpreadByField:"cluster", '
        'SpreadByLabel:"", MaxGroups:-1, MinGroups:-2}: maxGroups lower than 0 is not allowed, '
        "spec.failover.application.decisionConditions.tolerationSeconds: Invalid value: -1: must be greater than or "
        "equal to 0, spec.failover.application.gracePeriodSeconds: Invalid value: 0: must be greater than 0]",
        id="negative-bounds",
    ),
    pytest.param(
        {
            "resourceSelectors": [SELECTOR],
            "placement": {
                "clusterAffinity": {
                    "fieldSelector": {
                        "matchExpressions": [
                            {"key": "region", "operator": "In", "values": ["eu"]},
                            {"key": "city", "operator": "In", "values": ["paris"]},
                            {"key": "zone", "operator": "Exists"},
                        ]
                    }
                }
            },
        },
        "spec.placement.clusterAffinity.fieldSelector: Invalid value: v1alpha1.FieldSelector{MatchExpressions:"
        '[]v1.NodeSelectorRequirement{v1.NodeSelectorRequirement{Key:"region", Operator:"In", Values:[]string{"eu"}}, '
        'v1.NodeSelectorRequirement{Key:"city", Operator:"In", Values:[]string{"paris"}}, '
        'v1.NodeSelectorRequirement{Key:"zone", Operator:"Exists", Values:[]string(nil)}}}: '
        'unsupported key "city", must be provider, region, or zone',
        id="field-selector-key",
    ),
    pytest.param(
        {
            "resourceSelectors": [SELECTOR],
            "placement": {
                "clusterAffinities": [
                    {
                        "affinityName": "a",
                        "fieldSelector": {"matchExpressions": [{"key": "zone", "operator": "Exists"}]},
                    }
                ]
            },
        },
        "spec.placement.clusterAffinities[0].fieldSelector: Invalid value: v1alpha1.FieldSelector{MatchExpressions:"
        '[]v1.NodeSelectorRequirement{v1.NodeSelectorRequirement{Key:"zone", Operator:"Exists", '
        'Values:[]string(nil)}}}: unsupported operator "Exists", must be In or NotIn',
        id="field-selector-operator",
    ),
]


@pytest.mark.parametrize(
    "spec",
    [
        {"resourceSelectors": [SELECTOR], "preemption": "Always"},
        {"resourceSelectors": [{"apiVersion": "v1", "kind": "ConfigMap"}], "preemption": "Never"},
        # Karmada does not check a static weight's field selector.
        {
            "resourceSelectors": [SELECTOR],
            "placement": {
                "replicaScheduling": {
                    "replicaSchedulingType": "Divided",
                    "weightPreference": {
                        "staticWeightList": [
                            {
                                "targetCluster": {
                                    "fieldSelector": {
                                        "matchExpressions": [{"key": "city", "operator": "Exists"}]
                                    }
                                },
                                "weight": 1,
                            }
                        ]
                    },
                }
            },
        },
        # Karmada refuses clusters named beside dispatching: true, not an empty list of them.
        {"resourceSelectors": [SELECTOR], "suspension": {"dispatching": True, "dispatchingOnClusters": {}}},
        {
            "resourceSelectors": [SELECTOR],
            "suspension": {"dispatching": True, "dispatchingOnClusters": {"clusterNames": []}},
        },
        {
            "resourceSelectors": [SELECTOR],
            "placement": {
                "clusterAffinities": [{"affinityName": "Group_1.a", "clusterNames": ["m1"]}],
                "spreadConstraints": [
                    {"spreadByField": "region"},
                    {"spreadByField": "cluster"},
                    {"spreadByLabel": "zone"},
                    {"spreadByLabel": "zone"},
                ],
            },
        },
    ],
)
async def test_what_karmadas_webhook_takes_is_stored(api: TestClient[Any, Any], spec: dict[str, Any]) -> None:
    created = await api.post(
        collection("policy.karmada.io", "PropagationPolicy"),
        json=body("policy.karmada.io", "PropagationPolicy", spec),
    )
    assert created.status == 201, await created.text()


@pytest.mark.parametrize(
    ("kind", "webhook"),
    [
        ("PropagationPolicy", "propagationpolicy.karmada.io"),
        ("ClusterPropagationPolicy", "clusterpropagationpolicy.karmada.io"),
    ],
)
async def test_the_scheduler_name_cannot_change(api: TestClient[Any, Any], kind: str, webhook: str) -> None:
    url = collection("policy.karmada.io", kind)
    created = await api.post(url, json=body("policy.karmada.io", kind, {"resourceSelectors": [SELECTOR]}))
    assert created.status == 201, await created.text()
    merge = {"Content-Type": "application/merge-patch+json"}
    patched = await api.patch(f"{url}/p", json={"spec": {"schedulerName": "other"}}, headers=merge)
    assert patched.status == 403
    assert (await patched.json())["message"] == (
        f'admission webhook "{webhook}" denied the request: the schedulerName should not be updated'
    )
    # Written as it was (the CRD's default, stored on create) and any other change still go through.
    same = {"spec": {"schedulerName": "default-scheduler", "priority": 2}}
    assert (await api.patch(f"{url}/p", json=same, headers=merge)).status == 200
    unset = await api.patch(f"{url}/p", json={"spec": {"schedulerName": None}}, headers=merge)
    assert unset.status == 200, await unset.text()


def rule(overriders: dict[str, Any]) -> dict[str, Any]:
    return {
        "resourceSelectors": [SELECTOR],
        "overrideRules": [{"targetCluster": {"clusterNames": ["m1"]}, "overriders": overriders}],
    }


OVERRIDE_REFUSALS = [
    pytest.param(
        {**rule({}), "targetCluster": {"clusterNames": ["m1"]}},
        'spec.targetCluster: Invalid value: {"clusterNames":["m1"]}: overrideRules and targetCluster can\'t co-exist',
        id="target-cluster-and-rules",
    ),
    pytest.param(
        {**rule({}), "overriders": {"plaintext": [{"path": "/spec/replicas", "operator": "remove"}]}},
        'spec.overriders: Invalid value: {"plaintext":[{"operator":"remove","path":"/spec/replicas"}]}: '
        "overrideRules and overriders can't co-exist",
        id="overriders-and-rules",
    ),
    pytest.param(
        rule(
            {
                "labelsOverrider": [
                    {"operator": "add", "value": {"env": "prod"}},
                    {"operator": "add", "value": {"bad key": "a b"}},
                ]
            }
        ),
        f'[spec.overrideRules[0].overriders.labelsOverrider[1].value: Invalid value: "bad key": {QUALIFIED_NAME}, '
        'spec.overrideRules[0].overriders.labelsOverrider[1].value: Invalid value: "a b": a valid label must be an '
        "empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an "
        "alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is "
        "'(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')]",
        id="labels",
    ),
    pytest.param(
        rule(
            {
                "annotationsOverrider": [
                    {"operator": "add", "value": {"Example.COM/Note": "any text", "Not Valid": "x"}}
                ]
            }
        ),
        'spec.overrideRules[0].overriders.annotationsOverrider[0].value: Invalid value: "Not Valid": '
        f"{QUALIFIED_NAME}",
        id="annotations",
    ),
    pytest.param(
        rule({"annotationsOverrider": [{"operator": "add", "value": {"big": "x" * (256 * 1024)}}]}),
        "spec.overrideRules[0].overriders.annotationsOverrider[0].value: Too long: may not be more than 262144 bytes",
        id="annotations-size",
    ),
    pytest.param(
        rule(
            {
                "fieldOverrider": [
                    {
                        "fieldPath": "/data/config.json",
                        "json": [
                            {"subPath": "/a", "operator": "add"},
                            {"subPath": "/b", "operator": "remove", "value": {"x": 1}},
                            {"subPath": "/c", "operator": "remove"},
                        ],
                    },
                    {
                        "fieldPath": "/data/config.yaml",
                        "yaml": [{"subPath": "/d", "operator": "replace", "value": None}],
                    },
                ]
            }
        ),
        "[spec.overrideRules[0].overriders.fieldOverrider[0].json[0].value: Invalid value: v1.JSON{Raw:[]uint8(nil)}: "
        "value is required for add or replace operation, "
        "spec.overrideRules[0].overriders.fieldOverrider[0].json[1].value: Invalid value: "
        "v1.JSON{Raw:[]uint8{0x7b, 0x22, 0x78, 0x22, 0x3a, 0x31, 0x7d}}: value is not allowed for remove operation, "
        "spec.overrideRules[0].overriders.fieldOverrider[1].yaml[0].value: Invalid value: v1.JSON{Raw:[]uint8(nil)}: "
        "value is required for add or replace operation]",
        id="field-overrider-values",
    ),
    pytest.param(
        rule(
            {
                "imageOverrider": [
                    {
                        "predicate": {"path": "spec/template"},
                        "component": "Tag",
                        "operator": "replace",
                        "value": "1",
                    }
                ],
                "fieldOverrider": [
                    {
                        "fieldPath": "data/a",
                        "json": [{"subPath": "/x", "operator": "add", "value": 1}],
                        "yaml": [{"subPath": "y", "operator": "remove"}],
                    }
                ],
            }
        ),
        '[spec.overrideRules[0].overriders.imageOverrider[0].predicate.path: Invalid value: "spec/template": '
        'JSON pointer must be empty or start with a "/, '
        'spec.overrideRules[0].overriders.fieldOverrider[0]: Invalid value: {"fieldPath":"data/a","json":'
        '[{"operator":"add","subPath":"/x","value":1}],"yaml":[{"operator":"remove","subPath":"y"}]}: '
        "FieldOverrider has both YAML and JSON set. Only one is allowed, "
        'spec.overrideRules[0].overriders.fieldOverrider[0].fieldPath: Invalid value: "data/a": '
        'JSON pointer must be empty or start with a "/, '
        'spec.overrideRules[0].overriders.fieldOverrider[0].yaml[0].subPath: Invalid value: "y": '
        'JSON pointer must be empty or start with a "/]',
        id="pointers-and-both-formats",
    ),
    pytest.param(
        {
            "resourceSelectors": [SELECTOR],
            "overrideRules": [
                {
                    "targetCluster": {
                        "fieldSelector": {"matchExpressions": [{"key": "provider", "operator": "Gt"}]}
                    },
                    "overriders": {},
                }
            ],
        },
        "spec.overrideRules[0].targetCluster.fieldSelector: Invalid value: v1alpha1.FieldSelector{MatchExpressions:"
        '[]v1.NodeSelectorRequirement{v1.NodeSelectorRequirement{Key:"provider", Operator:"Gt", '
        'Values:[]string(nil)}}}: unsupported operator "Gt", must be In or NotIn',
        id="target-cluster-field-selector",
    ),
]


#: Each kind, its webhook and what that webhook refuses.
REFUSALS = [
    pytest.param(kind, webhook, *case.values, id=f"{case.id}-{kind}")
    for kinds, cases in (
        (("PropagationPolicy", "ClusterPropagationPolicy"), PROPAGATION_REFUSALS),
        (("OverridePolicy", "ClusterOverridePolicy"), OVERRIDE_REFUSALS),
    )
    for kind in kinds
    for webhook in [f"{kind.lower()}.karmada.io"]
    for case in cases
]


@pytest.mark.parametrize("group", GROUPS)
@pytest.mark.parametrize(("kind", "webhook", "spec", "errors"), REFUSALS)
async def test_policies_are_refused_as_karmadas_webhooks_refuse_them(
    api: TestClient[Any, Any], group: str, kind: str, webhook: str, spec: dict[str, Any], errors: str
) -> None:
    message = await refused(api, group, kind, copy.deepcopy(spec))
    assert message == f'admission webhook "{webhook}" denied the request: {errors}'


@pytest.mark.parametrize(
    "spec",
    [
        # The deprecated pair alone, and a field overrider (which Karmada's emptiness check skips) beside rules.
        {
            "resourceSelectors": [SELECTOR],
            "targetCluster": {"clusterNames": ["m1"]},
            "overriders": {"plaintext": [{"path": "/spec/replicas", "operator": "replace", "value": 2}]},
        },
        # Karmada checks only overrideRules: a deprecated overrider's path fails when applied.
        {
            "resourceSelectors": [SELECTOR],
            "overriders": {
                "imageOverrider": [{"predicate": {"path": "x"}, "component": "Tag", "operator": "remove"}],
                "fieldOverrider": [{"fieldPath": "y", "json": [{"subPath": "z", "operator": "remove"}]}],
            },
        },
        {
            **rule({}),
            "overriders": {
                "fieldOverrider": [
                    {"fieldPath": "/data/a", "json": [{"subPath": "/x", "operator": "remove"}]}
                ]
            },
        },
        rule(
            {
                "labelsOverrider": [{"operator": "remove", "value": {"example.com/team": ""}}],
                "annotationsOverrider": [
                    {"operator": "add", "value": {"Example.com/Note": "any text: at all"}}
                ],
                "fieldOverrider": [
                    {"fieldPath": "/data/a", "yaml": [{"subPath": "/x", "operator": "add", "value": 0}]}
                ],
            }
        ),
    ],
)
async def test_override_policies_karmadas_webhook_takes_are_stored(
    api: TestClient[Any, Any], spec: dict[str, Any]
) -> None:
    created = await api.post(
        collection("policy.karmada.io", "OverridePolicy"),
        json=body("policy.karmada.io", "OverridePolicy", spec),
    )
    assert created.status == 201, await created.text()


async def test_the_models_refusal_comes_before_the_webhooks(api: TestClient[Any, Any]) -> None:
    """kube validates a custom resource's schema before its validating webhooks: a policy both refuse
    gets the schema's 422."""
    spec = {
        "resourceSelectors": [{"apiVersion": "v1", "kind": "ConfigMap"}],
        "preemption": "Always",
        "priority": "high",
        "placement": {"clusterAffinities": [{"affinityName": "bad name"}]},
    }
    answer = await api.post(
        collection("policy.karmada.io", "PropagationPolicy"),
        json=body("policy.karmada.io", "PropagationPolicy", spec),
    )
    assert answer.status == 422, await answer.text()


async def test_a_policy_stored_before_the_rules_can_still_change_and_go(
    api: TestClient[Any, Any], objects: Any
) -> None:
    rt = objects.registry.require("policy.karmada.io/v1alpha1", "PropagationPolicy")
    denial, update_denial = rt.webhook_denial, rt.webhook_update_denial
    object.__setattr__(rt, "webhook_denial", None)
    object.__setattr__(rt, "webhook_update_denial", None)
    try:
        spec = {"resourceSelectors": [{"apiVersion": "v1", "kind": "ConfigMap"}], "preemption": "Always"}
        stored = body("policy.karmada.io", "PropagationPolicy", spec)
        stored["metadata"]["namespace"] = "default"
        await objects.create(rt, stored)
    finally:
        object.__setattr__(rt, "webhook_denial", denial)
        object.__setattr__(rt, "webhook_update_denial", update_denial)
    path = f"{collection('policy.karmada.io', 'PropagationPolicy')}/p"
    patched = await api.patch(
        path, json={"spec": {"priority": 3}}, headers={"Content-Type": "application/merge-patch+json"}
    )
    assert patched.status == 200, await patched.text()
    assert (await api.delete(path)).status == 200
