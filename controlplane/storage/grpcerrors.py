"""How a failed etcd call reads: transient or not, a dropped connection, a refused TLS
handshake, and the storage error (:mod:`controlplane.storage.interface`) it becomes.

In: gRPC errors (``aetcd.rpc.AioRpcError``) and timeouts from :class:`~controlplane.storage.etcd.EtcdStore`.
Out: booleans for the retry loop, and exceptions whose messages name etcd's endpoint for the
hub's log (the API server never shows them to clients).
"""

from __future__ import annotations

from typing import Any

from aetcd import rpc

from controlplane.storage.interface import NoSpace, StorageError, TooLarge, Unavailable
from controlplane.storage.paging import ResponseTooLarge

_COMPACTED = "required revision has been compacted"
_FUTURE = "required revision is a future revision"
#: etcd's words for a request over its --max-request-bytes.
_REQUEST_TOO_LARGE = "request is too large"
#: gRPC's words for a response over the receive limit.
_RESPONSE_TOO_LARGE = "larger than max"
#: etcd's words for a write refused under the NOSPACE alarm (``rpctypes.ErrGRPCNoSpace``).
NO_SPACE = "etcdserver: mvcc: database space exceeded"
#: The calls that send a value: a size refusal of one of these is the value's fault.
_WRITES = frozenset({"create", "update"})
#: How gRPC reports a stream that a stopping etcd cut (see ``connection_dropped``).
_DROPPED_INTERNAL = ("Stream removed", "Internal error from Core")
_NO_STATUS = "No status received"
#: Fragments of gRPC's message for a TLS handshake that failed on certificates (retrying
#: cannot help, the settings must change), and what to check for each.
_UNTRUSTED_SERVER = ("CERTIFICATE_VERIFY_FAILED", "certificate verify failed", "Hostname Verification", "Peer name")
_REFUSED_CLIENT = ("BAD_CERTIFICATE", "CERTIFICATE_REQUIRED", "UNKNOWN_CA", "CERTIFICATE_UNKNOWN")


class StreamEnded(Exception):
    """etcd ended a watch stream before confirming it (retried like a dropped connection)."""


class RevisionError(StorageError):
    """A read or compaction named a compacted or future revision (mapped by the caller)."""

    def __init__(self, message: str, *, compacted: bool) -> None:
        super().__init__(message)
        self.compacted = compacted


def is_transient(exc: BaseException, *, idempotent: bool) -> bool:
    if isinstance(exc, rpc.AioRpcError):
        if handshake_refused(exc) is not None:
            return False
        return connection_dropped(exc) or (idempotent and exc.code() == rpc.StatusCode.DEADLINE_EXCEEDED)
    return idempotent and isinstance(exc, TimeoutError | StreamEnded)


def connection_dropped(exc: Any) -> bool:
    """etcd is unreachable or went away mid-call.

    Over TLS etcd serves gRPC through Go's HTTP/2 server, which ends open streams with an
    RST_STREAM when it shuts down; gRPC reports that as INTERNAL "Stream removed" (or, on
    an open watch stream, INTERNAL "Internal error from Core" or UNKNOWN "No status
    received"), not UNAVAILABLE. It means the same: the connection dropped.
    """
    code = exc.code()
    if code == rpc.StatusCode.UNAVAILABLE:
        return True
    details = exc.details() or ""
    if code == rpc.StatusCode.INTERNAL:
        return any(fragment in details for fragment in _DROPPED_INTERNAL)
    return code == rpc.StatusCode.UNKNOWN and _NO_STATUS in details


def handshake_refused(exc: Any) -> str | None:
    """What to check when a TLS handshake failed on certificates (retrying cannot help), else None."""
    if exc.code() != rpc.StatusCode.UNAVAILABLE:
        return None
    details = exc.details() or ""
    if any(fragment in details for fragment in _UNTRUSTED_SERVER):
        return (
            "its serving certificate is not trusted: check that --etcd-cafile holds the CA that signed it "
            "and that the certificate names the endpoint's host"
        )
    if any(fragment in details for fragment in _REFUSED_CLIENT):
        return (
            "it refused our client certificate: check that --etcd-certfile/--etcd-keyfile are given and "
            "signed by the CA etcd trusts (its --trusted-ca-file)"
        )
    return None


def storage_error(what: str, exc: Any, *, endpoint: str, timeout: float) -> Exception:
    """The storage error a failed etcd call (``what``, e.g. "create") maps to."""
    code, details = exc.code(), exc.details() or ""
    hint = handshake_refused(exc)
    if hint is not None:
        return Unavailable(f"TLS handshake with etcd at {endpoint} failed, {hint} (gRPC: {details})")
    if connection_dropped(exc):
        return Unavailable(f"etcd at {endpoint} is unreachable: {details}")
    if code == rpc.StatusCode.DEADLINE_EXCEEDED:
        return Unavailable(
            f"etcd at {endpoint} did not answer {what} within {timeout:g}s: {details}"
        )
    if code == rpc.StatusCode.RESOURCE_EXHAUSTED and NO_SPACE in details:
        return NoSpace(NO_SPACE)
    if what in _WRITES and (
        (code == rpc.StatusCode.INVALID_ARGUMENT and _REQUEST_TOO_LARGE in details)
        or code == rpc.StatusCode.RESOURCE_EXHAUSTED
    ):
        # --max-request-bytes (etcd's "request is too large"), or the gRPC message limit above it.
        return TooLarge(f"etcd refused the {what}: {details}")
    if code == rpc.StatusCode.RESOURCE_EXHAUSTED and _RESPONSE_TOO_LARGE in details:
        return ResponseTooLarge(f"etcd's answer to {what} exceeds the hub's etcd response limit: {details}")
    if code == rpc.StatusCode.OUT_OF_RANGE and (_COMPACTED in details or _FUTURE in details):
        return RevisionError(details, compacted=_COMPACTED in details)
    return StorageError(f"etcd at {endpoint} failed {what}: {code.name}: {details}")
