"""The nulls a written custom resource loses before it is defaulted and validated, as kube drops them.

On a real cluster gpufed's, Karmada's and Kueue's kinds are CRDs, and
apiextensions-apiserver decodes their objects by the structural schema: a field set to ``null``
that the schema declares neither ``nullable`` nor defaulted is dropped
(``PruneNonNullableNullsWithoutDefaults``), so ``spec: {suspend: null}`` is stored as ``spec: {}``
instead of being refused; a null with a default is defaulted. Built-in kinds are not touched here
(kube decodes them into Go structs: a null is the field's zero value). The operators' kinds the
hub builds in (Kubeflow's training jobs, KubeRay's, JobSet, LeaderWorkerSet) are CRDs on a real
cluster: their nulls are pruned by the structural schema the hub serves for them
(:attr:`ResourceType.crd_schema`), as a CRD's.

In: a written object and its :class:`ResourceType` (a modelled kind's pydantic model, a CRD
version's ``openAPIV3Schema``, or an operator's kind's served schema). Out: the object, changed in place. Runs before the kind's
defaulting. No modelled kind declares a field ``nullable``, as none of their upstream CRDs does;
a field the model leaves open (``dict[str, Any]``, an ``Any``) keeps the nulls inside it, as a
preserved unknown field does. Pure: no I/O.
"""

from __future__ import annotations

import functools
import types
import typing
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson
from pydantic import BaseModel

from controlplane.apis.apiextensions.schema import prune_nulls as prune_schema_nulls
from controlplane.apiserver.resources import ResourceType


@dataclass(slots=True, eq=False)
class _Shape:
    """What a modelled value declares below it: a model's fields by wire name, a map's values, a
    list's items. None where it declares nothing (an open value: its nulls are kept)."""

    fields: dict[str, _Shape] = field(default_factory=dict)
    values: _Shape | None = None
    items: _Shape | None = None


@functools.cache
def _model_shape(model: type[BaseModel]) -> _Shape:
    """``model``'s shape, built once per model (the models are the process's own, fixed at import)."""
    return _shape(model, {})


def _shape(annotation: Any, building: dict[type[BaseModel], _Shape]) -> _Shape:
    """The shape of a field's type: ``X | None`` is ``X``'s, a union of several the merge of its
    members'. ``building``: the models whose shape is being built (a model may hold itself)."""
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin is typing.Annotated:
        return _shape(args[0], building)
    if origin is typing.Union or origin is types.UnionType:
        members = [_shape(arg, building) for arg in args if arg is not type(None)]
        if len(members) == 1:
            return members[0]
        merged = _Shape()
        for member in members:
            merged.fields = {**member.fields, **merged.fields}
            merged.values = merged.values or member.values
            merged.items = merged.items or member.items
        return merged
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        if annotation in building:
            return building[annotation]
        shape = building[annotation] = _Shape()
        for name, info in annotation.model_fields.items():
            sub = _shape(info.annotation, building)
            aliases = [info.alias, info.validation_alias if isinstance(info.validation_alias, str) else None]
            for key in {name, *(alias for alias in aliases if alias)}:
                shape.fields[key] = sub
        return shape
    if isinstance(origin, type) and issubclass(origin, Mapping) and len(args) == 2:
        return _Shape(values=None if args[1] is Any else _shape(args[1], building))
    if isinstance(origin, type) and issubclass(origin, Sequence | set | frozenset) and args and origin is not str:
        return _Shape(items=_shape(args[0], building))
    return _Shape()


def _prune(value: Any, shape: _Shape | None) -> None:
    if shape is None:
        return
    if isinstance(value, dict):
        for key in list(value):
            sub = shape.fields.get(key) if shape.fields else shape.values
            if sub is None:
                continue
            if value[key] is None:
                del value[key]
            else:
                _prune(value[key], sub)
    elif isinstance(value, list) and shape.items is not None:
        for item in value:
            _prune(item, shape.items)


def prune_model_nulls(obj: dict[str, Any], model: type[BaseModel]) -> None:
    """Drop, in place, the nulls of the fields ``model`` declares (kube's
    ``PruneNonNullableNullsWithoutDefaults`` over the kind's CRD schema)."""
    _prune(obj, _model_shape(model))


def _holds_null(obj: dict[str, Any]) -> bool:
    """Whether ``obj`` may hold a null (a string holding ``null`` says yes too): one scan of its
    JSON, in C, so that the usual write, which has none, is not walked."""
    try:
        return b"null" in orjson.dumps(obj)
    except TypeError:
        return True


def prune_nulls(rt: ResourceType, obj: dict[str, Any]) -> None:
    """Drop the nulls kube's decoding of a custom resource drops from ``obj`` (see the module
    docstring); nothing for a built-in kind."""
    if (rt.model is None and rt.custom is None and rt.crd_schema is None) or not _holds_null(obj):
        return
    if rt.model is not None:
        prune_model_nulls(obj, rt.model)
    elif rt.custom is not None:
        prune_schema_nulls(obj, dict(rt.custom.schema))
    elif rt.crd_schema is not None:
        prune_schema_nulls(obj, dict(rt.crd_schema()))
