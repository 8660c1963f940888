"""A small protobuf encoder for the decoder tests, written the way Go's generated code writes.

Go's marshallers write every non-pointer field even when empty; ``object_meta`` and
``container`` reproduce that, so the tables are tested against realistic bodies and
not only against minimal ones.
"""

from __future__ import annotations

_VARINT, _FIXED64, _BYTES, _FIXED32 = 0, 1, 2, 5


def varint(value: int) -> bytes:
    value %= 1 << 64  # negative numbers as Go writes them: two's complement, 10 bytes
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def key(number: int, wire_type: int) -> bytes:
    return varint(number << 3 | wire_type)


def vint(number: int, value: int | bool) -> bytes:
    """A varint field (int32, int64, bool)."""
    return key(number, _VARINT) + varint(int(value))


def text(number: int, value: str | bytes) -> bytes:
    """A length-delimited field holding a string or raw bytes."""
    raw = value.encode() if isinstance(value, str) else value
    return key(number, _BYTES) + varint(len(raw)) + raw


def msg(number: int, *parts: bytes) -> bytes:
    """A length-delimited field holding a message made of ``parts``."""
    return text(number, b"".join(parts))


def fixed32(number: int, value: int) -> bytes:
    return key(number, _FIXED32) + value.to_bytes(4, "little")


def fixed64(number: int, value: int) -> bytes:
    return key(number, _FIXED64) + value.to_bytes(8, "little")


def entry(number: int, map_key: str, value: str | bytes) -> bytes:
    """One entry of a ``map<string, string|bytes>`` field."""
    return msg(number, text(1, map_key), text(2, value))


def quantity_entry(number: int, map_key: str, amount: str) -> bytes:
    """One entry of a ``map<string, Quantity>`` field."""
    return msg(number, text(1, map_key), msg(2, text(1, amount)))


def envelope(api_version: str, kind: str, raw: bytes, *, encoding: str = "", content_type: str = "") -> bytes:
    """``k8s\\x00`` + runtime.Unknown{typeMeta, raw, contentEncoding, contentType}."""
    return (
        b"k8s\x00"
        + msg(1, text(1, api_version), text(2, kind))
        + text(2, raw)
        + text(3, encoding)
        + text(4, content_type)
    )


def object_meta(number: int, name: str, *parts: bytes) -> bytes:
    """ObjectMeta with the empty fields Go always writes (1-8), then ``parts``."""
    return msg(
        number,
        text(1, name), text(2, ""), text(3, ""), text(4, ""), text(5, ""), text(6, ""), vint(7, 0), text(8, b""),
        *parts,
    )


def container(number: int, name: str, image: str, *parts: bytes) -> bytes:
    """A Container with the empty non-pointer fields Go always writes, then ``parts``."""
    return msg(
        number,
        text(1, name), text(2, image), text(5, ""), msg(8), text(13, ""), text(14, ""),
        vint(16, 0), vint(17, 0), vint(18, 0), text(20, ""),
        *parts,
    )


def pod_spec(number: int, *parts: bytes) -> bytes:
    """A PodSpec with the empty non-pointer fields Go always writes, then ``parts``."""
    return msg(
        number,
        text(3, ""), text(6, ""), text(8, ""), text(9, ""), text(10, ""),
        vint(11, 0), vint(12, 0), vint(13, 0), text(16, ""), text(17, ""), text(19, ""), text(24, ""),
        *parts,
    )
