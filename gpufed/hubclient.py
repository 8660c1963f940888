"""How the user-facing commands reach the hub: find the kubeconfig as kubectl does and
make authenticated HTTPS calls.

Lookup order: ``--kubeconfig``, then ``$KUBECONFIG`` (first file), then
``.gpufed/hub.kubeconfig``. Errors come back as :class:`HubError` carrying the hub's
``Status`` message, so commands print one line a person can act on, in kubectl's words
(:attr:`HubError.line`).

Every LIST goes through one pager (:meth:`HubClient.list_pages`, :meth:`HubClient.read_list`),
as kubectl's: ``limit`` items per request (``--chunk-size``, 500 unless told; 0 asks for the
whole list at once) and the ``continue`` token of each page for the next, so the answer cap
applies to one page, never to the whole list. A continue token the hub has compacted away
(410 ``Expired``) starts the list again once from the beginning, as client-go's pager falls
back to a fresh list; a second expiry ends the command with the hub's message.
"""

from __future__ import annotations

import argparse
import errno
import json
import logging
import os
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple
from urllib.parse import urlsplit

import aiohttp

from controlplane.apiserver.kubeconfig import (
    HubCredentials,
    KubeconfigError,
    context_namespace,
    load_kubeconfig,
)
from controlplane.apiserver.tls import client_ssl_context
from gpufed.argtypes import whole_number

DEFAULT_KUBECONFIG = Path(".gpufed") / "hub.kubeconfig"
REQUEST_TIMEOUT = aiohttp.ClientTimeout(total=30)
#: The most a command reads of one answer from the hub: a hub (or something posing as one) that
#: sends more is refused before the command holds it all, never read whole into memory.
MAX_RESPONSE_BYTES = 64 * 1024 * 1024
_READ_CHUNK = 64 * 1024
#: kubectl's default ``--chunk-size``: how many items one LIST request asks for.
DEFAULT_CHUNK_SIZE = 500
#: The most pages one list is read in: a server whose continue tokens never end is refused, not
#: followed forever (at the default chunk size, five million items).
MAX_LIST_PAGES = 10_000

logger = logging.getLogger(__name__)


# What OpenSSL calls a certificate no CA the client trusts signed: Go's "x509: certificate
# signed by unknown authority" (self-signed leaf or chain, missing or unverifiable issuer).
_UNKNOWN_AUTHORITY = frozenset({18, 19, 20, 21})


class HubError(Exception):
    """A call to the hub failed; the message is meant for the user.

    ``status`` is the HTTP status code when the hub answered (None when it could not
    be reached), ``reason`` the Kubernetes Status reason (NotFound, Conflict, ...).
    ``prefixed`` is False for the sentences kubectl prints as they are (``Error from server
    (NotFound): …``, ``The connection to the server … was refused …``).
    """

    def __init__(self, message: str, *, status: int | None = None, reason: str | None = None,
                 prefixed: bool = True) -> None:
        super().__init__(message)
        self.status = status
        self.reason = reason
        self.prefixed = prefixed

    @property
    def line(self) -> str:
        """The line a command that fails with this error ends with, as kubectl words it."""
        return f"error: {self}" if self.prefixed else str(self)

    @classmethod
    def from_status(cls, code: int, reason: str, message: str) -> HubError:
        """The hub answered ``code`` with a Status: kubectl's ``You must be logged in to the server
        (…)`` for a 401, ``Error from server (Reason): message`` for the rest."""
        if code == 401:
            return cls(f"You must be logged in to the server ({message})", status=code, reason=reason)
        return cls(f"Error from server ({reason}): {message}", status=code, reason=reason, prefixed=False)


def unreachable(server: str, exc: aiohttp.ClientError, *, kubeconfig: Path | None = None) -> HubError:
    """kubectl's words for a hub the client could not talk to (refused, TLS, DNS, a dropped
    connection), naming the address and, for an untrusted certificate, the kubeconfig to fix."""
    host = urlsplit(server).netloc or server
    if isinstance(exc, aiohttp.ClientConnectorCertificateError):
        failure = exc.certificate_error
        code = getattr(failure, "verify_code", None)
        if code in _UNKNOWN_AUTHORITY:
            where = f"the CA in {kubeconfig}" if kubeconfig else "the kubeconfig's CA"
            return HubError(
                "Unable to connect to the server: tls: failed to verify certificate: x509: certificate signed "
                f"by unknown authority (the certificate of {host} is not signed by {where})", prefixed=False)
        detail = getattr(failure, "verify_message", None) or failure
        return HubError(f"Unable to connect to the server: tls: failed to verify certificate: {detail} ({host})",
                        prefixed=False)
    if isinstance(exc, aiohttp.ClientConnectorError):
        if exc.os_error.errno == errno.ECONNREFUSED:
            return HubError(
                f"The connection to the server {host} was refused - did you specify the right host or port?",
                prefixed=False)
        return HubError(f"Unable to connect to the server: {host}: {exc.os_error.strerror or exc.os_error}",
                        prefixed=False)
    return HubError(f"Unable to connect to the server: {host}: {exc}", prefixed=False)


def _size(limit: int) -> str:
    return f"{limit // (1024 * 1024)} MiB" if limit % (1024 * 1024) == 0 else f"{limit} bytes"


async def read_answer(resp: aiohttp.ClientResponse, *, method: str, path: str, limit: int = MAX_RESPONSE_BYTES) -> bytes:
    """The body of the hub's answer to ``method path``, at most ``limit`` bytes: a larger one (by
    its Content-Length, or as it arrives) is a :class:`HubError` that says so and what to do."""
    declared = resp.content_length
    body = bytearray()
    if declared is None or declared <= limit:
        async for chunk in resp.content.iter_chunked(_READ_CHUNK):
            body += chunk
            if len(body) > limit:
                break
        else:
            return bytes(body)
    raise HubError(
        f"the hub's answer to {method} {path} exceeds {_size(limit)}, the most gpufed reads of one answer; "
        "ask for less (one namespace, a selector, a smaller --chunk-size)"
    )


def add_chunk_size_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--chunk-size", type=whole_number(), default=DEFAULT_CHUNK_SIZE, metavar="N",
        help=f"read lists N items per request, as kubectl's --chunk-size (default {DEFAULT_CHUNK_SIZE}; 0: all at once)",
    )


class ListPage(NamedTuple):
    """One answer of a paged LIST."""

    body: dict[str, Any]
    #: True for the first page of the list, also of a list started again after its continue token
    #: expired: what earlier pages gave is to be dropped.
    first: bool


def _entries_key(body: dict[str, Any]) -> str:
    """Where a list answer keeps its entries: a Table's ``rows``, any other list's ``items``."""
    return "rows" if body.get("kind") == "Table" else "items"


def add_kubeconfig_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--kubeconfig",
        type=Path,
        help="hub kubeconfig (default: $KUBECONFIG, else .gpufed/hub.kubeconfig)",
    )


def add_namespace_argument(parser: argparse.ArgumentParser, *, what: str = "the namespace") -> None:
    """``-n/--namespace`` as kubectl's: when not given (or empty), the namespace of the
    kubeconfig's current context, else ``default`` (:func:`resolve_namespace`, run by
    :func:`gpufed.cli.main` before the command)."""
    parser.add_argument(
        "-n", "--namespace", default="", help=f"{what} (default: the kubeconfig context's namespace, else default)"
    )
    parser.set_defaults(namespace_from_context=True)


def resolve_namespace(args: argparse.Namespace) -> None:
    """Fill in ``args.namespace`` of a command with :func:`add_namespace_argument`. A kubeconfig
    that cannot be read gives ``default``: the command's own load says what is wrong with it."""
    if not getattr(args, "namespace_from_context", False) or args.namespace:
        return
    try:
        args.namespace = context_namespace(resolve_kubeconfig(getattr(args, "kubeconfig", None))) or "default"
    except (KubeconfigError, OSError):
        args.namespace = "default"


def resolve_kubeconfig(explicit: Path | None) -> Path:
    if explicit is not None:
        return explicit
    env = os.environ.get("KUBECONFIG", "")
    for candidate in env.split(os.pathsep):
        if candidate:
            return Path(candidate)
    return DEFAULT_KUBECONFIG


@dataclass
class HubClient:
    credentials: HubCredentials
    kubeconfig: Path | None = None  # the file the credentials came from, named in TLS errors
    #: The most read of one answer (:func:`read_answer`).
    max_response_bytes: int = MAX_RESPONSE_BYTES
    #: How many items one LIST request asks for (``limit``); 0 asks for the whole list at once.
    chunk_size: int = DEFAULT_CHUNK_SIZE

    @classmethod
    def from_kubeconfig(cls, explicit: Path | None, *, missing: str = "") -> HubClient:
        """The client of the kubeconfig ``explicit`` (else found as kubectl finds it); ``missing``
        is what to say when the file is not there, in place of the hub's hint."""
        path = resolve_kubeconfig(explicit)
        if not path.exists():
            raise HubError(missing or (
                f"no hub kubeconfig at {path}: start a hub (`gpufed up` or `gpufed controlplane`) "
                "or pass --kubeconfig"
            ))
        try:
            return cls(load_kubeconfig(path), path)
        except KubeconfigError as exc:
            raise HubError(str(exc)) from exc
        except OSError as exc:  # a directory, an unreadable file, a missing CA or token file it names
            named = "" if exc.filename in (None, str(path)) else f": {exc.filename}"
            raise HubError(f"cannot read the kubeconfig {path}{named}: {exc.strerror or exc}") from exc

    @property
    def server(self) -> str:
        return self.credentials.server.rstrip("/")

    async def request(self, method: str, path: str, *, body: Any = None,
                      content_type: str = "application/json", params: dict[str, str] | None = None,
                      accept: str = "application/json") -> Any:
        ssl_context = client_ssl_context(self.credentials.ca_pem)
        headers = {"Authorization": f"Bearer {self.credentials.token}", "Accept": accept}
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            headers["Content-Type"] = content_type
        connector = aiohttp.TCPConnector(ssl=ssl_context)
        try:
            async with (
                aiohttp.ClientSession(connector=connector, timeout=REQUEST_TIMEOUT) as session,
                session.request(method, self.server + path, data=data, headers=headers, params=params) as resp,
            ):
                raw = await read_answer(resp, method=method, path=path, limit=self.max_response_bytes)
                text = raw.decode("utf-8", errors="replace")  # kube's JSON is UTF-8
                try:
                    payload = json.loads(text) if text else None
                except ValueError:
                    if resp.status < 400:
                        raise HubError(f"the server at {self.server} answered {path} with something that is not "
                                       "JSON; is the kubeconfig's server a gpufed hub?") from None
                    payload = None
                if resp.status >= 400:
                    status = payload if isinstance(payload, dict) else {}
                    message = status.get("message") or text.strip()[:500]
                    reason = status.get("reason") or resp.reason or ""
                    raise HubError.from_status(resp.status, reason, message)
                return payload
        except aiohttp.ClientError as exc:
            raise unreachable(self.server, exc, kubeconfig=self.kubeconfig) from exc
        except TimeoutError as exc:
            raise HubError(f"the hub at {self.server} did not answer within {REQUEST_TIMEOUT.total:.0f}s") from exc

    async def get_or_none(self, path: str) -> dict[str, Any] | None:
        """The object at ``path``, or None when the server answers 404."""
        try:
            found = await self.request("GET", path)
        except HubError as exc:
            if exc.status == 404:
                return None
            raise
        return found if isinstance(found, dict) else None

    async def list_pages(self, path: str, *, params: dict[str, str] | None = None,
                         accept: str = "application/json") -> AsyncIterator[ListPage]:
        """The pages of the list at ``path``, ``chunk_size`` items each, as the hub answers them.

        A continue token the hub answers 410 ``Expired`` for starts the list again once from the
        beginning (the next page then says ``first``); a second expiry is the hub's error.
        """
        query = dict(params or {})
        if self.chunk_size:
            query["limit"] = str(self.chunk_size)
        restarted = False
        token = ""
        first = True
        for _ in range(MAX_LIST_PAGES):
            try:
                body = await self.request("GET", path, params={**query, "continue": token} if token else query, accept=accept)
            except HubError as exc:
                if not token or restarted or exc.status != 410 or exc.reason != "Expired":
                    raise
                logger.debug("the continue token of %s expired; listing it again from the start", path)
                restarted, token, first = True, "", True
                continue
            if not isinstance(body, dict) or not isinstance(body.get(_entries_key(body)) or [], list):
                raise HubError(f"the server at {self.server} answered the list {path} with something that is not a list")
            yield ListPage(body, first)
            first = False
            token = str((body.get("metadata") or {}).get("continue") or "")
            if not token:
                return
        raise HubError(f"the list {path} did not end after {MAX_LIST_PAGES} pages; ask for less (one namespace, a selector)")

    async def read_list(self, path: str, *, params: dict[str, str] | None = None,
                        accept: str = "application/json") -> dict[str, Any]:
        """The whole list at ``path`` as one answer: the first page with the entries (``items``, or
        a Table's ``rows``) of every page, read by :meth:`list_pages`."""
        whole: dict[str, Any] = {}
        for_key = "items"
        async for page in self.list_pages(path, params=params, accept=accept):
            if page.first:
                for_key = _entries_key(page.body)
                whole = {**page.body, for_key: list(page.body.get(for_key) or [])}
            else:
                whole[for_key].extend(page.body.get(for_key) or [])
        whole["metadata"] = {k: v for k, v in (whole.get("metadata") or {}).items()
                             if k not in ("continue", "remainingItemCount")}
        return whole
