"""The etcd requests of the hub's hot paths, encoded straight to protobuf bytes.

In: a full key (namespace included), a value and revisions. Out: the serialized
``RangeRequest`` of a single-key read and the ``TxnRequest`` of a compare-and-create and a
compare-and-swap update, byte for byte what ``rpc.TxnRequest(...).SerializeToString()``
gives for the same request (``tests/storage/test_etcd_wire.py`` checks it).

Why: building those requests as protobuf objects (a ``TxnRequest`` holding two ``Compare``
messages and two ``RequestOp`` messages, each made from keyword arguments) cost the hub about
three times as much CPU as concatenating their few fields, on every write of every object.
Only these three shapes are encoded here; everything else (guards, leases' own calls,
ranges with limits, compaction) builds protobuf objects as before.

Field numbers and enum values are etcd's ``etcdserverpb`` (``rpc.proto``):
``TxnRequest{compare=1, success=2, failure=3}``, ``Compare{result=1, target=2, key=3,
version=4, create_revision=5, mod_revision=6}``, ``RequestOp{request_range=1,
request_put=2}``, ``PutRequest{key=1, value=2, lease=3, prev_kv=4}``, ``RangeRequest{key=1}``;
``Compare.EQUAL=0, GREATER=1``, ``Compare.VERSION=0, CREATE=1, MOD=2``.
"""

from __future__ import annotations


def _varint(number: int) -> bytes:
    if number < 0x80:
        return bytes((number,))
    out = bytearray()
    while number >= 0x80:
        out.append((number & 0x7F) | 0x80)
        number >>= 7
    out.append(number)
    return bytes(out)


def _int64(number: int) -> bytes:
    """An int64 field's varint, as protobuf encodes it (a negative number as 64-bit two's
    complement; outside int64, ValueError)."""
    if not -(2**63) <= number < 2**63:
        raise ValueError(f"Value out of range: {number}")
    return _varint(number if number >= 0 else number + 2**64)


def _field(tag: bytes, data: bytes) -> bytes:
    """A length-delimited field: its tag byte, the length, the bytes."""
    return tag + _varint(len(data)) + data


def _put(key: bytes, value: bytes) -> bytes:
    """A PutRequest's key and value (proto3 leaves an empty value out)."""
    return _field(b"\x0a", key) + (_field(b"\x12", value) if value else b"")


def range_request(key: bytes) -> bytes:
    """``RangeRequest(key=key)``: one key's current value."""
    return _field(b"\x0a", key)


def create_txn(key: bytes, value: bytes, *, lease: int = 0) -> bytes:
    """Put ``value`` at ``key`` if the key does not exist (its create revision is 0)."""
    # Compare{result=EQUAL (0, omitted), target=CREATE, key, create_revision=0 (set in the oneof)}
    compare = b"\x10\x01" + _field(b"\x1a", key) + b"\x28\x00"
    put = _put(key, value)
    if lease:
        put += b"\x18" + _int64(lease)
    return _field(b"\x0a", compare) + _field(b"\x12", _field(b"\x12", put))


def update_txn(key: bytes, value: bytes, *, expected_revision: int) -> bytes:
    """Put ``value`` at ``key`` (returning the previous value) if the key exists and was
    last modified at ``expected_revision``; else read the key (the failure branch)."""
    key_field = _field(b"\x1a", key)
    # Compare{result=GREATER, target=VERSION, key, version=0}: the key exists.
    exists = b"\x08\x01" + key_field + b"\x20\x00"
    # Compare{result=EQUAL (omitted), target=MOD, key, mod_revision}
    unchanged = b"\x10\x02" + key_field + b"\x30" + _int64(expected_revision)
    put = _put(key, value) + b"\x20\x01"
    return (
        _field(b"\x0a", exists)
        + _field(b"\x0a", unchanged)
        + _field(b"\x12", _field(b"\x12", put))
        + _field(b"\x1a", _field(b"\x0a", range_request(key)))
    )
