"""The versions a registry serves each kind at, as one converter per kind for field ownership.

A kind stored once and served at several versions (autoscaling/v1 and v2, Kueue's v1beta1 and
v1beta2, core and events.k8s.io Events) converts an object between any two of them through its
storage version with the types' own :class:`VersionConversion`. Server-side apply and every
write's managedFields bookkeeping use it to compare a write in each entry's version
(:mod:`controlplane.apiserver.patching.versions`). In: a :class:`Registry`. Out:
:meth:`KindVersions.converter` for a type, None for a kind served at one version.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from controlplane.apiserver.patching.schema import FieldSchema
from controlplane.apiserver.patching.versions import VersionConverter
from controlplane.apiserver.resources import Registry, ResourceType


class KindVersions:
    """The converters of the kinds ``registry`` serves at more than one version."""

    def __init__(self, registry: Registry) -> None:
        by_stored: dict[tuple[str, str], dict[str, ResourceType]] = {}
        for rt in registry:
            by_stored.setdefault((rt.storage_api_version, rt.kind), {})[rt.api_version] = rt
        self._converters: dict[tuple[str, str], _Converter] = {}
        for served in by_stored.values():
            if len(served) > 1 and any(rt.conversion is not None for rt in served.values()):
                converter = _Converter(served)
                for api_version, rt in served.items():
                    self._converters[(api_version, rt.kind)] = converter

    def converter(self, rt: ResourceType) -> VersionConverter | None:
        return self._converters.get((rt.api_version, rt.kind))


class _Converter:
    """One kind's served versions (apiVersion -> type), all stored in one of them."""

    def __init__(self, served: dict[str, ResourceType]) -> None:
        self._served = served

    def __call__(self, obj: Mapping[str, Any], api_version: str) -> tuple[dict[str, Any], FieldSchema] | None:
        source, target = self._served.get(str(obj.get("apiVersion"))), self._served.get(api_version)
        if source is None or target is None:
            return None
        stored = dict(obj) if source.conversion is None else source.conversion.to_storage(dict(obj))
        if target.conversion is None:
            out = {**stored, "apiVersion": target.storage_api_version}
        else:
            out = target.conversion.from_storage(stored)
        return out, target.apply_schema
