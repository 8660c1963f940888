"""Dialing a WebSocket with aiohttp without losing a refused handshake's answer.

``aiohttp``'s ``ws_connect`` raises on a non-101 answer and drops its body, which for a kube
API is the Status saying why (403 with the RBAC reason, 404 for an unknown pod). :func:`dial`
reads that body first and raises :class:`HandshakeRefused` with the status, headers and body.
Used by the agent (toward a member) and by `gpufed exec` (toward the hub).
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
from aiohttp import ClientHandlerType, ClientRequest, ClientResponse

#: The most of a refusal's body kept.
MAX_REFUSAL_BYTES = 64 * 1024


class HandshakeRefused(Exception):
    """The server answered the WebSocket handshake with ``status`` instead of 101."""

    def __init__(self, status: int, headers: list[tuple[str, str]], body: bytes) -> None:
        self.status = status
        self.headers = headers
        self.body = body
        super().__init__(f"{status}: {self.message}")

    @property
    def message(self) -> str:
        """The Status message of the body, else the body's text."""
        text = self.body.decode(errors="replace").strip()
        try:
            status = json.loads(text)
        except ValueError:
            return text
        return str(status.get("message") or text) if isinstance(status, dict) else text


class _Refusal:
    def __init__(self) -> None:
        self.answer: tuple[int, list[tuple[str, str]], bytes] | None = None

    async def middleware(self, request: ClientRequest, handler: ClientHandlerType) -> ClientResponse:
        response = await handler(request)
        if response.status != 101:
            body = await response.content.read(MAX_REFUSAL_BYTES)
            self.answer = (response.status, list(response.headers.items()), body)
        return response


@contextlib.asynccontextmanager
async def dial(session: aiohttp.ClientSession, url: str, **options: Any) -> AsyncIterator[aiohttp.ClientWebSocketResponse]:
    """``session.ws_connect(url, **options)`` (over the session's connector); a refused handshake
    raises :class:`HandshakeRefused`."""
    refusal = _Refusal()
    async with aiohttp.ClientSession(
        connector=session.connector, connector_owner=False, middlewares=(refusal.middleware,)
    ) as dialer:
        try:
            ws = await dialer.ws_connect(url, **options)
        except aiohttp.WSServerHandshakeError as exc:
            if refusal.answer is None:
                raise
            raise HandshakeRefused(*refusal.answer) from exc
        async with ws:
            yield ws
