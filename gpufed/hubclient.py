"""How the user-facing commands reach the hub: find the kubeconfig as kubectl does and
make authenticated HTTPS calls.

Lookup order: ``--kubeconfig``, then ``$KUBECONFIG`` (first file), then
``.gpufed/hub.kubeconfig``. Errors come back as :class:`HubError` carrying the hub's
``Status`` message, so commands print one line a person can act on.
"""

from __future__ import annotations

import argparse
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp

from controlplane.apiserver.kubeconfig import HubCredentials, KubeconfigError, load_kubeconfig
from controlplane.apiserver.tls import client_ssl_context

DEFAULT_KUBECONFIG = Path(".gpufed") / "hub.kubeconfig"
REQUEST_TIMEOUT = aiohttp.ClientTimeout(total=30)


class HubError(Exception):
    """A call to the hub failed; the message is meant for the user.

    ``status`` is the HTTP status code when the hub answered (None when it could not
    be reached), ``reason`` the Kubernetes Status reason (NotFound, Conflict, ...).
    """

    def __init__(self, message: str, *, status: int | None = None, reason: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.reason = reason


def add_kubeconfig_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--kubeconfig",
        type=Path,
        help="hub kubeconfig (default: $KUBECONFIG, else .gpufed/hub.kubeconfig)",
    )


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

    @classmethod
    def from_kubeconfig(cls, explicit: Path | None) -> HubClient:
        path = resolve_kubeconfig(explicit)
        if not path.exists():
            raise HubError(
                f"no hub kubeconfig at {path}: start a hub (`gpufed up` or `gpufed controlplane`) "
                "or pass --kubeconfig"
            )
        try:
            return cls(load_kubeconfig(path))
        except KubeconfigError as exc:
            raise HubError(str(exc)) from exc

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
                text = await resp.text()
                payload = json.loads(text) if text else None
                if resp.status >= 400:
                    status = payload if isinstance(payload, dict) else {}
                    message = status.get("message") or text.strip()
                    reason = status.get("reason") or resp.reason or ""
                    raise HubError(f"Error from server ({reason}): {message}", status=resp.status, reason=reason)
                return payload
        except aiohttp.ClientConnectorError as exc:
            raise HubError(f"cannot reach the hub at {self.server}: {exc.os_error or exc}") from exc
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
