"""kube's validation and defaulting of a CustomResourceDefinition object itself.

:func:`default_crd` fills what kube-apiserver defaults (``listKind``, a version's
``served``/``storage`` are required, ``conversion.strategy: None``);
:func:`validate_crd` returns kube's field errors: the name must be ``<plural>.<group>``,
the group a domain with a dot, names DNS labels, ``scope`` Cluster or Namespaced, versions
named as DNS labels with no duplicates and exactly one ``storage``, every version with a
structural ``openAPIV3Schema`` (a type on every node that declares fields), valid
``pattern``s, ``default``s valid against their node, ``preserveUnknownFields`` false, scale
paths under ``.spec``/``.status``, and CEL rules that compile within the cost budget.
Pure: no I/O.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Callable
from typing import Any

from controlplane.apis.apiextensions.schema import (
    Path,
    Schema,
    apply_defaults,
    compiled_pattern,
    format_path,
    validate,
    walk,
)
from controlplane.apis.kube.field import ErrorType, FieldError
from controlplane.apis.kube.names import (
    DNS_1035,
    DNS_1035_REGEX_MESSAGE,
    DNS_LABEL,
    DNS_LABEL_REGEX_MESSAGE,
    DNS_SUBDOMAIN,
)

GROUP = "apiextensions.k8s.io"
VERSION = "v1"
_KIND = re.compile(r"^[A-Za-z][A-Za-z0-9]*\Z")
_SCHEMA_TYPES = ("object", "array", "string", "integer", "number", "boolean")
#: Checks a CEL rule at a schema node: None when it compiles within the cost budget, else why not.
RuleCompiler = Callable[[str, Schema], str | None]


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


def _invalid(path: str, value: Any, detail: str) -> FieldError:
    shown = f'"{value}"' if isinstance(value, str) else str(value).lower() if isinstance(value, bool) else str(value)
    return FieldError(ErrorType.INVALID, path, f"Invalid value: {shown}: {detail}")


def _required(path: str, detail: str = "") -> FieldError:
    return FieldError(ErrorType.REQUIRED, path, "Required value" + (f": {detail}" if detail else ""))


def validate_crd(crd: dict[str, Any], *, compile_rule: RuleCompiler | None = None) -> list[FieldError]:
    """kube's field errors for ``crd`` (empty: valid)."""
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
            ErrorType.NOT_SUPPORTED, "spec.scope", f'Unsupported value: "{scope}": supported values: "Cluster", "Namespaced"'
        ))
    if spec.get("preserveUnknownFields") is True:
        out.append(_invalid("spec.preserveUnknownFields", True, "must be false"))
    conversion = spec.get("conversion") or {}
    if isinstance(conversion, dict) and conversion.get("strategy") not in ("None", None):
        out.append(FieldError(
            ErrorType.NOT_SUPPORTED, "spec.conversion.strategy",
            f'Unsupported value: "{conversion.get("strategy")}": supported values: "None"',
        ))
    out.extend(_versions_errors(spec.get("versions"), compile_rule))
    return out


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


def _versions_errors(versions: Any, compile_rule: RuleCompiler | None) -> list[FieldError]:
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
            out.append(FieldError(ErrorType.DUPLICATE, f"{base}.name", f'Duplicate value: "{vname}"'))
        else:
            seen.add(vname)
        for flag in ("served", "storage"):
            if not isinstance(version.get(flag), bool):
                out.append(_required(f"{base}.{flag}"))
        storage += version.get("storage") is True
        schema = (version.get("schema") or {}).get("openAPIV3Schema")
        if not isinstance(schema, dict):
            out.append(_required(f"{base}.schema.openAPIV3Schema", "schemas are required"))
        else:
            out.extend(structural_errors(schema, f"{base}.schema.openAPIV3Schema", compile_rule))
        out.extend(_subresource_errors(version.get("subresources"), f"{base}.subresources"))
        for column_index, column in enumerate(version.get("additionalPrinterColumns") or []):
            cpath = f"{base}.additionalPrinterColumns[{column_index}]"
            if not isinstance(column, dict) or not column.get("name"):
                out.append(_required(f"{cpath}.name"))
            elif not column.get("jsonPath"):
                out.append(_required(f"{cpath}.jsonPath"))
    if storage != 1:
        out.append(_invalid("spec.versions", storage, "must have exactly one version marked as storage version"))
    if not any(isinstance(v, dict) and v.get("served") for v in versions):
        out.append(_invalid("spec.versions", len(versions), "must have at least one version marked as served"))
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


def _schema_path(base: str, path: Path) -> str:
    out = base
    for part in path:
        out += ".items" if part == "*" else f".properties[{part}]"
    return out


def structural_errors(schema: Schema, base: str, compile_rule: RuleCompiler | None = None) -> list[FieldError]:
    """Why ``schema`` is not structural (kube's messages), plus bad patterns and CEL rules."""
    out: list[FieldError] = []
    for path, node in walk(schema):
        where = _schema_path(base, path)
        node_type = node.get("type")
        int_or_string = node.get("x-kubernetes-int-or-string")
        preserve = node.get("x-kubernetes-preserve-unknown-fields")
        if not node_type and not int_or_string and not preserve:
            detail = "must not be empty at the root" if not path else "must not be empty for specified object fields"
            out.append(_required(f"{where}.type", detail))
        elif node_type and node_type not in _SCHEMA_TYPES:
            out.append(FieldError(
                ErrorType.NOT_SUPPORTED, f"{where}.type",
                f'Unsupported value: "{node_type}": supported values: ' + ", ".join(f'"{t}"' for t in _SCHEMA_TYPES),
            ))
        if not path and node_type not in (None, "object"):
            out.append(_invalid(f"{where}.type", node_type, "must be object at the root"))
        if node_type == "array" and not isinstance(node.get("items"), dict):
            out.append(_required(f"{where}.items", "must be specified"))
        if node.get("uniqueItems"):
            out.append(FieldError(ErrorType.FORBIDDEN, f"{where}.uniqueItems", "Forbidden: uniqueItems cannot be set to true since the runtime complexity becomes quadratic"))
        pattern = node.get("pattern")
        if isinstance(pattern, str) and isinstance(problem := compiled_pattern(pattern), str):
            out.append(_invalid(f"{where}.pattern", pattern, f"must be a valid regular expression, but isn't: {problem}"))
        if node.get("properties") and isinstance(node.get("additionalProperties"), dict):
            out.append(FieldError(ErrorType.FORBIDDEN, f"{where}.additionalProperties", "Forbidden: additionalProperties and properties are mutual exclusive"))
        if "default" in node and node["default"] is not None:
            # As kube: the default with the defaults nested under it applied is what must be valid.
            default = copy.deepcopy(node["default"])
            apply_defaults(default, node)
            out.extend(validate(default, node, path=(f"{where}.default",)))
        list_type = node.get("x-kubernetes-list-type")
        if list_type is not None and list_type not in ("atomic", "set", "map"):
            out.append(FieldError(
                ErrorType.NOT_SUPPORTED, f"{where}.x-kubernetes-list-type",
                f'Unsupported value: "{list_type}": supported values: "atomic", "set", "map"',
            ))
        if list_type == "map" and not node.get("x-kubernetes-list-map-keys"):
            out.append(_required(f"{where}.x-kubernetes-list-map-keys", "must not be empty if x-kubernetes-list-type is map"))
        for index, rule in enumerate(node.get("x-kubernetes-validations") or []):
            rpath = f"{where}.x-kubernetes-validations[{index}]"
            text = rule.get("rule") if isinstance(rule, dict) else None
            if not isinstance(text, str) or not text.strip():
                out.append(_required(f"{rpath}.rule"))
            elif compile_rule is not None and (problem := compile_rule(text, node)) is not None:
                out.append(_invalid(f"{rpath}.rule", text, f"compilation failed: {problem}"))
    return out


def storage_version(crd: dict[str, Any]) -> str:
    """The name of the version marked ``storage``."""
    for version in (crd.get("spec") or {}).get("versions") or []:
        if version.get("storage"):
            return str(version["name"])
    raise ValueError("no storage version")


def field_path(json_path: str) -> tuple[str, ...]:
    """``.spec.replicas`` → ``("spec", "replicas")`` (kube's simple JSON paths)."""
    return tuple(part for part in json_path.strip().lstrip(".").split(".") if part)


__all__ = ["GROUP", "VERSION", "default_crd", "field_path", "format_path", "storage_version", "validate_crd"]
