"""The hand-encoded etcd requests are byte for byte the protobuf messages they stand for."""

from __future__ import annotations

import pytest
from aetcd import rpc

from controlplane.storage.connecting import grpc_target
from controlplane.storage.etcd import unary, wire

KEYS = [b"/gpufed/registry/core/configmaps/ns/a", b"/k", b"/" + b"x" * 300]
VALUES = [b"", b"{}", b"v" * 127, b"v" * 128, b"v" * 20_000]
REVISIONS = [0, 1, 127, 128, 16_383, 16_384, 2**31, 2**63 - 1, -1, -(2**63)]
#: Write guards (the leader key a controller's writes are fenced by): none, one, two.
GUARDS: list[tuple[wire.Guard, ...]] = [
    (),
    ((b"/gpufed/leases/controller-manager", 7),),
    ((b"/l", 0), (b"/" + b"g" * 200, 2**40)),
]


def _guard_compares(guards: tuple[wire.Guard, ...]) -> list[rpc.Compare]:
    return [
        rpc.Compare(key=key, target=rpc.Compare.CREATE, result=rpc.Compare.EQUAL, create_revision=revision)
        for key, revision in guards
    ]


def _guard_reads(guards: tuple[wire.Guard, ...]) -> list[rpc.RequestOp]:
    return [rpc.RequestOp(request_range=rpc.RangeRequest(key=key, keys_only=True)) for key, _ in guards]


def _update(key: bytes, value: bytes, revision: int, guards: tuple[wire.Guard, ...] = ()) -> bytes:
    return rpc.TxnRequest(
        compare=[
            rpc.Compare(key=key, target=rpc.Compare.VERSION, result=rpc.Compare.GREATER, version=0),
            rpc.Compare(key=key, target=rpc.Compare.MOD, result=rpc.Compare.EQUAL, mod_revision=revision),
            *_guard_compares(guards),
        ],
        success=[rpc.RequestOp(request_put=rpc.PutRequest(key=key, value=value, prev_kv=True))],
        failure=[rpc.RequestOp(request_range=rpc.RangeRequest(key=key)), *_guard_reads(guards)],
    ).SerializeToString()


def _create(key: bytes, value: bytes, lease: int, guards: tuple[wire.Guard, ...] = ()) -> bytes:
    return rpc.TxnRequest(
        compare=[
            rpc.Compare(key=key, target=rpc.Compare.CREATE, result=rpc.Compare.EQUAL, create_revision=0),
            *_guard_compares(guards),
        ],
        success=[rpc.RequestOp(request_put=rpc.PutRequest(key=key, value=value, lease=lease))],
        failure=_guard_reads(guards),
    ).SerializeToString()


@pytest.mark.parametrize("key", KEYS)
@pytest.mark.parametrize("value", VALUES)
@pytest.mark.parametrize("guards", GUARDS, ids=["unguarded", "one-guard", "two-guards"])
def test_update_and_create_match_protobuf(key: bytes, value: bytes, guards: tuple[wire.Guard, ...]) -> None:
    for revision in REVISIONS:
        assert wire.update_txn(key, value, expected_revision=revision, guards=guards) == _update(
            key, value, revision, guards
        )
        assert wire.create_txn(key, value, lease=revision, guards=guards) == _create(key, value, revision, guards)


@pytest.mark.parametrize("key", KEYS)
def test_range_matches_protobuf(key: bytes) -> None:
    assert wire.range_request(key) == rpc.RangeRequest(key=key).SerializeToString()


def test_encoded_requests_decode_to_what_they_stand_for() -> None:
    request = rpc.TxnRequest.FromString(wire.update_txn(b"/k", b"v", expected_revision=42))
    assert [c.mod_revision for c in request.compare] == [0, 42]
    assert request.success[0].request_put.prev_kv
    assert request.failure[0].request_range.key == b"/k"
    fenced = rpc.TxnRequest.FromString(wire.create_txn(b"/k", b"v", guards=[(b"/leader", 9)]))
    assert [(c.key, c.create_revision) for c in fenced.compare] == [(b"/k", 0), (b"/leader", 9)]
    assert [(op.request_range.key, op.request_range.keys_only) for op in fenced.failure] == [(b"/leader", True)]


@pytest.mark.parametrize("revision", [2**63, -(2**63) - 1])
def test_out_of_range_numbers_are_refused_as_protobuf_does(revision: int) -> None:
    with pytest.raises(ValueError, match="out of range"):
        _update(b"/k", b"v", revision)
    with pytest.raises(ValueError, match="out of range"):
        wire.update_txn(b"/k", b"v", expected_revision=revision)


async def test_the_installed_grpcio_offers_the_direct_call_path() -> None:
    """The direct path uses grpc.aio internals; an upgrade without them must be noticed."""
    async with rpc.insecure_channel("127.0.0.1:1") as channel:
        assert unary.cython_channel(channel) is not None


async def test_direct_calls_answer_and_fail_as_the_generated_stub(etcd_endpoint: str) -> None:
    async with rpc.insecure_channel(grpc_target([etcd_endpoint])) as channel:
        stub = rpc.KVStub(channel)
        direct = unary.direct_unary(channel, "/etcdserverpb.KV/Range", rpc.RangeResponse)
        assert not isinstance(direct, type(stub.Range))  # the direct path, not the fallback
        await stub.Put(rpc.PutRequest(key=b"/wire-test/a", value=b"v"))
        found = await direct(wire.range_request(b"/wire-test/a"), timeout=10)
        assert found == await stub.Range(rpc.RangeRequest(key=b"/wire-test/a"), timeout=10)
        assert found.kvs[0].value == b"v"
        future = rpc.RangeRequest(key=b"/wire-test/a", revision=found.header.revision + 1000)
        with pytest.raises(rpc.AioRpcError) as from_stub:
            await stub.Range(future, timeout=10)
        with pytest.raises(rpc.AioRpcError) as from_direct:
            await direct(future.SerializeToString(), timeout=10)
        assert from_direct.value.code() == from_stub.value.code() == rpc.StatusCode.OUT_OF_RANGE
        assert from_direct.value.details() == from_stub.value.details()
        with pytest.raises(rpc.AioRpcError) as late_stub:
            await stub.Range(rpc.RangeRequest(key=b"/wire-test/a"), timeout=-1)
        with pytest.raises(rpc.AioRpcError) as late:
            await direct(wire.range_request(b"/wire-test/a"), timeout=-1)  # a deadline already past
        assert late.value.code() == late_stub.value.code() == rpc.StatusCode.DEADLINE_EXCEEDED
