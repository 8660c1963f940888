"""How objects are stored: JSON bytes without ``resourceVersion``, which comes from etcd.

``encode`` writes an object with ``apiVersion``, ``kind`` and ``metadata`` first and no
``metadata.resourceVersion``; ``decode`` reads it back and fills ``resourceVersion`` from
the key's ``mod_revision``. A type served under two groups stores its objects once; ``encode``
and ``decode`` take the apiVersion to store and to serve (``with_resource_version`` rewrites it
in the bytes). Because the top-level ``metadata`` always opens right after
two plain strings, ``with_resource_version`` can splice the resourceVersion into the
stored bytes without parsing them: a plain LIST of 10,000 objects never decodes one.

Objects of the kinds kube defaults are stored ending in a tab and a newline (:data:`DEFAULTED`,
whitespace no JSON writer ends a document with): it says they were written with today's
defaults, so reads serve them as stored; one without it (written before, or by hand) is
defaulted as it is read. JSON allows the whitespace; clients see no difference.

JSON goes through orjson (several times faster than the standard library on both ends).
"""

from __future__ import annotations

import functools
import re
from typing import Any

import orjson

from controlplane.storage.interface import KeyValue

_METADATA_OPEN = b'"metadata":{'
_STORED_PREFIX = b'{"apiVersion":'
#: Ends the stored form of an object written defaulted by the current rules. Change it when the
#: defaulting rules change, so that objects stored under the old ones are defaulted on read again.
DEFAULTED = b"\t\n"
#: Server-owned metadata never stored: resourceVersion comes from the store's revision.
_NOT_STORED = ("resourceVersion", "selfLink")


def dumps(value: Any) -> bytes:
    return orjson.dumps(value)


#: What a string read with ``surrogateescape`` (aiohttp's reading of header bytes that are not
#: UTF-8) holds in place of each such byte, and what orjson refuses to write.
_SURROGATE = re.compile("[\ud800-\udfff]")


def dumps_any_text(value: Any) -> bytes:
    """``dumps``, with every lone surrogate of a string (a byte of a header that is not UTF-8, as
    aiohttp reads it) written as U+FFFD, as Go's encoding/json writes bytes that are not UTF-8: a
    Status echoing ``Impersonate-User: \\xff`` is JSON, not a failure to write it. Costs nothing
    more unless such a string is there."""
    try:
        return orjson.dumps(value)
    except TypeError:
        return orjson.dumps(_replacing_surrogates(value))


def any_text_utf8(text: str) -> bytes:
    """``text`` in UTF-8, every lone surrogate written as U+FFFD (as :func:`dumps_any_text`)."""
    return any_text(text).encode()


def any_text(text: str) -> str:
    """``text`` with every lone surrogate as U+FFFD (``text`` itself when it is ASCII)."""
    return text if text.isascii() else _SURROGATE.sub("\ufffd", text)


def _replacing_surrogates(value: Any) -> Any:
    if isinstance(value, str):
        return any_text(value)
    if isinstance(value, dict):
        return {_replacing_surrogates(key): _replacing_surrogates(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_replacing_surrogates(item) for item in value]
    return value


def loads(data: bytes | str) -> Any:
    return orjson.loads(data)


def encode(obj: dict[str, Any], api_version: str | None = None, *, defaulted: bool = False) -> bytes:
    """The stored form of ``obj`` (not modified), with ``api_version`` when given; ``defaulted``:
    kube's defaults were applied."""
    meta = dict(obj.get("metadata") or {})
    for key in _NOT_STORED:
        meta.pop(key, None)
    ordered: dict[str, Any] = {
        "apiVersion": api_version or obj.get("apiVersion", ""), "kind": obj.get("kind", ""), "metadata": meta
    }
    for key, value in obj.items():
        if key not in ordered:
            ordered[key] = value
    data = dumps_any_text(ordered)  # a header's bytes (an impersonated name, a User-Agent's manager) as U+FFFD
    return data + DEFAULTED if defaulted else data


def is_defaulted(kv: KeyValue) -> bool:
    """Whether ``kv`` was stored by :func:`encode` with ``defaulted``."""
    return kv.value.endswith(DEFAULTED)


def decode(kv: KeyValue, api_version: str | None = None) -> dict[str, Any]:
    """The object stored in ``kv``, with ``metadata.resourceVersion`` filled in (and served
    as ``api_version`` when given)."""
    obj: dict[str, Any] = orjson.loads(kv.value)
    meta = obj.get("metadata")
    if not isinstance(meta, dict):
        meta = obj["metadata"] = {}
    meta["resourceVersion"] = str(kv.mod_revision)
    if api_version and obj.get("apiVersion") != api_version:
        obj = {"apiVersion": api_version, **{k: v for k, v in obj.items() if k != "apiVersion"}}
    return obj


def with_resource_version(kv: KeyValue, api_version: str | None = None) -> bytes:
    """The object's JSON with resourceVersion set (and served as ``api_version`` when given),
    without a parse when stored by encode()."""
    value = kv.value
    if api_version and value.startswith(_STORED_PREFIX):
        served = _served_prefix(api_version)
        if not value.startswith(served):
            end = value.find(b'",', len(_STORED_PREFIX) + 1)
            if end < 0 or value.find(b"\\", 0, end) >= 0:
                return orjson.dumps(decode(kv, api_version))
            value = served + value[end + 2 :]
    if value.startswith(_STORED_PREFIX):
        at = value.find(_METADATA_OPEN)
        if at > 0:
            insert = at + len(_METADATA_OPEN)
            field = b'"resourceVersion":"%d"' % kv.mod_revision
            if value[insert : insert + 1] != b"}":
                field += b","
            return value[:insert] + field + value[insert:]
    return orjson.dumps(decode(kv, api_version))


@functools.lru_cache(maxsize=256)
def _served_prefix(api_version: str) -> bytes:
    """How an object stored by encode() with ``api_version`` begins."""
    return _STORED_PREFIX + orjson.dumps(api_version) + b","
