"""The override language: OverridePolicy and ClusterOverridePolicy, and their overriders.

Field-compatible with Karmada's ``policy.karmada.io/v1alpha1`` schema, as :mod:`policies.models`
(the propagation policies) is: a Karmada user's YAML parses unchanged under either group. What
the overriders do to a manifest is :mod:`policies.overriders`.
"""

from __future__ import annotations

from typing import Any, Final, Literal, TypeAlias

from pydantic import Field

from controlplane.apis.meta import SpecModel
from policies.models import (
    AnyPropagationPolicy,
    ClusterAffinity,
    ClusterPropagationPolicy,
    PolicyObject,
    PropagationPolicy,
    ResourceSelector,
)

OverriderOperator: TypeAlias = Literal["add", "remove", "replace"]


class ImagePredicate(SpecModel):
    path: str
    """A JSON pointer to the image field to change, for example /spec/template/spec/containers/0/image
    ("" is the whole object, which is no image: the override fails when applied, as in Karmada)."""


class ImageOverrider(SpecModel):
    """Change one component of ``[registry/]repository[:tag|@digest]`` of container images."""

    predicate: ImagePredicate | None = None
    """Which image field to change. Absent: every container image of the workload's pod templates."""
    component: Literal["Registry", "Repository", "Tag"]
    """The part of the image to change: Registry, Repository or Tag."""
    operator: OverriderOperator
    """add, remove or replace the component."""
    value: str | None = None
    """The new value of the component, for add and replace. As in Karmada it may be empty
    (replacing a registry with an empty value drops it)."""


class CommandArgsOverrider(SpecModel):
    container_name: str
    """The container whose command or args change (as in Karmada, one named by no container, ""
    among them, changes nothing)."""
    operator: Literal["add", "remove"]
    """add appends the values; remove deletes them."""
    value: list[str] | None = None
    """The values to add or remove."""


class LabelAnnotationOverrider(SpecModel):
    operator: OverriderOperator
    """add, remove or replace the given labels or annotations."""
    value: dict[str, str] | None = None
    """The labels or annotations to add, remove or replace."""


class PlaintextOverrider(SpecModel):
    """A JSON-patch-like operation at a JSON pointer ``path``. As in Karmada, a ``path`` that is
    not a pointer is accepted (with a warning, ``policies.validation``) and fails when applied."""

    path: str = Field(min_length=1)
    """A JSON pointer to the field to change, for example /spec/replicas."""
    operator: OverriderOperator
    """add, remove or replace the field."""
    value: Any = None
    """The new value for add and replace."""


class JSONPatchOperation(SpecModel):
    sub_path: str
    """A JSON pointer inside the document held by the field."""
    operator: OverriderOperator
    """add, remove or replace at subPath."""
    value: Any = None
    """The new value for add and replace."""


class FieldOverrider(SpecModel):
    """Newer Karmada: patch inside a string field that holds JSON or YAML (e.g. a ConfigMap key)."""

    field_path: str
    """A JSON pointer to a string field that holds a JSON or YAML document, for example /data/config.yaml
    ("" is the whole object, which is no string: the override fails when applied, as in Karmada)."""
    json_ops: list[JSONPatchOperation] | None = Field(default=None, alias="json")
    """Changes to the field's JSON document. Cannot be set together with yaml."""
    yaml_ops: list[JSONPatchOperation] | None = Field(default=None, alias="yaml")
    """Changes to the field's YAML document. Cannot be set together with json."""


class Overriders(SpecModel):
    """The overriders of one rule, applied in Karmada's order: image, command, args, labels,
    annotations, field, plaintext."""

    plaintext: list[PlaintextOverrider] | None = None
    """Changes to any field, by JSON pointer."""
    image_overrider: list[ImageOverrider] | None = None
    """Changes to container images (registry, repository or tag)."""
    command_overrider: list[CommandArgsOverrider] | None = None
    """Changes to container commands."""
    args_overrider: list[CommandArgsOverrider] | None = None
    """Changes to container args."""
    labels_overrider: list[LabelAnnotationOverrider] | None = None
    """Changes to labels."""
    annotations_overrider: list[LabelAnnotationOverrider] | None = None
    """Changes to annotations."""
    field_overrider: list[FieldOverrider] | None = None
    """Changes inside fields that hold JSON or YAML documents."""


class RuleWithCluster(SpecModel):
    """One override rule: ``overriders`` for clusters matching ``targetCluster`` (all when absent)."""

    target_cluster: ClusterAffinity | None = None
    """The clusters this rule applies to. Absent: every cluster."""
    overriders: Overriders
    """The changes the rule makes, applied in this order: image, command, args, labels, annotations, field,
    plaintext."""


class OverrideSpec(SpecModel):
    """``spec`` of OverridePolicy and ClusterOverridePolicy.

    ``resourceSelectors`` absent means every resource (Karmada). The deprecated top-level
    ``targetCluster``/``overriders`` pair is accepted and used only when ``overrideRules`` is
    empty.
    """

    resource_selectors: list[ResourceSelector] | None = None
    """The resources this policy overrides. Absent: every resource the policy can see."""
    override_rules: list[RuleWithCluster] | None = None
    """The override rules, each for a set of clusters, applied in order."""
    target_cluster: ClusterAffinity | None = None
    """Deprecated: use overrideRules. The clusters overriders applies to; used only when overrideRules is
    empty."""
    overriders: Overriders | None = None
    """Deprecated: use overrideRules. The changes made in targetCluster; used only when overrideRules is
    empty."""

    def rules(self) -> list[RuleWithCluster]:
        """``overrideRules``; when empty, the deprecated ``targetCluster``/``overriders`` pair (Karmada)."""
        if self.override_rules:
            return list(self.override_rules)
        if self.overriders is not None:
            return [RuleWithCluster(target_cluster=self.target_cluster, overriders=self.overriders)]
        return []


class OverridePolicy(PolicyObject):
    """Namespaced (short name ``op``)."""

    kind: Literal["OverridePolicy"] = "OverridePolicy"
    spec: OverrideSpec
    """Spec is the desired behavior of the OverridePolicy."""


class ClusterOverridePolicy(PolicyObject):
    """Cluster-scoped (short name ``cop``)."""

    kind: Literal["ClusterOverridePolicy"] = "ClusterOverridePolicy"
    spec: OverrideSpec
    """Spec is the desired behavior of the ClusterOverridePolicy."""


AnyOverridePolicy: TypeAlias = OverridePolicy | ClusterOverridePolicy
AnyPolicy: TypeAlias = AnyPropagationPolicy | AnyOverridePolicy

POLICY_KINDS: Final[dict[str, type[SpecModel]]] = {
    "PropagationPolicy": PropagationPolicy,
    "ClusterPropagationPolicy": ClusterPropagationPolicy,
    "OverridePolicy": OverridePolicy,
    "ClusterOverridePolicy": ClusterOverridePolicy,
}
