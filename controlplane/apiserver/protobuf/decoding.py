"""Decode a Kubernetes protobuf request body into the JSON object the JSON path would get.

In: the body kubectl's typed clients send as ``application/vnd.kubernetes.protobuf``:
the 4 magic bytes ``k8s\\x00``, then a ``runtime.Unknown`` message
(``typeMeta = 1 {apiVersion = 1, kind = 2}``, ``raw = 2``, ``contentEncoding = 3``,
``contentType = 4``) whose ``raw`` is the object's own message. Out: a ``dict`` with
``apiVersion``, ``kind`` and the object's fields under their JSON names, empty values
omitted, quantities as strings, ``map<string, bytes>`` values in base64, times in
RFC 3339 — what ``json.loads`` of the same object sent as JSON would give, so the object
layer cannot tell the two apart.

Errors are the API server's own (:mod:`controlplane.apiserver.errors`):
``UnsupportedMediaType`` (415) for a body that is not the Kubernetes envelope, a kind
without a field table, or a field the tables do not decode (named by its path), so
nothing is ever stored with data quietly missing; ``BadRequest`` (400) for bytes that
are not well-formed protobuf. A delete's body (DeleteOptions, :func:`decode_delete_options`) is
refused with a 400 every time, as kube's delete handler refuses it. Pure: no I/O.
"""

from __future__ import annotations

import base64
import json
from datetime import UTC, datetime
from typing import Any

from controlplane.apis.timestamps import format_time
from controlplane.apiserver import errors
from controlplane.apiserver.protobuf.kinds import MESSAGES_BY_KIND
from controlplane.apiserver.protobuf.schema import Field, FieldType, Message
from controlplane.apiserver.protobuf.tables import MESSAGES
from controlplane.apiserver.protobuf.wire import (
    WireError,
    WireField,
    WireType,
    as_int32,
    as_int64,
    iter_fields,
    iter_packed_varints,
)

MEDIA_TYPE = "application/vnd.kubernetes.protobuf"
MAGIC = b"k8s\x00"
_INSTEAD = "send it as JSON or YAML instead: write it in a manifest and run kubectl apply -f (or kubectl create -f)"


class _Undecodable(Exception):
    """A field the tables do not decode; carries the JSON path for the 415 message."""

    def __init__(self, path: str, what: str) -> None:
        super().__init__(path)
        self.path = path
        self.what = what


class _Malformed(Exception):
    def __init__(self, path: str, reason: str) -> None:
        super().__init__(reason)
        self.path = path
        self.reason = reason


def decode_object(body: bytes) -> dict[str, Any]:
    """The object in a protobuf request body, as the JSON path would have parsed it."""
    if not body:
        raise errors.BadRequest("the request body is empty; send the object as JSON, YAML or protobuf")
    if not body.startswith(MAGIC):
        raise errors.UnsupportedMediaType(
            f'the body of the request was sent as "{MEDIA_TYPE}" but does not start with the Kubernetes '
            f"protobuf envelope (the bytes k8s\\x00); {_INSTEAD}"
        )
    api_version, kind, raw = _read_envelope(body[len(MAGIC) :])
    message = MESSAGES_BY_KIND.get((api_version, kind))
    if message is None:
        known = ", ".join(f"{k} ({v})" for v, k in MESSAGES_BY_KIND)
        raise errors.UnsupportedMediaType(
            f'this server does not decode {kind or "objects without a kind"} ({api_version or "no apiVersion"}) '
            f"from protobuf; it decodes protobuf only for the kinds kubectl's create commands send: {known}. "
            f"For {kind or 'this object'}, {_INSTEAD}"
        )
    try:
        fields = _decode_message(raw, message, path="")
    except _Undecodable as exc:
        raise errors.UnsupportedMediaType(
            f"this server cannot decode the {exc.what} at {exc.path} of a {kind} ({api_version}) sent as "
            f"protobuf; {_INSTEAD}"
        ) from exc
    except _Malformed as exc:
        raise _malformed(kind, exc) from exc
    return {"apiVersion": api_version, "kind": kind, **fields}


def _malformed(kind: str, exc: _Malformed) -> errors.BadRequest:
    where = f" at {exc.path}" if exc.path else ""
    return errors.BadRequest(f"the protobuf body of the {kind} is malformed{where}: {exc.reason}")


def decode_delete_options(body: bytes) -> dict[str, Any]:
    """A delete's body (DeleteOptions) sent as protobuf, as the JSON path would have parsed it.

    kube's delete handler answers any body it cannot decode with a 400 carrying the decoder's
    error, so every refusal here is a 400 (not the 415 a create's body may get). The envelope may
    name DeleteOptions of any group version (client-go writes its client's), or no type at all
    (kube then takes ``meta.k8s.io/v1`` DeleteOptions)."""
    if not body.startswith(MAGIC):
        raise errors.BadRequest(
            "provided data does not appear to be a protobuf message, expected prefix [107 56 115 0]"
        )
    if len(body) == len(MAGIC):
        raise errors.BadRequest("empty body")
    try:
        api_version, kind, raw = _read_envelope(body[len(MAGIC) :])
    except errors.UnsupportedMediaType as exc:
        raise errors.BadRequest(exc.message) from None
    if kind not in ("", "DeleteOptions"):
        raise errors.BadRequest(f"decoded object cannot be converted to DeleteOptions: the body is a {kind} ({api_version})")
    try:
        # Go's generated decoder skips the fields it does not know (a newer client's), as kube does.
        options = _decode_message(raw, MESSAGES["DeleteOptions"], path="", skip_unknown=True)
    except _Undecodable as exc:
        raise errors.BadRequest(f"the protobuf DeleteOptions hold a field this server does not decode, at {exc.path}") from exc
    except _Malformed as exc:
        raise _malformed("DeleteOptions", exc) from exc
    return {"apiVersion": api_version or "meta.k8s.io/v1", "kind": "DeleteOptions", **options}


def _read_envelope(data: bytes) -> tuple[str, str, bytes]:
    """``(apiVersion, kind, raw)`` of the ``runtime.Unknown`` after the magic bytes."""
    api_version = kind = encoding = content_type = ""
    raw = b""
    try:
        for wire in iter_fields(data):
            if wire.number == 1 and isinstance(wire.value, bytes):
                for meta in iter_fields(wire.value):
                    if meta.number == 1 and isinstance(meta.value, bytes):
                        api_version = _text(meta.value)
                    elif meta.number == 2 and isinstance(meta.value, bytes):
                        kind = _text(meta.value)
            elif wire.number == 2 and isinstance(wire.value, bytes):
                raw = wire.value
            elif wire.number == 3 and isinstance(wire.value, bytes):
                encoding = _text(wire.value)
            elif wire.number == 4 and isinstance(wire.value, bytes):
                content_type = _text(wire.value)
    except (WireError, UnicodeDecodeError) as exc:
        raise errors.BadRequest(f"the protobuf envelope of the request body is malformed: {exc}") from exc
    if encoding:
        raise errors.UnsupportedMediaType(
            f'the protobuf body uses content encoding "{encoding}", which this server does not decode; {_INSTEAD}'
        )
    if content_type and content_type != MEDIA_TYPE:
        raise errors.UnsupportedMediaType(
            f'the protobuf envelope holds "{content_type}" data, which this server does not decode; {_INSTEAD}'
        )
    return api_version, kind, raw


def _text(raw: bytes) -> str:
    return raw.decode("utf-8")


def _join(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name


def _decode_message(data: bytes, message: Message, *, path: str, skip_unknown: bool = False) -> dict[str, Any]:
    """``message``'s fields in ``data``; a field number it does not list is refused (a kind's body is
    stored: no data is dropped quietly) unless ``skip_unknown`` (options, which Go's decoder skips)."""
    out: dict[str, Any] = {}
    counts: dict[int, int] = {}
    try:
        wires = list(iter_fields(data))
    except WireError as exc:
        raise _Malformed(path, str(exc)) from exc
    for wire in wires:
        field = message.fields.get(wire.number)
        if field is None:
            if skip_unknown:
                continue
            raise _Undecodable(_join(path, f"<field {wire.number} of {message.name}>"), "unknown field")
        index = counts.get(wire.number, 0)
        counts[wire.number] = index + 1
        field_path = _join(path, field.name) + (f"[{index}]" if field.repeated else "")
        if field.type is FieldType.UNSUPPORTED:
            if field.repeated or field.pointer or not _is_empty(wire):
                raise _Undecodable(_join(path, field.name), "field")
            continue
        _store(out, field, wire, path=field_path)
    return out


def _store(out: dict[str, Any], field: Field, wire: WireField, *, path: str) -> None:
    name = field.name
    if field.type in (FieldType.STRING_MAP, FieldType.BYTES_MAP, FieldType.QUANTITY_MAP, FieldType.EXTRA_MAP):
        key, value = _map_entry(field, _payload(wire, path), path=path)
        out.setdefault(name, {})[key] = value
        return
    if field.repeated and field.type in (FieldType.INT32, FieldType.INT64) and isinstance(wire.value, bytes):
        convert = as_int32 if field.type is FieldType.INT32 else as_int64
        try:
            out.setdefault(name, []).extend(convert(v) for v in iter_packed_varints(wire.value))
        except WireError as exc:
            raise _Malformed(path, str(exc)) from exc
        return
    value = _value(field, wire, path=path)
    if field.repeated:
        out.setdefault(name, []).append(value)
    elif field.inline:
        out.update(value)
    elif field.type is FieldType.MESSAGE and isinstance(out.get(name), dict):
        out[name] = {**out[name], **value}  # a repeated occurrence of a message merges into it
    elif field.pointer and value is not None:
        out[name] = value
    elif _is_zero(value):
        out.pop(name, None)  # the last occurrence wins, and an empty one means "not set"
    else:
        out[name] = value


def _value(field: Field, wire: WireField, *, path: str) -> Any:
    kind = field.type
    if kind is FieldType.STRING:
        return _decode_text(_payload(wire, path), path)
    if kind is FieldType.BYTES:
        return base64.b64encode(_payload(wire, path)).decode("ascii")
    if kind is FieldType.FIELDS_V1:
        return _fields_v1(_payload(wire, path), path)
    if kind in (FieldType.INT32, FieldType.INT64, FieldType.BOOL):
        number = _number(wire, path)
        if kind is FieldType.BOOL:
            return number != 0
        return as_int32(number) if kind is FieldType.INT32 else as_int64(number)
    if kind is FieldType.MESSAGE:
        assert field.message is not None, f"table error: {field.name} has no message"
        return _decode_message(_payload(wire, path), field.message, path=path)
    if kind is FieldType.QUANTITY:
        return _quantity(_payload(wire, path), path)
    if kind is FieldType.INT_OR_STRING:
        return _int_or_string(_payload(wire, path), path)
    if kind is FieldType.TIME:
        return _time(_payload(wire, path), path)
    raise AssertionError(f"table error: no decoder for {kind} at {path}")


def _payload(wire: WireField, path: str) -> bytes:
    if not isinstance(wire.value, bytes):
        raise _Malformed(path, f"expected a length-delimited value, got wire type {wire.wire_type.name}")
    return wire.value


def _number(wire: WireField, path: str) -> int:
    if wire.wire_type is not WireType.VARINT or not isinstance(wire.value, int):
        raise _Malformed(path, f"expected a varint, got wire type {wire.wire_type.name}")
    return wire.value


def _decode_text(raw: bytes, path: str) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise _Malformed(path, "a string is not valid UTF-8") from exc


def _fields_of(raw: bytes, path: str) -> dict[int, WireField]:
    try:
        return {wire.number: wire for wire in iter_fields(raw)}
    except WireError as exc:
        raise _Malformed(path, str(exc)) from exc


def _map_entry(field: Field, raw: bytes, *, path: str) -> tuple[str, Any]:
    entry = _fields_of(raw, path)
    key = _decode_text(_payload(entry[1], path), path) if 1 in entry else ""
    value_wire = entry.get(2)
    value_raw = _payload(value_wire, path) if value_wire is not None else b""
    entry_path = f"{path}[{key}]"
    if field.type is FieldType.STRING_MAP:
        return key, _decode_text(value_raw, entry_path)
    if field.type is FieldType.BYTES_MAP:
        return key, base64.b64encode(value_raw).decode("ascii")
    if field.type is FieldType.EXTRA_MAP:
        try:
            items = [_decode_text(_payload(item, entry_path), entry_path) for item in iter_fields(value_raw) if item.number == 1]
        except WireError as exc:
            raise _Malformed(entry_path, str(exc)) from exc
        return key, items
    return key, _quantity(value_raw, entry_path)


def _fields_v1(raw: bytes, path: str) -> Any:
    entry = _fields_of(raw, path)
    try:
        return json.loads(_payload(entry[1], path)) if 1 in entry else {}
    except ValueError as exc:
        raise _Malformed(path, "fieldsV1 is not JSON") from exc


def _quantity(raw: bytes, path: str) -> str:
    entry = _fields_of(raw, path)
    return _decode_text(_payload(entry[1], path), path) if 1 in entry else ""


def _int_or_string(raw: bytes, path: str) -> int | str:
    entry = _fields_of(raw, path)
    is_string = 1 in entry and _number(entry[1], path) == 1
    if is_string:
        return _decode_text(_payload(entry[3], path), path) if 3 in entry else ""
    return as_int32(_number(entry[2], path)) if 2 in entry else 0


def _time(raw: bytes, path: str) -> str | None:
    """RFC 3339 at second precision, as metav1.Time marshals; ``None`` for the zero time."""
    if not raw:
        return None
    entry = _fields_of(raw, path)
    seconds = as_int64(_number(entry[1], path)) if 1 in entry else 0
    try:
        moment = datetime.fromtimestamp(seconds, tz=UTC)
    except (OverflowError, OSError, ValueError) as exc:
        raise _Malformed(path, f"the time {seconds}s since the epoch is out of range") from exc
    return format_time(moment)


def _is_empty(wire: WireField) -> bool:
    return wire.value in (0, b"")


def _is_zero(value: Any) -> bool:
    return value is None or value == "" or value == 0 or value is False or value == {}
