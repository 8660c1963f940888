"""One unary etcd call through gRPC's Cython call object, without grpc.aio's per-call Python layer.

In: the store's ``grpc.aio`` channel, a KV method and its response type. Out: an awaitable
callable ``(request bytes, timeout=seconds) -> response`` that raises ``grpc.aio.AioRpcError``
exactly where the generated stub's multicallable would (same status code, details and
trailing metadata), so retries and error mapping (:mod:`controlplane.storage.grpcerrors`) are
unchanged.

Why: a call through grpc.aio's multicallable builds a ``UnaryUnaryCall`` (metadata objects,
done-callbacks, a registration in the channel's call set) and runs the RPC in an asyncio Task
of its own, which the caller then awaits: two tasks and several Python objects per etcd call,
on every write and read the hub makes. The RPC itself is one batch on the Cython call object
(``AioChannel.call(...).unary_unary(...)``), which is what grpc.aio's task awaits; awaiting it
in the caller's own task does the same work with one task and none of those objects.

These are grpcio internals (``grpc.aio.Channel._channel`` and the Cython call's methods),
stable across grpcio 1.3x-1.8x but not a public API: :func:`direct_unary` checks for them and
hands back the public multicallable when they are missing, and
``tests/storage/test_etcd_wire.py`` fails if the installed grpcio no longer has them, so an
upgrade that changes them is noticed rather than silently slower.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any

import grpc.aio  # grpcio ships no type hints: see the mypy overrides in pyproject.toml
from aetcd import rpc

#: What grpc.aio tells the server when the caller's task is cancelled mid-call.
_LOCAL_CANCELLATION = "Locally cancelled by application!"
#: gRPC's status codes by their number (``grpc.StatusCode`` values are ``(number, name)``).
_STATUS_CODES = {code.value[0]: code for code in rpc.StatusCode}

Unary = Callable[..., Awaitable[Any]]


def cython_channel(channel: Any) -> Any | None:
    """The Cython channel under ``channel`` when it offers the call methods used here, else None."""
    cy = getattr(channel, "_channel", None)
    return cy if cy is not None and callable(getattr(cy, "call", None)) else None


def direct_unary(channel: Any, method: str, response_type: Any) -> Unary:
    """``method`` (``/etcdserverpb.KV/Txn``) of ``channel``, taking serialized requests."""
    public = channel.unary_unary(method, response_deserializer=response_type.FromString, _registered_method=True)
    cy = cython_channel(channel)
    if cy is None:
        return public  # type: ignore[no-any-return]
    name = method.encode()
    handle = getattr(public, "_registered_call_handle", 0)
    parse = response_type.FromString

    async def call(request: bytes, *, timeout: float) -> Any:  # noqa: ASYNC109 (the gRPC deadline, as the stub's)
        rpc_call = cy.call(name, time.time() + timeout, None, None, handle)
        try:
            response = await rpc_call.unary_unary(request, (), None)
        except asyncio.CancelledError:
            if not rpc_call.done():
                rpc_call.cancel(_LOCAL_CANCELLATION)
            raise
        if rpc_call.is_ok():
            return parse(response)
        if rpc_call.is_locally_cancelled():
            raise asyncio.CancelledError()
        status = await rpc_call.status()
        raise rpc.AioRpcError(
            _STATUS_CODES[status.code()],
            grpc.aio.Metadata(),
            grpc.aio.Metadata.from_tuple(status.trailing_metadata()),
            details=status.details(),
            debug_error_string=status.debug_error_string(),
        )

    return call
