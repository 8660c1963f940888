"""From CustomResourceDefinition objects to the :class:`ResourceType` s the server serves.

:func:`crd_resource_type` is the CustomResourceDefinition kind itself
(``apiextensions.k8s.io/v1``, with kube's defaulting and validation); :func:`custom_types`
turns one established CRD into a type per served version: names, scope, status and
scale subresources, ``additionalPrinterColumns`` as table columns, ``selectableFields`` as field
selectors, and the version's structural schema wired as the kind's pruning, defaulting and
validation (CEL rules included) and as the merge type of its server-side applies. Pure: no I/O; the CRD controller
keeps what it builds until the CRD's spec changes.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Final

from controlplane.apis.apiextensions import builtin, cel
from controlplane.apis.apiextensions import crd as crds
from controlplane.apis.apiextensions.kind import ConversionWebhook, CustomKind
from controlplane.apis.apiextensions.schema import (
    NO_OLD,
    Schema,
    apply_defaults,
    integral_floats_made_ints,
    prune,
    validate,
)
from controlplane.apis.durations import human_duration
from controlplane.apis.kube.field import CauseType, FieldError, go_float
from controlplane.apis.kube.fieldlabels import FieldGetter, field_path
from controlplane.apiserver.patching.structural import structural_apply_schema
from controlplane.apiserver.resources import (
    AGE,
    ResourceType,
    ScaleSubresource,
    TableColumn,
    path,
    with_kube_rules,
)
from controlplane.gojson import go_json_value

#: kube's finalizer on every CRD: its objects are deleted before it goes.
CLEANUP_FINALIZER = "customresourcecleanup.apiextensions.k8s.io"
CRD_KIND = "CustomResourceDefinition"


def _crd_prepare(obj: dict[str, Any]) -> None:
    finalizers = obj.setdefault("metadata", {}).setdefault("finalizers", [])
    if isinstance(finalizers, list) and CLEANUP_FINALIZER not in finalizers and not obj["metadata"].get("deletionTimestamp"):
        finalizers.append(CLEANUP_FINALIZER)


def _crd_validate(obj: dict[str, Any], old: dict[str, Any] | None) -> list[FieldError]:
    errors = crds.validate_crd(obj, compile_rule=cel.compile_error, old=old)
    if builtin.carries_label(obj) and not builtin.carries_label(old):
        errors.append(FieldError(  # only the CRDs the hub publishes for its built-in kinds carry it
            CauseType.FIELD_VALUE_FORBIDDEN, f"metadata.labels[{builtin.LABEL}]",
            "Forbidden: set only by the server, on the CustomResourceDefinitions of the kinds it serves built in",
        ))
    if old is not None:
        for key in ("group", "scope"):
            before, after = (old.get("spec") or {}).get(key), (obj.get("spec") or {}).get(key)
            if before != after:
                errors.append(FieldError(
                    CauseType.FIELD_VALUE_INVALID, f"spec.{key}", f'Invalid value: "{after}": field is immutable'
                ))
        errors.extend(crds.stored_versions_errors(obj, old))
    return errors + crds.api_approval_errors(obj, old)


def crd_resource_type() -> ResourceType:
    """``customresourcedefinitions.apiextensions.k8s.io`` (decoded as kube decodes it: ``with_kube_rules``)."""
    [crd] = with_kube_rules([ResourceType(
        crds.GROUP, crds.VERSION, CRD_KIND, "customresourcedefinitions",
        "customresourcedefinition", namespaced=False, short_names=("crd", "crds"),
        categories=("api-extensions",), has_status=True,
        columns=(TableColumn("Created At", path("metadata.creationTimestamp"), type="date"),),
        prepare=_crd_prepare, prepare_create=crds.add_stored_version,
        prepare_update=lambda new, _old: crds.add_stored_version(new),
        defaults=crds.default_crd, validate=_crd_validate,
    )])
    return crd


# --- printer columns ----------------------------------------------------------------------

_STEP = re.compile(r"\.([A-Za-z0-9_\-/]+)|\[(\d+)\]|\[\?\(@\.([A-Za-z0-9_]+)==[\"']([^\"']*)[\"']\)\]|\['([^']+)'\]")


def json_path_getter(expression: str) -> Callable[[Any], Any]:
    """A reader of kube's simple JSONPath (``.spec.x``, ``[0]``, ``['a.b']``,
    ``[?(@.type=="Ready")]``) over an object; None where nothing matches."""
    find = _json_path_finder(expression)

    def get(obj: Any) -> Any:
        value = find(obj)
        return None if value is _MISSING else value

    return get


#: What a JSONPath finds where nothing matches (unlike a field present with a null value).
_MISSING: Final = object()


def _json_path_finder(expression: str) -> Callable[[Any], Any]:
    steps = [m.groups() for m in _STEP.finditer(expression.strip().removeprefix("{").removesuffix("}"))]

    def find(obj: Any) -> Any:
        node = obj
        for name, index, key, wanted, quoted in steps:
            if name is not None or quoted is not None:
                field = name if name is not None else quoted
                if not isinstance(node, dict) or field not in node:
                    return _MISSING
                node = node[field]
            elif index is not None:
                if not isinstance(node, list) or int(index) >= len(node):
                    return _MISSING
                node = node[int(index)]
            else:
                matches = [i for i in node if isinstance(i, dict) and str(i.get(key)) == wanted] if isinstance(node, list) else []
                if not matches:
                    return _MISSING
                node = matches[0]
        return node

    return find


def printer_column(definition: dict[str, Any]) -> TableColumn:
    """An ``additionalPrinterColumns`` entry as kube's CRD table convertor shows it: its
    description, or ``Custom resource definition column (in JSONPath format): <jsonPath>``, and
    its cells as :func:`printer_cell` makes them."""
    json_path = str(definition.get("jsonPath", ""))
    find = _json_path_finder(json_path)
    kind = str(definition.get("type") or "string")
    return TableColumn(
        str(definition["name"]), lambda obj, now: printer_cell(kind, find(obj), now), type=kind,
        priority=int(definition.get("priority") or 0),
        description=str(definition.get("description")
                        or f"Custom resource definition column (in JSONPath format): {json_path}"),
        format=str(definition.get("format") or ""),
    )


#: Go's ``time.RFC3339`` as ``time.Parse`` reads it (fractional seconds allowed).
_RFC3339 = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d+)?(?:Z|[+-]\d{2}:\d{2})")
_GO_ZERO_TIME: Final = datetime(1, 1, 1, tzinfo=UTC)


def printer_cell(kind: str, value: Any, now: datetime) -> Any:
    """kube's cell of a printer column of type ``kind`` for what its JSONPath found (``_MISSING``:
    nothing, an empty cell whatever the type). A ``string`` column prints the value as kube's
    JSONPath printer does: a string as it is, a map or a list as Go's JSON (``{"a":1}``, ``["x"]``),
    another value with Go's ``%v`` (``3``, ``1.5``, ``true``; null: ``<no value>``). Other types
    (``cellForJSONValue``): an ``integer`` (a float truncated), a ``number``, a ``boolean``, or a
    ``date`` as its age (``<unknown>`` for an empty one, ``<invalid>`` for one that is not RFC 3339);
    a value of another JSON type than the column's leaves the cell empty."""
    if value is _MISSING:
        return None
    if kind == "string":
        return _printed(value)
    if kind == "integer" and isinstance(value, int | float) and not isinstance(value, bool):
        return int(value)
    if kind == "number" and isinstance(value, int | float) and not isinstance(value, bool):
        return value
    if kind == "boolean" and isinstance(value, bool):
        return value
    if kind == "date" and isinstance(value, str):
        return _age(value, now)
    return None


def _printed(value: Any) -> str | None:
    if value is None:
        return "<no value>"
    if isinstance(value, dict | list):
        try:
            return go_json_value(value)
        except ValueError:
            return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return go_float(value)
    return str(value)


def _age(text: str, now: datetime) -> str:
    """kube's ``ConvertToHumanReadableDateType`` of the time ``metav1.Time`` reads from ``text``."""
    if text in ("", "null"):
        return "<unknown>"
    if not _RFC3339.fullmatch(text):
        return "<invalid>"
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        return "<invalid>"
    if moment == _GO_ZERO_TIME:
        return "<unknown>"
    return human_duration((now - moment).total_seconds())


# --- instances ---------------------------------------------------------------------------


def _dotted(json_path: str) -> str:
    return ".".join(crds.field_path(json_path))


def _selectable_fields(version: dict[str, Any]) -> dict[str, FieldGetter]:
    """A version's ``selectableFields``: each a field selector named by its path without the
    leading dot, selecting on the value there (an absent field is ``""``, as kube's strategy reads it)."""
    out: dict[str, FieldGetter] = {}
    for selectable in version.get("selectableFields") or ():
        json_path = selectable.get("jsonPath") if isinstance(selectable, dict) else None
        if isinstance(json_path, str) and json_path:
            out[json_path.removeprefix(".")] = field_path(_dotted(json_path))
    return out


@dataclass(frozen=True, slots=True)
class _SchemaHooks:
    """What a version's schema does to its objects (see :class:`CustomKind`)."""

    prune: Callable[[dict[str, Any]], list[tuple[str | int, ...]]]
    defaults: Callable[[dict[str, Any]], None]
    validate: Callable[[dict[str, Any], dict[str, Any] | None], list[FieldError]]
    prune_status: Callable[[dict[str, Any]], list[tuple[str | int, ...]]]
    validate_status: Callable[[dict[str, Any], dict[str, Any] | None], list[FieldError]]


def _schema_hooks(schema: Schema) -> _SchemaHooks:
    """The pruning, defaulting and validation of objects by ``schema``, as kube's
    ``customResourceStrategy`` does them, and those of a status write, as its ``statusStrategy``
    does: only the ``status`` is pruned and checked against the status schema; the CEL rules run
    over the whole object, ratcheted (an unchanged spec that a newer schema refuses is not the
    status write's business). On update both ratchet against the stored object. The pruning, which
    decodes the written object, also turns an integer sent with a zero fraction (``3.0``) into the
    integer kube stores (:func:`~controlplane.apis.apiextensions.schema.integral_floats_made_ints`)."""
    rules = cel.compile_schema_rules(schema)
    status_schema = (schema.get("properties") or {}).get("status")
    # The root as pruning sees it when only the status is read: its other fields are not there.
    status_root = {
        **{k: v for k, v in schema.items() if k not in ("properties", "required")},
        "properties": {"status": status_schema} if isinstance(status_schema, dict) else {},
    }

    def prune_unknown(obj: dict[str, Any]) -> list[tuple[str | int, ...]]:
        integral_floats_made_ints(obj, schema)
        return prune(obj, schema)

    def prune_status(obj: dict[str, Any]) -> list[tuple[str | int, ...]]:
        if "status" not in obj:
            return []
        integral_floats_made_ints(obj["status"], status_schema if isinstance(status_schema, dict) else None)
        alone = {"status": obj["status"]}
        dropped = prune(alone, status_root)
        if "status" not in alone:
            del obj["status"]
        return dropped

    def defaults(obj: dict[str, Any]) -> None:
        apply_defaults(obj, schema)

    def check(obj: dict[str, Any], old: dict[str, Any] | None) -> list[FieldError]:
        return rules.after(validate(obj, schema, old=NO_OLD if old is None else old), obj, old)

    def check_status(obj: dict[str, Any], old: dict[str, Any] | None) -> list[FieldError]:
        found: list[FieldError] = []
        if "status" in obj and isinstance(status_schema, dict):
            was = old["status"] if old is not None and "status" in old else NO_OLD
            found = validate(obj["status"], status_schema, path=("status",), old=was)
        return rules.after(found, obj, old)

    return _SchemaHooks(prune_unknown, defaults, check, prune_status, check_status)


_KUBE_VERSION = re.compile(r"^v(\d+)(?:(alpha|beta)(\d+))?\Z")


def version_priority(name: str) -> tuple[int, int, int, str]:
    """kube's ordering of version names (sort ascending = most preferred first): GA before beta
    before alpha, higher numbers first, then anything else alphabetically."""
    match = _KUBE_VERSION.match(name)
    if match is None:
        return (3, 0, 0, name)
    major, level, minor = match.groups()
    rank = {None: 0, "beta": 1, "alpha": 2}[level]
    return (rank, -int(major), -int(minor or 0), name)


def deprecation_warning(spec: dict[str, Any], version: dict[str, Any]) -> str:
    """kube's warning for a request in a ``deprecated`` version: its ``deprecationWarning``, else
    ``<group>/<version> <Kind> is deprecated``, naming the most preferred served version newer
    than it that is not deprecated, if any (``; use <group>/<version> <Kind>``)."""
    if version.get("deprecated") is not True:
        return ""
    if isinstance(version.get("deprecationWarning"), str):
        return str(version["deprecationWarning"])
    group, name, kind = spec["group"], version["name"], spec["names"]["kind"]
    newer = [
        v["name"] for v in spec["versions"]
        if v.get("served") and not v.get("deprecated") and version_priority(v["name"]) < version_priority(name)
    ]
    warning = f"{group}/{name} {kind} is deprecated"
    return f"{warning}; use {group}/{min(newer, key=version_priority)} {kind}" if newer else warning


def custom_types(crd: dict[str, Any]) -> list[ResourceType]:
    """The types an established ``crd`` serves: one per served version, most preferred first
    (see the module docstring). With ``conversion: None`` every version reads and writes the
    same objects, stored as the storage version; each version has its own schema and columns.
    With ``conversion: Webhook`` the other versions are converted to and from the storage version
    by the CRD's webhook (:class:`ConversionWebhook`), and so is the storage version while
    ``status.storedVersions`` lists another (objects written before the storage version moved)."""
    spec = crd["spec"]
    names = spec["names"]
    group = spec["group"]
    stored = f"{group}/{crds.storage_version(crd)}"
    webhook = _conversion_webhook(crd)
    # Objects may still be stored in an earlier storage version: the storage version's own reads
    # then convert them too (kube converts whatever is stored to the version asked for).
    older = [v for v in (crd.get("status") or {}).get("storedVersions") or () if f"{group}/{v}" != stored]
    out: list[ResourceType] = []
    for version in sorted(spec["versions"], key=lambda v: version_priority(v["name"])):
        if not version.get("served"):
            continue
        schema: Schema = version["schema"]["openAPIV3Schema"]
        subresources = version.get("subresources") or {}
        scale = subresources.get("scale")
        printer = version.get("additionalPrinterColumns")
        hooks = _schema_hooks(schema)
        api_version = f"{group}/{version['name']}"
        out.append(ResourceType(
            group, version["name"], names["kind"], names["plural"], names.get("singular") or names["kind"].lower(),
            namespaced=spec["scope"] == "Namespaced",
            short_names=tuple(names.get("shortNames") or ()),
            categories=tuple(names.get("categories") or ()),
            has_status="status" in subresources,
            columns=tuple(printer_column(c) for c in printer) if printer else (AGE,),
            scale=ScaleSubresource(
                spec_replicas=_dotted(scale["specReplicasPath"]),
                status_replicas=_dotted(scale["statusReplicasPath"]),
                # No labelSelectorPath: kube's Scale has no selector.
                label_selector=_dotted(scale["labelSelectorPath"]) if scale.get("labelSelectorPath") else "",
            ) if isinstance(scale, dict) else None,
            extra_field_selectors=_selectable_fields(version),
            defaults=hooks.defaults, validate=hooks.validate,
            field_schema=structural_apply_schema(schema),
            custom=CustomKind(
                schema, hooks.prune, stored if api_version != stored else "",
                prune_status=hooks.prune_status, validate_status=hooks.validate_status,
                conversion_webhook=webhook if api_version != stored or older else None,
                deprecation_warning=deprecation_warning(spec, version),
                terminating=bool(crd["metadata"].get("deletionTimestamp")),
            ),
        ))
    return out


def _conversion_webhook(crd: dict[str, Any]) -> ConversionWebhook | None:
    webhook = crds.webhook_conversion(crd)
    if webhook is None:
        return None
    client = webhook.get("clientConfig") or {}
    return ConversionWebhook(
        crd["metadata"]["name"], client.get("url"), client.get("service"), client.get("caBundle"),
        tuple(str(v) for v in webhook.get("conversionReviewVersions") or ()),
    )
