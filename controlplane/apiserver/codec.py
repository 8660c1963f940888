"""How objects are stored: JSON bytes without ``resourceVersion``, which comes from etcd.

``encode`` writes an object with ``apiVersion``, ``kind`` and ``metadata`` first and no
``metadata.resourceVersion``; ``decode`` reads it back and fills ``resourceVersion`` from
the key's ``mod_revision``. Because the top-level ``metadata`` always opens right after
two plain strings, ``with_resource_version`` can splice the resourceVersion into the
stored bytes without parsing them: a plain LIST of 10,000 objects never decodes one.

JSON goes through orjson (several times faster than the standard library on both ends).
"""

from __future__ import annotations

from typing import Any

import orjson

from controlplane.storage.interface import KeyValue

_METADATA_OPEN = b'"metadata":{'
_STORED_PREFIX = b'{"apiVersion":'
#: Server-owned metadata never stored: resourceVersion comes from the store's revision.
_NOT_STORED = ("resourceVersion", "selfLink")


def dumps(value: Any) -> bytes:
    return orjson.dumps(value)


def loads(data: bytes | str) -> Any:
    return orjson.loads(data)


def encode(obj: dict[str, Any]) -> bytes:
    """The stored form of ``obj`` (not modified)."""
    meta = dict(obj.get("metadata") or {})
    for key in _NOT_STORED:
        meta.pop(key, None)
    ordered: dict[str, Any] = {"apiVersion": obj.get("apiVersion", ""), "kind": obj.get("kind", ""), "metadata": meta}
    for key, value in obj.items():
        if key not in ordered:
            ordered[key] = value
    return orjson.dumps(ordered)


def decode(kv: KeyValue) -> dict[str, Any]:
    """The object stored in ``kv``, with ``metadata.resourceVersion`` filled in."""
    obj: dict[str, Any] = orjson.loads(kv.value)
    meta = obj.get("metadata")
    if not isinstance(meta, dict):
        meta = obj["metadata"] = {}
    meta["resourceVersion"] = str(kv.mod_revision)
    return obj


def with_resource_version(kv: KeyValue) -> bytes:
    """The object's JSON with resourceVersion set, without a parse when stored by encode()."""
    value = kv.value
    if value.startswith(_STORED_PREFIX):
        at = value.find(_METADATA_OPEN)
        if at > 0:
            insert = at + len(_METADATA_OPEN)
            field = b'"resourceVersion":"%d"' % kv.mod_revision
            if value[insert : insert + 1] != b"}":
                field += b","
            return value[:insert] + field + value[insert:]
    return orjson.dumps(decode(kv))


_API_VERSION_OPEN = b'{"apiVersion":"'


def as_version(obj: dict[str, Any], api_version: str) -> dict[str, Any]:
    """``obj`` seen as ``api_version`` (a shallow copy when it says another one)."""
    return obj if obj.get("apiVersion") == api_version else {**obj, "apiVersion": api_version}


def bytes_as_version(data: bytes, api_version: str) -> bytes:
    """``data`` (an object's JSON) with its ``apiVersion`` replaced, without a parse when it
    opens with it, as :func:`encode` writes it."""
    if data.startswith(_API_VERSION_OPEN):
        end = data.find(b'"', len(_API_VERSION_OPEN))
        if end > 0:
            return _API_VERSION_OPEN + api_version.encode() + data[end:]
    return orjson.dumps(as_version(orjson.loads(data), api_version))
