"""The operators' kinds' served schemas as the structural schemas their CRDs validate with.

On a real cluster Kubeflow's training jobs, KubeRay's RayJob and RayCluster, JobSet,
LeaderWorkerSet and Kubeflow Trainer's TrainJob and runtimes are CRDs: apiextensions-apiserver
drops the nulls of their fields that are neither nullable nor defaulted and refuses a value of
another JSON type than its field's (``spec.pytorchReplicaSpecs.Worker.replicas: Invalid value:
"string": ... in body must be of type integer: "string"``). The hub builds those kinds in and
serves their schemas in kube's OpenAPI v2 dialect (:mod:`.extra_kinds`, :mod:`.sigs_kinds`,
:mod:`.trainer_kinds`, :mod:`.ray_kinds`); Karmada's interpreter customizations and webhook
configurations are CRDs too (:mod:`.karmada_config_kinds`). :func:`structural_schema` inlines every ``$ref`` of such a schema (its own parts and kube's definitions, a pod template's among them)
into one tree :mod:`controlplane.apis.apiextensions.schema` validates as a CRD version's
``openAPIV3Schema``, written as controller-gen writes the operators' CRDs:

* a Quantity or an IntOrString is ``x-kubernetes-int-or-string`` (an integer or a string);
* an embedded ObjectMeta (the root's, a pod template's) is an object whose fields are not
  checked here, as the CRDs' ``metadata: {type: object}`` (the root's is the server's);
* a definition met again below itself stays open (no kind reached here is recursive);
* a struct kube's definitions leave untyped is an ``object``; descriptions are left out; ``x-kubernetes-preserve-unknown-fields`` and list types are kept.

The schemas declare every field of the CRDs' ``spec`` and ``status`` and keep open only what the
CRDs keep open (an embedded ObjectMeta): :func:`undeclared_fields` finds the fields they do not
declare, which the hub drops (with a warning) or refuses under ``fieldValidation=Strict``, as
kube's pruning of a custom resource. Pure; each kind's tree is built once.

The kinds served from a pydantic model (Kueue's, Karmada's, gpufed's) are checked by their model,
not by such a tree; :func:`served_field_schema` reads the list and map types their served schema
declares (Kueue's ``+listType=map`` lists, as its CRDs declare them) into the
:class:`~controlplane.apiserver.patching.schema.FieldSchema` server-side apply merges them with,
and :func:`served_list_errors` refuses what kube's list-type validation refuses in them.
"""

from __future__ import annotations

import copy
import functools
from collections.abc import Callable, Mapping
from typing import Any

from pydantic import BaseModel

from controlplane.apis.apiextensions.cel import (
    RULES_NOT_CHECKED,
    SchemaRules,
    compile_schema_rules,
    has_rules,
)
from controlplane.apis.apiextensions.schema import NO_OLD, apply_defaults, list_type_errors, prune, validate
from controlplane.apis.kube.field import FieldError
from controlplane.apiserver.openapi.extra_kinds import extra_kind_definitions
from controlplane.apiserver.openapi.karmada_config_kinds import karmada_config_kind_definitions
from controlplane.apiserver.openapi.models import model_definitions, model_json_schema
from controlplane.apiserver.openapi.ray_kinds import ray_kind_definitions
from controlplane.apiserver.openapi.sigs_kinds import sigs_kind_definitions
from controlplane.apiserver.openapi.trainer_kinds import trainer_kind_definitions
from controlplane.apiserver.openapi.upstream import (
    DEFINITIONS_PREFIX,
    INT_OR_STRING,
    OBJECT_META,
    QUANTITY,
    shared_definitions,
)
from controlplane.apiserver.patching.schema import FieldSchema
from controlplane.apiserver.patching.structural import structural_apply_schema

Schema = dict[str, Any]

_INT_OR_STRING_SCHEMA: Schema = {"x-kubernetes-int-or-string": True}
_OPEN_OBJECT: Schema = {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
_LEFT_OUT = frozenset({"description", "x-kubernetes-group-version-kind", "example"})


def _inlined(name: str, definitions: Mapping[str, Any], upstream: Mapping[str, Any], seen: frozenset[str]) -> Schema:
    """The definition ``name`` with its ``$ref`` s replaced by what they name."""
    if name in (QUANTITY, INT_OR_STRING):
        return dict(_INT_OR_STRING_SCHEMA)
    if name == OBJECT_META or name in seen:
        return dict(_OPEN_OBJECT)
    found = definitions.get(name) or upstream.get(name)
    if not isinstance(found, dict):
        return {}
    return _node(found, definitions, upstream, seen | {name})


def _node(node: Mapping[str, Any], definitions: Mapping[str, Any], upstream: Mapping[str, Any], seen: frozenset[str]) -> Schema:
    ref = node.get("$ref")
    if isinstance(ref, str):
        # A field's own checks beside its reference (an IntOrString's ``default``) stay with it.
        own = {key: value for key, value in node.items() if key != "$ref" and key not in _LEFT_OUT}
        return {**_inlined(ref.removeprefix(DEFINITIONS_PREFIX), definitions, upstream, seen), **own}
    out: Schema = {}
    for key, value in node.items():
        if key in _LEFT_OUT:
            continue
        if key == "properties" and isinstance(value, dict):
            out[key] = {prop: _node(sub, definitions, upstream, seen) for prop, sub in value.items()}
        elif key in ("items", "additionalProperties") and isinstance(value, dict):
            out[key] = _node(value, definitions, upstream, seen)
        elif key in ("allOf", "anyOf", "oneOf") and isinstance(value, list):
            out[key] = [_node(sub, definitions, upstream, seen) for sub in value if isinstance(sub, dict)]
        else:
            out[key] = value
    if "properties" in out and "type" not in out:
        out["type"] = "object"  # kube's definitions leave a struct's type unsaid; a CRD's says it
    return out


_SOURCES: tuple[Callable[[str, str, str], tuple[str, dict[str, dict[str, Any]]] | None], ...] = (
    extra_kind_definitions, sigs_kind_definitions, trainer_kind_definitions, ray_kind_definitions,
    karmada_config_kind_definitions,
)


@functools.cache
def structural_schema(group: str, version: str, kind: str) -> Schema | None:
    """The structural schema of an operator's kind the hub serves a schema for (see the module
    docstring); None for another kind. Built on first use, then shared: callers do not change it."""
    for source in _SOURCES:
        found = source(group, version, kind)
        if found is not None:
            name, definitions = found
            upstream = shared_definitions().definitions
            return _inlined(name, definitions, {**upstream, **_key_defaulted(upstream)}, frozenset())
    return None


def schema_of(group: str, version: str, kind: str) -> Callable[[], Schema]:
    """:func:`structural_schema` of a kind known to have one, read when first called (a process
    that never writes the kind never builds it)."""

    def schema() -> Schema:
        found = structural_schema(group, version, kind)
        assert found is not None, f"no served schema for {group}/{version} {kind}"
        return found

    return schema


def _defaulted_part(node: Mapping[str, Any]) -> Schema | None:
    """The part of a structural schema that leads to a ``default`` (None: no default below it)."""
    out: Schema = {}
    properties = {prop: part for prop, sub in (node.get("properties") or {}).items()
                  if isinstance(sub, dict) and (part := _defaulted_part(sub)) is not None}
    if properties:
        out["properties"] = properties
    for key in ("items", "additionalProperties"):
        sub = node.get(key)
        if isinstance(sub, dict) and (part := _defaulted_part(sub)) is not None:
            out[key] = part
    if "default" in node:
        out["default"] = node["default"]
        if node.get("nullable"):
            out["nullable"] = True
    return out or None


def schema_defaults(schema: Callable[[], Mapping[str, Any]]) -> Callable[[dict[str, Any]], None]:
    """kube's structural defaulting of an operator's kind by its served schema: every unset field
    with a ``default`` in the CRD is filled, in place, as kube fills a custom resource's when it
    decodes one (a write, and an object read from storage). The walk follows only the schema's
    paths that lead to a default, found once per kind on first use."""
    found: list[Schema | None] = []

    def defaults(obj: dict[str, Any]) -> None:
        if not found:
            found.append(_defaulted_part(schema()))
        if found[0] is not None:
            apply_defaults(obj, found[0])

    return defaults


def status_defaulting(schema: Callable[[], Mapping[str, Any]]) -> Callable[[Mapping[str, Any]], Mapping[str, Any]]:
    """A status as kube would store it for a kind with this served schema: its ``status`` defaults
    filled (a copy), or the status itself when the schema defaults nothing in a status (the
    defaulted part found once per kind, on first use)."""
    found: list[Schema | None] = []

    def defaulted(status: Mapping[str, Any]) -> Mapping[str, Any]:
        if not found:
            part = _defaulted_part(schema()) or {}
            found.append((part.get("properties") or {}).get("status"))
        if found[0] is None:
            return status
        out = copy.deepcopy(dict(status))
        apply_defaults(out, found[0])
        return out

    return defaulted


def schema_errors(
    schema: Mapping[str, Any], obj: dict[str, Any], old: dict[str, Any] | None, *, status_only: bool = False
) -> list[FieldError]:
    """kube's field errors for ``obj`` against its kind's structural ``schema`` (empty: valid), as
    a CRD's strategy finds them: on update ratcheted against the stored ``old``; a write of the
    status subresource (``status_only``) checks the status alone, as its status strategy."""
    root = dict(schema)
    if not status_only:
        return validate(obj, root, old=NO_OLD if old is None else old)
    status_schema = (root.get("properties") or {}).get("status")
    if "status" not in obj or not isinstance(status_schema, dict):
        return []
    was = old["status"] if old is not None and "status" in old else NO_OLD
    return validate(obj["status"], status_schema, path=("status",), old=was)


def rule_errors(schema: Mapping[str, Any], obj: dict[str, Any], old: dict[str, Any] | None, *, blocked: bool) -> list[FieldError]:
    """The served schema's CEL rules (``x-kubernetes-validations``) over the whole object, as kube's
    CRD strategies run them after the metadata's and the schema's checks: none when the schema has
    none, :data:`~controlplane.apis.apiextensions.cel.RULES_NOT_CHECKED` instead of them when one of
    those errors blocks them (``blocked``), else every failed rule's error. A status write's spec is
    the stored one, so its rules ratchet and its transition rules hold."""
    rules = _rules(schema)
    if rules.empty():
        return []
    return [RULES_NOT_CHECKED] if blocked else rules.evaluate(obj, old)


#: Each served schema's compiled CEL rules, by the schema's identity (a kind's schema is built once).
_COMPILED_RULES: dict[int, tuple[Mapping[str, Any], SchemaRules]] = {}


def _rules(schema: Mapping[str, Any]) -> SchemaRules:
    """``schema``'s ``x-kubernetes-validations`` rules, compiled on first use."""
    held = _COMPILED_RULES.get(id(schema))
    if held is None or held[0] is not schema:
        held = (schema, compile_schema_rules(dict(schema)) if has_rules(schema) else SchemaRules())
        _COMPILED_RULES[id(schema)] = held
    return held[1]


_SHAPE_MARKERS = ("x-kubernetes-list-type", "x-kubernetes-map-type")


def _declares_shapes(node: Any) -> bool:
    if isinstance(node, dict):
        return any(key in node for key in _SHAPE_MARKERS) or any(map(_declares_shapes, node.values()))
    return isinstance(node, list) and any(map(_declares_shapes, node))


def _declares_unique_items(node: Any) -> bool:
    """Whether a schema tree has a ``map`` or ``set`` list anywhere (the lists whose items must be
    unique); an ``atomic`` list or map declares nothing to check."""
    if isinstance(node, dict):
        return node.get("x-kubernetes-list-type") in ("map", "set") or any(map(_declares_unique_items, node.values()))
    return isinstance(node, list) and any(map(_declares_unique_items, node))


@functools.cache
def _uniqueness_tree(group: str, version: str, kind: str, model: type[BaseModel]) -> Schema | None:
    """The served tree of a model's kind when it has a list whose items must be unique, else None:
    a kind whose only markers are atomic ones (a ResourceBinding's or a policy's embedded
    LabelSelector) is not walked on every write for a check that finds nothing."""
    tree = _model_tree(group, version, kind, model)
    return tree if tree is not None and _declares_unique_items(tree) else None


#: kube's ``+default`` on the key field of a keyed list of a kube type a model or an operator's kind
#: embeds (kube's definitions leave it out; the CRDs, generated from the Go types, carry it): a
#: container port applied without its protocol is keyed, and stored, as TCP, as on a cluster
#: running the CRD.
_KEY_DEFAULTS = {"io.k8s.api.core.v1.ContainerPort": {"protocol": "TCP"}}


def _key_defaulted(upstream: Mapping[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, defaults in _KEY_DEFAULTS.items():
        found = upstream[name]
        properties = {**found["properties"], **{k: {**found["properties"][k], "default": v} for k, v in defaults.items()}}
        out[name] = {**found, "properties": properties}
    return out


@functools.cache
def _model_tree(group: str, version: str, kind: str, model: type[BaseModel]) -> Schema | None:
    """The served schema of a model's kind as one tree (kube's parts inlined), or None when it
    declares no list or map type, its own or a kube type's it embeds (a LabelSelector's atomic
    map): its lists are atomic, its objects merged key by key."""
    name = f"{'.'.join(reversed(group.split('.')))}.{version}.{kind}"
    definitions = model_definitions(model_json_schema(model), name=name, kind=kind)
    upstream = shared_definitions().definitions
    tree = _inlined(name, {**_key_defaulted(upstream), **definitions}, upstream, frozenset())
    return tree if _declares_shapes(tree) else None


@functools.cache
def served_field_schema(group: str, version: str, kind: str, model: type[BaseModel]) -> FieldSchema | None:
    """How server-side apply merges a model's kind, as kube merges the CRD it stands for: by the list
    and map types its served schema declares (None: it declares none; the caller's default holds).
    Built on first use, once per kind and model."""
    tree = _model_tree(group, version, kind, model)
    return structural_apply_schema(tree) if tree is not None else None


def served_list_errors(
    group: str, version: str, kind: str, model: type[BaseModel], obj: dict[str, Any], *, status_only: bool = False
) -> list[FieldError]:
    """kube's list-type errors for ``obj`` of a model's kind: a key repeated in a ``map`` list, a
    value repeated in a ``set`` list (``spec.podSets[1]: Duplicate value: map[string]interface {}{"name":"main"}``);
    a write of the status subresource (``status_only``) is checked in its status alone."""
    tree = _uniqueness_tree(group, version, kind, model)
    if tree is None:
        return []
    if not status_only:
        return list_type_errors(obj, tree)
    status_schema = (tree.get("properties") or {}).get("status")
    if not isinstance(status_schema, dict) or not isinstance(obj.get("status"), dict):
        return []
    return list_type_errors(obj["status"], status_schema, path=("status",))
Path = tuple[str | int, ...]


def undeclared_fields(schema: Callable[[], Mapping[str, Any]]) -> Callable[[dict[str, Any], bool], list[Path]]:
    """The paths of the fields of an object its kind's structural ``schema`` does not declare, in
    document order, as the kind's CRD prunes them when kube decodes the object (dropped, or refused
    under ``fieldValidation=Strict``); ``metadata`` is left to kube's ObjectMeta. A write of the
    status subresource (``status_only``) looks at the status alone. The object is not changed."""

    def unknown(obj: dict[str, Any], status_only: bool = False) -> list[Path]:
        root = schema()
        if not status_only:
            return prune(copy.deepcopy(obj), dict(root))
        status_schema = (root.get("properties") or {}).get("status")
        if "status" not in obj or not isinstance(status_schema, dict):
            return []
        return [("status", *path) for path in prune(copy.deepcopy(obj["status"]), status_schema, root=False)]

    return unknown
