"""What the API server serves: a registry of resource types, as plain data.

A :class:`ResourceType` says everything the generic machinery needs about one kind:
its names (group, version, kind, plural, singular, short names, categories), scope,
whether it has a ``status`` subresource, the pydantic model that validates it (``None``
accepts any object), the columns ``kubectl get`` prints, which patch types it takes,
which field selectors it supports, how its names are validated, and which advisory
warnings a write of it returns (the policy kinds: ``policies.validation``).

A :class:`Registry` is a value. The kinds themselves are declared in :mod:`controlplane.apiserver.kinds`
(core/v1 in ``kinds.core``, the workloads in ``kinds.workloads``, the Lease in ``kinds.coordination``,
gpufed's in ``kinds.gpufed``, …), each list passed through :func:`with_kube_rules`; the hub serves
one combination of them (:mod:`controlplane.hubregistry`), a simulated member cluster another.
Nothing here does I/O.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime
from enum import StrEnum
from typing import Any

from pydantic import BaseModel

from controlplane.apis.apiextensions.kind import CustomKind
from controlplane.apis.kube import defaulting, fieldlabels, generation, unconditional, validation
from controlplane.apis.kube.defaulting import Defaulter
from controlplane.apis.kube.field import FieldError
from controlplane.apis.kube.fieldlabels import FieldGetter
from controlplane.apis.kube.validation import Validator
from controlplane.apis.untyped import dig
from controlplane.apiserver import columns as col
from controlplane.apiserver.openapi import known_fields
from controlplane.apiserver.openapi.structural import (
    schema_defaults,
    served_field_schema,
    status_defaulting,
    undeclared_fields,
)
from controlplane.apiserver.patching.schema import FieldSchema, builtin_apply_schema
from controlplane.apiserver.patching.structural import structural_apply_schema

#: A table cell getter: the object and "now" (for ages) in, a JSON-able cell out.
CellGetter = Callable[[dict[str, Any], datetime], Any]
#: A field selector getter: the object in, the field's string value out.
#: Advisory warnings about a valid object being written (kubectl prints each as "Warning: ...").
Warner = Callable[[dict[str, Any]], list[str]]
#: A webhook's refusal: (the webhook, why), a validator's ``admission.Denied`` (403 Forbidden), or
#: (the webhook, why, code), an ``admission.Errored(code, err)`` (that code, no reason).
WebhookDenial = tuple[str, str] | tuple[str, str, int]

ALL_VERBS: tuple[str, ...] = ("create", "delete", "deletecollection", "get", "list", "patch", "update", "watch")
STATUS_VERBS: tuple[str, ...] = ("get", "patch", "update")


class NameRule(StrEnum):
    """Which kube name format ``metadata.name`` must follow."""

    #: RFC 1123 subdomain: most kinds.
    SUBDOMAIN = "subdomain"
    #: RFC 1123 label: Namespace and every name that becomes a DNS label.
    LABEL = "label"
    #: RFC 1035 label (starts with a letter): Service.
    LABEL_1035 = "label1035"
    #: Any name that is a valid URL path segment (no '/' or '%', not '.' or '..'): the RBAC kinds.
    PATH_SEGMENT = "pathsegment"


@dataclass(frozen=True, slots=True)
class TableColumn:
    """One ``kubectl get`` column. ``name`` is shown upper-cased by kubectl."""

    name: str
    getter: CellGetter
    type: str = "string"
    priority: int = 0
    description: str = ""
    format: str = ""

    def definition(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "type": self.type,
            "format": self.format,
            "description": self.description,
            "priority": self.priority,
        }


#: The JSONPath of the cells whose getter reads one field (:func:`at_json_path`).
_JSON_PATHS: weakref.WeakKeyDictionary[CellGetter, str] = weakref.WeakKeyDictionary()


def at_json_path(getter: CellGetter, json_path: str) -> CellGetter:
    """``getter``, known to read the field at ``json_path`` (``.spec.cohort``): a CRD's printer
    column can say so (:func:`column_json_path`)."""
    _JSON_PATHS[getter] = json_path
    return getter


def column_json_path(column: TableColumn) -> str | None:
    """The JSONPath ``column`` reads, or None for a column computed in code."""
    return _JSON_PATHS.get(column.getter)


def path(dotted: str, *, default: Any = "") -> CellGetter:
    """A getter for a dotted path (``spec.replicas``); missing values print as ``default``."""
    parts = dotted.split(".")

    def get(obj: dict[str, Any], _now: datetime) -> Any:
        value = dig(obj, *parts)
        return default if value is None else value

    return at_json_path(get, f".{dotted}")


AGE = TableColumn(
    "Age",
    lambda obj, now: col.age(obj, now),
    description="CreationTimestamp is a timestamp representing the server time when this object was created.",
)
#: kube's default table convertor's column for a kind without a printer (a Role, a LimitRange):
#: the creation time as RFC 3339, of type ``date``.
CREATED_AT = TableColumn(
    "Created At",
    lambda obj, _now: str(dig(obj, "metadata", "creationTimestamp") or ""),
    type="date",
    description="CreationTimestamp is a timestamp representing the server time when this object was created.",
)

@dataclass(frozen=True, slots=True)
class ScaleSubresource:
    """Where a kind keeps what ``/scale`` (autoscaling/v1 Scale) shows and sets."""

    spec_replicas: str = "spec.replicas"
    status_replicas: str = "status.replicas"
    #: A metav1.LabelSelector (matchLabels/matchExpressions) shown as a selector string, or a
    #: field already holding one as a string; empty for none (a CRD without ``labelSelectorPath``).
    label_selector: str = "spec.selector"
    #: The selector is a plain map of labels (ReplicationController's ``spec.selector``).
    label_set: bool = False


@dataclass(frozen=True, slots=True)
class StatusWrite:
    """kube's strategy of a write through a subresource that changes only the status (a
    CertificateSigningRequest's ``status`` and ``approval``): ``prepare`` (new as merged, stored)
    adjusts the new object in place (``PrepareForUpdate``); ``validate`` replaces the kind's."""

    prepare: Callable[[dict[str, Any], dict[str, Any]], None]
    validate: Validator


@dataclass(frozen=True, slots=True)
class VersionConversion:
    """How a version of a built-in kind is served from the objects stored in another version of
    its group (kube's conversion through the internal type: autoscaling/v1 HorizontalPodAutoscaler
    from autoscaling/v2). Both functions return a new object with the other version's apiVersion."""

    #: The version the objects are stored in (``v2``).
    storage_version: str
    #: This version's object as stored (its defaults and validation are the storage version's).
    to_storage: Callable[[dict[str, Any]], dict[str, Any]]
    #: A stored object as this version serves it.
    from_storage: Callable[[dict[str, Any]], dict[str, Any]]
    #: Annotations that carry the storage version's status in this version: a write of the main
    #: resource keeps the stored ones, a write of the status subresource takes the request's.
    status_annotations: tuple[str, ...] = ()
    #: The group the objects are stored in when it is not the type's own ("" for core: an
    #: events.k8s.io/v1 Event is a stored core v1 Event).
    storage_group: str | None = None


@dataclass(frozen=True, slots=True)
class ResourceType:
    group: str
    version: str
    kind: str
    plural: str
    singular: str
    namespaced: bool
    short_names: tuple[str, ...] = ()
    categories: tuple[str, ...] = ()
    #: Served with a ``status`` subresource: the main resource ignores ``.status``
    #: on update, the subresource changes only ``.status``.
    has_status: bool = False
    #: Validates the whole object (apiVersion/kind/metadata/spec/status); None = permissive.
    model: type[BaseModel] | None = None
    #: Extra columns after NAME (AGE included where wanted).
    columns: tuple[TableColumn, ...] = (AGE,)
    #: False: NAME is the last column and only shown with ``-o wide`` (kube's Event table).
    name_first: bool = True
    #: The NAME cell when it is more than the object's name (kube's ``fast (default)`` StorageClass).
    name_cell: CellGetter | None = None
    #: Built-in kinds take strategic merge patch; custom kinds only JSON/merge patch.
    strategic_merge: bool = False
    #: Field selectors beyond metadata.name / metadata.namespace.
    extra_field_selectors: Mapping[str, FieldGetter] = field(default_factory=dict)
    name_rule: NameRule = NameRule.SUBDOMAIN
    #: Normalises an object before it is validated and written (e.g. Secret stringData).
    prepare: Callable[[dict[str, Any]], None] | None = None
    #: What a create does first, given the new object without the status it was sent with: kube's
    #: strategy ``PrepareForCreate`` steps beyond :attr:`prepare` (a namespace is ``Active``).
    prepare_create: Callable[[dict[str, Any]], None] | None = None
    #: What an update does first, given (new, stored): kube's strategy ``PrepareForUpdate`` steps
    #: that read the stored object (a Service keeps its allocated values).
    prepare_update: Callable[[dict[str, Any], dict[str, Any]], None] | None = None
    #: Subresources whose writes change only the status, each with kube's strategy: ``status``
    #: (with :attr:`has_status`) and others (a CSR's ``approval``), routed as ``status`` is.
    status_writes: Mapping[str, StatusWrite] = field(default_factory=dict)
    #: Served with kube's namespace ``finalize`` subresource (update only): a write of the whole
    #: object but its status, whose ``spec.finalizers`` the main resource keeps; this validates it
    #: instead of :attr:`validate`.
    finalize: Validator | None = None
    #: Served with a ``scale`` subresource (``kubectl scale``).
    scale: ScaleSubresource | None = None
    #: Warnings about a valid object on create/update/patch (accepted, but not doing what the
    #: author may expect), returned as ``Warning: 299`` headers, as Kubernetes admission does.
    warn: Warner | None = None
    #: kube's defaulting of the kind: fills unset fields in place on every create and update,
    #: after ``prepare`` and before validation (built-in kinds: :mod:`controlplane.apis.kube`).
    defaults: Defaulter | None = None
    #: kube's defaulting of the kind read back from storage (for objects stored without it); for a
    #: converted version (:attr:`conversion`) it applies to the stored form, before the conversion.
    defaults_on_read: Defaulter | None = None
    #: kube's validation of the kind beyond ``model``: (new, stored on update) → field errors;
    #: any error refuses the write with 422 Invalid (built-in kinds: :mod:`controlplane.apis.kube`).
    validate: Validator | None = None
    #: kube's validation of a write of the status subresource (the kind's status strategy:
    #: counts not negative, parts within the whole); :attr:`validate` checks the other writes.
    validate_status: Validator | None = None
    #: A webhook's checks, run in the same answer once the schema, the rules and :attr:`validate`
    #: took the write (kube calls a validating webhook only then): Kueue's Workload webhook, on
    #: the object and on its status writes.
    validate_once_valid: Validator | None = None
    #: The validating webhook whose checks :attr:`validate_once_valid` are (Kueue's
    #: ``vclusterqueue.kb.io``…): its errors are that webhook's denial (403 ``admission webhook
    #: "<name>" denied the request: <errors>``, as controller-runtime answers a validator's field
    #: errors); without one, a 422 Invalid.
    once_valid_webhook: str = ""
    #: Whether that webhook is called for status writes too (Kueue's Workload webhook, registered
    #: for ``workloads/status``; its ClusterQueue and ResourceFlavor webhooks are not).
    once_valid_on_status: bool = False
    #: kube's typed decoding of a built-in kind: the paths of an object's fields its Go type does
    #: not have (``status_only``: in its ``.status``, a write of the status subresource), which
    #: a write drops, or refuses under ``fieldValidation=Strict``. Kinds with a ``model`` or a
    #: ``custom`` schema are checked by those instead (:mod:`controlplane.apiserver.openapi.known_fields`).
    unknown_fields: Callable[[dict[str, Any], bool], list[tuple[str | int, ...]]] | None = None
    #: Validation against the other stored objects of the kind (new object, those objects) →
    #: field errors: rules across objects, as a webhook that lists its kind enforces them.
    validate_against_stored: Callable[[dict[str, Any], list[dict[str, Any]]], list[FieldError]] | None = None
    #: kube's validating admission across the kind's stored objects (new object, the others) →
    #: why the write is forbidden (403 ``<resource> "<name>" is forbidden: <reason>``), or None.
    admit_against_stored: Callable[[dict[str, Any], list[dict[str, Any]]], str | None] | None = None
    #: A webhook's refusal that reads the kind's other stored objects (Karmada's of an interpreter
    #: customization that sets another's hook): (new object, the others) → (the webhook, why), or None;
    #: answered as :attr:`webhook_denial` is, after the checks above.
    webhook_against_stored: Callable[[dict[str, Any], list[dict[str, Any]]], tuple[str, str] | None] | None = None
    #: A webhook's refusal of an object on create and update (Karmada's, of a policy's spec): the
    #: object -> (the webhook, why), or None; answered as kube answers a webhook's denial (403
    #: ``Forbidden``, as controller-runtime's ``admission.Denied`` gives it), or (the webhook, why,
    #: code) for controller-runtime's ``admission.Errored(code, err)`` (that code, no reason: Karmada's
    #: mutating webhook's 400 of a policy's long name). An update of an object it already refuses
    #: (stored before the rule) is let through.
    webhook_denial: Callable[[dict[str, Any]], WebhookDenial | None] | None = None
    #: The webhook's refusal of an update, given (new, stored), where its rules read the stored object
    #: (a field it keeps immutable): checked on update instead of :attr:`webhook_denial`.
    webhook_update_denial: Callable[[dict[str, Any], dict[str, Any]], WebhookDenial | None] | None = None
    #: kube answers a delete of this kind with the deleted object, not a success Status (its
    #: registry's ``ReturnDeletedObject``: Pod, PersistentVolumeClaim, Service, ServiceAccount…).
    returns_deleted_object: bool = False
    #: The verbs discovery lists and the handlers serve on the kind itself; kube's namespace
    #: storage has no ``DeleteCollection``, so a ``DELETE`` of the namespaces is its 405.
    verbs: tuple[str, ...] = ALL_VERBS
    #: The group whose objects this type serves (kube's Event in core and events.k8s.io): stored once,
    #: under that group's key and apiVersion, served with this type's. None: its own group.
    stored_as: str | None = None
    #: A CustomResourceDefinition's kind: its schema, pruning and the apiVersion it is stored as.
    custom: CustomKind | None = None
    #: The structural schema of a kind that is a CRD on a real cluster but built into the hub (the
    #: operators' kinds: Kubeflow's training jobs, KubeRay's, JobSet, LeaderWorkerSet), read when
    #: first written: its objects' nulls are pruned and their values' types checked by it, as kube
    #: checks a CRD's (:mod:`controlplane.apiserver.openapi.structural`). None: no such schema.
    crd_schema: Callable[[], Mapping[str, Any]] | None = field(default=None, compare=False)
    #: A status as kube stores it for the kind: ``crd_schema``'s status defaults filled (a copy;
    #: the status itself when it defaults none), so a controller compares what it would write with
    #: what is stored (set by :func:`with_kube_rules`). None: the kind defaults no status.
    status_defaults: Callable[[Mapping[str, Any]], Mapping[str, Any]] | None = field(default=None, compare=False)
    #: A built-in kind served in this version from objects stored in another (autoscaling/v1
    #: HorizontalPodAutoscaler): every read and write converts (:mod:`.objects.reading`).
    conversion: VersionConversion | None = None
    #: The kind stands for a custom resource (a Kueue kind served from its model): an update's
    #: model errors ratchet as kube's CRDValidationRatcheting, a value equal to the stored one at
    #: its path is not refused again (:func:`~controlplane.apiserver.validation.check_object`).
    ratchets: bool = False
    #: kube keeps a ``metadata.generation`` for the kind: 1 on create, bumped by a write that
    #: changes its spec. False: a built-in kind whose registry strategy keeps none (ConfigMap,
    #: Secret, Service...; :mod:`controlplane.apis.kube.generation`, set by :func:`with_kube_rules`).
    keeps_generation: bool = True
    #: How server-side apply and managedFields see the kind's fields (associative and set lists,
    #: atomic maps): a CRD version's, built from its structural schema. None: the built-in kind's
    #: of this group, or ObjectMeta only.
    field_schema: FieldSchema | None = field(default=None, compare=False)
    #: The schema server-side apply and managedFields use, resolved on first use rather than on
    #: every write (:attr:`apply_schema`).
    _apply_schema: FieldSchema | None = field(default=None, init=False, repr=False, compare=False)

    @property
    def apply_schema(self) -> FieldSchema:
        """How server-side apply and managedFields see the kind's fields: :attr:`field_schema`; for
        a kind built in with its CRD's schema (:attr:`crd_schema`: a JobSet's ``replicatedJobs``
        keyed by name, an embedded pod spec's containers by theirs) or served from a model (Kueue's
        keyed lists), the list and map types that schema declares, as kube merges the CRD; else
        the built-in kind's of this group."""
        schema = self._apply_schema
        if schema is None:
            schema = self.field_schema
            if schema is None and self.crd_schema is not None:
                schema = structural_apply_schema(self.crd_schema())
            if schema is None and self.model is not None:
                schema = served_field_schema(self.group, self.version, self.kind, self.model)
            if schema is None:
                schema = builtin_apply_schema(self.group, self.kind)
            object.__setattr__(self, "_apply_schema", schema)
        return schema

    @property
    def status_subresources(self) -> list[str]:
        """The subresources served that write only the status (``status``, ``approval``...), sorted."""
        return sorted({*self.status_writes, *(("status",) if self.has_status else ())})

    def writes_status_only(self, subresource: str | None) -> bool:
        """Whether a write through ``subresource`` changes only the status."""
        return subresource == "status" or (subresource is not None and subresource in self.status_writes)

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def group_version(self) -> str:
        return self.api_version

    @property
    def list_kind(self) -> str:
        return f"{self.kind}List"

    @property
    def storage_group(self) -> str:
        if self.conversion is not None and self.conversion.storage_group is not None:
            return self.conversion.storage_group or "core"
        return self.stored_as or self.group or "core"

    @property
    def stored_in_version(self) -> str:
        """The apiVersion of the same kind whose objects this type serves, when another version of
        it stores them (a CRD's version other than its storage version, a converted built-in
        version); empty for the storage version itself. Controllers watch the storage version only."""
        if self.custom is not None and self.custom.stored_api_version:
            return self.custom.stored_api_version
        if self.conversion is not None:
            group = self.group if self.conversion.storage_group is None else self.conversion.storage_group
            return f"{group}/{self.conversion.storage_version}" if group else self.conversion.storage_version
        return ""

    @property
    def storage_api_version(self) -> str:
        """The apiVersion objects of this type are stored with: ``api_version`` unless an alias of
        another group's type, or a version of a kind stored in another (:attr:`stored_in_version`)."""
        if self.stored_in_version:
            return self.stored_in_version
        return f"{self.stored_as}/{self.version}" if self.stored_as else self.api_version

    @property
    def field_selectors(self) -> Mapping[str, FieldGetter]:
        return fieldlabels.selectable(
            self.extra_field_selectors, own_conversion=self._converts_field_labels, namespaced=self.namespaced
        )

    def field_label_refusal(self, field_name: str) -> str:
        return fieldlabels.refusal(field_name, own_conversion=self._converts_field_labels)

    @property
    def unconditional_update(self) -> bool:
        """An update without ``metadata.resourceVersion`` (or with ``0``) writes over the stored
        revision, as kube's strategy for the kind allows (``AllowUnconditionalUpdate``): most
        built-in kinds; not a custom resource, nor :mod:`controlplane.apis.kube.unconditional`'s."""
        return self.custom is None and unconditional.allows_unconditional_update(self.group, self.kind)

    @property
    def create_on_update(self) -> bool:
        """A PUT of a missing object creates it, as kube's strategy for the kind allows
        (``AllowCreateOnUpdate``): :mod:`controlplane.apis.kube.unconditional`'s few built-in kinds."""
        return self.custom is None and unconditional.allows_create_on_update(self.group, self.kind)

    @property
    def built_in(self) -> bool:
        """kube serves the kind from a Go type of its own (a built-in kind, CRDs included), not as
        an unstructured custom resource: the kinds with strategic merge patch, and CRDs."""
        return self.strategic_merge or self.group == "apiextensions.k8s.io"

    @property
    def decoded_by_kube(self) -> bool:
        """Its writes are decoded as kube decodes them into its Go type (:attr:`unknown_fields`,
        from kube's definitions): it has no schema of the hub's own (a model, a CRD's, an operator's)."""
        return self.model is None and self.custom is None and self.crd_schema is None

    @property
    def _converts_field_labels(self) -> bool:
        """kube converts the kind's field labels with a function of its own: a built-in kind with
        fields of its own, or a custom resource (served here without strategic merge patch)."""
        return bool(self.extra_field_selectors) or not self.built_in

    def key_prefix(self, namespace: str | None = None) -> str:
        """The storage prefix of every object of this type (in ``namespace``, if given)."""
        base = f"/registry/{self.storage_group}/{self.plural}/"
        if self.namespaced and namespace:
            return f"{base}{namespace}/"
        return base

    def key(self, *, namespace: str | None, name: str) -> str:
        if self.namespaced:
            return f"/registry/{self.storage_group}/{self.plural}/{namespace}/{name}"
        return f"/registry/{self.storage_group}/{self.plural}/{name}"

    def qualified(self) -> str:
        """``deployments.apps``: the resource as kube names it in messages."""
        return f"{self.plural}.{self.group}" if self.group else self.plural


class Registry:
    """An immutable set of served resource types with the look-ups the server needs."""

    def __init__(self, *groups: Iterable[ResourceType]) -> None:
        self._types: tuple[ResourceType, ...] = tuple(rt for group in groups for rt in group)
        self._by_resource: dict[tuple[str, str, str], ResourceType] = {}
        self._by_kind: dict[tuple[str, str], ResourceType] = {}
        for rt in self._types:
            resource_key = (rt.group, rt.version, rt.plural)
            if resource_key in self._by_resource:
                raise ValueError(f"resource {rt.plural} in {rt.api_version} registered twice")
            self._by_resource[resource_key] = rt
            self._by_kind[(rt.api_version, rt.kind)] = rt

    def __iter__(self) -> Iterator[ResourceType]:
        return iter(self._types)

    def __len__(self) -> int:
        return len(self._types)

    def __add__(self, other: Registry) -> Registry:
        return Registry(self._types, other._types)

    def get(self, group: str, version: str, plural: str) -> ResourceType | None:
        return self._by_resource.get((group, version, plural))

    def for_kind(self, api_version: str, kind: str) -> ResourceType | None:
        return self._by_kind.get((api_version, kind))

    def require(self, api_version: str, kind: str) -> ResourceType:
        """The type of ``kind`` in ``api_version``; KeyError when not served."""
        rt = self.for_kind(api_version, kind)
        if rt is None:
            raise KeyError(f"{kind} in {api_version} is not served")
        return rt

    def group_versions(self) -> dict[str, list[str]]:
        """group -> its versions, in registration order ("" is the core group)."""
        out: dict[str, list[str]] = {}
        for rt in self._types:
            versions = out.setdefault(rt.group, [])
            if rt.version not in versions:
                versions.append(rt.version)
        return out

    def in_group_version(self, group: str, version: str) -> list[ResourceType]:
        return [rt for rt in self._types if rt.group == group and rt.version == version]

    def namespaced_types(self) -> list[ResourceType]:
        """The namespaced types, each stored set once (aliases of another group and versions of a
        kind stored in another version left out)."""
        return [rt for rt in self._types if rt.namespaced and rt.stored_as is None and not rt.stored_in_version]


def with_kube_rules(types: Iterable[ResourceType]) -> list[ResourceType]:
    """``types`` with kube's defaulting and validation of each kind attached, where kube has them,
    and whether kube keeps a generation for it.

    kube validates its internal type, whose shape is the storage version's: a converted version
    (:attr:`ResourceType.conversion`) is validated as its storage form (the field paths of errors
    are the storage version's, as kube's are). Its own defaulting is the one it declares (kube's
    of that version); the storage version's is applied to its storage form (``defaults_on_read``,
    as kube defaults what it decodes from etcd)."""
    out: list[ResourceType] = []
    for rt in types:
        defaults = _with_schema_defaults(rt, rt.defaults or defaulting.for_kind(rt.group, rt.kind))
        validate = rt.validate or validation.for_kind(rt.group, rt.kind)
        once_valid = rt.validate_once_valid
        validate_status = rt.validate_status or validation.for_status(rt.group, rt.kind)
        if rt.conversion is not None:
            defaults = rt.defaults
            validate = _converted_validator(rt.conversion, validate)
            validate_status = _converted_validator(rt.conversion, validate_status)
            once_valid = _converted_validator(rt.conversion, rt.validate_once_valid)
        out.append(replace(
            rt,
            defaults=defaults,
            defaults_on_read=_with_schema_defaults(rt, rt.defaults_on_read or defaulting.for_reading(rt.group, rt.kind)),
            validate=validate,
            validate_status=validate_status,
            validate_once_valid=once_valid,
            unknown_fields=rt.unknown_fields or _unknown_fields(rt),
            status_defaults=rt.status_defaults or (status_defaulting(rt.crd_schema) if rt.crd_schema else None),
            keeps_generation=rt.keeps_generation and generation.keeps_generation(rt.group, rt.kind),
        ))
    return out


def _with_schema_defaults(rt: ResourceType, then: Defaulter | None) -> Defaulter | None:
    """An operator's kind's defaulting: its CRD's structural defaults (its served schema's
    ``default`` values, as kube fills a custom resource's when it decodes one), then ``then``
    (its webhook's, run after, as kube's mutating admission runs after decoding)."""
    if rt.crd_schema is None:
        return then
    structural = schema_defaults(rt.crd_schema)
    if then is None:
        return structural

    def defaults(obj: dict[str, Any]) -> None:
        structural(obj)
        then(obj)

    return defaults


def _unknown_fields(rt: ResourceType) -> Callable[[dict[str, Any], bool], list[tuple[str | int, ...]]] | None:
    """The fields kube's decoding drops from the kind's objects: a model's or a CRD's own check
    finds them (None here); an operator's kind's, its served structural schema; kube's kind's, kube's
    Go type."""
    if rt.model or rt.custom:
        return None
    if rt.crd_schema is not None:
        return undeclared_fields(rt.crd_schema)
    return known_fields.unknown_fields_of(rt.group, rt.version, rt.kind)


def _converted_validator(conversion: VersionConversion, validate: Validator | None) -> Validator | None:
    """The storage version's validation of a converted version's objects."""
    if validate is None:
        return None
    to_storage = conversion.to_storage
    return lambda new, old: validate(to_storage(new), None if old is None else to_storage(old))
