"""Policy models: Karmada YAML parses unchanged, gpufed extensions, field-level validation."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from controlplane.apis.meta import CauseType
from policies.models import ClusterPropagationPolicy, DivisionStrategy, Placement, PropagationPolicy
from policies.override_models import ClusterOverridePolicy, OverridePolicy
from policies.validation import policy_warnings, validate_policy

# Realistic documents in the shape of Karmada's documentation examples.
KARMADA_DOCS = {
    "duplicated": """
apiVersion: policy.karmada.io/v1alpha1
kind: PropagationPolicy
metadata:
  name: nginx-propagation
  namespace: default
spec:
  resourceSelectors:
    - apiVersion: apps/v1
      kind: Deployment
      name: nginx
  placement:
    clusterAffinity:
      clusterNames: [member1, member2]
    replicaScheduling:
      replicaSchedulingType: Duplicated
""",
    "static-weights": """
apiVersion: policy.karmada.io/v1alpha1
kind: PropagationPolicy
metadata:
  name: nginx-propagation
spec:
  resourceSelectors:
    - apiVersion: apps/v1
      kind: Deployment
      name: nginx
  placement:
    clusterAffinity:
      clusterNames: [member1, member2]
    replicaScheduling:
      replicaDivisionPreference: Weighted
      replicaSchedulingType: Divided
      weightPreference:
        staticWeightList:
          - targetCluster:
              clusterNames: [member1]
            weight: 1
          - targetCluster:
              clusterNames: [member2]
            weight: 2
""",
    "dynamic-weights": """
apiVersion: policy.karmada.io/v1alpha1
kind: ClusterPropagationPolicy
metadata:
  name: all-deployments
spec:
  priority: 10
  preemption: Always
  resourceSelectors:
    - apiVersion: apps/v1
      kind: Deployment
      labelSelector:
        matchLabels: {app: web}
  placement:
    clusterAffinity:
      labelSelector:
        matchExpressions: [{key: env, operator: In, values: [prod]}]
      fieldSelector:
        matchExpressions:
          - {key: provider, operator: NotIn, values: [huaweicloud]}
          - {key: region, operator: In, values: [cn-south-1, cn-north-1]}
      exclude: [member3]
    replicaScheduling:
      replicaDivisionPreference: Weighted
      replicaSchedulingType: Divided
      weightPreference:
        dynamicWeight: AvailableReplicas
""",
    "affinities-failover": """
apiVersion: policy.karmada.io/v1alpha1
kind: PropagationPolicy
metadata:
  name: web
  namespace: shop
spec:
  propagateDeps: true
  conflictResolution: Overwrite
  schedulerName: default-scheduler
  preserveResourcesOnDeletion: false
  activationPreference: Lazy
  dependentOverrides: [web-images]
  suspension:
    dispatchingOnClusters: {clusterNames: [member2]}
  failover:
    application:
      decisionConditions: {tolerationSeconds: 120}
      purgeMode: Graciously
      gracePeriodSeconds: 600
      statePreservation:
        rules: [{aliasLabelName: app.example.io/offset, jsonPath: "{ .jobStatus.offset }"}]
  resourceSelectors:
    - {apiVersion: apps/v1, kind: Deployment, name: web}
    - {apiVersion: v1, kind: Service, name: web}
  placement:
    clusterAffinities:
      - affinityName: local-clusters
        clusterNames: [member1, member2]
      - affinityName: cloud-clusters
        labelSelector: {matchLabels: {cloud: "true"}}
    clusterTolerations:
      - {key: cluster.karmada.io/not-ready, operator: Exists, effect: NoExecute, tolerationSeconds: 300}
    spreadConstraints:
      - {spreadByField: region, maxGroups: 2, minGroups: 1}
      - {spreadByField: cluster, maxGroups: 3, minGroups: 2}
    replicaScheduling:
      replicaSchedulingType: Divided
      replicaDivisionPreference: Aggregated
""",
    "override-image-plaintext": """
apiVersion: policy.karmada.io/v1alpha1
kind: OverridePolicy
metadata:
  name: example
  namespace: default
spec:
  resourceSelectors:
    - apiVersion: apps/v1
      kind: Deployment
      name: myapp
  overrideRules:
    - targetCluster:
        clusterNames: [member1]
      overriders:
        imageOverrider:
          - component: Registry
            operator: replace
            value: test-repo
          - predicate: {path: /spec/template/spec/containers/0/image}
            component: Tag
            operator: replace
            value: "1.0.1"
        plaintext:
          - {path: /metadata/annotations, operator: add, value: {foo: bar}}
          - {path: /spec/replicas, operator: replace, value: 3}
          - {path: /spec/template/spec/nodeSelector, operator: remove}
""",
    "cluster-override-labels-command": """
apiVersion: policy.karmada.io/v1alpha1
kind: ClusterOverridePolicy
metadata:
  name: everywhere
spec:
  resourceSelectors:
    - {apiVersion: apps/v1, kind: Deployment}
  overrideRules:
    - overriders:
        labelsOverrider:
          - operator: add
            value: {region: east}
        annotationsOverrider:
          - operator: remove
            value: {obsolete: ""}
        commandOverrider:
          - {containerName: myapp, operator: add, value: ["--cluster=member1"]}
        argsOverrider:
          - {containerName: myapp, operator: remove, value: ["--debug"]}
        fieldOverrider:
          - fieldPath: /data/config.yaml
            yaml:
              - {subPath: /server/port, operator: replace, value: 8080}
""",
    "override-deprecated-form": """
apiVersion: policy.karmada.io/v1alpha1
kind: OverridePolicy
metadata: {name: legacy, namespace: default}
spec:
  resourceSelectors: [{apiVersion: apps/v1, kind: Deployment, name: nginx}]
  targetCluster: {clusterNames: [member1]}
  overriders:
    plaintext: [{path: /spec/replicas, operator: replace, value: 1}]
""",
}

GPUFED_TIERED = """
apiVersion: policy.gpufed.io/v1alpha1
kind: PropagationPolicy
metadata: {name: training, namespace: ml}
spec:
  resourceSelectors: [{apiVersion: kubeflow.org/v1, kind: PyTorchJob}]
  gang: true
  gpuShapes:
    alternatives:
      - resources: {nvidia.com/mig-3g.40gb: 1}
      - resources: {nvidia.com/gpu: 1}
        nodeSelector: {nvidia.com/gpu.product: NVIDIA-A100-SXM4-80GB}
  placement:
    replicaScheduling:
      replicaSchedulingType: Divided
      replicaDivisionPreference: TieredOverflow
      tieredOverflow:
        order: TierThenPrice
        tiers:
          - name: datacenter
            clusterAffinity: {fieldSelector: {matchExpressions: [{key: provider, operator: In, values: [onprem]}]}}
          - name: burst
            clusterAffinity: {labelSelector: {matchLabels: {gpufed.io/pool: burst}}}
"""

MODELS = {
    "PropagationPolicy": PropagationPolicy,
    "ClusterPropagationPolicy": ClusterPropagationPolicy,
    "OverridePolicy": OverridePolicy,
    "ClusterOverridePolicy": ClusterOverridePolicy,
}


@pytest.mark.parametrize("text", [*KARMADA_DOCS.values(), GPUFED_TIERED], ids=[*KARMADA_DOCS, "gpufed-tiered"])
def test_documents_round_trip_unchanged(text: str) -> None:
    wire = yaml.safe_load(text)
    policy = MODELS[wire["kind"]].model_validate(wire)
    assert policy.model_dump(by_alias=True, exclude_none=True) == wire
    result = validate_policy(wire)
    assert result.ok and result.policy is not None


@pytest.mark.parametrize("api_version", ["policy.gpufed.io/v1alpha1", "policy.karmada.io/v1alpha1"])
def test_both_api_versions_are_accepted(api_version: str) -> None:
    wire = yaml.safe_load(KARMADA_DOCS["duplicated"])
    wire["apiVersion"] = api_version
    assert PropagationPolicy.model_validate(wire).api_version == api_version


def test_other_api_version_is_rejected() -> None:
    wire = yaml.safe_load(KARMADA_DOCS["duplicated"])
    wire["apiVersion"] = "policy.example.io/v1"
    causes = validate_policy(wire).errors
    assert [c.field for c in causes] == ["apiVersion"]
    assert causes[0].reason == CauseType.FIELD_VALUE_NOT_SUPPORTED


@pytest.mark.parametrize(
    ("placement", "expected"),
    [
        ({}, DivisionStrategy.DUPLICATED),
        ({"replicaScheduling": {}}, DivisionStrategy.STATIC_WEIGHT),
        ({"replicaScheduling": {"replicaSchedulingType": "Duplicated"}}, DivisionStrategy.DUPLICATED),
        ({"replicaScheduling": {"replicaSchedulingType": "Divided"}}, DivisionStrategy.STATIC_WEIGHT),
        ({"replicaScheduling": {"replicaDivisionPreference": "Aggregated"}}, DivisionStrategy.AGGREGATED),
        (
            {"replicaScheduling": {"weightPreference": {"dynamicWeight": "AvailableReplicas",
                                                        "staticWeightList": [{"targetCluster": {}, "weight": 1}]}}},
            DivisionStrategy.DYNAMIC_WEIGHT,
        ),
        ({"replicaScheduling": {"replicaDivisionPreference": "TieredOverflow"}}, DivisionStrategy.TIERED_OVERFLOW),
        ({"replicaScheduling": {"tieredOverflow": {}}}, DivisionStrategy.TIERED_OVERFLOW),
    ],
)
def test_division_strategy_defaults(placement: dict[str, Any], expected: DivisionStrategy) -> None:
    assert Placement.model_validate(placement).division_strategy == expected


def _errors(text: str, mutate: Any) -> list[tuple[str, str]]:
    wire = yaml.safe_load(text)
    mutate(wire)
    return [(c.field, c.message) for c in validate_policy(wire).errors]


def _rs(wire: dict[str, Any]) -> dict[str, Any]:
    result: dict[str, Any] = wire["spec"]["placement"]["replicaScheduling"]
    return result


@pytest.mark.parametrize(
    ("text", "mutate", "field", "message"),
    [
        (KARMADA_DOCS["static-weights"],
         lambda w: _rs(w)["weightPreference"]["staticWeightList"][0].update(weight=0),
         "spec.placement.replicaScheduling.weightPreference.staticWeightList[0].weight",
         "greater than or equal to 1"),
        (KARMADA_DOCS["duplicated"],
         lambda w: w["spec"].update(resourceSelectors=[]),
         "spec.resourceSelectors",
         "must select at least one resource"),
        (KARMADA_DOCS["duplicated"],
         lambda w: w["spec"].pop("resourceSelectors"),
         "spec.resourceSelectors",
         "Required value"),
        (KARMADA_DOCS["affinities-failover"],
         lambda w: w["spec"]["placement"]["clusterAffinities"][0].update(affinityName="x" * 33),
         "spec.placement.clusterAffinities[0].affinityName",
         "at most 32 characters"),
        (KARMADA_DOCS["affinities-failover"],
         lambda w: w["spec"]["placement"]["clusterTolerations"][0].update(operator="Sometimes"),
         "spec.placement.clusterTolerations[0].operator",
         "Unsupported value"),
        (KARMADA_DOCS["duplicated"],
         lambda w: w["spec"]["placement"].update(clusterAfinity={}),
         "spec.placement.clusterAfinity",
         'unknown field "spec.placement.clusterAfinity"'),
        (GPUFED_TIERED,
         lambda w: _rs(w).update(replicaDivisionPreference="Aggregated"),
         "spec.placement.replicaScheduling.tieredOverflow",
         "tieredOverflow requires replicaDivisionPreference 'TieredOverflow'"),
        (GPUFED_TIERED,
         lambda w: _rs(w)["tieredOverflow"]["tiers"][1].update(name="datacenter"),
         "spec.placement.replicaScheduling.tieredOverflow.tiers",
         "tier name 'datacenter' is used twice"),
        (GPUFED_TIERED,
         lambda w: _rs(w)["tieredOverflow"].update(order="Random"),
         "spec.placement.replicaScheduling.tieredOverflow.order",
         "Unsupported value"),
        (GPUFED_TIERED,
         lambda w: _rs(w)["tieredOverflow"].update(packingHints=True, packingHintsScope="LeastAllocated"),
         "spec.placement.replicaScheduling.tieredOverflow.packingHintsScope",
         "Unsupported value"),
        (GPUFED_TIERED,
         lambda w: _rs(w)["tieredOverflow"].update(packingHintsMultiGPUPercent=101),
         "spec.placement.replicaScheduling.tieredOverflow.packingHintsMultiGPUPercent",
         "less than or equal to 100"),
        (GPUFED_TIERED,
         lambda w: _rs(w)["tieredOverflow"].update(shareRemainderHints="sometimes"),
         "spec.placement.replicaScheduling.tieredOverflow.shareRemainderHints",
         "boolean"),
        (GPUFED_TIERED,
         lambda w: _rs(w)["tieredOverflow"].update(rareNodeSteering="sometimes"),
         "spec.placement.replicaScheduling.tieredOverflow.rareNodeSteering",
         "boolean"),
        (GPUFED_TIERED,
         lambda w: w["spec"]["gpuShapes"].update(alternatives=[]),
         "spec.gpuShapes.alternatives",
         "at least 1 item"),
        (GPUFED_TIERED,
         lambda w: w["spec"]["gpuShapes"]["alternatives"][0].update(resources={"nvidia.com/gpu": "half"}),
         "spec.gpuShapes.alternatives[0].resources",
         "nvidia.com/gpu: 'half' is not a valid quantity"),
        (GPUFED_TIERED,
         lambda w: w["spec"]["gpuShapes"]["alternatives"][0].update(resources={"nvidia.com/gpu": "0.5"}),
         "spec.gpuShapes.alternatives[0].resources",
         "extended resources must be whole numbers"),
        (GPUFED_TIERED,
         lambda w: w["spec"]["gpuShapes"]["alternatives"][0].update(resources={}),
         "spec.gpuShapes.alternatives[0].resources",
         "must request at least one resource"),
        (GPUFED_TIERED,
         lambda w: w["spec"].update(gang="sometimes"),
         "spec.gang",
         "valid boolean"),
        (KARMADA_DOCS["override-image-plaintext"],
         lambda w: w["spec"]["overrideRules"][0]["overriders"]["imageOverrider"][0].update(component="Host"),
         "spec.overrideRules[0].overriders.imageOverrider[0].component",
         "Unsupported value"),
        (KARMADA_DOCS["cluster-override-labels-command"],
         lambda w: w["spec"]["overrideRules"][0]["overriders"]["commandOverrider"][0].update(operator="replace"),
         "spec.overrideRules[0].overriders.commandOverrider[0].operator",
         "Unsupported value"),
    ],
)
def test_validation_errors_name_the_field(text: str, mutate: Any, field: str, message: str) -> None:
    errors = _errors(text, mutate)
    assert [f for f, _ in errors] == [field], errors
    assert message in errors[0][1]


def test_unknown_kind_is_an_error_value() -> None:
    result = validate_policy({"kind": "Deployment"})
    assert not result.ok and result.errors[0].field == "kind"


@pytest.mark.parametrize(
    ("text", "mutate", "expected"),
    [
        (KARMADA_DOCS["duplicated"],
         lambda w: w["spec"]["resourceSelectors"][0].update(labelSelector={"matchLabels": {"a": "b"}}),
         "spec.resourceSelectors[0].labelSelector is ignored because spec.resourceSelectors[0].name is set"),
        (KARMADA_DOCS["duplicated"],
         lambda w: w["spec"]["resourceSelectors"][0].update(namespace="other"),
         "spec.resourceSelectors[0].namespace 'other' is ignored"),
        (KARMADA_DOCS["dynamic-weights"],
         lambda w: _rs(w)["weightPreference"].update(staticWeightList=[{"targetCluster": {}, "weight": 1}]),
         "staticWeightList is ignored because dynamicWeight is set"),
        (KARMADA_DOCS["duplicated"],
         lambda w: _rs(w).update(replicaDivisionPreference="Aggregated"),
         "replicaDivisionPreference is ignored because replicaSchedulingType is Duplicated"),
        # Karmada accepts a weightPreference it does not use; gpufed warns instead of refusing.
        (KARMADA_DOCS["static-weights"],
         lambda w: _rs(w).update(replicaSchedulingType="Duplicated"),
         "spec.placement.replicaScheduling.weightPreference is ignored because replicaSchedulingType is Duplicated"),
        (KARMADA_DOCS["static-weights"],
         lambda w: _rs(w).update(replicaDivisionPreference="Aggregated"),
         "spec.placement.replicaScheduling.weightPreference is ignored because replicaDivisionPreference is Aggregated"),
        # Karmada accepts a plaintext path that is not a JSON pointer (applying it fails): a warning.
        (KARMADA_DOCS["override-image-plaintext"],
         lambda w: w["spec"]["overrideRules"][0]["overriders"]["plaintext"][0].update(path="metadata/annotations"),
         "spec.overrideRules[0].overriders.plaintext[0].path 'metadata/annotations' is not a JSON pointer"),
        (KARMADA_DOCS["override-deprecated-form"], lambda w: None, "deprecated; use spec.overrideRules"),
        (KARMADA_DOCS["duplicated"], lambda w: w["spec"].update(association=True), "spec.association is deprecated"),
    ],
)
def test_warnings(text: str, mutate: Any, expected: str) -> None:
    wire = yaml.safe_load(text)
    mutate(wire)
    result = validate_policy(wire)
    assert result.ok, result.errors
    assert any(expected in warning for warning in result.warnings), result.warnings


def test_no_warning_for_the_division_preference_karmadas_webhook_writes() -> None:
    """karmada-webhook gives every Divided policy ``replicaDivisionPreference: Weighted``; Karmada's
    progressive-rollout sample then applies the policy again as Duplicated (its wave step), and a
    client-side apply keeps the Weighted its author never wrote: nothing to warn about."""
    wire = yaml.safe_load(KARMADA_DOCS["duplicated"])
    _rs(wire).update(replicaDivisionPreference="Weighted")
    result = validate_policy(wire)
    assert result.ok and not result.warnings, result.warnings


@pytest.mark.parametrize(
    ("text", "mutate"),
    [
        # Karmada's webhook leaves clusterTolerations to the schema: an empty key with Equal is valid.
        (KARMADA_DOCS["duplicated"],
         lambda w: w["spec"]["placement"].update(
             clusterTolerations=[{"key": "", "operator": "Equal", "value": "x", "effect": "NoSchedule"}]
         )),
        (KARMADA_DOCS["duplicated"],
         lambda w: w["spec"]["placement"].update(
             clusterTolerations=[{"key": "k", "operator": "Exists", "value": "x", "effect": "NoExecute"}]
         )),
        # Karmada's webhook checks an imageOverrider's predicate path, not its value.
        (KARMADA_DOCS["override-image-plaintext"],
         lambda w: w["spec"]["overrideRules"][0]["overriders"]["imageOverrider"][0].pop("value")),
        # Karmada's docs advise propagateDeps with application failover; its webhook does not require it.
        (KARMADA_DOCS["affinities-failover"], lambda w: w["spec"].pop("propagateDeps")),
        (KARMADA_DOCS["duplicated"],
         lambda w: w["spec"].update(failover={"application": {"decisionConditions": {"tolerationSeconds": 90}, "purgeMode": "Never"}})),
        # Karmada checks a field selector's key and operator, not that it lists values.
        (KARMADA_DOCS["dynamic-weights"],
         lambda w: w["spec"]["placement"]["clusterAffinity"]["fieldSelector"]["matchExpressions"][0].update(values=[])),
    ],
)
def test_accepted_as_karmada_accepts(text: str, mutate: Any) -> None:
    wire = yaml.safe_load(text)
    mutate(wire)
    result = validate_policy(wire)
    assert result.ok, result.errors


def test_clean_policy_has_no_warnings() -> None:
    policy = PropagationPolicy.model_validate(yaml.safe_load(KARMADA_DOCS["static-weights"]))
    assert policy_warnings(policy) == []


def test_override_rules_deprecated_pair_used_only_without_rules() -> None:
    legacy = OverridePolicy.model_validate(yaml.safe_load(KARMADA_DOCS["override-deprecated-form"]))
    assert len(legacy.spec.rules()) == 1
    assert legacy.spec.rules()[0].target_cluster is not None
    modern = OverridePolicy.model_validate(yaml.safe_load(KARMADA_DOCS["override-image-plaintext"]))
    assert len(modern.spec.rules()) == 1
    assert modern.spec.rules()[0].overriders.plaintext is not None


def test_affinity_terms() -> None:
    placement = Placement.model_validate({"clusterAffinity": {"clusterNames": ["a"]}})
    terms = placement.affinity_terms()
    assert [(t.affinity_name, t.cluster_names) for t in terms] == [("default", ["a"])]
    placement = Placement.model_validate({"clusterAffinities": [{"affinityName": "x"}, {"affinityName": "y"}]})
    assert [t.affinity_name for t in placement.affinity_terms()] == ["x", "y"]




# The shipped examples (policy + workload documents) are checked in tests/examples/.

