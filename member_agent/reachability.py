"""Whether the agent reaches an API server: one line when it stops answering, one when it is back.

While the hub is away, every loop of the agent that talks to it -- the heartbeat, the Work and
customization watches, the capacity report, the Work status writes -- fails at each of its
retries. Logged by each loop at WARNING, with aiohttp's repr of the error, that was a dozen
lines of ``ClientConnectorError(ConnectionKey(host=..., ...))`` every few seconds for as long
as the hub stayed down. Instead the transport tells the server's :class:`Reachability` of
each failure to connect: the first one (or one for another reason) is logged at WARNING as one
line in words, ``hub https://hub.example:6443 unreachable (connection refused); retrying``,
the ones after it at DEBUG, and the first answer after them at INFO (``hub ... answers
again``). A loop logs its own failures of that kind at DEBUG (:func:`failure_level`); any other
failure (a refusal, a conflict, a 5xx) stays a WARNING there.

In: transport exceptions (aiohttp, OS, TLS, timeouts) and answers. Out: log lines, and the
:class:`Unreachable` error whose message says what failed in a few words
(:func:`connection_problem`).
"""

from __future__ import annotations

import asyncio
import errno
import logging
import socket
import ssl
from typing import Final

import aiohttp

from member_agent.apierrors import Unavailable

logger = logging.getLogger(__name__)

_ERRNO_WORDS: Final[dict[int, str]] = {
    errno.ECONNREFUSED: "connection refused",
    errno.ECONNRESET: "connection reset",
    errno.ECONNABORTED: "connection aborted",
    errno.ETIMEDOUT: "timed out",
    errno.EHOSTUNREACH: "no route to host",
    errno.ENETUNREACH: "network unreachable",
    errno.EPIPE: "connection closed",
}


class Unreachable(Unavailable):
    """The server could not be reached, or the connection to it broke (worth retrying)."""

    def __init__(self, server: str, problem: str, *, what: str = "") -> None:
        message = f"{what + ' ' if what else ''}{server} unreachable ({problem})"
        super().__init__(0, "Unavailable", message)
        self.args = (message,)
        self.server = server
        self.problem = problem


def connection_problem(exc: BaseException) -> str:
    """What went wrong with a connection, in a few words (``connection refused``, ``timed out``,
    ``name not resolved: ...``, ``TLS: certificate verify failed: ...``), never a repr."""
    if isinstance(exc, aiohttp.ClientConnectorCertificateError):
        return f"TLS: {_tls_words(exc.certificate_error)}"
    if isinstance(exc, aiohttp.ClientConnectorError):
        return connection_problem(exc.os_error)
    if isinstance(exc, aiohttp.ServerDisconnectedError):
        return "server disconnected"
    if isinstance(exc, TimeoutError | asyncio.TimeoutError | aiohttp.ServerTimeoutError):
        return "timed out"
    if isinstance(exc, ssl.SSLError):
        return f"TLS: {_tls_words(exc)}"
    if isinstance(exc, socket.gaierror):
        return f"name not resolved: {exc.strerror or exc}"
    if isinstance(exc, OSError):
        if exc.errno in _ERRNO_WORDS:
            return _ERRNO_WORDS[exc.errno]
        text = str(exc)
        # asyncio's error for a host with several addresses, each refused.
        if exc.errno is None and text.startswith("Multiple exceptions") and f"[Errno {errno.ECONNREFUSED}]" in text:
            return "connection refused"
        return (exc.strerror or text or type(exc).__name__).lower()
    if isinstance(exc, aiohttp.ClientPayloadError):
        return "the answer broke off"
    text = str(exc)
    return text if text and len(text) <= 200 else type(exc).__name__


def _tls_words(exc: BaseException) -> str:
    if isinstance(exc, ssl.SSLCertVerificationError) and exc.verify_message:
        return f"certificate verify failed: {exc.verify_message}"
    if isinstance(exc, ssl.SSLError) and exc.reason:
        return str(exc.reason).lower().replace("_", " ")
    return str(exc) or type(exc).__name__


class Reachability:
    """Whether ``server`` (``what``: ``hub``, ``member cluster``) answered last, logged on change."""

    def __init__(self, what: str, server: str) -> None:
        self.what = what
        self.server = server.rstrip("/")
        #: Why the last attempt failed to connect; None while the server answers.
        self.problem: str | None = None

    def failed(self, exc: BaseException) -> Unreachable:
        """Note a failure to connect (or a connection that broke); the error to raise for it."""
        error = exc if isinstance(exc, Unreachable) else Unreachable(self.server, connection_problem(exc), what=self.what)
        level = logging.DEBUG if error.problem == self.problem else logging.WARNING
        self.problem = error.problem
        logger.log(level, "%s; retrying", error)
        return error

    def answered(self) -> None:
        """Note an answer (any HTTP status: the server is there)."""
        if self.problem is not None:
            self.problem = None
            logger.info("%s %s answers again", self.what, self.server)


def failure_level(exc: BaseException | None) -> int:
    """The level a loop logs its failure at: DEBUG for one its server's :class:`Reachability` has
    logged already, WARNING for anything else."""
    return logging.DEBUG if isinstance(exc, Unreachable) else logging.WARNING
