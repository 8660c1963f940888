"""The field types structured-merge-diff gives each kind an apply is made to (:mod:`..patching.smdtypes`).

A built-in kind's come from kube's definitions (:mod:`.upstream`), compiled once per process and
kind; a custom resource's from its CRD version's structural schema, with ObjectMeta's from the
same definitions. Kinds kube does not have (the hub's own, Karmada's and Kueue's served as
built-in kinds) get none: their applied objects are checked by their merge schema's shapes only.

In: a :class:`ResourceType`. Out: its root :class:`SmdType`, or None.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Mapping
from typing import Any

from controlplane.apiserver.openapi.upstream import shared_definitions
from controlplane.apiserver.patching.smdtypes import SmdType, TypeCompiler
from controlplane.apiserver.resources import ResourceType

#: Custom resources' types by their schema's identity (the schema is kept alongside, so that the
#: identity is not reused); cleared when it grows past this, as CRDs come and go.
_CUSTOM_LIMIT = 256
_custom: dict[int, tuple[Mapping[str, Any], SmdType]] = {}
_lock = threading.Lock()


@functools.cache
def _compiler() -> TypeCompiler:
    return TypeCompiler(shared_definitions().definitions)


@functools.cache
def _builtin(group: str, version: str, kind: str) -> SmdType | None:
    name = shared_definitions().for_kind(group, version, kind)
    return _compiler().named(name) if name is not None else None


def applied_type(rt: ResourceType) -> SmdType | None:
    """The types SMD gives an applied object of ``rt``'s kind and version, or None if not known.
    A kind kube has is typed by its definition first: a custom resource's ``scale`` subresource
    serves kube's own Scale (no CRD's group is a built-in one)."""
    if rt.model is not None or rt.crd_schema is not None:
        return None
    builtin = _builtin(rt.group, rt.version, rt.kind)
    if builtin is not None or rt.custom is None:
        return builtin
    schema = rt.custom.schema
    with _lock:
        found = _custom.get(id(schema))
        if found is not None and found[0] is schema:
            return found[1]
        typed = _compiler().custom_resource(schema)
        if len(_custom) >= _CUSTOM_LIMIT:
            _custom.clear()
        _custom[id(schema)] = (schema, typed)
        return typed
