"""The versions a registry serves each kind at, as one converter per kind for field ownership.

A kind stored once and served at several versions (autoscaling/v1 and v2, Kueue's v1beta1 and
v1beta2, core and events.k8s.io Events) converts an object between any two of them through its
storage version with the types' own :class:`VersionConversion`. Server-side apply and every
write's managedFields bookkeeping use it to compare a write in each entry's version
(:mod:`controlplane.apiserver.patching.versions`). In: a :class:`Registry`. Out:
:meth:`KindVersions.converter` for a type, None for a kind served at one version.

A CRD's versions are converted by its conversion webhook, a call the pure comparison cannot make:
:meth:`KindVersions.computed` runs the comparison, collects the objects it asked for in versions not
yet converted, converts them (one review per version asked for, through the :class:`BatchConverter`
the hub sets) and runs it again with them, until it asks for nothing new (kube's versionConverter
converts the object to each entry's version the same way). An apply over an entry of another
version costs one review per such version, and one more when the applier's own last entry is
in another version (its fields are converted back).
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Callable, Mapping
from typing import Any, Protocol, TypeVar, cast

import orjson

from controlplane.apiserver import errors
from controlplane.apiserver.offloading import pure
from controlplane.apiserver.patching.schema import FieldSchema
from controlplane.apiserver.patching.versions import VersionConverter
from controlplane.apiserver.resources import Registry, ResourceType

logger = logging.getLogger(__name__)
T = TypeVar("T")
#: How often :meth:`KindVersions.computed` converts what a comparison asked for before it compares
#: without what is still missing: the comparison of each entry's version, then an applier's fields
#: converted back.
_ROUNDS = 3
_MISSING: Any = object()


class BatchConverter(Protocol):
    """Converts objects of a custom kind to another of its versions (through its conversion webhook)."""

    async def __call__(
        self, rt: ResourceType, objects: list[dict[str, Any]], api_version: str
    ) -> tuple[list[dict[str, Any]], FieldSchema] | None:
        """``objects`` (of ``rt``'s kind, one apiVersion) at ``api_version``, and that version's
        schema; None when the kind is not served at it or has no conversion webhook."""
        ...


class KindVersions:
    """The converters of the kinds ``registry`` serves at more than one version."""

    #: Converts a CRD's versions through its conversion webhook (set by the hub).
    webhooks: BatchConverter | None = None

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

    async def computed(
        self, rt: ResourceType, compute: Callable[..., T], *, dropping: dict[str, Any] | None = None,
        off_loop: bool = False,
    ) -> T:
        """``compute(converter=...)`` (pure, run again as needed) with ``rt``'s converter: a CRD's
        versions converted by its webhook, one review per version the comparison asks for. A failed
        conversion is the webhook's error; with ``dropping`` (an update's object, not an apply's),
        that object is the answer without its managedFields instead, as kube's field manager drops
        the entries of an update it cannot record (``UpdateNoErrors``). ``off_loop``: ``compute``
        runs in a worker thread (a large write: :mod:`.offloading`)."""

        async def run(converter: VersionConverter | None) -> T:
            return await pure(off_loop, compute, converter=converter)

        converter = self.converter(rt)
        if converter is not None or self.webhooks is None or rt.custom is None:
            return await run(converter)
        prefetched = _Prefetched()
        for _round in range(_ROUNDS):
            prefetched.missing = {}
            try:
                result = await run(prefetched)
            except Exception:
                if not prefetched.missing:
                    raise
            else:
                if not prefetched.missing:
                    return result
            for api_version, objects in prefetched.missing.items():
                try:
                    await self._fetch(rt, objects, api_version, prefetched.known)
                except errors.ApiError:
                    if dropping is None:
                        raise
                    logger.warning("managedFields of %s %s dropped: its entries of other versions do not convert",
                                   rt.qualified(), dropping["metadata"].get("name"), exc_info=True)
                    return cast(T, {**dropping, "metadata": _without_managed_fields(dropping["metadata"])})
        prefetched.missing = None  # what is still missing is compared in the request's version
        return await run(prefetched)

    async def _fetch(
        self, rt: ResourceType, objects: dict[bytes, Mapping[str, Any]], api_version: str,
        known: dict[tuple[bytes, str], tuple[dict[str, Any], FieldSchema] | None],
    ) -> None:
        """``objects`` converted to ``api_version`` into ``known``, one review per apiVersion they are in."""
        assert self.webhooks is not None
        by_source: dict[str, list[tuple[bytes, dict[str, Any]]]] = {}
        for key, obj in objects.items():
            by_source.setdefault(str(obj.get("apiVersion")), []).append((key, dict(obj)))
        for batch in by_source.values():
            out = await self.webhooks(rt, [obj for _, obj in batch], api_version)
            for index, (key, _) in enumerate(batch):
                known[(key, api_version)] = None if out is None else (out[0][index], out[1])


def _without_managed_fields(metadata: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in metadata.items() if key != "managedFields"}


class _Prefetched:
    """A :class:`VersionConverter` answering from the conversions made so far, noting what it was
    asked for that is not among them (:attr:`missing`, by apiVersion; None: note nothing)."""

    def __init__(self) -> None:
        self.known: dict[tuple[bytes, str], tuple[dict[str, Any], FieldSchema] | None] = {}
        self.missing: dict[str, dict[bytes, Mapping[str, Any]]] | None = None

    def __call__(self, obj: Mapping[str, Any], api_version: str) -> tuple[dict[str, Any], FieldSchema] | None:
        key = orjson.dumps(obj, option=orjson.OPT_SORT_KEYS)
        found = self.known.get((key, api_version), _MISSING)
        if found is _MISSING:
            if self.missing is not None:
                self.missing.setdefault(api_version, {})[key] = obj
            return None
        return None if found is None else (copy.deepcopy(found[0]), found[1])


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
