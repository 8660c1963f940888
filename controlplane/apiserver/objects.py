"""The object layer: Kubernetes object semantics over a revisioned key-value store.

:class:`ObjectStore` is what the HTTP handlers *and* in-process controllers (hub
controllers, simulated member clusters) call. It takes and returns object dicts and
implements what makes a store an API server: uid/creationTimestamp/generation,
``resourceVersion`` = the key's ``mod_revision``, compare-and-swap updates with kube's
Conflict message, the ``status`` subresource, finalizers and ``deletionTimestamp``,
namespace lifecycle, label/field selectors, paginated lists with opaque continue
tokens, watches with selector-aware ADDED/MODIFIED/DELETED and BOOKMARK events,
validation (DNS-1123 names, pydantic models, ``fieldValidation``), dry-run and the
four patch types.

It works on any :class:`~controlplane.storage.interface.Store` (memory or etcd)
unchanged. Keys are ``/registry/<group or core>/<plural>/[<namespace>/]<name>``;
values are JSON without ``resourceVersion`` (see ``codec``). Errors raised are the
``errors.ApiError`` tree.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import contextlib
import copy
import dataclasses
import logging
import secrets
import time
import uuid
from collections import deque
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any, TypedDict, Unpack

from controlplane.apiserver import codec, errors
from controlplane.apiserver.admission import Operation, ValidateWrite, WriteAttributes
from controlplane.apiserver.columns import dig
from controlplane.apiserver.decoding import INT64_MAX
from controlplane.apiserver.patches import PatchType, apply_patch, record_update
from controlplane.apiserver.resources import Registry, ResourceType, ScaleSubresource
from controlplane.apiserver.selectors import (
    FieldSelector,
    LabelSelector,
    parse_field_selector,
    parse_label_selector,
)
from controlplane.apiserver.validation import FieldValidation, check_object
from controlplane.storage import interface as storage

logger = logging.getLogger(__name__)

#: Namespaces that always exist and cannot be deleted.
SYSTEM_NAMESPACES: tuple[str, ...] = ("default", "kube-system", "kube-public")
#: How often a patch re-reads and retries after losing a compare-and-swap race; every
#: round one of the racing writers wins, so this bounds the writers racing on one object.
PATCH_RETRIES = 32
_GENERATE_NAME_CHARS = "bcdfghjklmnpqrstvwxz2456789"
_GENERATE_NAME_MAX_PREFIX = 58
_SERVER_OWNED_METADATA = (
    "uid",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "generation",
    "resourceVersion",
    "selfLink",
)
_CONTINUE_VERSION = "meta.k8s.io/v1"


def utc_now() -> datetime:
    return datetime.now(UTC)


def format_time(moment: datetime) -> str:
    """RFC 3339 in UTC to the second (``2024-05-01T10:00:00Z``), as kube writes timestamps."""
    # isoformat is about twice as fast as strftime, and this runs on every write.
    return moment.astimezone(UTC).isoformat(timespec="seconds")[:19] + "Z"


class WatchEventType(StrEnum):
    ADDED = "ADDED"
    MODIFIED = "MODIFIED"
    DELETED = "DELETED"
    BOOKMARK = "BOOKMARK"
    ERROR = "ERROR"


class PropagationPolicy(StrEnum):
    BACKGROUND = "Background"
    FOREGROUND = "Foreground"
    ORPHAN = "Orphan"


@dataclass(frozen=True, slots=True)
class ObjectEvent:
    type: WatchEventType
    object: dict[str, Any]
    #: The store revision of the event (for BOOKMARK: the last revision seen).
    revision: int


@dataclass(frozen=True, slots=True)
class ObjectList:
    items: list[dict[str, Any]]
    resource_version: str
    continue_token: str = ""


@dataclass(frozen=True, slots=True)
class EncodedList:
    """A list page for the HTTP layer: its items as stored, encoded to JSON (with
    resourceVersion) one by one as the response is written (:meth:`items`)."""

    kvs: list[storage.KeyValue]
    resource_version: str
    continue_token: str = ""

    def items(self) -> Iterator[bytes]:
        return (codec.with_resource_version(kv) for kv in self.kvs)

    @property
    def stored_bytes(self) -> int:
        return sum(len(kv.value) for kv in self.kvs)


@dataclass(frozen=True, slots=True)
class Preconditions:
    uid: str | None = None
    resource_version: str | None = None


@dataclass(frozen=True, slots=True)
class DeleteResult:
    object: dict[str, Any]
    #: False when finalizers keep the object (it now has a deletionTimestamp).
    deleted: bool


class _LostRace(errors.Conflict):
    """A compare-and-swap lost against a concurrent write (patches re-read and retry)."""


@dataclass(slots=True)
class _Page:
    kvs: list[storage.KeyValue]
    #: Decoded objects for the kvs, when selectors made decoding necessary.
    objects: list[dict[str, Any] | None]
    revision: int
    continue_token: str


@dataclass(slots=True)
class _NamespaceState:
    exists: bool
    terminating: bool
    expires: float = field(default=0.0)


#: Where a write appends warnings for the client (unknown fields under fieldValidation=Warn, and
#: what the kind's ``ResourceType.warn`` hook says about the object written).
WarningSink = list[str]
LabelSelectorArg = str | LabelSelector | None
FieldSelectorArg = str | FieldSelector | None


@dataclass(frozen=True, slots=True)
class WriteOptions:
    """What a create, update or patch asks for besides its object: kube's metav1
    Create/Update/PatchOptions (``dryRun``, ``fieldValidation``, ``fieldManager``), where
    the write's warnings go, and the admission check that sees the final object before
    it is stored."""

    dry_run: bool = False
    field_validation: FieldValidation = FieldValidation.STRICT
    field_manager: str | None = None
    warnings: WarningSink | None = None
    validate: ValidateWrite | None = None


class WriteArgs(TypedDict, total=False):
    """:class:`WriteOptions` as the keyword arguments of ``create``, ``update`` and ``patch``."""

    dry_run: bool
    field_validation: FieldValidation
    field_manager: str | None
    warnings: WarningSink | None
    validate: ValidateWrite | None


@dataclass(frozen=True, slots=True)
class ListOptions:
    """kube's metav1.ListOptions for a list: selectors, paging, and the revision to read."""

    label_selector: LabelSelectorArg = None
    field_selector: FieldSelectorArg = None
    limit: int = 0
    continue_token: str | None = None
    resource_version: str | None = None
    resource_version_match: str | None = None


class ListArgs(TypedDict, total=False):
    """:class:`ListOptions` as the keyword arguments of ``list`` and ``list_encoded``."""

    label_selector: LabelSelectorArg
    field_selector: FieldSelectorArg
    limit: int
    continue_token: str | None
    resource_version: str | None
    resource_version_match: str | None


class ObjectStore:
    """Kubernetes object semantics over ``store`` for the kinds in ``registry``."""

    def __init__(
        self,
        store: storage.Store,
        registry: Registry,
        *,
        clock: Callable[[], datetime] = utc_now,
        namespace_cache_seconds: float = 2.0,
    ) -> None:
        self._store = store
        self._registry = registry
        self._clock = clock
        self._namespace_cache_seconds = namespace_cache_seconds
        self._namespaces: dict[str, _NamespaceState] = {}
        # One store read per namespace at a time: concurrent creates share it (single flight).
        self._namespace_reads: dict[str, asyncio.Future[_NamespaceState]] = {}
        namespace_type = registry.get("", "v1", "namespaces")
        self._namespace_type = namespace_type

    @property
    def store(self) -> storage.Store:
        return self._store

    @property
    def registry(self) -> Registry:
        return self._registry

    def now(self) -> str:
        return format_time(self._clock())

    async def bootstrap(self) -> None:
        """Create the namespaces that always exist (idempotent; call at startup)."""
        if self._namespace_type is None:
            return
        for name in SYSTEM_NAMESPACES:
            with contextlib.suppress(errors.AlreadyExists):
                await self.create(
                    self._namespace_type, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}
                )

    # --- reads ------------------------------------------------------------------------

    async def get(self, rt: ResourceType, *, namespace: str | None = None, name: str) -> dict[str, Any]:
        return codec.decode(await self._get_kv(rt, namespace=namespace, name=name))

    async def get_encoded(self, rt: ResourceType, *, namespace: str | None = None, name: str) -> bytes:
        return codec.with_resource_version(await self._get_kv(rt, namespace=namespace, name=name))

    async def list(self, rt: ResourceType, *, namespace: str | None = None, **options: Unpack[ListArgs]) -> ObjectList:
        page = await self._list_page(rt, namespace, ListOptions(**options))
        items = [
            obj if obj is not None else codec.decode(kv) for kv, obj in zip(page.kvs, page.objects, strict=True)
        ]
        return ObjectList(items, str(page.revision), page.continue_token)

    async def list_encoded(
        self, rt: ResourceType, *, namespace: str | None = None, **options: Unpack[ListArgs]
    ) -> EncodedList:
        page = await self._list_page(rt, namespace, ListOptions(**options))
        return EncodedList(page.kvs, str(page.revision), page.continue_token)

    # --- writes -----------------------------------------------------------------------

    async def create(
        self, rt: ResourceType, obj: dict[str, Any], *, namespace: str | None = None, **options: Unpack[WriteArgs]
    ) -> dict[str, Any]:
        """Create ``obj``; raise AlreadyExists, Invalid, or NotFound for a missing namespace.

        ``validate`` (admission) sees the final object before it is stored.
        """
        created, _ = await self._create_owned(rt, self._incoming(rt, obj, namespace=namespace), WriteOptions(**options))
        return created

    async def create_encoded(
        self, rt: ResourceType, obj: dict[str, Any], *, namespace: str | None = None, **options: Unpack[WriteArgs]
    ) -> bytes:
        """:meth:`create` for the HTTP layer: the created object as JSON, with its resourceVersion.

        ``obj`` is handed over (a freshly parsed request body): it is changed in place
        instead of copied. The answer is the stored JSON itself, encoded once for etcd.
        """
        created, stored = await self._create_owned(
            rt, self._incoming(rt, obj, namespace=namespace, copy_body=False), WriteOptions(**options)
        )
        return codec.dumps(created) if stored is None else codec.with_resource_version(stored)

    async def _create_owned(
        self, rt: ResourceType, obj: dict[str, Any], options: WriteOptions
    ) -> tuple[dict[str, Any], storage.KeyValue | None]:
        """Create ``obj`` (this store's own copy, checked by ``_incoming``), drawing a name
        for ``generateName``; return the object and what was stored (None on dry run)."""
        meta = obj["metadata"]
        generated = not meta.get("name") and bool(meta.get("generateName"))
        for attempt in range(3 if generated else 1):
            if generated:
                prefix = str(meta["generateName"])[:_GENERATE_NAME_MAX_PREFIX]
                meta["name"] = prefix + "".join(secrets.choice(_GENERATE_NAME_CHARS) for _ in range(5))
            try:
                return await self._create(rt, obj, options)
            except errors.AlreadyExists:
                if not generated or attempt == 2:
                    raise
        raise AssertionError("unreachable")

    async def update(
        self,
        rt: ResourceType,
        obj: dict[str, Any],
        *,
        namespace: str | None = None,
        name: str | None = None,
        subresource: str | None = None,
        **options: Unpack[WriteArgs],
    ) -> dict[str, Any]:
        """Replace ``obj`` (CAS on ``metadata.resourceVersion`` when given).

        For kinds with a status subresource the main resource keeps the stored
        ``.status``; ``subresource="status"`` changes only ``.status``.
        """
        obj = self._incoming(rt, obj, namespace=namespace, name=name)
        meta = obj["metadata"]
        kv = await self._get_kv(rt, namespace=meta.get("namespace"), name=meta["name"])
        wanted = meta.get("resourceVersion")
        if wanted and str(wanted) != str(kv.mod_revision):
            raise errors.conflict_modified(plural=rt.plural, group=rt.group, name=meta["name"])
        old = codec.decode(kv)
        new = self._merged(rt, old, obj, subresource=subresource)
        return await self._write_update(rt, kv, old, new, subresource=subresource, options=WriteOptions(**options))

    async def update_status(self, rt: ResourceType, obj: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        """``update(..., subresource="status")``: write only ``.status``."""
        return await self.update(rt, obj, subresource="status", **kwargs)

    async def patch(
        self,
        rt: ResourceType,
        *,
        namespace: str | None = None,
        name: str,
        patch_type: PatchType,
        patch: Any,
        subresource: str | None = None,
        force: bool = False,
        **options: Unpack[WriteArgs],
    ) -> dict[str, Any]:
        """Patch an object, re-reading and retrying when a concurrent write wins.

        A ``metadata.resourceVersion`` inside the patch is a precondition. Server-side
        apply of a missing object creates it.
        """
        namespace = namespace if rt.namespaced else None
        write = WriteOptions(**options)
        field_manager = write.field_manager
        # Server-side apply records its own managedFields entry: its write must not add another.
        applied_write = dataclasses.replace(write, field_manager=None)
        for _attempt in range(PATCH_RETRIES):
            try:
                kv = await self._get_kv(rt, namespace=namespace, name=name)
            except errors.NotFound:
                if patch_type is not PatchType.APPLY or subresource:
                    raise
                applied = apply_patch(rt, None, patch_type, patch, manager=field_manager, force=force, now=self.now())
                applied = self._incoming(rt, applied, namespace=namespace, name=name)
                created, _ = await self._create_owned(rt, applied, applied_write)
                return created
            old = codec.decode(kv)
            patched = apply_patch(rt, old, patch_type, patch, manager=field_manager, force=force, now=self.now())
            patched = self._incoming(rt, patched, namespace=namespace, name=name)
            wanted = patched["metadata"].get("resourceVersion")
            if wanted and str(wanted) != str(kv.mod_revision):
                raise errors.conflict_modified(plural=rt.plural, group=rt.group, name=name)
            new = self._merged(rt, old, patched, subresource=subresource)
            try:
                return await self._write_update(
                    rt, kv, old, new, subresource=subresource,
                    options=applied_write if patch_type is PatchType.APPLY else write,
                )
            except _LostRace:
                continue
        raise errors.conflict_modified(plural=rt.plural, group=rt.group, name=name)

    # --- scale subresource --------------------------------------------------------------

    def _scale_of(self, rt: ResourceType, obj: dict[str, Any]) -> dict[str, Any]:
        """The autoscaling/v1 Scale view of ``obj``."""
        spec = self._require_scale(rt)
        meta = obj["metadata"]
        selector = dig(obj, *spec.label_selector.split("."))
        status: dict[str, Any] = {"replicas": dig(obj, *spec.status_replicas.split(".")) or 0}
        if isinstance(selector, dict):
            status["selector"] = LabelSelector.from_dict(selector).to_string()
        return {
            "kind": "Scale",
            "apiVersion": "autoscaling/v1",
            "metadata": {
                key: meta[key]
                for key in ("name", "namespace", "uid", "resourceVersion", "creationTimestamp")
                if key in meta
            },
            "spec": {"replicas": dig(obj, *spec.spec_replicas.split(".")) or 0},
            "status": status,
        }

    @staticmethod
    def _require_scale(rt: ResourceType) -> ScaleSubresource:
        if rt.scale is None:
            raise errors.NotFound(f"the server could not find the requested resource ({rt.plural}/scale)")
        return rt.scale

    async def get_scale(self, rt: ResourceType, *, namespace: str | None = None, name: str) -> dict[str, Any]:
        return self._scale_of(rt, await self.get(rt, namespace=namespace, name=name))

    async def update_scale(
        self,
        rt: ResourceType,
        scale: Any,
        *,
        namespace: str | None = None,
        name: str,
        dry_run: bool = False,
        field_manager: str | None = None,
    ) -> dict[str, Any]:
        """Set the object's replicas from a Scale (CAS on its resourceVersion when given)."""
        spec = self._require_scale(rt)
        replicas = dig(scale, "spec", "replicas")
        if not isinstance(replicas, int) or isinstance(replicas, bool) or replicas < 0:
            raise errors.invalid(
                kind="Scale", group="autoscaling", name=name,
                causes=[errors.Cause(
                    errors.CauseType.FIELD_VALUE_INVALID,
                    f"Invalid value: {replicas!r}: must be a non-negative integer",
                    "spec.replicas",
                )],
            )
        patch: dict[str, Any] = {}
        node = patch
        *parents, leaf = spec.spec_replicas.split(".")
        for part in parents:
            node = node.setdefault(part, {})
        node[leaf] = replicas
        wanted = dig(scale, "metadata", "resourceVersion")
        if wanted:
            patch["metadata"] = {"resourceVersion": str(wanted)}
        updated = await self.patch(
            rt, namespace=namespace, name=name, patch_type=PatchType.MERGE, patch=patch,
            dry_run=dry_run, field_manager=field_manager,
        )
        return self._scale_of(rt, updated)

    async def patch_scale(
        self,
        rt: ResourceType,
        *,
        namespace: str | None = None,
        name: str,
        patch_type: PatchType,
        patch: Any,
        dry_run: bool = False,
        field_manager: str | None = None,
    ) -> dict[str, Any]:
        if patch_type is PatchType.APPLY:
            raise errors.UnsupportedMediaType("server-side apply of the scale subresource is not supported")
        current = await self.get_scale(rt, namespace=namespace, name=name)
        # A Scale has no lists, so a strategic merge patch is a merge patch here.
        effective = PatchType.MERGE if patch_type is PatchType.STRATEGIC else patch_type
        scale_type = dataclasses.replace(rt, strategic_merge=False, model=None)
        patched = apply_patch(scale_type, current, effective, patch, manager=field_manager, force=False, now=self.now())
        return await self.update_scale(
            rt, patched, namespace=namespace, name=name, dry_run=dry_run, field_manager=field_manager
        )

    async def delete(
        self,
        rt: ResourceType,
        *,
        namespace: str | None = None,
        name: str,
        preconditions: Preconditions | None = None,
        propagation_policy: str | None = None,
        dry_run: bool = False,
    ) -> DeleteResult:
        """Delete now, or (with finalizers) mark with ``deletionTimestamp`` and keep.

        ``propagation_policy`` is validated and accepted; the hub keeps no owner
        graph, so dependents are not cascaded.
        """
        if propagation_policy and propagation_policy not in {p.value for p in PropagationPolicy}:
            raise errors.BadRequest(
                f'propagationPolicy: Unsupported value: "{propagation_policy}": supported values: '
                '"Background", "Foreground", "Orphan"'
            )
        namespace = namespace if rt.namespaced else None
        for _attempt in range(PATCH_RETRIES):
            kv = await self._get_kv(rt, namespace=namespace, name=name)
            obj = codec.decode(kv)
            self._check_preconditions(rt, obj, preconditions)
            try:
                if rt is self._namespace_type:
                    return await self._delete_namespace(kv, obj, dry_run=dry_run)
                return await self._delete_kv(rt, kv, obj, dry_run=dry_run)
            except _LostRace:
                continue
        raise errors.conflict_modified(plural=rt.plural, group=rt.group, name=name)

    async def delete_collection(
        self,
        rt: ResourceType,
        *,
        namespace: str | None = None,
        label_selector: LabelSelectorArg = None,
        field_selector: FieldSelectorArg = None,
        dry_run: bool = False,
    ) -> ObjectList:
        """Delete every matching object; returns them as they were left."""
        listed = await self.list(rt, namespace=namespace, label_selector=label_selector, field_selector=field_selector)
        out = []
        for obj in listed.items:
            meta = obj["metadata"]
            try:
                result = await self.delete(rt, namespace=meta.get("namespace"), name=meta["name"], dry_run=dry_run)
            except errors.NotFound:
                continue
            out.append(result.object)
        return ObjectList(out, listed.resource_version)

    # --- watch ------------------------------------------------------------------------

    async def watch(
        self,
        rt: ResourceType,
        *,
        namespace: str | None = None,
        label_selector: LabelSelectorArg = None,
        field_selector: FieldSelectorArg = None,
        resource_version: str | None = None,
        bookmark_interval: float | None = None,
    ) -> AsyncIterator[ObjectEvent]:
        """Events for objects of ``rt`` as kube's watch sends them.

        ``resource_version`` absent or "0": the current objects as ADDED, then changes.
        "N": changes after revision N (Gone when N is compacted). With selectors, an
        object that stops matching arrives as DELETED and one that starts as ADDED.
        With ``bookmark_interval``, a BOOKMARK event carries the last revision seen
        whenever that many seconds pass without an event.
        """
        labels = self._label_selector(label_selector)
        fields = self._field_selector(rt, field_selector)
        filtered = not (labels.empty and fields.empty)
        prefix = rt.key_prefix(namespace)
        matched: set[str] = set()

        def matches(obj: dict[str, Any]) -> bool:
            return labels.matches(obj["metadata"].get("labels")) and fields.matches(obj)

        if resource_version in (None, "", "0"):
            listed = await self._store_call(rt, "", self._store.list(prefix))
            start = listed.revision
            # Hand the listed objects out one by one and keep none: a watch whose client
            # reads slowly would otherwise hold the whole list for as long as it stays open.
            items = listed.items
            del listed
            items.reverse()
            while items:
                kv = items.pop()
                obj = codec.decode(kv)
                key, revision = kv.key, kv.mod_revision
                del kv
                if filtered and not matches(obj):
                    continue
                matched.add(key)
                yield ObjectEvent(WatchEventType.ADDED, obj, revision)
            obj = {}  # not even the last one
        else:
            start = self._parse_resource_version(resource_version)
            if filtered:
                current = await self._store_call(rt, "", self._store.current_revision())
                try:
                    listed = await self._store.list(prefix, revision=min(start, current))
                except storage.Gone as exc:
                    raise errors.expired_resource_version(start, exc.compacted_revision) from exc
                except storage.StorageError as exc:
                    raise errors.from_storage_error(exc, plural=rt.plural, group=rt.group) from exc
                matched = {kv.key for kv in listed.items if matches(codec.decode(kv))}

        last_revision = start
        ready: deque[ObjectEvent] = deque()
        events = self._store.watch(prefix, from_revision=start + 1).__aiter__()
        pending: asyncio.Task[storage.WatchEvent | None] | None = None
        try:
            while True:
                if pending is None:
                    pending = asyncio.create_task(_next_event(events))
                if bookmark_interval is not None:
                    done, _ = await asyncio.wait({pending}, timeout=bookmark_interval)
                    if not done:
                        bookmark = {
                            "kind": rt.kind,
                            "apiVersion": rt.api_version,
                            "metadata": {"resourceVersion": str(last_revision)},
                        }
                        yield ObjectEvent(WatchEventType.BOOKMARK, bookmark, last_revision)
                        continue
                try:
                    event = await pending
                except storage.Gone as exc:
                    raise errors.expired_resource_version(start, exc.compacted_revision) from exc
                except storage.StorageError as exc:
                    raise errors.from_storage_error(exc, plural=rt.plural, group=rt.group) from exc
                pending = None
                if event is None:
                    return
                last_revision = event.kv.mod_revision
                translated = self._translate(event, filtered=filtered, matched=matched, matches=matches)
                del event
                if translated is not None:
                    ready.append(translated)
                    del translated
                while ready:
                    # Yielded straight from the list, so this frame keeps no reference to an
                    # event its consumer has taken: a watcher that stops reading holds one copy.
                    yield ready.popleft()
        finally:
            # A cancelled consumer leaves the read of the store's watch in flight; it
            # must finish before the store's iterator can be closed.
            if pending is not None and not pending.done():
                pending.cancel()
                await asyncio.gather(pending, return_exceptions=True)
            aclose = getattr(events, "aclose", None)
            if aclose is not None:
                await aclose()

    def _translate(
        self,
        event: storage.WatchEvent,
        *,
        filtered: bool,
        matched: set[str],
        matches: Callable[[dict[str, Any]], bool],
    ) -> ObjectEvent | None:
        obj = codec.decode(event.kv)
        revision = event.kv.mod_revision
        key = event.kv.key
        if event.type is storage.EventType.DELETE:
            if filtered and key not in matched:
                return None
            matched.discard(key)
            return ObjectEvent(WatchEventType.DELETED, obj, revision)
        if not filtered:
            return ObjectEvent(WatchEventType.ADDED if event.created else WatchEventType.MODIFIED, obj, revision)
        was = key in matched
        if matches(obj):
            matched.add(key)
            return ObjectEvent(WatchEventType.MODIFIED if was else WatchEventType.ADDED, obj, revision)
        if was:
            matched.discard(key)
            return ObjectEvent(WatchEventType.DELETED, obj, revision)
        return None

    # --- internals: reading -----------------------------------------------------------

    async def _store_call(self, rt: ResourceType, name: str, awaitable: Any) -> Any:
        try:
            return await awaitable
        except storage.StorageError as exc:
            raise errors.from_storage_error(exc, plural=rt.plural, group=rt.group, name=name) from exc

    async def _get_kv(self, rt: ResourceType, *, namespace: str | None, name: str) -> storage.KeyValue:
        if rt.namespaced and not namespace:
            raise errors.BadRequest(f"{rt.plural} is namespaced: a namespace is required to address {name!r}")
        kv: storage.KeyValue = await self._store_call(
            rt, name, self._store.get(rt.key(namespace=namespace, name=name))
        )
        return kv

    @staticmethod
    def _label_selector(selector: LabelSelectorArg) -> LabelSelector:
        if isinstance(selector, LabelSelector):
            return selector
        return parse_label_selector(selector)

    @staticmethod
    def _field_selector(rt: ResourceType, selector: FieldSelectorArg) -> FieldSelector:
        if isinstance(selector, FieldSelector):
            return selector
        return parse_field_selector(selector, rt.field_selectors)

    @staticmethod
    def _parse_resource_version(value: str) -> int:
        try:
            revision = int(value)
        except ValueError:
            revision = -1
        if not 0 <= revision < INT64_MAX:  # etcd revisions are int64 (and a watch starts one later)
            raise errors.BadRequest(f'resourceVersion: Invalid value: "{value}": must be a valid resource version')
        return revision

    async def _list_page(self, rt: ResourceType, namespace: str | None, options: ListOptions) -> _Page:
        labels = self._label_selector(options.label_selector)
        fields = self._field_selector(rt, options.field_selector)
        limit, continue_token = options.limit, options.continue_token
        resource_version, resource_version_match = options.resource_version, options.resource_version_match
        filtered = not (labels.empty and fields.empty)
        prefix = rt.key_prefix(namespace)
        if limit < 0:
            raise errors.BadRequest(f"limit: Invalid value: {limit}: must be greater than or equal to 0")
        revision: int | None = None
        start_after: str | None = None
        if continue_token:
            revision, start_after = _decode_continue(continue_token, prefix)
        elif resource_version_match == "Exact" and resource_version:
            revision = self._parse_resource_version(resource_version)
        elif resource_version_match not in (None, "", "NotOlderThan", "Exact"):
            raise errors.BadRequest(
                f'resourceVersionMatch: Unsupported value: "{resource_version_match}": '
                'supported values: "Exact", "NotOlderThan"'
            )

        kvs: list[storage.KeyValue] = []
        objects: list[dict[str, Any] | None] = []
        more = False
        last_key = start_after
        while True:
            want = limit - len(kvs) if limit else 0
            chunk = max(want, min(limit * 2, 500)) if limit and filtered else want
            try:
                result = await self._store.list(prefix, revision=revision, limit=chunk, start_after=last_key)
            except storage.Gone as exc:
                if continue_token:
                    raise errors.Gone(
                        "The provided continue parameter is too old to display a consistent list result. "
                        "You can start a new list without the continue parameter."
                    ) from exc
                raise errors.expired_resource_version(revision or 0, exc.compacted_revision) from exc
            except storage.StorageError as exc:
                raise errors.from_storage_error(exc, plural=rt.plural, group=rt.group) from exc
            revision = result.revision
            stopped_early = False
            for index, kv in enumerate(result.items):
                last_key = kv.key
                obj: dict[str, Any] | None = None
                if filtered:
                    obj = codec.decode(kv)
                    if not (labels.matches(obj["metadata"].get("labels")) and fields.matches(obj)):
                        continue
                kvs.append(kv)
                objects.append(obj)
                if limit and len(kvs) >= limit:
                    stopped_early = index < len(result.items) - 1
                    break
            if limit and len(kvs) >= limit:
                more = stopped_early or result.more
                break
            if not result.more:
                break
        token = _encode_continue(revision, last_key or "", prefix) if more and last_key else ""
        return _Page(kvs, objects, revision, token)

    # --- internals: writing -----------------------------------------------------------

    def _incoming(
        self, rt: ResourceType, obj: Any, *, namespace: str | None, name: str | None = None, copy_body: bool = True
    ) -> dict[str, Any]:
        """A private copy of a written object, checked against the request's type and URL.

        With ``copy_body=False`` the caller hands ``obj`` over and it is used as it is.
        """
        if not isinstance(obj, dict):
            raise errors.BadRequest(f"the body must be a {rt.kind} object, not {type(obj).__name__}")
        if copy_body:
            obj = copy.deepcopy(obj)
        checked: dict[str, Any] = obj
        api_version = obj.setdefault("apiVersion", rt.api_version)
        kind = obj.setdefault("kind", rt.kind)
        if api_version != rt.api_version:
            raise errors.BadRequest(
                f"the API version in the data ({api_version}) does not match the expected API version ({rt.api_version})"
            )
        if kind != rt.kind:
            raise errors.BadRequest(f"the kind in the data ({kind}) does not match the expected kind ({rt.kind})")
        meta = obj.get("metadata")
        if meta is None:
            meta = obj["metadata"] = {}
        if not isinstance(meta, dict):
            raise errors.BadRequest("metadata must be an object")
        if rt.namespaced:
            body_namespace = meta.get("namespace")
            if namespace and body_namespace and body_namespace != namespace:
                raise errors.BadRequest(
                    "the namespace of the provided object does not match the namespace sent on the request"
                )
            resolved = namespace or body_namespace
            if not resolved:
                raise errors.BadRequest(f"{rt.plural} is namespaced: the object needs metadata.namespace")
            meta["namespace"] = resolved
        else:
            meta.pop("namespace", None)
        if name is not None:
            body_name = meta.get("name")
            if body_name and body_name != name:
                raise errors.BadRequest(
                    f"the name of the object ({body_name}) does not match the name on the URL ({name})"
                )
            meta["name"] = name
        return checked

    async def _create(
        self, rt: ResourceType, obj: dict[str, Any], options: WriteOptions
    ) -> tuple[dict[str, Any], storage.KeyValue | None]:
        """One create attempt of ``obj``, which is this store's own (``_incoming``'s) copy:
        a retry with another generated name finds it changed only in what this resets."""
        meta = obj["metadata"]
        for key in _SERVER_OWNED_METADATA:
            meta.pop(key, None)
        if rt.has_status:
            obj.pop("status", None)
        if rt is self._namespace_type:
            obj["spec"] = {"finalizers": ["kubernetes"]}
            obj["status"] = {"phase": "Active"}
        if rt.prepare is not None:
            rt.prepare(obj)
        checked = check_object(obj, rt, field_validation=options.field_validation)
        obj = checked.obj
        meta = obj["metadata"]
        if rt.namespaced:
            await self._require_namespace(rt, meta["namespace"], meta["name"])
        now = self.now()
        meta["uid"] = str(uuid.uuid4())
        meta["creationTimestamp"] = now
        meta["generation"] = 1
        if options.field_manager:
            obj = record_update(None, obj, manager=options.field_manager, now=now)
        if options.warnings is not None:
            options.warnings.extend(checked.warnings)
            if rt.warn is not None:
                options.warnings.extend(rt.warn(obj))
        if options.validate is not None:
            options.validate(WriteAttributes(Operation.CREATE, rt, obj))
        if options.dry_run:
            return obj, None
        kv: storage.KeyValue = await self._store_call(
            rt, meta["name"], self._store.create(rt.key(namespace=meta.get("namespace"), name=meta["name"]), codec.encode(obj))
        )
        obj["metadata"]["resourceVersion"] = str(kv.mod_revision)
        if rt is self._namespace_type:
            self._namespaces.pop(meta["name"], None)
        return obj, kv

    def _merged(
        self, rt: ResourceType, old: dict[str, Any], incoming: dict[str, Any], *, subresource: str | None
    ) -> dict[str, Any]:
        """The object an update would store: server-owned fields and the other half kept."""
        if subresource == "status":
            new = copy.deepcopy(old)
            if "status" in incoming:
                new["status"] = incoming["status"]
            else:
                new.pop("status", None)
            return new
        if subresource:
            raise errors.NotFound(f"the server could not find the requested resource ({rt.plural}/{subresource})")
        new = incoming
        meta = new["metadata"]
        old_meta = old["metadata"]
        for key in _SERVER_OWNED_METADATA:
            if key in old_meta:
                meta[key] = old_meta[key]
            else:
                meta.pop(key, None)
        if "managedFields" not in meta and "managedFields" in old_meta:
            meta["managedFields"] = old_meta["managedFields"]
        if rt.has_status:
            if "status" in old:
                new["status"] = old["status"]
            else:
                new.pop("status", None)
        return new

    async def _write_update(
        self,
        rt: ResourceType,
        kv: storage.KeyValue,
        old: dict[str, Any],
        new: dict[str, Any],
        *,
        subresource: str | None,
        options: WriteOptions,
    ) -> dict[str, Any]:
        if rt.prepare is not None:
            rt.prepare(new)
        checked = check_object(new, rt, field_validation=options.field_validation)
        new = checked.obj
        meta = new["metadata"]
        old_meta = old["metadata"]
        name = meta["name"]
        if old_meta.get("deletionTimestamp"):
            added = sorted(set(meta.get("finalizers") or []) - set(old_meta.get("finalizers") or []))
            if added:
                raise errors.invalid(
                    kind=rt.kind, group=rt.group, name=name,
                    causes=[errors.Cause(
                        errors.CauseType.FIELD_VALUE_FORBIDDEN,
                        f"Forbidden: no new finalizers can be added if the object is being deleted, "
                        f"found new finalizers {added}",
                        "metadata.finalizers",
                    )],
                )
        if subresource is None and _spec_of(new) != _spec_of(old):
            meta["generation"] = int(old_meta.get("generation") or 0) + 1
        if options.warnings is not None:
            options.warnings.extend(checked.warnings)
            if rt.warn is not None and subresource is None:
                options.warnings.extend(rt.warn(new))
        if _without_resource_version(new) == _without_resource_version(old):
            return old  # kube writes nothing for a no-op update
        if options.field_manager:
            new = record_update(old, new, manager=options.field_manager, now=self.now())
            meta = new["metadata"]
        if options.validate is not None:
            options.validate(WriteAttributes(Operation.UPDATE, rt, new, old=old, subresource=subresource))
        if options.dry_run:
            return new
        key = kv.key
        if meta.get("deletionTimestamp") and not meta.get("finalizers"):
            try:
                deleted = await self._store.delete(key, expected_revision=kv.mod_revision)
            except storage.Conflict as exc:
                raise _LostRace(errors.conflict_modified(plural=rt.plural, group=rt.group, name=name).message) from exc
            except storage.StorageError as exc:
                raise errors.from_storage_error(exc, plural=rt.plural, group=rt.group, name=name) from exc
            meta["resourceVersion"] = str(deleted.mod_revision)
            if rt.namespaced:
                await self._namespace_content_deleted(meta["namespace"])
            return new
        try:
            written = await self._store.update(key, codec.encode(new), expected_revision=kv.mod_revision)
        except storage.Conflict as exc:
            raise _LostRace(errors.conflict_modified(plural=rt.plural, group=rt.group, name=name).message) from exc
        except storage.StorageError as exc:
            raise errors.from_storage_error(exc, plural=rt.plural, group=rt.group, name=name) from exc
        meta["resourceVersion"] = str(written.mod_revision)
        return new

    def _check_preconditions(self, rt: ResourceType, obj: dict[str, Any], pre: Preconditions | None) -> None:
        if pre is None:
            return
        meta = obj["metadata"]
        what = f'Operation cannot be fulfilled on {rt.qualified()} "{meta["name"]}": Precondition failed: '
        target = errors.Target(name=meta["name"], group=rt.group, kind=rt.plural)
        if pre.uid and pre.uid != meta.get("uid"):
            raise errors.Conflict(
                what + f"UID in precondition: {pre.uid}, UID in object meta: {meta.get('uid')}", target=target
            )
        if pre.resource_version and pre.resource_version != meta.get("resourceVersion"):
            raise errors.Conflict(
                what + f"ResourceVersion in precondition: {pre.resource_version}, "
                f"ResourceVersion in object meta: {meta.get('resourceVersion')}",
                target=target,
            )

    async def _delete_kv(
        self, rt: ResourceType, kv: storage.KeyValue, obj: dict[str, Any], *, dry_run: bool
    ) -> DeleteResult:
        meta = obj["metadata"]
        name = meta["name"]
        if meta.get("finalizers"):
            if meta.get("deletionTimestamp"):
                return DeleteResult(obj, deleted=False)
            marked = copy.deepcopy(obj)
            marked["metadata"]["deletionTimestamp"] = self.now()
            marked["metadata"]["deletionGracePeriodSeconds"] = 0
            if dry_run:
                return DeleteResult(marked, deleted=False)
            try:
                written = await self._store.update(kv.key, codec.encode(marked), expected_revision=kv.mod_revision)
            except storage.Conflict as exc:
                raise _LostRace(str(exc)) from exc
            except storage.StorageError as exc:
                raise errors.from_storage_error(exc, plural=rt.plural, group=rt.group, name=name) from exc
            marked["metadata"]["resourceVersion"] = str(written.mod_revision)
            return DeleteResult(marked, deleted=False)
        if dry_run:
            return DeleteResult(obj, deleted=True)
        try:
            deleted = await self._store.delete(kv.key, expected_revision=kv.mod_revision)
        except storage.Conflict as exc:
            raise _LostRace(str(exc)) from exc
        except storage.StorageError as exc:
            raise errors.from_storage_error(exc, plural=rt.plural, group=rt.group, name=name) from exc
        meta["resourceVersion"] = str(deleted.mod_revision)
        if rt.namespaced:
            await self._namespace_content_deleted(meta["namespace"])
        return DeleteResult(obj, deleted=True)

    # --- internals: namespaces --------------------------------------------------------

    async def _namespace_state(self, name: str) -> _NamespaceState:
        cached = self._namespaces.get(name)
        if cached is not None and cached.expires > time.monotonic():
            return cached
        pending = self._namespace_reads.get(name)
        if pending is not None:
            return await asyncio.shield(pending)
        read = asyncio.ensure_future(self._read_namespace_state(name))
        self._namespace_reads[name] = read
        read.add_done_callback(lambda _: self._namespace_reads.pop(name, None))
        return await asyncio.shield(read)

    async def _read_namespace_state(self, name: str) -> _NamespaceState:
        assert self._namespace_type is not None
        now = time.monotonic()
        try:
            kv = await self._store.get(self._namespace_type.key(namespace=None, name=name))
        except storage.NotFound:
            state = _NamespaceState(exists=False, terminating=False)
        except storage.StorageError as exc:
            raise errors.from_storage_error(exc, plural="namespaces", group="", name=name) from exc
        else:
            ns = codec.decode(kv)
            terminating = bool(ns["metadata"].get("deletionTimestamp"))
            state = _NamespaceState(exists=True, terminating=terminating)
        # Only an existing, active namespace is cached: creation must see a new one at once.
        if state.exists and not state.terminating:
            state.expires = now + self._namespace_cache_seconds
            self._namespaces[name] = state
        return state

    async def _require_namespace(self, rt: ResourceType, namespace: str, name: str) -> None:
        if self._namespace_type is None:
            return
        state = await self._namespace_state(namespace)
        if not state.exists:
            raise errors.not_found(plural="namespaces", group="", name=namespace)
        if state.terminating:
            raise errors.Forbidden(
                f'{rt.qualified()} "{name}" is forbidden: unable to create new content in namespace '
                f"{namespace} because it is being terminated",
                target=errors.Target(name=name, group=rt.group, kind=rt.plural),
            )

    async def _delete_namespace(self, kv: storage.KeyValue, ns: dict[str, Any], *, dry_run: bool) -> DeleteResult:
        assert self._namespace_type is not None
        rt = self._namespace_type
        name = ns["metadata"]["name"]
        if name in SYSTEM_NAMESPACES:
            raise errors.Forbidden(
                f'namespaces "{name}" is forbidden: this namespace may not be deleted',
                target=errors.Target(name=name, kind="namespaces"),
            )
        if dry_run:
            return DeleteResult(ns, deleted=False)
        self._namespaces.pop(name, None)
        if not ns["metadata"].get("deletionTimestamp"):
            ns = copy.deepcopy(ns)
            ns["metadata"]["deletionTimestamp"] = self.now()
            ns["metadata"]["deletionGracePeriodSeconds"] = 0
            ns.setdefault("status", {})["phase"] = "Terminating"
            try:
                written = await self._store.update(kv.key, codec.encode(ns), expected_revision=kv.mod_revision)
            except storage.Conflict as exc:
                raise _LostRace(str(exc)) from exc
            except storage.StorageError as exc:
                raise errors.from_storage_error(exc, plural=rt.plural, group="", name=name) from exc
            ns["metadata"]["resourceVersion"] = str(written.mod_revision)
        for content_type in self._registry.namespaced_types():
            await self._delete_all_in(content_type, name)
        finished = await self._finish_namespace(name)
        return DeleteResult(finished or ns, deleted=finished is not None)

    async def _delete_all_in(self, rt: ResourceType, namespace: str) -> None:
        listed = await self._store_call(rt, "", self._store.list(rt.key_prefix(namespace)))
        for kv in listed.items:
            obj = codec.decode(kv)
            for _attempt in range(PATCH_RETRIES):
                try:
                    await self._delete_kv(rt, kv, obj, dry_run=False)
                    break
                except _LostRace:
                    try:
                        kv = await self._store.get(kv.key)
                    except storage.NotFound:
                        break
                    obj = codec.decode(kv)
                except errors.NotFound:
                    break

    async def _namespace_is_empty(self, namespace: str) -> bool:
        for rt in self._registry.namespaced_types():
            listed = await self._store_call(rt, "", self._store.list(rt.key_prefix(namespace), limit=1))
            if listed.items:
                return False
        return True

    async def _finish_namespace(self, name: str) -> dict[str, Any] | None:
        """Remove a terminating namespace once it is empty; return it when removed."""
        assert self._namespace_type is not None
        if not await self._namespace_is_empty(name):
            return None
        key = self._namespace_type.key(namespace=None, name=name)
        try:
            kv = await self._store.get(key)
            ns = codec.decode(kv)
            if not ns["metadata"].get("deletionTimestamp"):
                return None
            deleted = await self._store.delete(key, expected_revision=kv.mod_revision)
        except (storage.NotFound, storage.Conflict):
            return None
        except storage.StorageError as exc:
            raise errors.from_storage_error(exc, plural="namespaces", group="", name=name) from exc
        ns["metadata"]["resourceVersion"] = str(deleted.mod_revision)
        self._namespaces.pop(name, None)
        logger.debug("namespace finalized", extra={"namespace": name})
        return ns

    async def _namespace_content_deleted(self, namespace: str) -> None:
        if self._namespace_type is None:
            return
        state = await self._namespace_state(namespace)
        if state.exists and state.terminating:
            await self._finish_namespace(namespace)


# --- helpers ----------------------------------------------------------------------------


async def _next_event(events: AsyncIterator[storage.WatchEvent]) -> storage.WatchEvent | None:
    try:
        return await anext(events)
    except StopAsyncIteration:
        return None


def _spec_of(obj: dict[str, Any]) -> dict[str, Any]:
    """Everything that counts as "spec" for generation: all but metadata and status."""
    return {key: value for key, value in obj.items() if key not in ("metadata", "status")}


def _without_resource_version(obj: dict[str, Any]) -> dict[str, Any]:
    meta = {k: v for k, v in obj["metadata"].items() if k != "resourceVersion"}
    return {**obj, "metadata": meta}


def _encode_continue(revision: int, start: str, prefix: str) -> str:
    token = {"v": _CONTINUE_VERSION, "rv": revision, "start": start.removeprefix(prefix)}
    return base64.urlsafe_b64encode(codec.dumps(token)).decode().rstrip("=")


def _decode_continue(token: str, prefix: str) -> tuple[int, str]:
    try:
        raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
        data = codec.loads(raw)
        revision = int(data["rv"])
        start = str(data["start"])
        if data.get("v") != _CONTINUE_VERSION or revision <= 0 or start.startswith("/") or ".." in start:
            raise ValueError(token)
    except (ValueError, KeyError, TypeError, binascii.Error) as exc:
        raise errors.BadRequest("continue key is not valid: the continue token is malformed") from exc
    return revision, prefix + start
