"""kube's checks of a CRD version's ``openAPIV3Schema``: structural (a type on every node that
declares fields, ``items`` on arrays), valid ``pattern``s and ``default``s, kube's extensions used
where they apply (``x-kubernetes-embedded-resource``, ``x-kubernetes-int-or-string``, list and map
types, list map keys), the root ``metadata`` restricted to ``name`` and ``generateName``, and CEL
rules that compile within the cost budget. Pure: no I/O.
"""

from __future__ import annotations

import copy
import re
from typing import Any, Protocol

from controlplane.apis.apiextensions.cel import MUST_BE_BOOL, OVER_BUDGET, compile_schema_rules, has_rules
from controlplane.apis.apiextensions.schema import (
    Path,
    Schema,
    apply_defaults,
    compiled_pattern,
    validate,
    walk,
)
from controlplane.apis.kube import field
from controlplane.apis.kube.field import CauseType, FieldError

_SCHEMA_TYPES = ("object", "array", "string", "integer", "number", "boolean")


class RuleCompiler(Protocol):
    """Checks a CEL rule at a schema node (``root``: a resource's root or an embedded resource;
    ``optional_old_self``: its ``oldSelf`` is an optional): None when it compiles within the cost
    budget, else why not. With ``message``, the expression is the rule's ``messageExpression`` and
    the answer is kube's whole detail."""

    def __call__(
        self,
        rule: str,
        schema: Schema,
        *,
        root: bool = False,
        optional_old_self: bool = False,
        message: bool = False,
    ) -> str | None: ...


#: What the root ``metadata`` of a CRD's schema may hold besides name and generateName: its type
#: and default (kube clears them before comparing) and the keywords a structural schema drops.
_METADATA_IGNORED = frozenset({"type", "default", "example", "externalDocs"})


def _schema_path(base: str, path: Path) -> str:
    out = base
    for part in path:
        out += ".items" if part == "*" else f".properties[{part}]"
    return out


def structural_errors(
    schema: Schema, base: str, compile_rule: RuleCompiler | None = None, *, list_types: bool = True
) -> list[FieldError]:
    """Why ``schema`` is not structural (kube's messages), plus bad patterns and CEL rules.
    Without ``list_types``, a map list's items and keys and a set's items are not checked (kube
    ratchets those checks: an update of a CRD stored with such errors keeps them)."""
    out: list[FieldError] = []
    for path, node in walk(schema):
        where = _schema_path(base, path)
        node_type = node.get("type")
        int_or_string = node.get("x-kubernetes-int-or-string")
        preserve = node.get("x-kubernetes-preserve-unknown-fields")
        embedded = node.get("x-kubernetes-embedded-resource") is True  # its own message (below)
        if not node_type and not int_or_string and not preserve and not embedded:
            detail = (
                "must not be empty at the root"
                if not path
                else "must not be empty for specified object fields"
            )
            out.append(field.required(f"{where}.type", detail))
        elif node_type and node_type not in _SCHEMA_TYPES:
            out.append(
                FieldError(
                    CauseType.FIELD_VALUE_NOT_SUPPORTED,
                    f"{where}.type",
                    f'Unsupported value: "{node_type}": supported values: '
                    + ", ".join(f'"{t}"' for t in _SCHEMA_TYPES),
                )
            )
        if not path and node_type not in (None, "object"):
            out.append(field.invalid(f"{where}.type", node_type, "must be object at the root"))
        if node_type == "array" and not isinstance(node.get("items"), dict):
            out.append(field.required(f"{where}.items", "must be specified"))
        if node.get("uniqueItems"):
            out.append(
                FieldError(
                    CauseType.FIELD_VALUE_FORBIDDEN,
                    f"{where}.uniqueItems",
                    "Forbidden: uniqueItems cannot be set to true since the runtime complexity becomes quadratic",
                )
            )
        pattern = node.get("pattern")
        if isinstance(pattern, str) and isinstance(problem := compiled_pattern(pattern), str):
            out.append(
                field.invalid(
                    f"{where}.pattern", pattern, f"must be a valid regular expression, but isn't: {problem}"
                )
            )
        if node.get("properties") and (
            isinstance(node.get("additionalProperties"), dict) or node.get("additionalProperties") is False
        ):
            out.append(
                FieldError(
                    CauseType.FIELD_VALUE_FORBIDDEN,
                    f"{where}.additionalProperties",
                    "Forbidden: additionalProperties and properties are mutual exclusive",
                )
            )
        if "default" in node and node["default"] is not None:
            # As kube: the default with the defaults nested under it applied is what must be valid.
            default = copy.deepcopy(node["default"])
            apply_defaults(default, node)
            found = validate(default, node, path=(f"{where}.default",))
            out.extend(found)
            if not found and compile_rule is not None and has_rules(node):
                out.extend(_default_rule_errors(default, node, f"{where}.default", root=not path or embedded))
        list_type = node.get("x-kubernetes-list-type")
        if list_type is not None and list_type not in ("atomic", "set", "map"):
            out.append(
                FieldError(
                    CauseType.FIELD_VALUE_NOT_SUPPORTED,
                    f"{where}.x-kubernetes-list-type",
                    f'Unsupported value: "{list_type}": supported values: "atomic", "set", "map"',
                )
            )
        if list_type == "map" and not node.get("x-kubernetes-list-map-keys"):
            out.append(
                field.required(
                    f"{where}.x-kubernetes-list-map-keys",
                    "must not be empty if x-kubernetes-list-type is map",
                )
            )
        out.extend(_extension_errors(node, where, root=not path, list_types=list_types))
        for index, rule in enumerate(node.get("x-kubernetes-validations") or []):
            rpath = f"{where}.x-kubernetes-validations[{index}]"
            rule = field.mapping(rule)
            out.extend(_rule_errors(rule, rpath, node))
            text = rule.get("rule")
            if not isinstance(text, str) or not text.strip():
                continue
            root = not path or embedded
            optional_old_self = rule.get("optionalOldSelf") is True
            if (
                compile_rule is not None
                and (problem := compile_rule(text, node, root=root, optional_old_self=optional_old_self))
                is not None
            ):
                out.append(_rule_refusal(f"{rpath}.rule", text, problem))
            elif _OLD_SELF.search(text) and (apart := _uncorrelatable(schema, path)) is not None:
                out.append(
                    field.invalid(
                        f"{rpath}.rule",
                        text,
                        "oldSelf cannot be used on the uncorrelatable portion of the schema within "
                        + _schema_path(base, apart),
                    )
                )
            elif rule.get("optionalOldSelf") is not None and not _OLD_SELF.search(text):
                out.append(
                    field.invalid(
                        f"{rpath}.optionalOldSelf",
                        rule["optionalOldSelf"],
                        "may not be set if oldSelf is not used in rule",
                    )
                )
            expression = rule.get("messageExpression")
            if (
                compile_rule is not None
                and isinstance(expression, str)
                and expression.strip()
                and (
                    problem := compile_rule(
                        expression, node, root=root, optional_old_self=optional_old_self, message=True
                    )
                )
                is not None
            ):
                out.append(field.invalid(f"{rpath}.messageExpression", expression, problem))
    return out


def _default_rule_errors(default: Any, node: Schema, where: str, *, root: bool) -> list[FieldError]:
    """kube's ValidateDefaults: a default that the schema takes must pass the node's rules, as an
    update from itself (``oldSelf`` the default: ratcheted, so only a transition rule, or a rule
    that cannot be evaluated, fails there) and then, when that passes, as a create (every rule
    but the transition rules without ``optionalOldSelf``)."""
    rules = compile_schema_rules(dict(node), root=root)
    found = rules.evaluate(default, default, path=(where,))
    return found or rules.evaluate(default, None, path=(where,))


def _uncorrelatable(schema: Schema, path: Path) -> Path | None:
    """The highest array above ``path`` that is not a ``map`` list (kube's
    ``withForbidOldSelfValidations``): its items have no old selves, so ``oldSelf`` cannot be used
    below it. None: every array above is a map list (a map's values correlate by key)."""
    node: Any = schema
    for index, step in enumerate(path):
        if step != "*":
            node = (node.get("properties") or {}).get(step) or {}
        elif isinstance(node.get("items"), dict):
            if node.get("x-kubernetes-list-type") != "map":
                return path[:index]
            node = node["items"]
        else:
            node = node.get("additionalProperties") or {}
    return None


def _rule_refusal(where: str, text: str, problem: str) -> FieldError:
    """kube's error for a rule that cannot be used: Forbidden over the cost budget, Invalid for a
    rule that is not a bool, else Invalid ``compilation failed: ...``."""
    if problem.startswith(OVER_BUDGET):
        return field.forbidden(where, problem)
    return field.invalid(
        where, text, problem if problem == MUST_BE_BOOL else f"compilation failed: {problem}"
    )


def _type_for(node: Schema, where: str, wanted: str, reason: str) -> list[FieldError]:
    """kube's ``type`` must be ``wanted`` when ``reason`` (Required when absent, else Invalid)."""
    node_type = node.get("type")
    if node_type == wanted:
        return []
    detail = f"must be {wanted} if {reason}"
    return [
        field.required(f"{where}.type", detail)
        if not node_type
        else field.invalid(f"{where}.type", node_type, detail)
    ]


def _extension_errors(node: Schema, where: str, *, root: bool, list_types: bool = True) -> list[FieldError]:
    """kube's checks of its ``x-kubernetes-*`` extensions at one node, and of the root's ``metadata``
    (ValidateStructural and ValidateCustomResourceDefinitionOpenAPISchema)."""
    out: list[FieldError] = []
    embedded, preserve = (
        node.get("x-kubernetes-embedded-resource") is True,
        node.get("x-kubernetes-preserve-unknown-fields"),
    )
    if node.get("x-kubernetes-int-or-string") is True:
        for key in ("x-kubernetes-preserve-unknown-fields", "x-kubernetes-embedded-resource"):
            if node.get(key) is True:
                out.append(
                    field.invalid(
                        f"{where}.{key}", True, "must be false if x-kubernetes-int-or-string is true"
                    )
                )
    if embedded:
        out += _type_for(node, where, "object", "x-kubernetes-embedded-resource is true")
        if "additionalProperties" in node:
            out.append(
                field.forbidden(
                    f"{where}.additionalProperties",
                    "must not be used if x-kubernetes-embedded-resource is set",
                )
            )
        if preserve is not True and not node.get("properties"):
            out.append(
                field.required(
                    f"{where}.properties",
                    "must not be empty if x-kubernetes-embedded-resource is true without x-kubernetes-preserve-unknown-fields",
                )
            )
    if root and "additionalProperties" in node:
        out.append(field.forbidden(f"{where}.additionalProperties", "must not be used at the root"))
    metadata = (node.get("properties") or {}).get("metadata")
    if root and isinstance(metadata, dict):
        names = set(metadata.get("properties") or {})
        # kube compares what is left, name and generateName taken out, with an empty structural
        # schema: a zero value (``nullable: false``, ``description: ""``) and a keyword a
        # structural schema does not hold (``example``, ``externalDocs``) are nothing.
        restricted = {
            k
            for k, v in metadata.items()
            if k not in _METADATA_IGNORED and v not in (None, False, "", [], {})
        } - ({"properties"} if names <= {"name", "generateName"} else set())
        if restricted:
            out.append(
                field.forbidden(
                    f"{where}.properties[metadata]",
                    "must not specify anything other than name and generateName, but metadata is implicitly specified",
                )
            )
    if root:  # kube forbids defaults anywhere in the top-level apiVersion, kind and metadata
        for meta in ("apiVersion", "kind", "metadata"):
            sub = (node.get("properties") or {}).get(meta)
            for at, inner in walk(sub) if isinstance(sub, dict) else ():
                if "default" in inner:
                    out.append(
                        field.forbidden(
                            f"{_schema_path(where, (meta, *at))}.default",
                            f"must not be set in top-level {meta}",
                        )
                    )
    if "$ref" in node:
        out.append(field.forbidden(f"{where}.$ref", "$ref is not supported"))
    if preserve is False:
        out.append(
            field.invalid(f"{where}.x-kubernetes-preserve-unknown-fields", False, "must be true or undefined")
        )
    map_type = node.get("x-kubernetes-map-type")
    if map_type is not None:
        out += _type_for(node, where, "object", "x-kubernetes-map-type is specified")
        if map_type not in ("atomic", "granular"):
            out.append(
                field.not_supported(f"{where}.x-kubernetes-map-type", map_type, ("atomic", "granular"))
            )
    list_type, keys = node.get("x-kubernetes-list-type"), node.get("x-kubernetes-list-map-keys") or []
    if list_type is not None:
        out += _type_for(node, where, "array", "x-kubernetes-list-type is specified")
    if keys and list_type != "map":
        detail = "must be map if x-kubernetes-list-map-keys is non-empty"
        out.append(
            field.required(f"{where}.x-kubernetes-list-type", detail)
            if list_type is None
            else field.invalid(f"{where}.x-kubernetes-list-type", list_type, detail)
        )
    items = node.get("items") if isinstance(node.get("items"), dict) else None
    if list_type == "map" and items is not None and list_types:
        out += _map_list_errors(items, keys, where)
    if (
        list_type == "set" and items is not None and list_types
    ):  # kube shows the items' list type (its own quirk)
        detail, shown = (
            "must be atomic as item of a list with x-kubernetes-list-type=set",
            items.get("x-kubernetes-list-type"),
        )
        if items.get("type") == "array" and shown not in (None, "atomic"):
            out.append(field.invalid(f"{where}.items.x-kubernetes-list-type", shown, detail))
        elif items.get("type") == "object" and items.get("x-kubernetes-map-type") != "atomic":
            out.append(field.invalid(f"{where}.items.x-kubernetes-map-type", shown, detail))
    return out


def _map_list_errors(items: Schema, keys: list[str], where: str) -> list[FieldError]:
    """kube's checks of a ``x-kubernetes-list-type: map`` list's items and keys."""
    if items.get("type") != "object":
        detail = "must be object if parent array's x-kubernetes-list-type is map"
        return [field.invalid(f"{where}.items.type", items.get("type") or "", detail)]
    out: list[FieldError] = []
    properties, required = items.get("properties") or {}, set(items.get("required") or [])
    for index, key in enumerate(keys):
        key_schema = properties.get(key)
        if not isinstance(key_schema, dict):
            out.append(
                field.invalid(
                    f"{where}.x-kubernetes-list-map-keys",
                    field.go_strings(keys),
                    "entries must all be names of item properties",
                )
            )
        elif key_schema.get("type") in ("array", "object"):
            out.append(
                field.invalid(
                    f"{where}.items.properties[{key}].type",
                    "object",
                    "must be a scalar type if parent array's x-kubernetes-list-type is map",
                )
            )
        if key in keys[:index]:
            out.append(
                field.invalid(
                    f"{where}.x-kubernetes-list-map-keys",
                    field.go_strings(keys),
                    "must not contain duplicate entries",
                )
            )
    for key in keys:
        key_schema = properties.get(key)
        if isinstance(key_schema, dict) and key not in required and "default" not in key_schema:
            out.append(
                field.required(
                    f"{where}.items.properties[{key}].default",
                    "this property is in x-kubernetes-list-map-keys, so it must have a default or be a required property",
                )
            )
        if isinstance(key_schema, dict) and key_schema.get("nullable") is True:
            out.append(
                field.forbidden(
                    f"{where}.items.properties[{key}].nullable",
                    "this property is in x-kubernetes-list-map-keys, so it cannot be nullable",
                )
            )
    return out


#: kube's supportedValidationReason, as its set lists them.
_RULE_REASONS = ("FieldValueDuplicate", "FieldValueForbidden", "FieldValueInvalid", "FieldValueRequired")
_NEWLINES = re.compile(r"[\n\r]+")
_OLD_SELF = re.compile(r"\boldSelf\b")


def _rule_errors(rule: dict[str, Any], rpath: str, node: Schema) -> list[FieldError]:
    """kube's checks of one ``x-kubernetes-validations`` entry's text fields (its rule compiled apart)."""
    out: list[FieldError] = []
    text, message = str(rule.get("rule") or ""), str(rule.get("message") or "")
    if not text.strip():
        out.append(field.required(f"{rpath}.rule", "rule is not specified"))
    elif message and not message.strip():
        out.append(field.invalid(f"{rpath}.message", message, "message must be non-empty if specified"))
    elif _NEWLINES.search(message.strip()):
        out.append(field.invalid(f"{rpath}.message", message, "message must not contain line breaks"))
    elif _NEWLINES.search(text.strip()) and not message.strip():
        out.append(
            field.required(f"{rpath}.message", "message must be specified if rule contains line breaks")
        )
    expression = str(rule.get("messageExpression") or "")
    if expression and not expression.strip():
        out.append(
            field.required(f"{rpath}.messageExpression", "messageExpression must be non-empty if specified")
        )
    reason = rule.get("reason")
    if reason is not None and reason not in _RULE_REASONS:
        out.append(field.not_supported(f"{rpath}.reason", reason, _RULE_REASONS))
    where = str(rule.get("fieldPath") or "")
    if where and not where.strip():
        out.append(field.invalid(f"{rpath}.fieldPath", where, "fieldPath must be non-empty if specified"))
    if _NEWLINES.search(where):
        out.append(field.invalid(f"{rpath}.fieldPath", where, "fieldPath must not contain line breaks"))
    if where.strip() and "[" not in where:  # a path with array or map-key notation is not checked here
        try:
            field_path_in(where, dict(node))
        except ValueError:
            out.append(field.invalid(f"{rpath}.fieldPath", where, "fieldPath must be a valid path"))
    return out


def _path_tokens(json_path: str) -> list[str]:
    """kube's ``ValidFieldPath`` tokens: ``.``, ``[`` and ``]`` alone, a single-quoted string
    whole, and the text between."""
    tokens: list[str] = []
    i = 0
    while i < len(json_path):
        if json_path[i] == "'":
            end = i + 1
            while end < len(json_path) and not (json_path[end] == "'" and json_path[end - 1] != "\\"):
                end += 1
            tokens.append(json_path[i : end + 1])
            i = end + 1
        elif json_path[i] in ".[]":
            tokens.append(json_path[i])
            i += 1
        else:
            end = i
            while end < len(json_path) and json_path[end] not in ".[]":
                end += 1
            tokens.append(json_path[i:end])
            i = end
    return tokens


def field_path_in(json_path: str, schema: Schema) -> tuple[list[str], Any]:
    """kube's ``ValidFieldPath`` without array notation: the path's parts (a map key as
    ``[key]``) and the schema node it reaches; ValueError with kube's reason."""
    tokens = iter(_path_tokens(json_path))
    path: list[str] = []
    node: Any = schema
    for token in tokens:
        if token == "[":
            raise ValueError("array notation is not allowed")
        if token != ".":
            raise ValueError(f"expected [ or . but got: {token}")
        name = next(tokens, None)
        if name is None:
            raise ValueError("unexpected end of JSON path")
        if isinstance(node, dict) and isinstance(node.get("properties"), dict):
            if name not in node["properties"]:
                raise ValueError("does not refer to a valid field")
            path.append(name)
            node = node["properties"][name]
        elif isinstance(node, dict) and node.get("additionalProperties") not in (None, False):
            path.append(f"[{name}]")
            node = node["additionalProperties"]
        else:
            raise ValueError("does not refer to a valid field")
    return path, node
