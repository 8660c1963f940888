"""The etcd requests of the hub's hot paths, encoded straight to protobuf bytes.

In: a full key (namespace included), a value and revisions. Out: the serialized
``RangeRequest`` of a single-key read and the ``TxnRequest`` of a compare-and-create and a
compare-and-swap update, each optionally fenced by write guards (the controllers' writes:
:class:`~controlplane.leader.fencing.FencedStore`), byte for byte what
``rpc.TxnRequest(...).SerializeToString()`` gives for the same request
(``tests/storage/test_etcd_wire.py`` checks it).

Why: building those requests as protobuf objects (a ``TxnRequest`` holding two ``Compare``
messages and two ``RequestOp`` messages, each made from keyword arguments) cost the hub about
three times as much CPU as concatenating their few fields, on every write of every object.
Only these three shapes are encoded here; everything else (deletes, leases' own calls,
ranges with limits, compaction) builds protobuf objects as before.

Field numbers and enum values are etcd's ``etcdserverpb`` (``rpc.proto``):
``TxnRequest{compare=1, success=2, failure=3}``, ``Compare{result=1, target=2, key=3,
version=4, create_revision=5, mod_revision=6}``, ``RequestOp{request_range=1,
request_put=2}``, ``PutRequest{key=1, value=2, lease=3, prev_kv=4}``, ``RangeRequest{key=1,
keys_only=8}``;
``Compare.EQUAL=0, GREATER=1``, ``Compare.VERSION=0, CREATE=1, MOD=2``.
"""

from __future__ import annotations

from collections.abc import Sequence

#: A write guard as the wire sees it: the guard key (namespace included) and the create
#: revision it must have (:class:`~controlplane.storage.etcd.WriteGuard`).
Guard = tuple[bytes, int]


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


def _created_at(key: bytes, revision: int) -> bytes:
    """``Compare{result=EQUAL (0, omitted), target=CREATE, key, create_revision}``: the key was
    created at ``revision`` (0: it does not exist; set in the oneof, so written even when 0)."""
    return _field(b"\x0a", b"\x10\x01" + _field(b"\x1a", key) + b"\x28" + _int64(revision))


def _guards(guards: Sequence[Guard]) -> tuple[bytes, bytes]:
    """The compares that fence a write by ``guards``, and the failure-branch reads that tell
    which guard failed (``RequestOp{request_range=RangeRequest{key, keys_only=true}}``)."""
    compares = b"".join(_created_at(key, revision) for key, revision in guards)
    reads = b"".join(_field(b"\x1a", _field(b"\x0a", _field(b"\x0a", key) + b"\x40\x01")) for key, _ in guards)
    return compares, reads


def create_txn(key: bytes, value: bytes, *, lease: int = 0, guards: Sequence[Guard] = ()) -> bytes:
    """Put ``value`` at ``key`` if the key does not exist (its create revision is 0) and every
    guard holds; on failure, read each guard's key."""
    put = _put(key, value)
    if lease:
        put += b"\x18" + _int64(lease)
    fence, reads = _guards(guards)
    return _created_at(key, 0) + fence + _field(b"\x12", _field(b"\x12", put)) + reads


def update_txn(key: bytes, value: bytes, *, expected_revision: int, guards: Sequence[Guard] = ()) -> bytes:
    """Put ``value`` at ``key`` (returning the previous value) if the key exists, was last
    modified at ``expected_revision`` and every guard holds; else read the key, then each
    guard's key (the failure branch)."""
    key_field = _field(b"\x1a", key)
    # Compare{result=GREATER, target=VERSION, key, version=0}: the key exists.
    exists = b"\x08\x01" + key_field + b"\x20\x00"
    # Compare{result=EQUAL (omitted), target=MOD, key, mod_revision}
    unchanged = b"\x10\x02" + key_field + b"\x30" + _int64(expected_revision)
    put = _put(key, value) + b"\x20\x01"
    fence, reads = _guards(guards)
    return (
        _field(b"\x0a", exists)
        + _field(b"\x0a", unchanged)
        + fence
        + _field(b"\x12", _field(b"\x12", put))
        + _field(b"\x1a", _field(b"\x0a", range_request(key)))
        + reads
    )
