"""The protobuf wire format, read without compiled message classes.

Kubernetes encodes objects with proto2 messages whose ``.proto`` files we do not compile;
the decoder walks the raw fields and interprets them with hand-kept field tables
(:mod:`controlplane.apiserver.protobuf.schema`). This module only splits bytes into
fields. In: a message's ``bytes``; out: :class:`WireField` items (field number, wire
type, and an ``int`` for varint/fixed values or ``bytes`` for length-delimited ones). Anything
malformed (truncated varint or payload, groups, unknown wire types) raises
:class:`WireError`. Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from enum import IntEnum

_MAX_VARINT_BYTES = 10
_UINT64 = 1 << 64


class WireType(IntEnum):
    VARINT = 0
    FIXED64 = 1
    LENGTH_DELIMITED = 2
    START_GROUP = 3
    END_GROUP = 4
    FIXED32 = 5


class WireError(ValueError):
    """The bytes are not a well-formed protobuf message."""


@dataclass(frozen=True, slots=True)
class WireField:
    number: int
    wire_type: WireType
    value: int | bytes


def read_varint(data: bytes, offset: int) -> tuple[int, int]:
    """The unsigned varint at ``offset`` and the offset just past it."""
    result = 0
    shift = 0
    for index in range(offset, min(len(data), offset + _MAX_VARINT_BYTES)):
        byte = data[index]
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result % _UINT64, index + 1
        shift += 7
    if len(data) - offset >= _MAX_VARINT_BYTES:
        raise WireError(f"a varint at byte {offset} is longer than {_MAX_VARINT_BYTES} bytes")
    raise WireError(f"the message ends inside a varint at byte {offset}")


def iter_fields(data: bytes) -> Iterator[WireField]:
    """Every field of one message, in wire order."""
    offset = 0
    end = len(data)
    while offset < end:
        start = offset
        key, offset = read_varint(data, offset)
        number = key >> 3
        try:
            wire_type = WireType(key & 0x07)
        except ValueError:
            raise WireError(f"unknown wire type {key & 0x07} at byte {start}") from None
        if number == 0:
            raise WireError(f"field number 0 at byte {start}")
        value: int | bytes
        if wire_type is WireType.VARINT:
            value, offset = read_varint(data, offset)
        elif wire_type is WireType.LENGTH_DELIMITED:
            length, offset = read_varint(data, offset)
            if offset + length > end:
                raise WireError(f"field {number} at byte {start} claims {length} bytes; the message ends sooner")
            value = data[offset : offset + length]
            offset += length
        elif wire_type in (WireType.FIXED64, WireType.FIXED32):
            size = 8 if wire_type is WireType.FIXED64 else 4
            if offset + size > end:
                raise WireError(f"the message ends inside fixed-size field {number} at byte {start}")
            value = int.from_bytes(data[offset : offset + size], "little")
            offset += size
        else:
            raise WireError(f"field {number} at byte {start} uses protobuf groups, which Kubernetes never sends")
        yield WireField(number, wire_type, value)


def iter_packed_varints(data: bytes) -> Iterator[int]:
    """The varints of a packed repeated scalar field."""
    offset = 0
    while offset < len(data):
        value, offset = read_varint(data, offset)
        yield value


def as_int64(value: int) -> int:
    """A varint read as a two's-complement int64 (how Go encodes negative int32/int64)."""
    return value - _UINT64 if value >= 1 << 63 else value


def as_int32(value: int) -> int:
    """A varint read as int32, truncated as Go's decoder does."""
    low = value & 0xFFFFFFFF
    return low - (1 << 32) if low >= 1 << 31 else low
