"""Reading objects: one by key, or a page of a list with selectors and continue tokens.

Functions over a :class:`~controlplane.storage.interface.Store` that the rest of the
object layer shares: :func:`store_call` (a storage error becomes the API's error for the
resource), :func:`get_kv`, selector and resourceVersion parsing, and :func:`list_page`,
which reads a list in chunks until ``limit`` objects match and hands back kube's opaque
continue token (``meta.k8s.io/v1``, the revision and the key to resume after). Nothing
is decoded unless a selector needs it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from controlplane.apis.kube.selectors import (
    FieldSelector,
    LabelSelector,
    SelectorError,
    parse_field_selector,
    parse_label_selector,
)
from controlplane.apiserver import codec, errors
from controlplane.apiserver.decoding import INT64_MAX, UINT64_MAX
from controlplane.apiserver.objects import continuation
from controlplane.apiserver.objects.values import (
    FieldSelectorArg,
    LabelSelectorArg,
    ListOptions,
    Preconditions,
)
from controlplane.apiserver.resources import ResourceType
from controlplane.gojson import go_quote
from controlplane.storage import interface as storage


@dataclass(slots=True)
class Page:
    """One page of a list: the stored items and, when selectors were given, their decoded objects."""

    kvs: list[storage.KeyValue]
    #: Decoded objects for the kvs, when selectors made decoding necessary.
    objects: list[dict[str, Any] | None]
    revision: int
    continue_token: str
    #: kube's ``remainingItemCount``: the objects after this page, known only without selectors.
    remaining_item_count: int | None = None


async def store_call(rt: ResourceType, name: str, awaitable: Any) -> Any:
    """Await a store call; a storage error becomes the API's error for ``rt``/``name``."""
    try:
        return await awaitable
    except storage.StorageError as exc:
        raise errors.from_storage_error(exc, plural=rt.plural, group=rt.group, name=name) from exc


async def get_kv(store: storage.Store, rt: ResourceType, *, namespace: str | None, name: str) -> storage.KeyValue:
    """The stored object ``name`` (NotFound when missing; BadRequest without a needed namespace)."""
    if rt.namespaced and not namespace:
        raise errors.BadRequest(f"{rt.plural} is namespaced: a namespace is required to address {name!r}")
    kv: storage.KeyValue = await store_call(
        rt, name, store.get(rt.key(namespace=namespace, name=name))
    )
    return kv


#: The last revision the store can hold (etcd's are int64).
LAST_REVISION = INT64_MAX

#: How long a read not older than a revision waits for the store to reach it (kube's cacher
#: ``blockTimeout``) before answering ``Too large resource version``.
FRESH_WAIT_SECONDS = 3.0


async def check_read_revision(store: storage.Store, rt: ResourceType, resource_version: str | None, *, name: str) -> None:
    """A get at ``resource_version`` reads an object not older than it, as kube's cache serves one
    (:func:`wait_until_fresh`); one that does not parse is the list's 400. Unset or ``0``: any."""
    if not resource_version or resource_version == "0":
        return
    await wait_until_fresh(store, rt, parse_resource_version(resource_version), name=name)


async def wait_until_fresh(store: storage.Store, rt: ResourceType, wanted: int, *, name: str = "") -> None:
    """Return once the store has reached revision ``wanted``, waiting up to
    :data:`FRESH_WAIT_SECONDS` as kube's ``waitUntilFreshAndBlock`` does; then kube's 504
    ``Too large resource version``. The wait is a store watch from ``wanted``: its first event
    is the write that reaches it."""
    current: int = await store_call(rt, name, store.current_revision())
    if wanted <= current:
        return
    events = store.watch("", from_revision=store_revision(wanted))
    try:
        async with asyncio.timeout(FRESH_WAIT_SECONDS):
            await anext(events)
        return
    except (TimeoutError, StopAsyncIteration, storage.StorageError):
        pass  # the store's own revision decides below
    finally:
        aclose = getattr(events, "aclose", None)
        if aclose is not None:
            await aclose()
    current = await store_call(rt, name, store.current_revision())
    if wanted > current:
        raise errors.too_large_resource_version(wanted, current)


async def in_use(store: storage.Store, rt: ResourceType, key: str, *, name: str) -> bool:
    """Whether an object is stored at ``key``."""
    try:
        await store_call(rt, name, store.get(key))
    except errors.NotFound:
        return False
    return True


def decode(rt: ResourceType, kv: storage.KeyValue) -> dict[str, Any]:
    """The object stored in ``kv`` as served: with its resourceVersion and kube's defaults
    (applied here to an object not stored with them, as kube defaults what it decodes), and
    converted from its storage version when ``rt`` is another version of its kind."""
    if keeps_stored_version(rt):
        return _stored_object(rt, kv, None)
    obj = _stored_object(rt, kv, rt.api_version if rt.conversion is None else rt.storage_api_version)
    return obj if rt.conversion is None else rt.conversion.from_storage(obj)


def keeps_stored_version(rt: ResourceType) -> bool:
    """Whether ``rt``'s objects are read with the apiVersion they are stored as: a CRD version
    served through its conversion webhook, which converts each from that version
    (:mod:`controlplane.apiserver.crd.converted`)."""
    return rt.custom is not None and rt.custom.conversion_webhook is not None


def _stored_object(rt: ResourceType, kv: storage.KeyValue, api_version: str | None) -> dict[str, Any]:
    """The object in ``kv`` with ``api_version`` (None: the one it is stored with), defaulted as
    kube defaults what it decodes."""
    obj = codec.decode(kv, api_version)
    if rt.defaults_on_read is not None and not codec.is_defaulted(kv):
        rt.defaults_on_read(obj)
    return obj


def _storage_form(rt: ResourceType, obj: dict[str, Any]) -> dict[str, Any]:
    """``obj`` of a converted version in its storage version, defaulted as that."""
    assert rt.conversion is not None
    converted = rt.conversion.to_storage(obj)
    if rt.defaults_on_read is not None:
        rt.defaults_on_read(converted)
    return converted


#: Objects decoded between two turns of the event loop in :func:`decode_all`.
DECODE_TURN = 256


async def decode_all(
    rt: ResourceType, kvs: Sequence[storage.KeyValue], objects: Sequence[dict[str, Any] | None] | None = None
) -> list[dict[str, Any]]:
    """:func:`decode` of every kv (or its already decoded object, when ``objects`` has one),
    giving the event loop a turn every :data:`DECODE_TURN` objects: a list of thousands of
    bindings or Works decoded in one go held the hub's loop for seconds."""
    out: list[dict[str, Any]] = []
    for start in range(0, len(kvs), DECODE_TURN):
        if start:
            await asyncio.sleep(0)
        for index in range(start, min(start + DECODE_TURN, len(kvs))):
            obj = objects[index] if objects is not None else None
            out.append(obj if obj is not None else decode(rt, kvs[index]))
    return out


def encoded(rt: ResourceType, kv: storage.KeyValue) -> bytes:
    """:func:`decode` as JSON, spliced from the stored bytes unparsed when nothing is to default
    or convert."""
    if rt.conversion is None and (rt.defaults_on_read is None or codec.is_defaulted(kv)):
        return codec.with_resource_version(kv, None if keeps_stored_version(rt) else rt.api_version)
    return codec.dumps(decode(rt, kv))


def stored_form(
    rt: ResourceType, obj: dict[str, Any], *, replacing: storage.KeyValue | None = None, part: str | None = None
) -> bytes:
    """What is written for ``obj``, an object of ``rt`` that went through its defaulting.

    When ``rt`` is another version of its kind than the stored one, ``obj`` is converted to that
    version (and defaulted as it); a write ``replacing`` a stored object takes from the conversion
    only the ``part`` it changes (``None``: all but the status, ``"status"``: the status,
    ``"metadata"``) and keeps the rest as stored, as kube's strategies keep its internal object's:
    converting back and forth is not lossless (v1 puts the CPU target last, its status quantities
    are not optional)."""
    if rt.conversion is not None:
        obj = _converted_for_storage(rt, obj, replacing, part)
    return codec.encode(obj, rt.storage_api_version, defaulted=rt.defaults_on_read is not None)


def _converted_for_storage(
    rt: ResourceType, obj: dict[str, Any], replacing: storage.KeyValue | None, part: str | None
) -> dict[str, Any]:
    converted = _storage_form(rt, obj)
    if replacing is None:
        return converted
    stored = _stored_object(rt, replacing, rt.storage_api_version)
    if part is None:
        out = {k: v for k, v in converted.items() if k != "status"}
        if "status" in stored:
            out["status"] = stored["status"]
        return out
    out = {**stored, "metadata": converted["metadata"]}
    if part == "status":
        out.pop("status", None)
        if "status" in converted:
            out["status"] = converted["status"]
    return out


def served(rt: ResourceType, obj: dict[str, Any]) -> dict[str, Any]:
    """``obj`` (of ``rt``, defaulted) as a read of it once stored serves it: itself, unless ``rt``
    converts (then what its storage form converts back to). The answer of a dry run."""
    if rt.conversion is None:
        return obj
    return rt.conversion.from_storage(_storage_form(rt, obj))


def label_selector_of(selector: LabelSelectorArg) -> LabelSelector:
    """``selector``, parsed when it is text (kube's 400 when that does not parse)."""
    if isinstance(selector, LabelSelector):
        return selector
    try:
        return parse_label_selector(selector)
    except SelectorError as exc:
        raise errors.bad_selector(exc) from None


def field_selector_of(rt: ResourceType, selector: FieldSelectorArg) -> FieldSelector:
    """``selector``, parsed over ``rt``'s field labels when it is text (kube's 400 when that does
    not parse or names a field ``rt`` does not offer)."""
    if isinstance(selector, FieldSelector):
        return selector
    try:
        return parse_field_selector(selector, rt.field_selectors, refuse=rt.field_label_refusal)
    except SelectorError as exc:
        raise errors.bad_selector(exc) from None


def parse_resource_version(value: str) -> int:
    """``?resourceVersion`` as kube's versioner reads it (Go's ``strconv.ParseUint`` in base 10:
    ASCII digits only, no sign, space or underscore), in kube's words when it does not parse. kube's
    watch cache returns that error unconverted, a 500; here it is the 400 kube's etcd store gives.
    Any uint64 is one: a revision past the store's (etcd's are int64, :data:`LAST_REVISION`) is
    one it has not reached yet, as kube's cache takes it."""
    try:
        return _go_parse_uint(value)
    except ValueError as exc:
        quoted = go_quote(value)
        raise errors.BadRequest(f"resourceVersion: Invalid value: {quoted}: strconv.ParseUint: parsing {quoted}: {exc}") from None


def parse_update_resource_version(value: str) -> int:
    """An update's ``metadata.resourceVersion`` as kube's store reads it (the versioner's
    ``ObjectResourceVersion``: ``strconv.ParseUint`` too). kube passes that error on unconverted,
    a reasonless 500 with Go's words; here the same words are the client's 400."""
    try:
        return _go_parse_uint(value)
    except ValueError as exc:
        raise errors.BadRequest(f"strconv.ParseUint: parsing {go_quote(value)}: {exc}") from None


def _go_parse_uint(value: str) -> int:
    """Go's ``strconv.ParseUint(value, 10, 64)``; a ValueError with Go's reason when it fails."""
    if not (value.isascii() and value.isdigit()):
        raise ValueError("invalid syntax")
    revision = int(value)
    if revision > UINT64_MAX:
        raise ValueError("value out of range")
    return revision


def store_revision(revision: int) -> int:
    """``revision`` as the store can be asked about it: etcd's revisions are int64, and one past
    :data:`LAST_REVISION` (a uint64 resourceVersion) is one it never reaches, as that one."""
    return min(revision, LAST_REVISION)


async def list_page(store: storage.Store, rt: ResourceType, namespace: str | None, options: ListOptions) -> Page:
    labels = label_selector_of(options.label_selector)
    fields = field_selector_of(rt, options.field_selector)
    limit, continue_token = options.limit, options.continue_token
    resource_version, resource_version_match = options.resource_version, options.resource_version_match
    filtered = not (labels.empty and fields.empty)
    prefix = rt.key_prefix(namespace)
    if limit < 0:
        raise errors.BadRequest(f"limit: Invalid value: {limit}: must be greater than or equal to 0")
    revision: int | None = None
    start_after: str | None = None
    #: A resourceVersion the list must not be older than (kube waits for it, then says it is too large).
    not_older_than = 0
    if continue_token:
        if resource_version not in (None, "", "0"):
            raise errors.BadRequest("specifying resource version is not allowed when using continue")
        revision, start_after = continuation.decode(continue_token, prefix)
    elif resource_version and (
        resource_version_match == "Exact" or (limit and not resource_version_match and resource_version != "0")
    ):
        # Without a match, a limited list at a resourceVersion is kube's legacy exact read.
        revision = parse_resource_version(resource_version)
        if revision > LAST_REVISION:  # one the store never reaches: kube's answer to any future one
            raise errors.too_large_resource_version(revision, await store_call(rt, "", store.current_revision()))
    elif resource_version_match not in (None, "", "NotOlderThan", "Exact"):
        raise errors.BadRequest(
            f'resourceVersionMatch: Unsupported value: "{resource_version_match}": '
            'supported values: "Exact", "NotOlderThan"'
        )
    elif resource_version and resource_version != "0":
        not_older_than = parse_resource_version(resource_version)

    if not_older_than:
        await wait_until_fresh(store, rt, not_older_than)
    kvs: list[storage.KeyValue] = []
    objects: list[dict[str, Any] | None] = []
    more = False
    remaining: int | None = None
    last_key = start_after
    while True:
        want = limit - len(kvs) if limit else 0
        chunk = max(want, min(limit * 2, 500)) if limit and filtered else want
        try:
            result = await store.list(prefix, revision=revision, limit=chunk, start_after=last_key)
        except storage.Gone as exc:
            if continue_token:
                # kube's token goes on after the same key at the latest revision (rv -1).
                raise errors.InconsistentContinue(continuation.encode(-1, start_after or "", prefix)) from exc
            raise errors.Gone(errors.EXPIRED_LIST) from exc
        except storage.StorageError as exc:
            raise errors.from_storage_error(exc, plural=rt.plural, group=rt.group) from exc
        if result.revision < not_older_than:
            raise errors.too_large_resource_version(not_older_than, result.revision)
        revision = result.revision
        stopped_early = False
        for index, kv in enumerate(result.items):
            last_key = kv.key
            obj: dict[str, Any] | None = None
            if filtered:
                obj = decode(rt, kv)
                if not (labels.matches(obj["metadata"].get("labels")) and fields.matches(obj)):
                    continue
            kvs.append(kv)
            objects.append(obj)
            if limit and len(kvs) >= limit:
                stopped_early = index < len(result.items) - 1
                break
        if limit and len(kvs) >= limit:
            more = stopped_early or result.more
            # kube's store counts what is left only when every key of the range is an item.
            remaining = result.remaining if more and not filtered else None
            break
        if not result.more:
            break
    token = continuation.encode(revision, last_key or "", prefix) if more and last_key else ""
    return Page(kvs, objects, revision, token, remaining if token else None)


def check_preconditions(rt: ResourceType, obj: dict[str, Any], pre: Preconditions | None) -> None:
    """kube's ``storage.Preconditions.Check``: a Conflict when the stored ``obj`` is not the uid
    (or resourceVersion) a delete or an update names."""
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
