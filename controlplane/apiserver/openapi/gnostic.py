"""The v2 document as kubectl asks for it: gnostic's ``openapi.v2.Document`` protobuf.

kubectl fetches ``/openapi/v2`` with ``Accept: application/com.github.proto-openapi.spec.v2@v1.0+protobuf``
and unmarshals the body as the ``openapi_v2.Document`` message of github.com/google/gnostic
(``openapiv2/OpenAPIv2.proto``), never JSON. This encodes the JSON document into that message
with the field numbers of that file. Maps are repeated ``Named*`` pairs in document order;
values kube reads from extensions and enums (``Any``) are carried as YAML text (JSON is YAML),
as gnostic itself does. Parts of Swagger 2.0 the document never uses (security, headers,
form parameters, XML) are not encoded.
Pure: in a JSON-ready dict, out bytes.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import orjson

#: What kubectl asks for (``Accept``; the ``@`` spelling is kube's deprecated one, still what
#: client-go sends) and the ``Content-Type`` kube answers with (Go's MIME parser rejects ``@``).
ACCEPTED_MEDIA_TYPES = (
    "application/com.github.proto-openapi.spec.v2@v1.0+protobuf",
    "application/com.github.proto-openapi.spec.v2.v1.0+protobuf",
)
MEDIA_TYPE = "application/com.github.proto-openapi.spec.v2.v1.0+protobuf"

_VARINT, _FIXED64, _BYTES = 0, 1, 2


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _key(number: int, wire_type: int) -> bytes:
    return _varint(number << 3 | wire_type)


def _bytes(number: int, payload: bytes) -> bytes:
    return _key(number, _BYTES) + _varint(len(payload)) + payload


def _string(number: int, value: Any) -> bytes:
    return _bytes(number, str(value).encode()) if value not in (None, "") else b""


def _bool(number: int, value: Any) -> bytes:
    return _key(number, _VARINT) + b"\x01" if value is True else b""


def _int(number: int, value: Any) -> bytes:
    return _key(number, _VARINT) + _varint(int(value)) if isinstance(value, int) and value > 0 else b""


def _double(number: int, value: Any) -> bytes:
    if isinstance(value, bool) or not isinstance(value, int | float) or value == 0:
        return b""
    return _key(number, _FIXED64) + struct.pack("<d", float(value))


def _strings(number: int, values: Any) -> bytes:
    return b"".join(_string(number, v) for v in values or ())


def _any(value: Any) -> bytes:
    """``openapi.v2.Any``: the value as YAML text (field 2)."""
    return _string(2, orjson.dumps(value).decode())


def _named(number: int, items: Iterable[tuple[str, bytes]]) -> bytes:
    """A repeated ``Named*`` field: name (1) and value (2) per entry."""
    return b"".join(_bytes(number, _string(1, name) + _bytes(2, value)) for name, value in items)


def _extensions(number: int, node: Mapping[str, Any]) -> bytes:
    return _named(number, ((k, _any(v)) for k, v in node.items() if k.startswith("x-")))


# --- Schema --------------------------------------------------------------------------------

_SCHEMA_SCALARS: dict[str, tuple[int, Callable[[int, Any], bytes]]] = {
    "$ref": (1, _string), "format": (2, _string), "title": (3, _string), "description": (4, _string),
    "multipleOf": (6, _double), "maximum": (7, _double), "exclusiveMaximum": (8, _bool),
    "minimum": (9, _double), "exclusiveMinimum": (10, _bool), "maxLength": (11, _int), "minLength": (12, _int),
    "pattern": (13, _string), "maxItems": (14, _int), "minItems": (15, _int), "uniqueItems": (16, _bool),
    "maxProperties": (17, _int), "minProperties": (18, _int), "required": (19, _strings),
    "discriminator": (26, _string), "readOnly": (27, _bool),
}


def schema(node: Mapping[str, Any]) -> bytes:
    """``openapi.v2.Schema``."""
    out = bytearray()
    for key, (number, encode) in _SCHEMA_SCALARS.items():
        if key in node:
            out += encode(number, node[key])
    if "default" in node:
        out += _bytes(5, _any(node["default"]))
    for value in node.get("enum") or ():
        out += _bytes(20, _any(value))
    additional = node.get("additionalProperties")
    if isinstance(additional, bool):
        out += _bytes(21, _key(2, _VARINT) + (b"\x01" if additional else b"\x00"))
    elif isinstance(additional, Mapping):
        out += _bytes(21, _bytes(1, schema(additional)))
    if "type" in node:
        types = node["type"] if isinstance(node["type"], list) else [node["type"]]
        out += _bytes(22, _strings(1, types))
    if isinstance(node.get("items"), Mapping):
        out += _bytes(23, _bytes(1, schema(node["items"])))
    for sub in node.get("allOf") or ():
        out += _bytes(24, schema(sub))
    if isinstance(node.get("properties"), Mapping):
        out += _bytes(25, _named(1, ((name, schema(sub)) for name, sub in node["properties"].items())))
    if "example" in node:
        out += _bytes(30, _any(node["example"]))
    out += _extensions(31, node)
    return bytes(out)


# --- Paths and operations ----------------------------------------------------------------------


def _parameter(node: Mapping[str, Any]) -> bytes:
    """``openapi.v2.ParametersItem`` holding a body, query or path parameter."""
    where = node.get("in")
    if where == "body":
        body = (_string(1, node.get("description")) + _string(2, node["name"]) + _string(3, where)
                + _bool(4, node.get("required")) + _bytes(5, schema(node.get("schema") or {})))
        parameter = _bytes(1, body)
    else:
        common = (_bool(1, node.get("required")) + _string(2, where) + _string(3, node.get("description"))
                  + _string(4, node["name"]))
        if where == "path":  # PathParameterSubSchema: type 5, uniqueItems 19
            sub = common + _string(5, node.get("type")) + _bool(19, node.get("uniqueItems"))
            non_body = _bytes(4, sub)
        else:  # QueryParameterSubSchema: type 6, uniqueItems 20
            sub = common + _string(6, node.get("type")) + _bool(20, node.get("uniqueItems"))
            non_body = _bytes(3, sub)
        parameter = _bytes(2, non_body)
    return _bytes(1, parameter)


def _response(node: Mapping[str, Any]) -> bytes:
    """``openapi.v2.ResponseValue`` holding a Response."""
    response = _string(1, node.get("description"))
    if isinstance(node.get("schema"), Mapping):
        response += _bytes(2, _bytes(1, schema(node["schema"])))
    return _bytes(1, response)


def _operation(node: Mapping[str, Any]) -> bytes:
    out = (_strings(1, node.get("tags")) + _string(2, node.get("summary")) + _string(3, node.get("description"))
           + _string(5, node.get("operationId")) + _strings(6, node.get("produces"))
           + _strings(7, node.get("consumes")))
    out += b"".join(_bytes(8, _parameter(p)) for p in node.get("parameters") or ())
    responses = node.get("responses") or {}
    out += _bytes(9, _named(1, ((code, _response(r)) for code, r in responses.items())))
    out += _strings(10, node.get("schemes")) + _bool(11, node.get("deprecated"))
    return out + _extensions(13, node)


_METHODS = {"get": 2, "put": 3, "post": 4, "delete": 5, "options": 6, "head": 7, "patch": 8}


def _path_item(node: Mapping[str, Any]) -> bytes:
    out = b"".join(_bytes(number, _operation(node[m])) for m, number in _METHODS.items() if m in node)
    out += b"".join(_bytes(9, _parameter(p)) for p in node.get("parameters") or ())
    return out + _extensions(10, node)


def encode_document(document: Mapping[str, Any]) -> bytes:
    """``openapi.v2.Document`` of a Swagger 2.0 document."""
    info = document.get("info") or {}
    out = _string(1, document.get("swagger", "2.0"))
    out += _bytes(2, _string(1, info.get("title")) + _string(2, info.get("version")) + _string(3, info.get("description")))
    paths = document.get("paths") or {}
    out += _bytes(8, _named(2, ((path, _path_item(item)) for path, item in paths.items())))
    definitions = document.get("definitions") or {}
    out += _bytes(9, _named(1, ((name, schema(s)) for name, s in definitions.items())))
    return out + _extensions(16, document)
