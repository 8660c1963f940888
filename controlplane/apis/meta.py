"""Object metadata, conditions, label selectors and taints shared by every gpufed kind.

These are the pydantic v2 counterparts of the pieces of ``meta.k8s.io/v1`` and ``core/v1``
that gpufed's own kinds embed. Models read and write the Kubernetes wire form (camelCase
keys); ``model.model_dump(by_alias=True, exclude_none=True)`` gives back exactly what was
parsed, because optional fields default to ``None`` rather than to an empty value.

Besides the models this module holds the small pure helpers every controller needs:
``set_condition`` (moves ``lastTransitionTime`` only on a status change),
``LabelSelector.matches``, ``Toleration.tolerates`` with Kubernetes' semantics, the
DNS-1123 name checks with Kubernetes' messages, and ``validation_causes``, which turns a
pydantic ``ValidationError`` into Kubernetes ``Status`` causes with dotted field paths.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
)
from pydantic.alias_generators import to_camel
from pydantic.config import JsonDict

from controlplane.apis.kube.field import CauseType as CauseType  # the reasons of the causes below
from controlplane.apis.kube.names import (
    DNS_LABEL,
    DNS_LABEL_REGEX_MESSAGE,
    DNS_SUBDOMAIN,
    DNS_SUBDOMAIN_REGEX_MESSAGE,
    format_errors,
)
from controlplane.apis.pods import FILTERED_EFFECTS, requirement_matches, tolerates
from controlplane.apis.timestamps import format_time, parse_time

# ---------------------------------------------------------------------------------------------
# Base classes
# ---------------------------------------------------------------------------------------------


class WireModel(BaseModel):
    """Base for every API model: camelCase on the wire, snake_case in Python, unknown keys kept.

    Use it directly for parts of an object that agents or newer clients may extend (status).
    A string right under a field is that field's description for users (``kubectl explain``).
    """

    model_config = ConfigDict(
        alias_generator=to_camel,
        populate_by_name=True,
        extra="allow",
        validate_default=False,
        # Not use_attribute_docstrings: controlplane.apis.fielddocs reads them when a schema is
        # written, instead of parsing each class's source again while the class is built.
    )

    def to_wire(self) -> dict[str, Any]:
        """The JSON-ready wire form: camelCase keys, absent optional fields left out."""
        return self.model_dump(mode="json", by_alias=True, exclude_none=True)


class SpecModel(WireModel):
    """Base for desired-state models: unknown fields are errors of type ``extra_forbidden``.

    The API server relies on that error type to implement ``fieldValidation=Strict|Warn|Ignore``.
    """

    model_config = ConfigDict(extra="forbid")


#: The JSON-schema key :func:`published_as` sets (the OpenAPI documents read it).
PUBLISHED_AS = "x-gpufed-published-as"


def published_as(kube_type: str) -> JsonDict:
    """A free-form field's ``json_schema_extra`` naming the kube type it holds (``PodTemplateSpec``):
    the server keeps the field as written, and the OpenAPI documents publish kube's schema for it,
    as the upstream CRD embeds it."""
    return {PUBLISHED_AS: kube_type}


def listed_by(*keys: str) -> JsonDict:
    """A list field's ``json_schema_extra`` for its CRD's ``+listType=map`` with ``+listMapKey``:
    server-side apply merges and owns its items by ``keys``, and two items with the same keys
    are refused (``Duplicate value``), as kube treats the CRD's list."""
    return {"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": list(keys)}


#: The JSON-schema key :data:`SERVED_DEFAULT` sets (the OpenAPI documents read it).
SERVES_DEFAULT = "x-gpufed-serves-default"
#: A field's ``json_schema_extra`` for a CRD's ``+kubebuilder:default`` on the key of a keyed list
#: (a pod set's ``name``: ``main``): its schema carries the model's default, as the CRD's does, so
#: that server-side apply takes an item that leaves the key out, as kube does.
SERVED_DEFAULT: JsonDict = {SERVES_DEFAULT: True}


#: An integer field's ``json_schema_extra`` for its CRD's ``format`` (a Go ``int32`` or ``int64``;
#: kube publishes the format and checks no range for it).
INT32: JsonDict = {"format": "int32"}
INT64: JsonDict = {"format": "int64"}


def served_default(value: Any) -> JsonDict:
    """A field's ``json_schema_extra`` for a CRD's ``default`` the model leaves unset (None, read
    as the default where it is used): the served schema publishes ``value``, as kube publishes a
    CRD's default in both OpenAPI versions, and the kind's defaulting stores it."""
    return {SERVES_DEFAULT: True, "default": value}


#: A list field's ``json_schema_extra`` for its CRD's ``+listType=set``: each value owned on its own, once.
LISTED_AS_SET: JsonDict = {"x-kubernetes-list-type": "set"}
#: ``+listType=atomic``: the list is one value, replaced and owned whole (also a list's default).
LISTED_ATOMIC: JsonDict = {"x-kubernetes-list-type": "atomic"}
#: A map field's ``+mapType=atomic``: the map is one value, replaced and owned whole.
MAPPED_ATOMIC: JsonDict = {"x-kubernetes-map-type": "atomic"}
#: ``+listType=map`` by ``type``: a status's conditions, as every Kueue kind declares them.
CONDITIONS_BY_TYPE: JsonDict = listed_by("type")


# ---------------------------------------------------------------------------------------------
# Time
# ---------------------------------------------------------------------------------------------


def repeated(names: Iterable[str]) -> str | None:
    """The first name ``names`` holds twice (list fields whose entries must be unique by name), or None."""
    seen: set[str] = set()
    for name in names:
        if name in seen:
            return name
        seen.add(name)
    return None


def _check_time(value: str) -> str:
    try:
        parse_time(value)
    except ValueError as exc:
        raise ValueError(f"{value!r} is not an RFC 3339 timestamp (e.g. 2024-05-01T10:00:00Z)") from exc
    return value


Timestamp = Annotated[str, AfterValidator(_check_time)]
"""An RFC 3339 timestamp kept as the string that came over the wire."""


# ---------------------------------------------------------------------------------------------
# Names
# ---------------------------------------------------------------------------------------------

DNS1123_LABEL_MAX_LENGTH = 63
DNS1123_SUBDOMAIN_MAX_LENGTH = 253


def validate_dns1123_label(value: str) -> list[str]:
    """Kubernetes' ``IsDNS1123Label`` (without its dots hint): the problems with ``value``, empty when it is valid."""
    return format_errors(value, DNS_LABEL, DNS1123_LABEL_MAX_LENGTH, DNS_LABEL_REGEX_MESSAGE)


def validate_dns1123_subdomain(value: str) -> list[str]:
    """Kubernetes' ``IsDNS1123Subdomain``: the problems with ``value``, empty when it is valid."""
    return format_errors(value, DNS_SUBDOMAIN, DNS1123_SUBDOMAIN_MAX_LENGTH, DNS_SUBDOMAIN_REGEX_MESSAGE)


# ---------------------------------------------------------------------------------------------
# ObjectMeta
# ---------------------------------------------------------------------------------------------


class OwnerReference(WireModel):
    """``metadata.ownerReferences[]``."""

    api_version: str
    kind: str
    name: str
    uid: str
    controller: bool | None = None
    block_owner_deletion: bool | None = None


class ObjectMeta(WireModel):
    """``metadata`` of every object. Unknown metadata fields are kept, as the API server does.

    Name format is not checked here because it depends on the kind; the API server calls
    :func:`validate_dns1123_subdomain` / :func:`validate_dns1123_label` as the kind requires.
    """

    name: str | None = None
    generate_name: str | None = None
    namespace: str | None = None
    uid: str | None = None
    resource_version: str | None = None
    generation: int | None = None
    creation_timestamp: Timestamp | None = None
    deletion_timestamp: Timestamp | None = None
    deletion_grace_period_seconds: int | None = None
    labels: dict[str, str] | None = None
    annotations: dict[str, str] | None = None
    finalizers: list[str] | None = None
    owner_references: list[OwnerReference] | None = None
    managed_fields: list[dict[str, Any]] | None = None


# ---------------------------------------------------------------------------------------------
# Conditions
# ---------------------------------------------------------------------------------------------


class ConditionStatus(StrEnum):
    TRUE = "True"
    FALSE = "False"
    UNKNOWN = "Unknown"


class Condition(WireModel):
    """One entry of ``status.conditions``, as ``metav1.Condition``."""

    type: str
    status: Literal["True", "False", "Unknown"]
    reason: str | None = None
    message: str | None = None
    last_transition_time: Timestamp | None = None
    observed_generation: int | None = None


def get_condition(conditions: Iterable[Condition] | None, condition_type: str) -> Condition | None:
    """The condition of ``condition_type``, or ``None``."""
    for condition in conditions or ():
        if condition.type == condition_type:
            return condition
    return None


def is_condition_true(conditions: Iterable[Condition] | None, condition_type: str) -> bool:
    """Whether the condition of ``condition_type`` exists and is ``"True"``."""
    condition = get_condition(conditions, condition_type)
    return condition is not None and condition.status == "True"


def set_condition(
    conditions: Sequence[Condition] | None, condition: Condition, *, now: datetime
) -> list[Condition]:
    """A new condition list with ``condition`` set (replacing one of the same type).

    ``lastTransitionTime`` moves to ``now`` only when the status changes (or the condition is
    new); a change of reason or message alone keeps the old transition time. Order is kept;
    a new type is appended.
    """
    result: list[Condition] = []
    replaced = False
    for existing in conditions or ():
        if existing.type != condition.type:
            result.append(existing)
            continue
        replaced = True
        if existing.status == condition.status and existing.last_transition_time is not None:
            transition = existing.last_transition_time
        else:
            transition = format_time(now)
        result.append(condition.model_copy(update={"last_transition_time": transition}))
    if not replaced:
        transition = condition.last_transition_time or format_time(now)
        result.append(condition.model_copy(update={"last_transition_time": transition}))
    return result


# ---------------------------------------------------------------------------------------------
# Label selectors
# ---------------------------------------------------------------------------------------------


class LabelSelectorRequirement(SpecModel):
    """One ``matchExpressions`` entry of a label selector."""

    key: str = Field(min_length=1)
    operator: Literal["In", "NotIn", "Exists", "DoesNotExist"]
    values: list[str] | None = Field(default=None, validate_default=True)

    @field_validator("values")
    @classmethod
    def _values_fit_operator(cls, values: list[str] | None, info: Any) -> list[str] | None:
        operator = info.data.get("operator")
        if operator in ("In", "NotIn") and not values:
            raise ValueError(f"must be specified when `operator` is '{operator}'")
        if operator in ("Exists", "DoesNotExist") and values:
            raise ValueError(f"may not be specified when `operator` is '{operator}'")
        return values

    def matches(self, labels: Mapping[str, str]) -> bool:
        """Kubernetes set-based semantics (``NotIn`` and ``DoesNotExist`` match absent keys)."""
        return requirement_matches(self.operator, self.values or (), labels.get(self.key))


class LabelSelector(SpecModel):
    """``metav1.LabelSelector``. An empty selector matches everything, as in Kubernetes."""

    match_labels: dict[str, str] | None = None
    match_expressions: list[LabelSelectorRequirement] | None = None

    def is_empty(self) -> bool:
        return not self.match_labels and not self.match_expressions

    def matches(self, labels: Mapping[str, str] | None) -> bool:
        """Whether ``labels`` satisfy every ``matchLabels`` pair and every expression."""
        labels = labels or {}
        for key, value in (self.match_labels or {}).items():
            if labels.get(key) != value:
                return False
        return all(requirement.matches(labels) for requirement in self.match_expressions or ())


# ---------------------------------------------------------------------------------------------
# Taints and tolerations
# ---------------------------------------------------------------------------------------------


class Taint(SpecModel):
    """A taint on a cluster (or on a node, in capacity reports)."""

    key: str = Field(min_length=1)
    value: str | None = None
    effect: Literal["NoSchedule", "PreferNoSchedule", "NoExecute"]
    time_added: Timestamp | None = None


class Toleration(SpecModel):
    """``core/v1`` Toleration against cluster taints (placement), as Karmada takes it.

    Karmada checks only the field types of a cluster toleration (its webhook leaves
    ``clusterTolerations`` alone), so kube's two pod-toleration rules do not apply: an empty
    ``key`` with ``Equal`` tolerates a taint of any key with that value, and ``Exists`` ignores
    ``value`` (kube's ``ToleratesTaint``).
    """

    key: str | None = None
    operator: Literal["Exists", "Equal"] | None = None
    value: str | None = None
    effect: Literal["NoSchedule", "PreferNoSchedule", "NoExecute"] | None = None
    toleration_seconds: int | None = None

    def tolerates(self, taint: Taint) -> bool:
        """Kubernetes' ``Toleration.ToleratesTaint`` (:func:`controlplane.apis.pods.tolerates`)."""
        return tolerates(self, taint)


def taints_tolerated(
    taints: Iterable[Taint], tolerations: Iterable[Toleration], *, effects: Iterable[str] | None = None
) -> tuple[bool, Taint | None]:
    """Whether every taint (with one of ``effects``, default NoSchedule and NoExecute) is tolerated.

    Returns ``(True, None)`` or ``(False, first_untolerated_taint)``.
    """
    wanted = set(effects) if effects is not None else set(FILTERED_EFFECTS)
    tolerations = list(tolerations)
    for taint in taints:
        if taint.effect not in wanted:
            continue
        if not any(toleration.tolerates(taint) for toleration in tolerations):
            return False, taint
    return True, None


# ---------------------------------------------------------------------------------------------
# Validation errors as Kubernetes Status causes
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class FieldCause:
    """One problem with one field, ready to go into a Kubernetes ``Status``."""

    field: str
    message: str
    reason: CauseType = CauseType.FIELD_VALUE_INVALID
    type: str = ""
    """The pydantic error type (``extra_forbidden`` for unknown fields); empty for our own checks."""

    def as_status_cause(self) -> dict[str, str]:
        return {"reason": str(self.reason), "message": self.message, "field": self.field}


def field_path(loc: Sequence[int | str], *, prefix: str = "") -> str:
    """A pydantic error location as a Kubernetes field path: ``spec.clusters[0].name``."""
    path = prefix
    for part in loc:
        if isinstance(part, int):
            path += f"[{part}]"
        elif part.startswith(("function-after[", "function-before[", "function-wrap[")):
            continue
        elif path:
            path += "." + part
        else:
            path = part
    return path


def validation_causes(error: ValidationError, *, prefix: str = "") -> list[FieldCause]:
    """Turn a pydantic ``ValidationError`` (raised with ``by_alias`` locations) into causes.

    Messages name the field and say what is wrong in words a person can act on, e.g.
    ``spec.placement.replicaScheduling.weightPreference.staticWeightList[0].weight: Invalid value:
    0: must be greater than or equal to 1``.
    """
    causes: list[FieldCause] = []
    for item in error.errors(include_url=False):
        loc = [part for part in item["loc"] if not (isinstance(part, str) and "[" in part and "]" in part)]
        path = field_path(loc, prefix=prefix)
        kind = item["type"]
        message = str(item["msg"])
        if message.startswith("Value error, "):
            message = message[len("Value error, ") :]
        if kind == "extra_forbidden":
            reason = CauseType.FIELD_VALUE_UNKNOWN
            text = f'unknown field "{path}"'
        elif kind == "missing":
            reason = CauseType.FIELD_VALUE_REQUIRED
            text = f"{path}: Required value"
        elif kind in ("literal_error", "enum"):
            reason = CauseType.FIELD_VALUE_NOT_SUPPORTED
            text = f"{path}: Unsupported value: {item.get('input')!r}: {message}"
        elif kind.endswith("_type") or kind.endswith("_parsing"):
            reason = CauseType.FIELD_VALUE_TYPE_INVALID
            text = f"{path}: Invalid value: {item.get('input')!r}: {message}"
        else:
            reason = CauseType.FIELD_VALUE_INVALID
            shown = item.get("input")
            if isinstance(shown, dict | list):
                text = f"{path}: Invalid value: {message}"
            else:
                text = f"{path}: Invalid value: {shown!r}: {message}"
        causes.append(FieldCause(field=path, message=text, reason=reason, type=kind))
    return causes
