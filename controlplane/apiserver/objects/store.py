"""The façade of the object layer: :class:`ObjectStore`, which the HTTP handlers and every
in-process consumer (hub controllers, simulated member clusters, reports) call.

It holds the store, the registry and the clock, and hands each call to the module of its
concern: :mod:`.reading` (get, list pages), :mod:`.writing` (create, update, patch),
:mod:`.deleting`, :mod:`.events` (watch), :mod:`.scale` and :mod:`.namespaces`. Calls take
and return object dicts; the ``*_encoded`` twins give the HTTP layer the stored JSON
without decoding it. Errors raised are the ``errors.ApiError`` tree.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable
from datetime import datetime
from functools import partial
from typing import Any, Unpack

from controlplane.apis.apiextensions.builtin import is_view
from controlplane.apis.kube.field import go_printed
from controlplane.apis.kube.namespaces import SYSTEM_NAMESPACES
from controlplane.apis.untyped import dig
from controlplane.apiserver import codec, errors
from controlplane.apiserver.admission import AdmitWrite, CheckCreate, WebhookCalls
from controlplane.apiserver.allocating import Allocations
from controlplane.apiserver.objects.aliases import merge_alias_storage
from controlplane.apiserver.objects.body_kind import checked_body
from controlplane.apiserver.objects.deleting import Deleter
from controlplane.apiserver.objects.events import watch_events
from controlplane.apiserver.objects.namespaces import NamespaceLifecycle
from controlplane.apiserver.objects.reading import (
    check_read_revision,
    decode,
    decode_all,
    encoded,
    get_kv,
    list_page,
)
from controlplane.apiserver.objects.scale import (
    applied_scale,
    patched_scale,
    replicas_patch,
    require_scale,
    scale_of,
    scale_patch_type,
)
from controlplane.apiserver.objects.swapping import LostRace
from controlplane.apiserver.objects.values import (
    DeleteOptions,
    DeleteResult,
    EncodedList,
    FieldSelectorArg,
    LabelSelectorArg,
    ListArgs,
    ListOptions,
    ObjectEvent,
    ObjectList,
    Preconditions,
    WatchArgs,
    WatchOptions,
    WriteArgs,
    WriteOptions,
    format_time,
    utc_now,
)
from controlplane.apiserver.objects.versions import KindVersions
from controlplane.apiserver.objects.writing import PATCH_RETRIES, Writer
from controlplane.apiserver.offloading import is_large, pure
from controlplane.apiserver.patches import PatchType
from controlplane.apiserver.patching.scalefields import ReplicasPaths, replicas_path
from controlplane.apiserver.resources import Registry, ResourceType
from controlplane.apiserver.validation import DecodingError
from controlplane.gojson import go_json
from controlplane.storage import interface as storage
from controlplane.storage.recent import latest_seen


class ObjectStore:
    """Kubernetes object semantics over ``store`` for the kinds in ``registry``."""

    def __init__(
        self,
        store: storage.Store,
        registry: Registry,
        *,
        clock: Callable[[], datetime] = utc_now,
        namespace_cache_seconds: float = 2.0,
        garbage_collection: bool = False,
    ) -> None:
        """``garbage_collection``: a garbage collector runs over these objects (the hub's), so a
        delete puts on its finalizers (kube-apiserver's ``--enable-garbage-collector``); without
        one (a simulated member) Foreground and Orphan delete as Background does."""
        self._store = store
        self._registry = registry
        self._clock = clock
        self._namespaces = NamespaceLifecycle(store, registry, cache_seconds=namespace_cache_seconds)
        self._writer = Writer(store, self._namespaces, now=self.now)
        self._writer.versions = KindVersions(registry)
        self._deleter = Deleter(store, self._namespaces, now=self.now, garbage_collection=garbage_collection)

    @property
    def store(self) -> storage.Store:
        return self._store

    @property
    def registry(self) -> Registry:
        return self._registry

    @property
    def versions(self) -> KindVersions:
        """The kinds served at several versions, for the managedFields of writes made in one of them."""
        return self._writer.versions

    def now(self) -> str:
        return format_time(self._clock())

    def check_creates(self, check: CheckCreate) -> None:
        """Await ``check`` for every create from now on, HTTP and in-process, dry runs included:
        an admission plugin that reads other objects (:data:`CheckCreate`)."""
        self._writer.create_checks.append(check)

    def admit_writes(self, admit: AdmitWrite) -> None:
        """Await ``admit`` for every create and main-resource update from now on, HTTP and
        in-process, dry runs included (:data:`AdmitWrite`): the hub's quota admission."""
        self._writer.write_admissions.append(admit)

    def allocate_with(self, allocations: Allocations) -> None:
        """Ask ``allocations`` for the values every write takes from a shared pool, and tell it
        of every delete (:mod:`controlplane.apiserver.allocating`): the hub's Service addresses."""
        self._writer.allocations = allocations
        self._deleter.allocations = allocations

    async def bootstrap(self) -> None:
        """Move objects of types now served under two groups to their shared storage and create
        the namespaces that always exist (idempotent; call at startup)."""
        await merge_alias_storage(self._store, self._registry)
        namespace_type = self._namespaces.type
        if namespace_type is None:
            return
        for name in SYSTEM_NAMESPACES:
            with contextlib.suppress(errors.AlreadyExists):
                await self.create(
                    namespace_type, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}
                )

    # --- reads ------------------------------------------------------------------------

    async def get(
        self, rt: ResourceType, *, namespace: str | None = None, name: str, resource_version: str | None = None
    ) -> dict[str, Any]:
        """The object (not older than ``resource_version``, when given: see :func:`check_read_revision`)."""
        await check_read_revision(self._store, rt, resource_version, name=name)
        return decode(rt, await get_kv(self._store, rt, namespace=namespace, name=name))

    async def get_latest_seen(self, rt: ResourceType, *, namespace: str | None = None, name: str) -> dict[str, Any]:
        """The object as this hub last saw it (its own writes and reads, its watches), without
        a read from etcd when it has; else :meth:`get`. Another process may have written it
        since: for callers whose writes are compare-and-swaps on the revision they read (a
        stale copy loses that race and is read again), such as the hub's own controllers."""
        if not rt.namespaced or namespace:
            kv = latest_seen(self._store, rt.key(namespace=namespace, name=name))
            if kv is not None:
                return decode(rt, kv)
        return await self.get(rt, namespace=namespace, name=name)

    async def get_encoded(
        self, rt: ResourceType, *, namespace: str | None = None, name: str, resource_version: str | None = None
    ) -> bytes:
        await check_read_revision(self._store, rt, resource_version, name=name)
        return encoded(rt, await get_kv(self._store, rt, namespace=namespace, name=name))

    async def get_sized(self, rt: ResourceType, *, namespace: str | None = None, name: str) -> tuple[dict[str, Any], int]:
        """:meth:`get` and the size of the object as stored (whether a write of it is large:
        :mod:`.offloading`)."""
        kv = await get_kv(self._store, rt, namespace=namespace, name=name)
        return decode(rt, kv), len(kv.value)

    async def list(self, rt: ResourceType, *, namespace: str | None = None, **options: Unpack[ListArgs]) -> ObjectList:
        page = await list_page(self._store, rt, namespace, ListOptions(**options))
        items = await decode_all(rt, page.kvs, page.objects)
        return ObjectList(items, str(page.revision), page.continue_token, page.remaining_item_count)

    async def list_encoded(
        self, rt: ResourceType, *, namespace: str | None = None, **options: Unpack[ListArgs]
    ) -> EncodedList:
        page = await list_page(self._store, rt, namespace, ListOptions(**options))
        return EncodedList(
            page.kvs, str(page.revision), page.continue_token, page.remaining_item_count, encode=partial(encoded, rt)
        )

    # --- writes -----------------------------------------------------------------------

    async def create(
        self, rt: ResourceType, obj: dict[str, Any], *, namespace: str | None = None, **options: Unpack[WriteArgs]
    ) -> dict[str, Any]:
        """Create ``obj``; raise AlreadyExists, Invalid, or NotFound for a missing namespace.

        ``validate`` (admission) sees the final object before it is stored.
        """
        write = WriteOptions(**options)
        owned = await pure(is_large(write.body_bytes), checked_body, rt, obj, namespace=namespace)
        created, _ = await self._writer.create_owned(rt, owned, write)
        return created

    async def create_encoded(
        self, rt: ResourceType, obj: dict[str, Any], *, namespace: str | None = None, **options: Unpack[WriteArgs]
    ) -> bytes:
        """:meth:`create` for the HTTP layer: the created object as JSON, with its resourceVersion.

        ``obj`` is handed over (a freshly parsed request body): it is changed in place
        instead of copied. The answer is the stored JSON itself, encoded once for etcd.
        """
        created, stored = await self._writer.create_owned(
            rt, checked_body(rt, obj, namespace=namespace, copy_body=False, from_request=True), WriteOptions(**options)
        )
        return codec.dumps(created) if stored is None else encoded(rt, stored)

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
        return await self._writer.update(
            rt, obj, namespace=namespace, name=name, subresource=subresource, options=WriteOptions(**options)
        )

    async def update_handed_over(
        self,
        rt: ResourceType,
        obj: dict[str, Any],
        *,
        namespace: str | None = None,
        name: str | None = None,
        subresource: str | None = None,
        **options: Unpack[WriteArgs],
    ) -> dict[str, Any]:
        """:meth:`update` for the HTTP layer: ``obj`` is handed over (a freshly parsed request
        body) and changed in place instead of copied."""
        return await self._writer.update(
            rt, obj, namespace=namespace, name=name, subresource=subresource, options=WriteOptions(**options),
            handed_over=True,
        )

    async def update_status(self, rt: ResourceType, obj: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        """``update(..., subresource="status")``: write only ``.status``."""
        return await self.update(rt, obj, subresource="status", **kwargs)

    async def update_with_status(
        self,
        rt: ResourceType,
        obj: dict[str, Any],
        *,
        status_of: Callable[[dict[str, Any]], Any] | None = None,
        **options: Unpack[WriteArgs],
    ) -> dict[str, Any]:
        """:meth:`update` and :meth:`update_status` of ``obj`` as one write (one revision, one
        watch event); ``status_of`` computes the status from the main update's result
        (:meth:`Writer.update_with_status`)."""
        return await self._writer.update_with_status(rt, obj, status_of=status_of, options=WriteOptions(**options))

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
        return await self._writer.patch(
            rt, namespace=namespace, name=name, patch_type=patch_type, patch=patch, subresource=subresource,
            force=force, options=WriteOptions(**options),
        )

    # --- scale subresource --------------------------------------------------------------

    async def get_scale(
        self, rt: ResourceType, *, namespace: str | None = None, name: str, resource_version: str | None = None
    ) -> dict[str, Any]:
        return scale_of(rt, await self.get(rt, namespace=namespace, name=name, resource_version=resource_version))

    async def update_scale(
        self,
        rt: ResourceType,
        scale: Any,
        *,
        namespace: str | None = None,
        name: str,
        dry_run: bool = False,
        field_manager: str | None = None,
        webhooks: WebhookCalls | None = None,
    ) -> dict[str, Any]:
        """Set the object's replicas from a Scale (its resourceVersion and uid, when given, are
        preconditions)."""
        patch = replicas_patch(rt, scale, name=name, sent_to=(namespace, name))
        uid = dig(scale, "metadata", "uid")
        updated = await self.patch(
            rt, namespace=namespace, name=name, patch_type=PatchType.MERGE, patch=patch,
            dry_run=dry_run, field_manager=field_manager, recorded_subresource="scale",
            expected_uid=str(uid) if uid else None, webhooks=webhooks,
        )
        return scale_of(rt, updated)

    def replicas_paths(self, rt: ResourceType) -> ReplicasPaths:
        """The replicas field of ``rt``'s kind by served apiVersion (None: no scale subresource)."""
        return {
            other.api_version: replicas_path(other.scale.spec_replicas) if other.scale is not None else None
            for other in self._registry
            if (other.group, other.kind) == (rt.group, rt.kind)
        }

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
        force: bool = False,
        webhooks: WebhookCalls | None = None,
    ) -> dict[str, Any]:
        """Patch the object's replicas through its Scale (a server-side apply: :meth:`apply_scale`)."""
        if patch_type is PatchType.APPLY:
            return await self.apply_scale(
                rt, namespace=namespace, name=name, patch=patch, field_manager=field_manager, force=force, dry_run=dry_run,
                webhooks=webhooks,
            )
        effective = scale_patch_type(patch_type)
        modified = errors.conflict_modified(plural=rt.plural, group=rt.group, name=name)
        for _attempt in range(PATCH_RETRIES):
            current = await self.get_scale(rt, namespace=namespace, name=name)
            patched = patched_scale(rt, current, effective, patch, field_manager=field_manager, now=self.now())
            try:
                return await self.update_scale(
                    rt, patched, namespace=namespace, name=name, dry_run=dry_run, field_manager=field_manager,
                    webhooks=webhooks,
                )
            except errors.Conflict as exc:
                # As kube's patch handler: a concurrent write is retried against the latest object,
                # unless the patch names the resourceVersion it was made against.
                named = patched["metadata"].get("resourceVersion") != current["metadata"].get("resourceVersion")
                if named or exc.message != modified.message:
                    raise
            except DecodingError as exc:  # kube decodes the patched Scale: its patch handler's 422
                strategic = patch_type is PatchType.STRATEGIC
                raise exc.in_patch(go_printed(patch) if strategic else go_json(patched), strategic=strategic) from exc
        raise modified

    async def apply_scale(
        self,
        rt: ResourceType,
        *,
        namespace: str | None = None,
        name: str,
        patch: Any,
        field_manager: str | None,
        force: bool = False,
        dry_run: bool = False,
        webhooks: WebhookCalls | None = None,
    ) -> dict[str, Any]:
        """Server-side apply of a Scale: the object's replicas set and owned by ``field_manager``
        (:func:`applied_scale`), re-reading and retrying when a concurrent write wins."""
        require_scale(rt)
        paths = self.replicas_paths(rt)
        options = WriteOptions(dry_run=dry_run, webhooks=webhooks, recorded_subresource="scale")
        for _attempt in range(PATCH_RETRIES):
            kv = await get_kv(self._store, rt, namespace=namespace, name=name)
            old = decode(rt, kv)
            new = applied_scale(
                rt, old, patch, replicas_paths=paths, manager=field_manager, force=force, now=self.now()
            )
            try:
                written = await self._writer.write_update(rt, kv, old, new, subresource=None, options=options)
            except LostRace:
                continue
            return scale_of(rt, written)
        raise errors.conflict_modified(plural=rt.plural, group=rt.group, name=name)

    # --- deletes ----------------------------------------------------------------------

    async def delete(
        self,
        rt: ResourceType,
        *,
        namespace: str | None = None,
        name: str,
        preconditions: Preconditions | None = None,
        propagation_policy: str | None = None,
        dry_run: bool = False,
        orphan_dependents: bool | None = None,
        webhooks: WebhookCalls | None = None,
    ) -> DeleteResult:
        """Delete now, or (with finalizers) mark with ``deletionTimestamp`` and keep.

        ``propagation_policy`` (or the legacy ``orphan_dependents``) puts on the garbage
        collector's finalizer as kube's store does (:mod:`.deleting`).
        """
        options = DeleteOptions(preconditions, propagation_policy, dry_run, orphan_dependents, webhooks)
        return await self._deleter.delete(rt, namespace=namespace, name=name, options=options)

    async def delete_collection(
        self,
        rt: ResourceType,
        *,
        namespace: str | None = None,
        label_selector: LabelSelectorArg = None,
        field_selector: FieldSelectorArg = None,
        dry_run: bool = False,
        propagation_policy: str | None = None,
        orphan_dependents: bool | None = None,
        webhooks: WebhookCalls | None = None,
    ) -> ObjectList:
        """Delete every matching object; returns them as they were left."""
        listed = await self.list(rt, namespace=namespace, label_selector=label_selector, field_selector=field_selector)
        out = []
        for obj in listed.items:
            meta = obj["metadata"]
            if is_view(obj):
                continue  # a CRD published for a kind served built in stays (see Deleter.delete)
            try:
                result = await self.delete(
                    rt, namespace=meta.get("namespace"), name=meta["name"], dry_run=dry_run,
                    propagation_policy=propagation_policy, orphan_dependents=orphan_dependents, webhooks=webhooks,
                )
            except errors.NotFound:
                continue
            out.append(result.object)
        return ObjectList(out, listed.resource_version)

    # --- watch ------------------------------------------------------------------------

    def watch(
        self, rt: ResourceType, *, namespace: str | None = None, **options: Unpack[WatchArgs]
    ) -> AsyncIterator[ObjectEvent]:
        """Events for objects of ``rt`` as kube's watch sends them (see :func:`.events.watch_events`)."""
        return watch_events(self._store, rt, namespace=namespace, options=WatchOptions(**options))
