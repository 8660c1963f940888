"""Each served kind's schema as the hub publishes it, for the controllers that reason about kinds.

kube's ValidatingAdmissionPolicy type checker resolves a policy's resources to kinds with the
RESTMapper and each kind to its OpenAPI schema. :class:`KindSchemas` answers both from a
registry (the live one: a CRD's kinds and schemas are found as soon as it is served): the
kinds a group-version-resource names, and a kind's schema, the same as ``/openapi/v2``
serves (:mod:`.catalog`), with a look-up for its ``$ref``s. A kind served with an open schema
(no known fields) has no schema here, as kube has none for a kind it cannot resolve.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from typing import Any

from controlplane.apiserver.openapi.catalog import kind_schema
from controlplane.apiserver.openapi.models import model_json_schema
from controlplane.apiserver.openapi.upstream import (
    DEFINITIONS_PREFIX,
    UpstreamDefinitions,
    shared_definitions,
)
from controlplane.apiserver.resources import Registry

Schema = Mapping[str, Any]
GVK = tuple[str, str, str]


class KindSchemas:
    """The kinds and schemas ``registry`` serves; ``load_upstream`` reads kube's definitions once."""

    def __init__(self, registry: Registry, *, load_upstream: Callable[[], UpstreamDefinitions] = shared_definitions) -> None:
        self._registry = registry
        self._load_upstream = load_upstream
        self._json_schema = functools.cache(model_json_schema)

    def kinds_for(self, group: str, version: str, resource: str) -> list[GVK]:
        """kube's ``KindsFor`` for a fully named resource: its kind, or none when not served."""
        rt = self._registry.get(group, version, resource)
        return [] if rt is None else [(rt.group, rt.version, rt.kind)]

    def schema_for(self, gvk: GVK) -> tuple[Schema, Callable[[str], Schema | None]] | None:
        """``gvk``'s schema and its ``$ref`` look-up (None: not served, or served open)."""
        group, version, kind = gvk
        rt = self._registry.for_kind(f"{group}/{version}" if group else version, kind)
        if rt is None:
            return None
        upstream = self._load_upstream()
        found = kind_schema(rt, upstream, self._json_schema)
        own = found.definitions

        def resolve(ref: str) -> Schema | None:
            name = ref.removeprefix(DEFINITIONS_PREFIX)
            return own.get(name) or upstream.definitions.get(name)

        root = resolve(found.name)
        if root is None or (root.get("x-kubernetes-preserve-unknown-fields") and not root.get("properties")):
            return None
        return root, resolve
