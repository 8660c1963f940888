"""The protobuf wire reader: varints, the four wire types Kubernetes uses, and malformed input."""

from __future__ import annotations

import pytest

from controlplane.apiserver.protobuf.wire import (
    WireError,
    WireField,
    WireType,
    as_int32,
    as_int64,
    iter_fields,
    iter_packed_varints,
    read_varint,
)

from .builders import fixed32, fixed64, text, varint, vint


@pytest.mark.parametrize(
    ("encoded", "value"),
    [
        (b"\x00", 0),
        (b"\x01", 1),
        (b"\x7f", 127),
        (b"\x80\x01", 128),
        (b"\x90\x3f", 8080),
        (b"\xff\xff\xff\xff\x0f", 0xFFFFFFFF),
        (b"\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01", (1 << 64) - 1),
    ],
)
def test_read_varint(encoded: bytes, value: int) -> None:
    assert read_varint(encoded + b"rest", 0) == (value, len(encoded))
    assert varint(value) == encoded


@pytest.mark.parametrize(
    ("number", "int64", "int32"),
    [(0, 0, 0), (5, 5, 5), (-1, -1, -1), (-5, -5, -5), (2**31 - 1, 2**31 - 1, 2**31 - 1), (-(2**31), -(2**31), -(2**31))],
)
def test_signed_readings(number: int, int64: int, int32: int) -> None:
    raw, _ = read_varint(varint(number), 0)
    assert as_int64(raw) == int64
    assert as_int32(raw) == int32


def test_fields_of_every_wire_type() -> None:
    data = vint(1, 150) + text(2, "hi") + fixed32(3, 7) + fixed64(4, 9) + text(200, b"")
    assert list(iter_fields(data)) == [
        WireField(1, WireType.VARINT, 150),
        WireField(2, WireType.LENGTH_DELIMITED, b"hi"),
        WireField(3, WireType.FIXED32, 7),
        WireField(4, WireType.FIXED64, 9),
        WireField(200, WireType.LENGTH_DELIMITED, b""),
    ]


def test_packed_varints() -> None:
    assert list(iter_packed_varints(varint(1) + varint(300) + varint(-2))) == [1, 300, (1 << 64) - 2]


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (b"\x08", "ends inside a varint"),  # field 1 varint, no value
        (b"\x08\x80", "ends inside a varint"),
        (b"\x08" + b"\xff" * 11, "longer than 10 bytes"),
        (b"\x12\x05abc", "claims 5 bytes"),
        (b"\x1d\x01\x02", "inside fixed-size field 3"),
        (b"\x0b", "groups"),  # field 1, start group
        (b"\x0e", "unknown wire type 6"),
        (b"\x02\x00", "field number 0"),
    ],
)
def test_malformed(data: bytes, reason: str) -> None:
    with pytest.raises(WireError, match=reason):
        list(iter_fields(data))
