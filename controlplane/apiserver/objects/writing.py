"""Writing objects: create, update and patch, with kube's rules for each.

:class:`Writer` turns a request's object into what is stored: it drops or keeps the
server-owned metadata (uid, creationTimestamp, generation, resourceVersion…), draws a
name for ``generateName``, keeps ``.status`` or only changes it (the status
subresource), sets ``generation`` and bumps it when the spec changes (for the kinds kube keeps
one for: :attr:`ResourceType.keeps_generation`), records ``managedFields``,
applies the four patch types (re-reading and retrying when a concurrent write wins the
compare-and-swap, as an update naming no resourceVersion does), runs admission, and honours dry run. A write whose object has a
``deletionTimestamp`` and no finalizers left deletes it (a namespace: none in its
``spec.finalizers`` either). Creating in a namespace asks
:class:`~controlplane.apiserver.objects.namespaces.NamespaceLifecycle` whether the
namespace exists and accepts content. What an update keeps of the stored object is
:mod:`~controlplane.apiserver.objects.merging`'s.
"""

from __future__ import annotations

import copy
import dataclasses
import secrets
import uuid
from collections.abc import Callable
from functools import partial
from typing import Any

from controlplane.apis.kube.field import go_printed
from controlplane.apiserver import errors
from controlplane.apiserver.admission import (
    AdmitWrite,
    CheckCreate,
    Operation,
    WriteAttributes,
)
from controlplane.apiserver.allocating import NOTHING_RESERVED, Allocations, NoAllocations, stored_with
from controlplane.apiserver.nullpruning import prune_nulls
from controlplane.apiserver.objects.admitting import mutated, view_update, webhook_request
from controlplane.apiserver.objects.body_decoding import checked_warned, decoded_dropped
from controlplane.apiserver.objects.body_kind import checked_body, status_request
from controlplane.apiserver.objects.kind_admission import check_against_others, webhooks_admit, webhooks_deny
from controlplane.apiserver.objects.merging import (
    SERVER_OWNED_METADATA,
    merged,
    refuse_undecodable_server_times,
    spec_changed,
    unchanged,
)
from controlplane.apiserver.objects.mutated_updates import merged_body, mutated_update
from controlplane.apiserver.objects.namespaces import NamespaceLifecycle
from controlplane.apiserver.objects.reading import (
    check_preconditions,
    decode,
    get_kv,
    in_use,
    parse_update_resource_version,
    served,
    store_call,
    stored_form,
)
from controlplane.apiserver.objects.revisions import (
    VersionPrecondition,
    known_revision,
    names_no_version,
    version_precondition,
)
from controlplane.apiserver.objects.scale import check_uid_precondition
from controlplane.apiserver.objects.swapping import LostRace, delete_stored, swap_call
from controlplane.apiserver.objects.values import Preconditions, WriteOptions
from controlplane.apiserver.objects.versions import KindVersions
from controlplane.apiserver.offloading import is_large, pure
from controlplane.apiserver.patches import PatchType, apply_patch, check_apply_request, record_update
from controlplane.apiserver.resources import Registry, ResourceType
from controlplane.apiserver.validation import (
    DecodingError,
    FieldValidation,
    decoded_applied,
    new_unknown_fields,
    refuse_unknown_fields,
)
from controlplane.gojson import go_json
from controlplane.storage import interface as storage
from controlplane.storage.ledger import WriteReason, changed_fields, writing_because

#: How often a patch re-reads and retries after losing a compare-and-swap race; every
#: round one of the racing writers wins, so this bounds the writers racing on one object.
PATCH_RETRIES = 32
_GENERATE_NAME_CHARS = "bcdfghjklmnpqrstvwxz2456789"
_GENERATE_NAME_MAX_PREFIX = 58


#: No ``.status`` in the object written (the key is absent, which differs from an empty one).
_NO_STATUS: Any = object()


class Writer:
    """Creates, updates and patches objects in ``store``; ``now`` gives the timestamp to write."""

    def __init__(self, store: storage.Store, namespaces: NamespaceLifecycle, *, now: Callable[[], str]) -> None:
        self._store = store
        self._namespaces = namespaces
        self.now = now
        #: Awaited for every create, after ``options.validate`` and before the validating webhooks
        #: (see :data:`CheckCreate`).
        self.create_checks: list[CheckCreate] = []
        #: Awaited for every create and main-resource update, last (see :data:`AdmitWrite`).
        self.write_admissions: list[AdmitWrite] = []
        #: Asked for the values a write takes from a shared pool (a Service's cluster IP).
        self.allocations: Allocations = NoAllocations()
        #: The kinds served at several versions, whose managedFields entries are compared in theirs.
        self.versions = KindVersions(Registry())

    async def create_owned(
        self, rt: ResourceType, obj: dict[str, Any], options: WriteOptions
    ) -> tuple[dict[str, Any], storage.KeyValue | None]:
        """Create ``obj`` (this store's own copy, checked by :func:`checked_body`), drawing a name
        for ``generateName``; return the object and what was stored (None on dry run)."""
        options = options.sized()
        meta = obj["metadata"]
        generated = not meta.get("name") and bool(meta.get("generateName"))
        # Defaulting writes the name and uid into the object (a Job's labels): each attempt
        # at a generated name starts from the object as written.
        written = copy.deepcopy(obj) if generated else obj
        for attempt in range(3 if generated else 1):
            if generated:
                obj = copy.deepcopy(written)
                meta = obj["metadata"]
                prefix = str(meta["generateName"])[:_GENERATE_NAME_MAX_PREFIX]
                meta["name"] = prefix + "".join(secrets.choice(_GENERATE_NAME_CHARS) for _ in range(5))
            try:
                return await self._create_attempt(rt, obj, options)
            except errors.AlreadyExists:
                if not generated or attempt == 2:
                    raise
        raise AssertionError("unreachable")

    async def _check_against_stored(self, rt: ResourceType, obj: dict[str, Any]) -> None:
        """:func:`check_against_others` over the kind's other stored objects."""
        if rt.validate_against_stored is None and rt.admit_against_stored is None and rt.webhook_against_stored is None:
            return
        name = obj["metadata"]["name"]
        listed = await store_call(rt, name, self._store.list(rt.key_prefix(obj["metadata"].get("namespace"))))
        check_against_others(rt, obj, [o for o in (decode(rt, kv) for kv in listed.items) if o["metadata"]["name"] != name])

    async def _create_attempt(
        self, rt: ResourceType, obj: dict[str, Any], options: WriteOptions
    ) -> tuple[dict[str, Any], storage.KeyValue | None]:
        """One create attempt of ``obj``, which is this store's own (:func:`checked_body`'s) copy."""
        prune_nulls(rt, obj)  # as kube decodes a custom resource, before anything reads it
        meta = obj["metadata"]
        given_generation = meta.get("generation")
        refuse_undecodable_server_times(rt, meta)
        for key in SERVER_OWNED_METADATA:
            meta.pop(key, None)
        if not rt.keeps_generation and given_generation is not None:
            # kube's create sets a generation only where the kind's strategy does; it keeps
            # (and validates) one the request gives for the others.
            meta["generation"] = given_generation
        # kube decodes the whole body first: the status the create drops too.
        dropped = decoded_dropped(rt, obj, None, options.field_validation, status_write=False) if rt.has_status else []
        obj.pop("status", None)
        if rt.prepare_create is not None:
            rt.prepare_create(obj)
        # Before defaulting: a Job's generated selector names its uid.
        meta["uid"] = str(uuid.uuid4())
        if rt.prepare is not None:
            rt.prepare(obj)
        if rt.defaults is not None:
            rt.defaults(obj)
        if options.webhooks is not None:
            refuse_unknown_fields(rt, obj, None, options.field_validation)  # kube's decoding, before its admission
            obj = await mutated(rt, options, Operation.CREATE, obj, None, subresource=None)
            meta = obj["metadata"]
        # The kind's own webhooks validate, after the mutating ones (kube's order).
        webhooks_admit(rt, obj, field_validation=options.field_validation)
        checked = await pure(options.off_loop, checked_warned, rt, obj, options, dropped)  # a later refusal carries the warnings
        obj = checked.obj
        meta = obj["metadata"]
        await self._check_against_stored(rt, obj)
        if rt.namespaced:
            await self._namespaces.require(rt, meta["namespace"], meta["name"])
        now = self.now()
        meta["creationTimestamp"] = now
        if rt.keeps_generation:
            meta["generation"] = 1
        if options.field_manager:
            obj = await pure(options.off_loop, record_update, rt, None, obj, manager=options.field_manager, now=now)
        if options.warnings is not None and rt.warn is not None:
            options.warnings.extend(rt.warn(obj))
        if options.validate is not None:
            await options.validate(WriteAttributes(Operation.CREATE, rt, obj))
        for check in self.create_checks:
            await check(rt, obj)
        if options.webhooks is not None:  # they see what the hub's own plugins set (kube's order)
            await options.webhooks.validate(webhook_request(rt, options, Operation.CREATE, obj, None, subresource=None))
        for admit in self.write_admissions:
            await admit(WriteAttributes(Operation.CREATE, rt, obj, dry_run=options.dry_run))
        # kube's status store is a copy of the main one made before the main one's allocation hooks
        # were set: the Service a PUT of its status creates gets no cluster IP, node port or IP family.
        reserved = (NOTHING_RESERVED if options.recorded_subresource == "status"
                    else await self.allocations.on_create(rt, obj, dry_run=options.dry_run))
        key = rt.key(namespace=meta.get("namespace"), name=meta["name"])
        if options.dry_run:  # kube's dry-run storage refuses a name in use, as its create would
            if await in_use(self._store, rt, key, name=meta["name"]):
                raise errors.already_exists(plural=rt.plural, group=rt.group, name=meta["name"])
            return served(rt, obj), None
        kv: storage.KeyValue = await stored_with(
            reserved, store_call(rt, meta["name"], self._store.create(key, stored_form(rt, obj)))
        )
        if rt.conversion is not None:
            obj = decode(rt, kv)  # the answer is the stored object, converted back
        obj["metadata"]["resourceVersion"] = str(kv.mod_revision)
        if rt is self._namespaces.type:
            self._namespaces.forget(meta["name"])
        return obj, kv

    async def update(
        self,
        rt: ResourceType,
        obj: dict[str, Any],
        *,
        namespace: str | None,
        name: str | None,
        subresource: str | None,
        options: WriteOptions,
        handed_over: bool = False,
    ) -> dict[str, Any]:
        """Replace ``obj`` (CAS on ``metadata.resourceVersion`` when given; without one, where the
        kind allows it, re-read and tried again when a concurrent write wins).

        For kinds with a status subresource the main resource keeps the stored
        ``.status``; ``subresource="status"`` changes only ``.status``. With ``handed_over``
        (a freshly parsed request body) ``obj`` is changed in place instead of copied.
        """
        large = is_large(options.body_bytes)
        if rt.writes_status_only(subresource) and not handed_over:
            obj = checked_body(rt, status_request(obj), namespace=namespace, name=name, copy_body=False)
        else:
            obj = await pure(large, checked_body, rt, obj, namespace=namespace, name=name, copy_body=not handed_over, from_request=handed_over)
        # kube's store re-reads the object and tries again when its compare-and-swap loses, which
        # only an update naming no resourceVersion survives: its body is kept for the next try. It
        # reads the resourceVersion the mutating webhooks leave, on each try: they may drop it.
        unconditional = rt.unconditional_update and (
            options.webhooks is not None or names_no_version(obj["metadata"].get("resourceVersion"))
        )
        sent = await pure(large, copy.deepcopy, obj) if unconditional else None
        for attempt in range(PATCH_RETRIES if unconditional else 1):
            body = obj if sent is None or attempt == 0 else await pure(large, copy.deepcopy, sent)
            try:
                kv, old, version = await self._replaced(rt, body, options)
            except errors.NotFound:
                if subresource not in (None, "status") or options.on_create is None or not rt.create_on_update:
                    refuse_unknown_fields(rt, body, None, options.field_validation)  # kube decodes before its store reads
                    raise
                # A Service's status strategy is its main one but for the update: its store creates
                # (whatever the status handler's forceAllowCreate), as a create of the main resource
                # that admission sees made through the status (kube's handler's scope).
                if subresource:
                    body = copy.deepcopy(body)  # the status body shares the caller's spec
                    options = dataclasses.replace(options, recorded_subresource=subresource)
                return await self._created_on_update(rt, body, options, subresource=subresource)
            options = options.sized(kv)
            try:
                # A status write's managedFields are recorded by its caller. The hub's own status
                # writes send back the rest as they read it: only a request's is decoded whole.
                return await self._write_body(
                    rt, kv, old, body, subresource=subresource, options=options, version=version,
                    own_managed_fields=bool(subresource and options.recorded_managed_fields),
                    whole=handed_over or not rt.writes_status_only(subresource),
                )
            except LostRace:
                if not unconditional:
                    raise
        raise errors.conflict_modified(plural=rt.plural, group=rt.group, name=str(obj["metadata"]["name"]))

    async def _created_on_update(
        self, rt: ResourceType, obj: dict[str, Any], options: WriteOptions, *, subresource: str | None
    ) -> dict[str, Any]:
        """An update of a missing object of a kind whose strategy allows it (kube's
        ``AllowCreateOnUpdate``) creates it, as a create: its admission sees a CREATE, and the
        resourceVersion the request names is dropped as kube's store drops it (after reading it:
        one that does not parse is still its error), and a uid it names is kube's Conflict. One
        created meanwhile by another writer is updated instead, as kube's store retries its write
        on the object it then reads."""
        meta = obj["metadata"]
        if meta.get("uid"):  # kube's store checks it against the empty object it read
            check_preconditions(rt, {"metadata": {"name": meta["name"], "uid": ""}}, Preconditions(uid=str(meta["uid"])))
        given = meta.get("resourceVersion")
        if isinstance(given, str) and given:
            parse_update_resource_version(given)
        retry = copy.deepcopy(obj)
        try:
            created, _ = await self.create_owned(rt, obj, options)
        except errors.AlreadyExists:
            kv, old, version = await self._replaced(rt, retry, options)
            return await self._write_body(rt, kv, old, retry, subresource=subresource, options=options, version=version)
        if options.on_create is not None:
            options.on_create()
        return created

    async def patch(
        self,
        rt: ResourceType,
        *,
        namespace: str | None,
        name: str,
        patch_type: PatchType,
        patch: Any,
        subresource: str | None,
        force: bool,
        options: WriteOptions,
    ) -> dict[str, Any]:
        """Patch an object, re-reading and retrying when a concurrent write wins. A ``metadata.resourceVersion``
        inside the patch is a precondition. Server-side apply of a missing object creates it."""
        namespace = namespace if rt.namespaced else None
        write, field_manager = options, options.field_manager
        # Server-side apply records its own managedFields entry: its write must not add another.
        applied_write = dataclasses.replace(write, field_manager=None)
        large_body = is_large(write.body_bytes)
        if patch_type is PatchType.APPLY and isinstance(patch, dict):
            await pure(large_body, check_apply_request, rt, patch, manager=field_manager)  # before its fields are decoded, as kube
            decoded = await pure(large_body, decoded_applied, rt, patch, write.field_validation)
            patch = decoded.obj
            if write.warnings is not None:
                write.warnings.extend(decoded.warnings)
        for _attempt in range(PATCH_RETRIES):
            try:
                kv = await get_kv(self._store, rt, namespace=namespace, name=name)
            except errors.NotFound:
                if patch_type is not PatchType.APPLY or subresource:
                    raise
                applied = await self.versions.computed(rt, partial(
                    apply_patch, rt, None, patch_type, patch, manager=field_manager, force=force, now=self.now(),
                ), off_loop=large_body)
                applied = await pure(large_body, checked_body, rt, applied, namespace=namespace, name=name)
                created, _ = await self.create_owned(rt, applied, applied_write)
                if write.on_create is not None:
                    write.on_create()
                return created
            old = decode(rt, kv)
            check_uid_precondition(rt, old, write.expected_uid)
            large = is_large(write.body_bytes, len(kv.value))
            patched = await self.versions.computed(rt, partial(
                apply_patch, rt, old, patch_type, patch, manager=field_manager, force=force, now=self.now(),
                subresource=subresource, strict_decoding=write.field_validation is not FieldValidation.IGNORE,
            ), off_loop=large)
            patched = await pure(large, checked_body, rt, patched, namespace=namespace, name=name, named=True)
            write_options = dataclasses.replace(applied_write if patch_type is PatchType.APPLY else write, off_loop=large)
            try:
                try:
                    version = version_precondition(rt, kv, patched["metadata"].get("resourceVersion"), name=name,
                                                   options=write_options)
                except errors.ApiError:  # after kube's patcher decoded the patched object
                    refuse_unknown_fields(rt, patched, old, write_options.field_validation)
                    raise
                # A status write keeps the stored metadata, but for the applier's own entry.
                return await self._write_body(
                    rt, kv, old, patched, subresource=subresource, options=write_options, version=version,
                    own_managed_fields=patch_type is PatchType.APPLY and bool(subresource),
                )
            except LostRace:
                continue
            except DecodingError as exc:
                if patch_type is PatchType.APPLY:
                    raise
                strategic = patch_type is PatchType.STRATEGIC
                raise exc.in_patch(go_printed(patch) if strategic else go_json(patched), strategic=strategic) from exc
        raise errors.conflict_modified(plural=rt.plural, group=rt.group, name=name)

    async def update_with_status(
        self,
        rt: ResourceType,
        obj: dict[str, Any],
        *,
        status_of: Callable[[dict[str, Any]], Any] | None,
        options: WriteOptions,
    ) -> dict[str, Any]:
        """``obj``'s main resource as :meth:`update` writes it and its ``.status`` as the status
        subresource does, in one compare-and-swap on ``metadata.resourceVersion``: what the
        two writes in turn would store, with one revision and one watch event.

        ``status_of``, when given, is called with the object as its main update leaves it (its
        new ``generation`` included) and returns the status to write, handed over (None: the
        status as it is); otherwise ``obj``'s own ``.status`` is written. For the hub's own
        controllers, whose change of a workload or binding is often both (a finalizer and a
        condition, a placement and its decision); kinds without a status subresource take
        ``obj`` whole.
        """
        if not rt.has_status:
            return await self.update(rt, obj, namespace=None, name=None, subresource=None, options=options)
        if rt.conversion is not None:
            # Its storage keeps what each part of a write does not change (:func:`stored_form`).
            raise TypeError(f"{rt.api_version} is converted: write its object and its status in turn")
        obj = checked_body(rt, obj, namespace=None)
        incoming = obj.get("status", _NO_STATUS)  # before the main update's merge puts the stored one there
        kv, old, _ = await self._replaced(rt, obj, None)
        options = options.sized(kv)
        main = await self.prepared_update(rt, old, merged(rt, old, obj, subresource=None), subresource=None, options=options)
        status = status_of(main) if status_of is not None else incoming
        new = main
        if status is not None:
            request: dict[str, Any] = {"metadata": main["metadata"]}
            if status is not _NO_STATUS:
                request["status"] = status
            new = await self.prepared_update(
                rt, main, merged(rt, main, request, subresource="status"), subresource="status", options=options
            )
        if new is old:
            return old
        return await self.stored_update(rt, kv, old, new, subresource=None, options=options)

    async def _replaced(
        self, rt: ResourceType, body: dict[str, Any], options: WriteOptions | None
    ) -> tuple[storage.KeyValue, dict[str, Any], VersionPrecondition | None]:
        """The stored key-value and object an update of ``body`` replaces, and its resourceVersion
        precondition when that waits for mutating admission (:func:`version_precondition`); a
        Conflict when its ``uid`` names another object (kube's update takes a uid in the body as a
        precondition, checked as the object is read: a missing one is a 404 first). With
        ``options``, the body is a request's, which kube decodes before its store reads: under
        Strict, its unknown fields are refused before those refusals.

        An update made from a revision the hub has just seen skips the read: the
        compare-and-swap that follows fails on that revision as the read would have.
        """
        meta = body["metadata"]
        given = meta.get("resourceVersion")
        mutating = options is not None and options.webhooks is not None
        try:
            kv = known_revision(self._store, rt, meta, given, stale_conflicts=not mutating)
        except errors.Conflict:
            strict = options is not None and options.field_validation is FieldValidation.STRICT
            if strict and new_unknown_fields(rt, body, None):
                assert options is not None
                await self._refuse_unknown_fields(rt, body, options)
            raise
        kv = kv or await get_kv(self._store, rt, namespace=meta.get("namespace"), name=meta["name"])
        old = decode(rt, kv)
        try:
            if meta.get("uid"):
                check_preconditions(rt, old, Preconditions(uid=str(meta["uid"])))
            return kv, old, version_precondition(rt, kv, given, name=meta["name"], options=options)
        except errors.ApiError:
            if options is not None:
                refuse_unknown_fields(rt, body, old, options.field_validation)
            raise

    async def _refuse_unknown_fields(self, rt: ResourceType, body: dict[str, Any], options: WriteOptions) -> None:
        """:func:`refuse_unknown_fields` of ``body`` against the object stored now (those it holds
        already are not refused), for an update found stale without a read."""
        meta = body["metadata"]
        try:
            old: dict[str, Any] | None = decode(rt, await get_kv(
                self._store, rt, namespace=meta.get("namespace"), name=meta["name"]
            ))
        except errors.NotFound:
            old = None
        refuse_unknown_fields(rt, body, old, options.field_validation)

    async def _write_body(
        self, rt: ResourceType, kv: storage.KeyValue, old: dict[str, Any], body: dict[str, Any], *,
        subresource: str | None, options: WriteOptions, version: VersionPrecondition | None,
        own_managed_fields: bool = False, whole: bool = True,
    ) -> dict[str, Any]:
        """Write an update's ``body`` (the request's object, this write's own) over ``old``, merged
        with it (:func:`merged_body`): before the write's admission, or after the mutating webhooks
        when any may run, which see the body itself (:func:`mutated_update`). kube decodes the whole
        body before anything: what the merge drops (the status a main-resource update sends, all
        but the status of a status write) is decoded too (:func:`decoded_dropped`; with ``whole``),
        whatever webhooks exist."""
        status_write = rt.writes_status_only(subresource)
        dropped = decoded_dropped(rt, body, old, options.field_validation, status_write=status_write) if whole and (
            status_write or (subresource is None and rt.has_status)
        ) else []
        if options.webhooks is not None:
            return await self.write_update(rt, kv, old, body, subresource=subresource, options=options,
                                           version=version, own_managed_fields=own_managed_fields, dropped=dropped)
        new = merged_body(rt, old, body, subresource=subresource, own_managed_fields=own_managed_fields)
        return await self.write_update(rt, kv, old, new, subresource=subresource, options=options, version=version,
                                       dropped=dropped)

    async def write_update(
        self,
        rt: ResourceType,
        kv: storage.KeyValue,
        old: dict[str, Any],
        new: dict[str, Any],
        *,
        subresource: str | None,
        options: WriteOptions,
        version: VersionPrecondition | None = None,
        own_managed_fields: bool = False,
        dropped: list[str] | None = None,
    ) -> dict[str, Any]:
        prepared = await self.prepared_update(rt, old, new, subresource=subresource, options=options,
                                              version=version, own_managed_fields=own_managed_fields, dropped=dropped)
        if prepared is old:
            return old  # kube writes nothing for a no-op update
        return await self.stored_update(rt, kv, old, prepared, subresource=subresource, options=options)

    async def prepared_update(
        self,
        rt: ResourceType,
        old: dict[str, Any],
        new: dict[str, Any],
        *,
        subresource: str | None,
        options: WriteOptions,
        version: VersionPrecondition | None = None,
        own_managed_fields: bool = False,
        dropped: list[str] | None = None,
    ) -> dict[str, Any]:
        """``new`` as an update of ``old`` would store it (defaulted, validated, its generation
        and managedFields, admission run), or ``old`` itself when the update changes nothing.
        ``dropped``: the warnings of the body's part the update does not store (:func:`decoded_dropped`).
        When mutating webhooks may run, ``new`` can be the request's body itself, which they see
        and which is merged with ``old`` after them (:func:`mutated_update`, ``own_managed_fields``
        as :func:`merged_body` takes it). ``version``, the update's resourceVersion precondition,
        is checked once they have run."""
        if (kept := view_update(old, new, subresource=subresource)) is not None:
            return kept  # a CRD published for a kind served built in
        if options.webhooks is not None:
            new = await mutated_update(rt, old, new, subresource=subresource, options=options, version=version,
                                       own_managed_fields=own_managed_fields)
        else:
            prune_nulls(rt, new)
        if rt.prepare_update is not None and subresource is None:
            rt.prepare_update(new, old)
        if rt.prepare is not None:
            rt.prepare(new)
        if rt.defaults is not None and options.webhooks is None:  # the webhooks' object is defaulted
            rt.defaults(new)
        if subresource is None and not webhooks_deny(rt, old):
            # The kind's own webhooks validate, after the mutating ones and the resourceVersion's check.
            # An object stored before the rule (a policy with a long name) stays changeable and deletable.
            webhooks_admit(rt, new, old, field_validation=options.field_validation)
        status_write = rt.writes_status_only(subresource)
        checked = await pure(  # in the body's order: its metadata and spec, then its status
            options.off_loop, checked_warned, rt, new, options, dropped, dropped_first=status_write,
            old=old, status_only=status_write, subresource=subresource,
        )
        new = checked.obj
        if subresource is None:
            await self._check_against_stored(rt, new)
        meta = new["metadata"]
        old_meta = old["metadata"]
        if subresource is None and rt.keeps_generation and spec_changed(rt, old, new):
            meta["generation"] = int(old_meta.get("generation") or 0) + 1
        if options.warnings is not None and rt.warn is not None and subresource is None:
            options.warnings.extend(rt.warn(new))
        if unchanged(old, new):
            return old  # kube writes nothing for a no-op update
        if options.field_manager:
            recorded = partial(record_update, rt, old, new, subresource=subresource or options.recorded_subresource)
            new = await self.versions.computed(rt, partial(recorded, manager=options.field_manager, now=self.now()),
                                               dropping=new, off_loop=options.off_loop)
        if options.validate is not None:
            await options.validate(WriteAttributes(Operation.UPDATE, rt, new, old=old, subresource=subresource))
        if options.webhooks is not None:
            await options.webhooks.validate(webhook_request(rt, options, Operation.UPDATE, new, old, subresource=subresource))
        if subresource is None:
            for admit in self.write_admissions:
                await admit(WriteAttributes(Operation.UPDATE, rt, new, old=old, dry_run=options.dry_run,
                                            scale=options.recorded_subresource == "scale"))
        return new

    async def stored_update(
        self,
        rt: ResourceType,
        kv: storage.KeyValue,
        old: dict[str, Any],
        new: dict[str, Any],
        *,
        subresource: str | None,
        options: WriteOptions,
    ) -> dict[str, Any]:
        """Store ``new`` (from :meth:`prepared_update`) over ``old``, stored as ``kv``: a
        compare-and-swap on its revision, or the delete of an object whose last finalizer went."""
        meta = new["metadata"]
        name = meta["name"]
        key = kv.key
        deleting = bool(meta.get("deletionTimestamp") and not meta.get("finalizers"))
        if rt is self._namespaces.type and (new.get("spec") or {}).get("finalizers"):
            deleting = False  # kube's ShouldDeleteNamespaceDuringUpdate: its spec.finalizers hold it too
        # A status write changes no allocated value (and gives none to an object stored without).
        allocating = not deleting and subresource is None
        reserved = await self.allocations.on_update(rt, old, new, dry_run=options.dry_run) if allocating else None
        if options.dry_run:
            return served(rt, new)
        if deleting:
            await delete_stored(self._store, rt, kv, new, allocations=self.allocations, namespaces=self._namespaces)
            return new
        with writing_because(WriteReason(subresource or "", partial(changed_fields, old, new))):
            stored = stored_form(rt, new, replacing=kv, part=subresource)
            update = self._store.update(key, stored, expected_revision=kv.mod_revision)
            written = await swap_call(rt, name, update if reserved is None else stored_with(reserved, update))
        if subresource == "finalize" and meta.get("deletionTimestamp"):
            await self._namespaces.finish(name)  # emptied already: ``kubernetes`` alone no longer holds it
        if rt.conversion is not None:
            return decode(rt, written)  # the answer is the stored object, converted back
        meta["resourceVersion"] = str(written.mod_revision)
        return new
