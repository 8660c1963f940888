"""kube's validation and defaulting of a CustomResourceDefinition object itself.

:func:`default_crd` fills what kube-apiserver defaults (``listKind``, a version's
``served``/``storage`` are required, ``conversion.strategy: None``);
:func:`validate_crd` returns kube's field errors: the name must be ``<plural>.<group>``,
the group a domain with a dot, names DNS labels, ``scope`` Cluster or Namespaced, versions
named as DNS labels with no duplicates and exactly one ``storage``, every version with a
structural ``openAPIV3Schema`` (a type on every node that declares fields), valid
``pattern``s, ``default``s valid against their node, ``preserveUnknownFields`` false, scale
paths under ``.spec``/``.status``, CEL rules that compile within the cost budget,
``selectableFields`` (simple paths to string, boolean or integer fields, at most eight), and a
``conversion`` that is None or a reachable Webhook (:func:`conversion_errors`).
Pure: no I/O.
"""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import urlsplit

from controlplane.apis.apiextensions.schema import Schema, format_path
from controlplane.apis.apiextensions.structural import RuleCompiler, field_path_in, structural_errors
from controlplane.apis.kube import field, webhookclient
from controlplane.apis.kube.field import CauseType, FieldError
from controlplane.apis.kube.names import (
    DNS_1035,
    DNS_1035_REGEX_MESSAGE,
    DNS_LABEL,
    DNS_LABEL_REGEX_MESSAGE,
    DNS_SUBDOMAIN,
)
from controlplane.gojson import go_quote

GROUP = "apiextensions.k8s.io"
VERSION = "v1"
_KIND = re.compile(r"^[A-Za-z][A-Za-z0-9]*\Z")
CONVERSION_STRATEGIES = ("None", "Webhook")
#: kube's MaxSelectableFields: how many selectable fields one version may declare.
MAX_SELECTABLE_FIELDS = 8


def default_crd(crd: dict[str, Any]) -> None:
    """kube's defaults of a CRD, in place."""
    spec = crd.get("spec")
    if not isinstance(spec, dict):
        return
    names = spec.get("names")
    if isinstance(names, dict) and isinstance(names.get("kind"), str) and not names.get("listKind"):
        names["listKind"] = names["kind"] + "List"
    if isinstance(names, dict) and isinstance(names.get("plural"), str) and not names.get("singular") and isinstance(names.get("kind"), str):
        names["singular"] = names["kind"].lower()
    conversion = spec.setdefault("conversion", {"strategy": "None"})
    if isinstance(conversion, dict):
        conversion.setdefault("strategy", "None")
        service = field.mapping(field.mapping(field.mapping(conversion.get("webhook")).get("clientConfig")).get("service"))
        if service and service.get("port") is None:
            service["port"] = 443


def _invalid(path: str, value: Any, detail: str) -> FieldError:
    shown = f'"{value}"' if isinstance(value, str) else str(value).lower() if isinstance(value, bool) else str(value)
    return FieldError(CauseType.FIELD_VALUE_INVALID, path, f"Invalid value: {shown}: {detail}")


def _required(path: str, detail: str = "") -> FieldError:
    return FieldError(CauseType.FIELD_VALUE_REQUIRED, path, "Required value" + (f": {detail}" if detail else ""))


def validate_crd(
    crd: dict[str, Any], *, compile_rule: RuleCompiler | None = None, old: dict[str, Any] | None = None
) -> list[FieldError]:
    """kube's field errors for ``crd`` (empty: valid); ``old``: the stored CRD an update replaces."""
    out: list[FieldError] = []
    spec = crd.get("spec")
    if not isinstance(spec, dict):
        return [_required("spec")]
    group = spec.get("group")
    names: dict[str, Any] = spec["names"] if isinstance(spec.get("names"), dict) else {}
    plural = names.get("plural")
    name = (crd.get("metadata") or {}).get("name")
    if isinstance(plural, str) and isinstance(group, str) and name != f"{plural}.{group}":
        out.append(_invalid("metadata.name", name, 'must be spec.names.plural+"."+spec.group'))
    if not group:
        out.append(_required("spec.group"))
    elif not isinstance(group, str) or not DNS_SUBDOMAIN.match(group) or "." not in group:
        out.append(_invalid("spec.group", group, "should be a domain with at least one dot"))
    out.extend(_names_errors(names))
    scope = spec.get("scope")
    if not scope:
        out.append(_required("spec.scope"))
    elif scope not in ("Cluster", "Namespaced"):
        out.append(FieldError(
            CauseType.FIELD_VALUE_NOT_SUPPORTED, "spec.scope", f'Unsupported value: "{scope}": supported values: "Cluster", "Namespaced"'
        ))
    if spec.get("preserveUnknownFields") is True:
        out.append(_invalid("spec.preserveUnknownFields", True, "must be false"))
    out.extend(conversion_errors(spec, old))
    # kube's requireMapListKeysMapSetValidation: an update of a CRD stored with such errors
    # keeps them (it was valid before kube checked them).
    list_types = old is None or not _has_list_type_errors(field.mapping(old.get("spec")).get("versions"))
    out.extend(_versions_errors(spec.get("versions"), compile_rule, list_types=list_types))
    return out


def _has_list_type_errors(versions: Any) -> bool:
    """Whether a version's schema in ``versions`` breaks the map-list and set checks."""
    for version in field.items(versions):
        schema = field.mapping(field.mapping(field.mapping(version).get("schema")).get("openAPIV3Schema"))
        if len(structural_errors(schema, "")) != len(structural_errors(schema, "", list_types=False)):
            return True
    return False


def conversion_errors(spec: dict[str, Any], old: dict[str, Any] | None = None) -> list[FieldError]:
    """kube's ``validateCustomResourceConversion`` of a v1 ``spec.conversion`` (its paths are kube's
    internal type's: ``webhookClientConfig``, ``conversionReviewVersions``). On update a review
    version the server does not know stays allowed when the stored CRD had one already, and a CA
    bundle without a certificate is refused only once the CRD is established with a valid one
    (kube's ratcheting)."""
    conversion = field.mapping(spec.get("conversion"))
    strategy = conversion.get("strategy")
    base = "spec.conversion"
    out: list[FieldError] = []
    if not strategy:
        out.append(_required(f"{base}.strategy"))
    elif strategy not in CONVERSION_STRATEGIES:
        out.append(field.not_supported(f"{base}.strategy", strategy, CONVERSION_STRATEGIES))
    if strategy not in (None, "None") and spec.get("preserveUnknownFields") is True:
        out.append(_invalid(f"{base}.strategy", strategy, "must be None if spec.preserveUnknownFields is true"))
    webhook = conversion.get("webhook")
    client = field.mapping(webhook).get("clientConfig") if isinstance(webhook, dict) else None
    versions = field.items(field.mapping(webhook).get("conversionReviewVersions"))
    if strategy != "Webhook":
        if client is not None:
            out.append(field.forbidden(f"{base}.webhookClientConfig", "should not be set when strategy is not set to Webhook"))
        if versions:
            out.append(field.forbidden(f"{base}.conversionReviewVersions", "should not be set when strategy is not set to Webhook"))
        return out
    old_conversion = field.mapping(field.mapping((old or {}).get("spec")).get("conversion"))
    old_webhook = field.mapping(old_conversion.get("webhook"))
    if not isinstance(client, dict):
        out.append(_required(f"{base}.webhookClientConfig", "required when strategy is set to Webhook"))
    else:
        out.extend(webhookclient.client_config_errors(client, f"{base}.webhookClientConfig"))
        old_bundle = field.mapping(old_webhook.get("clientConfig")).get("caBundle")
        # As kube: allowed on create and while the CRD is not established (its status then says
        # InvalidCABundle), or when the stored one was not valid either.
        allow_invalid = old is None or not _established(old) or bool(webhookclient.ca_bundle_errors(old_bundle, "caBundle"))
        if not allow_invalid:
            out.extend(webhookclient.ca_bundle_errors(client.get("caBundle"), f"{base}.webhookClientConfig.caBundle"))
    old_versions = [str(v) for v in field.items(old_webhook.get("conversionReviewVersions"))]
    recognized = old is None or not old_versions or bool(set(old_versions) & set(webhookclient.ACCEPTED_REVIEW_VERSIONS))
    return out + webhookclient.review_versions_errors(
        versions, f"{base}.conversionReviewVersions", require_recognized=recognized
    )


def _established(crd: dict[str, Any]) -> bool:
    conditions = field.items(field.mapping(crd.get("status")).get("conditions"))
    return any(field.mapping(c).get("type") == "Established" and field.mapping(c).get("status") == "True" for c in conditions)


def invalid_ca_bundle(crd: dict[str, Any]) -> bool:
    """Whether the CRD's conversion webhook has a CA bundle with no certificate in it."""
    webhook = webhook_conversion(crd)
    bundle = field.mapping((webhook or {}).get("clientConfig")).get("caBundle")
    return bool(webhookclient.ca_bundle_errors(bundle, "caBundle"))


def webhook_conversion(crd: dict[str, Any]) -> dict[str, Any] | None:
    """The ``spec.conversion.webhook`` of a CRD whose strategy is Webhook, else None."""
    conversion = field.mapping(field.mapping(crd.get("spec")).get("conversion"))
    webhook = conversion.get("webhook")
    return webhook if conversion.get("strategy") == "Webhook" and isinstance(webhook, dict) else None


def _names_errors(names: dict[str, Any]) -> list[FieldError]:
    out: list[FieldError] = []
    for key in ("plural", "singular"):
        value = names.get(key)
        if not value:
            if key == "plural":
                out.append(_required("spec.names.plural"))
        elif not isinstance(value, str) or not DNS_LABEL.match(value):
            out.append(_invalid(f"spec.names.{key}", value, DNS_LABEL_REGEX_MESSAGE))
    for key in ("kind", "listKind"):
        value = names.get(key)
        if not value:
            out.append(_required(f"spec.names.{key}"))
        elif not isinstance(value, str) or not _KIND.match(value):
            out.append(_invalid(f"spec.names.{key}", value, "may have mixed case, but should otherwise match: [a-z]([-a-z0-9]*[a-z0-9])?"))
    if names.get("kind") and names.get("kind") == names.get("listKind"):
        out.append(_invalid("spec.names.listKind", names.get("listKind"), "kind and listKind may not be the same"))
    for index, short in enumerate(names.get("shortNames") or []):
        if not isinstance(short, str) or not DNS_LABEL.match(short):
            out.append(_invalid(f"spec.names.shortNames[{index}]", short, DNS_LABEL_REGEX_MESSAGE))
    for index, category in enumerate(names.get("categories") or []):
        if not isinstance(category, str) or not DNS_LABEL.match(category):
            out.append(_invalid(f"spec.names.categories[{index}]", category, DNS_LABEL_REGEX_MESSAGE))
    return out


def _deprecation_warning_errors(version: dict[str, Any], path: str) -> list[FieldError]:
    """kube's ``validateDeprecationWarning``: only on a deprecated version, 1 to 256 bytes of
    printable characters."""
    warning = version.get("deprecationWarning")
    if warning is None:
        return []
    if version.get("deprecated") is not True:
        return [field.invalid(path, warning, "can only be set for deprecated versions")]
    if not isinstance(warning, str):
        return []
    problems = []
    if len(warning.encode()) > 256:
        problems.append("must be <= 256 characters long")
    if not warning:
        problems.append("must not be an empty string")
    bad = next((i for i, char in enumerate(warning) if not char.isprintable()), None)
    if bad is not None:  # Go ranges over a string by byte offset
        offset = len(warning[:bad].encode())
        problems.append(f"must only contain printable UTF-8 characters; non-printable character found at index {offset}")
    return [field.invalid(path, warning, problem) for problem in problems]


#: kube's printerColumnDatatypes and customResourceColumnDefinitionFormats, listed as its sets list them.
_COLUMN_TYPES = ("boolean", "date", "integer", "number", "string")
_COLUMN_FORMATS = ("byte", "date", "date-time", "double", "float", "int32", "int64", "password")


def _printer_column_errors(column: dict[str, Any], path: str) -> list[FieldError]:
    """kube's ``ValidateCustomResourceColumnDefinition`` (its field path ``JSONPath`` included)."""
    out: list[FieldError] = []
    if not column.get("name"):
        out.append(_required(f"{path}.name"))
    kind, kinds = column.get("type"), f"must be one of {','.join(_COLUMN_TYPES)}"
    if not kind:
        out.append(_required(f"{path}.type", kinds))
    elif kind not in _COLUMN_TYPES:
        out.append(field.invalid(f"{path}.type", kind, kinds))
    form = column.get("format")
    if form and form not in _COLUMN_FORMATS:
        out.append(field.invalid(f"{path}.format", form, f"must be one of {','.join(_COLUMN_FORMATS)}"))
    json_path = column.get("jsonPath")
    if not json_path:
        out.append(_required(f"{path}.JSONPath"))
    elif not str(json_path).startswith("."):
        out.append(field.invalid(f"{path}.JSONPath", json_path, "must be a simple json path starting with ."))
    return out


def _versions_errors(versions: Any, compile_rule: RuleCompiler | None, *, list_types: bool = True) -> list[FieldError]:
    if not isinstance(versions, list) or not versions:
        return [_required("spec.versions", "must have exactly one version marked as storage version")]
    out: list[FieldError] = []
    seen: set[str] = set()
    storage = 0
    for index, version in enumerate(versions):
        base = f"spec.versions[{index}]"
        if not isinstance(version, dict):
            out.append(_invalid(base, str(version), "must be an object"))
            continue
        vname = version.get("name")
        if not vname:
            out.append(_required(f"{base}.name"))
        elif not isinstance(vname, str) or not DNS_1035.match(vname):
            out.append(_invalid(f"{base}.name", vname, DNS_1035_REGEX_MESSAGE))
        elif vname in seen:
            out.append(FieldError(CauseType.FIELD_VALUE_DUPLICATE, f"{base}.name", f'Duplicate value: "{vname}"'))
        else:
            seen.add(vname)
        for flag in ("served", "storage"):
            if not isinstance(version.get(flag), bool):
                out.append(_required(f"{base}.{flag}"))
        storage += version.get("storage") is True
        out.extend(_deprecation_warning_errors(version, f"{base}.deprecationWarning"))
        schema = (version.get("schema") or {}).get("openAPIV3Schema")
        if not isinstance(schema, dict):
            out.append(_required(f"{base}.schema.openAPIV3Schema", "schemas are required"))
        else:
            out.extend(structural_errors(schema, f"{base}.schema.openAPIV3Schema", compile_rule, list_types=list_types))
        out.extend(_subresource_errors(version.get("subresources"), f"{base}.subresources"))
        for column_index, column in enumerate(version.get("additionalPrinterColumns") or []):
            out.extend(_printer_column_errors(field.mapping(column), f"{base}.additionalPrinterColumns[{column_index}]"))
    out.extend(_all_selectable_fields_errors(versions))
    if storage != 1:
        out.append(_invalid("spec.versions", storage, "must have exactly one version marked as storage version"))
    if not any(isinstance(v, dict) and v.get("served") for v in versions):
        out.append(_invalid("spec.versions", len(versions), "must have at least one version marked as served"))
    return out


def _all_selectable_fields_errors(versions: list[Any]) -> list[FieldError]:
    """kube's checks of ``selectableFields``: at ``spec.selectableFields`` when every version has
    the same schema and the same selectable fields (kube's internal CRD then holds them once, at
    the top level), else at each version's."""
    shaped = [v for v in versions if isinstance(v, dict)]
    if not shaped:
        return []
    first = shaped[0]
    if all(v.get("schema") == first.get("schema") and (v.get("selectableFields") or []) == (
        first.get("selectableFields") or []
    ) for v in shaped):
        fields = first.get("selectableFields") or []
        if not fields:
            return []
        schema = (first.get("schema") or {}).get("openAPIV3Schema")
        if not isinstance(schema, dict):
            return [_invalid("spec.selectableFields", "", "selectableFields may only be set when validations.schema is included")]
        return selectable_fields_errors(fields, schema, "spec.selectableFields")
    out: list[FieldError] = []
    for index, version in enumerate(versions):
        fields = version.get("selectableFields") if isinstance(version, dict) else None
        if not fields:
            continue
        base = f"spec.versions[{index}].selectableFields"
        schema = (version.get("schema") or {}).get("openAPIV3Schema")
        if not isinstance(schema, dict):
            # (sic) kube's message.
            out.append(_invalid(base, "", "selectableFields may only be set when version.schema.openAPIV3Schema is not included"))
        else:
            out.extend(selectable_fields_errors(fields, schema, base))
    return out


def selectable_fields_errors(fields: Any, schema: Schema, base: str) -> list[FieldError]:
    """kube's ``ValidateCustomResourceSelectableFields``: each ``jsonPath`` a simple path (no array
    notation) to a string, boolean or integer field of ``schema``, not in ``metadata``, no two the
    same, and at most :data:`MAX_SELECTABLE_FIELDS` of them."""
    out: list[FieldError] = []
    seen: set[str] = set()
    for index, selectable in enumerate(fields if isinstance(fields, list) else []):
        where = f"{base}[{index}].jsonPath"
        json_path = selectable.get("jsonPath") if isinstance(selectable, dict) else None
        if not json_path or not isinstance(json_path, str):
            out.append(_required(where))
            continue
        try:
            path, node = field_path_in(json_path, schema)
        except ValueError as exc:
            out.append(_invalid(where, json_path, f"is an invalid path: {exc}"))
            continue
        if path and path[0] == "metadata":
            out.append(_invalid(where, json_path, "must not point to fields in metadata"))
        if not isinstance(node, dict) or node.get("type") not in ("string", "boolean", "integer"):
            out.append(_invalid(
                where, json_path,
                "must point to a field of type string, boolean or integer. Enum string fields and strings with formats are allowed.",
            ))
        shown = ".".join(path).replace(".[", "[")
        if shown in seen:
            out.append(FieldError(CauseType.FIELD_VALUE_DUPLICATE, where, f'Duplicate value: "{json_path}"'))
        else:
            seen.add(shown)
    if len(seen) > MAX_SELECTABLE_FIELDS:
        out.append(FieldError(
            CauseType.FIELD_VALUE_TOO_MANY, base, f"Too many: {len(seen)}: must have at most {MAX_SELECTABLE_FIELDS} items"
        ))
    return out


def _subresource_errors(subresources: Any, base: str) -> list[FieldError]:
    if not isinstance(subresources, dict):
        return []
    scale = subresources.get("scale")
    if not isinstance(scale, dict):
        return []
    out: list[FieldError] = []
    for key, prefix, required in (
        ("specReplicasPath", ".spec.", True), ("statusReplicasPath", ".status.", True), ("labelSelectorPath", None, False),
    ):
        value = scale.get(key)
        if not value:
            if required:
                out.append(_required(f"{base}.scale.{key}"))
        elif not isinstance(value, str) or not value.startswith(prefix or "."):
            where = "should be a json path under either .spec or .status" if prefix is None else f"should be a json path under {prefix[:-1]}"
            out.append(_invalid(f"{base}.scale.{key}", value, where))
        elif prefix is None and not value.startswith((".spec.", ".status.")):
            out.append(_invalid(f"{base}.scale.{key}", value, "should be a json path under either .spec or .status"))
    return out


#: kube's KubeAPIApprovedAnnotation: a CRD in a protected group names the review that approved it.
API_APPROVED = "api-approved.kubernetes.io"
_APPROVAL_PR = "see https://github.com/kubernetes/enhancements/pull/1111"


def _approval_state(annotations: dict[str, Any]) -> tuple[str, str]:
    """kube's ``GetAPIApprovalState``: (Missing|Bypassed|Approved|Invalid, its reason)."""
    value = str(annotations.get(API_APPROVED) or "")
    parsed = urlsplit(value) if value.startswith("/") or "://" in value else None
    if not value:
        return "Missing", f'protected groups must have approval annotation "{API_APPROVED}", {_APPROVAL_PR}'
    if value.startswith("unapproved"):
        return "Bypassed", f"not approved: {go_quote(value)}"
    if parsed is not None and parsed.scheme and parsed.netloc:
        return "Approved", f"approved in {value}"
    return "Invalid", (
        f'protected groups must have approval annotation "{API_APPROVED}" with either a URL or a reason starting '
        f'with "unapproved", {_APPROVAL_PR}'
    )


def _protected(crd: dict[str, Any]) -> bool:
    """kube's ``IsProtectedCommunityGroup``: ``k8s.io``, ``kubernetes.io`` and their subdomains."""
    group = str(field.mapping(crd.get("spec")).get("group") or "")
    return group in ("k8s.io", "kubernetes.io") or group.endswith((".k8s.io", ".kubernetes.io"))


_APPROVAL_CONDITIONS = {
    "Approved": ("True", "ApprovedAnnotation"), "Bypassed": ("False", "UnapprovedAnnotation"),
    "Missing": ("False", "MissingAnnotation"), "Invalid": ("False", "InvalidAnnotation"),
}


def api_approval_condition(crd: dict[str, Any]) -> dict[str, str] | None:
    """The ``KubernetesAPIApprovalPolicyConformant`` condition kube's API approval controller
    gives a CRD of a protected group (None for another group), without its transition time."""
    if not _protected(crd):
        return None
    state, reason = _approval_state(field.mapping(field.mapping(crd.get("metadata")).get("annotations")))
    status, kind = _APPROVAL_CONDITIONS[state]
    return {"type": "KubernetesAPIApprovalPolicyConformant", "status": status, "reason": kind, "message": reason}


def api_approval_errors(crd: dict[str, Any], old: dict[str, Any] | None) -> list[FieldError]:
    """kube's ``validateAPIApproval``: a CRD in a ``k8s.io`` or ``kubernetes.io`` group carries
    the ``api-approved.kubernetes.io`` annotation (a URL, or a reason starting with ``unapproved``);
    an update that leaves its state as it was is not refused."""
    if not _protected(crd):
        return []
    state, reason = _approval_state(field.mapping(field.mapping(crd.get("metadata")).get("annotations")))
    if old is not None and _approval_state(field.mapping(field.mapping(old.get("metadata")).get("annotations")))[0] == state:
        return []
    path = f"metadata.annotations[{API_APPROVED}]"
    if state == "Missing":
        return [field.required(path, reason)]
    if state == "Invalid":
        return [field.invalid(path, str(crd["metadata"]["annotations"][API_APPROVED]), reason)]
    return []


def _storage_name(crd: dict[str, Any]) -> str | None:
    versions = [field.mapping(v) for v in field.items(field.mapping(crd.get("spec")).get("versions"))]
    storage = next((v.get("name") for v in versions if v.get("storage") is True), None)
    return storage if isinstance(storage, str) else None


def add_stored_version(crd: dict[str, Any]) -> None:
    """kube's CRD strategy ``PrepareForCreate`` and ``PrepareForUpdate``: the storage version
    joins ``status.storedVersions`` in the write itself, so its response lists it (a create's
    status starts empty; an update's is the stored one, copied here, never changed in place)."""
    storage = _storage_name(crd)
    status = dict(field.mapping(crd.get("status")))
    stored = list(field.items(status.get("storedVersions")))
    if storage is None or storage in stored:
        return
    status["storedVersions"] = [*stored, storage]
    crd["status"] = status


def stored_versions_errors(crd: dict[str, Any], old: dict[str, Any]) -> list[FieldError]:
    """kube's ``ValidateCustomResourceDefinitionStoredVersions`` on an update of ``old``: its
    ``status.storedVersions``, with the storage version ``crd`` names added (kube's
    PrepareForUpdate), must all stay in ``spec.versions``, since objects may be stored in them."""
    stored = [str(v) for v in field.items(field.mapping(old.get("status")).get("storedVersions"))]
    versions = [field.mapping(v) for v in field.items(field.mapping(crd.get("spec")).get("versions"))]
    storage = _storage_name(crd)
    if storage is not None and storage not in stored:
        stored.append(storage)
    if not stored:
        return [field.invalid("status.storedVersions", field.go_strings(stored), "must have at least one stored version")]
    named = {v.get("name") for v in versions}
    return [
        field.invalid(
            f"status.storedVersions[{index}]", version,
            f"missing from spec.versions; {version} was previously a storage version, and must remain in spec.versions "
            f"until a storage migration ensures no data remains persisted in {version} and removes {version} from "
            "status.storedVersions",
        )
        for index, version in enumerate(stored) if version not in named
    ]


def storage_version(crd: dict[str, Any]) -> str:
    """The name of the version marked ``storage``."""
    for version in (crd.get("spec") or {}).get("versions") or []:
        if version.get("storage"):
            return str(version["name"])
    raise ValueError("no storage version")


def field_path(json_path: str) -> tuple[str, ...]:
    """``.spec.replicas`` → ``("spec", "replicas")`` (kube's simple JSON paths)."""
    return tuple(part for part in json_path.strip().lstrip(".").split(".") if part)


__all__ = ["CONVERSION_STRATEGIES", "GROUP", "VERSION", "add_stored_version", "conversion_errors", "default_crd", "field_path", "format_path", "invalid_ca_bundle", "storage_version", "validate_crd", "webhook_conversion"]
