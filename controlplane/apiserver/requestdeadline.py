"""kube-apiserver's ``--request-timeout`` for the part of a request a client controls: its body.

In: the seconds a request may take (``ServingLimits.request_timeout``) and which requests are
long-running. Out: a middleware (:func:`body_deadline_middleware`).

kube bounds every request that is not long-running by ``--request-timeout`` (60 s) from when it
arrives: past it, its timeout filter answers ``504 Timeout: request did not complete within the
allotted timeout``, and the handler's context ends, so what it held (its priority-and-fairness seat
among them) is given back. Here the bound is on the body: a client declaring a large
``Content-Length`` and sending a byte a second held a seat as long as it liked. A request whose body
has not all arrived by then is answered that 504 (the seat released as the error leaves the
flow-control middleware), and its connection is closed after the answer, as Go closes one whose
body was not read to its end. The answer is written as kube's timeout filter writes it
(``baseTimeoutWriter.timeout``: the Status encoded as it is, without ``kind`` and ``apiVersion``,
and no ``Content-Type``, which Go's sniffing makes ``text/plain; charset=utf-8``), so a client reads
it as kube's: client-go, finding no decoder for it, says ``the server was unable to return a
response in the time allotted, but may still be processing the request``. A request whose body has
arrived is not bounded here; a request without a body costs nothing (no timer).

As kube's ``WithRequestDeadline``, a request's ``timeout`` query parameter (kubectl's
``--request-timeout`` sends it) shortens the deadline when it is shorter (0 or a longer one leaves
``--request-timeout``), and one that is no Go duration is kube's ``400 invalid timeout specified in
the request URL - time: invalid duration "abc"``, before the request is authenticated.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import orjson
from aiohttp import web
from aiohttp.typedefs import Middleware

from controlplane.apis.durations import go_duration_error, go_duration_seconds
from controlplane.apiserver import errors

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]

#: kube-apiserver's ``--request-timeout`` default.
DEFAULT_REQUEST_TIMEOUT = 60.0
#: kube's timeout filter's message (``apierrors.NewTimeoutError``: "Timeout: " and this).
TIMED_OUT = "Timeout: request did not complete within the allotted timeout"
#: What the filter writes: ``json.NewEncoder(w).Encode(&err.ErrStatus)``, metav1.Status's fields in
#: their Go order (an empty TypeMeta left out; NewTimeoutError's details hold only a zero retryAfterSeconds).
TIMED_OUT_BODY = orjson.dumps({
    "metadata": {}, "status": "Failure", "message": TIMED_OUT, "reason": "Timeout", "details": {}, "code": 504,
}) + b"\n"


def timed_out() -> web.Response:
    """kube's timeout filter's answer (module docstring)."""
    return web.Response(status=504, body=TIMED_OUT_BODY, content_type="text/plain", charset="utf-8")


class _BodyTimedOut(TimeoutError):
    """Set on a request's body stream at the deadline: what a read of the body raises. A
    ``TimeoutError``, so aiohttp, reading what is left of the body after the answer, stops and
    closes the connection instead of logging it."""


def _deadline(request: web.Request, limit: float) -> float:
    """The request's deadline in seconds: ``limit``, or its shorter ``timeout`` (kube's ``parseTimeout``)."""
    asked = request.query.get("timeout")
    if not asked:
        return limit
    problem = go_duration_error(asked)
    if problem is not None:
        raise errors.BadRequest(f"invalid timeout specified in the request URL - {problem}")
    wanted = go_duration_seconds(asked)
    return wanted if 0 < wanted < limit else limit


def body_deadline_middleware(limit: float, long_running: Callable[[web.Request], bool]) -> Middleware:
    @web.middleware
    async def middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
        if long_running(request):
            return await handler(request)
        seconds = _deadline(request, limit)
        body = request.content
        if not request.body_exists or body.is_eof():
            return await handler(request)

        def expired() -> None:
            if not body.is_eof():
                body.set_exception(_BodyTimedOut(TIMED_OUT))

        deadline = asyncio.get_running_loop().call_later(seconds, expired)
        try:
            return await handler(request)
        except _BodyTimedOut:
            return timed_out()
        finally:
            deadline.cancel()

    return middleware
