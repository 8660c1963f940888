"""kube-apiserver's audit webhook backend (``--audit-webhook-config-file``): events are POSTed as
``audit.k8s.io/v1`` EventLists to the server of a kubeconfig (its CA; its user's token or client
certificate), in the mode of ``--audit-webhook-mode`` (:mod:`.buffered`: ``batch`` by default).

:meth:`AuditWebhook.process` sends one list; a send that fails as kube's webhook client retries
(connection reset, ``429``, ``500``, ``504``, an answer with ``Retry-After``) is retried with kube's
backoff (from ``--audit-webhook-initial-backoff``, 10 s, times 1.5 with 20 % jitter, 5 tries), any
other failure drops the list (counted in ``apiserver_audit_error_total{plugin="webhook"}``).

In: events (dicts). Out: EventLists to the receiver. I/O: HTTPS to the receiver only.
"""

from __future__ import annotations

import asyncio
import errno
import os
import random
import ssl
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import aiohttp

from controlplane.apiserver.audit.buffered import BatchSettings
from controlplane.apiserver.audit.metrics import AuditMetrics
from controlplane.apiserver.audit.truncate import TruncateSettings
from controlplane.apiserver.kubeconfig import KubeconfigError, load_client_certificate, load_kubeconfig
from controlplane.apiserver.tls import client_ssl_context

PLUGIN: Final = "webhook"
#: How long one POST may take (kube's webhook client default).
REQUEST_TIMEOUT_SECONDS: Final = 30.0
#: kube's retry backoff: factor, jitter and tries (``DefaultRetryBackoffWithInitialDelay``).
_BACKOFF_FACTOR: Final = 1.5
_BACKOFF_JITTER: Final = 0.2
_BACKOFF_STEPS: Final = 5
_RETRIED_CODES: Final = frozenset({429, 500, 504})


@dataclass(frozen=True, slots=True)
class WebhookSettings:
    """``--audit-webhook-config-file`` and the other ``--audit-webhook-*`` flags, with kube's defaults."""

    config_file: Path
    batch: BatchSettings = field(default_factory=BatchSettings)
    truncate: TruncateSettings = field(default_factory=TruncateSettings)
    initial_backoff_seconds: float = 10.0


class _SendError(Exception):
    def __init__(self, message: str, *, retry: bool) -> None:
        super().__init__(message)
        self.retry = retry


class AuditWebhook:
    """The webhook: :meth:`process` POSTs one EventList (retried as kube retries it)."""

    def __init__(self, settings: WebhookSettings, metrics: AuditMetrics) -> None:
        credentials = load_kubeconfig(settings.config_file, token_required=False)
        self.settings = settings
        self.url = credentials.server
        self.metrics = metrics
        self._ssl = client_ssl_context(credentials.ca_pem)
        if (pair := load_client_certificate(settings.config_file)) is not None:
            _load_client_certificate(self._ssl, *pair, path=settings.config_file)
        self._headers = {"Content-Type": "application/json"}
        if credentials.token:
            self._headers["Authorization"] = f"Bearer {credentials.token}"
        self._session: aiohttp.ClientSession | None = None

    def start(self) -> None:
        self._session = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(ssl=self._ssl),
            timeout=aiohttp.ClientTimeout(total=REQUEST_TIMEOUT_SECONDS),
        )

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def process(self, events: list[dict[str, Any]], *, final: bool = False) -> bool:
        """Send ``events``; False (and counted) when they could not be; ``final``: one try."""
        delay = self.settings.initial_backoff_seconds
        tries = 1 if final else _BACKOFF_STEPS
        for attempt in range(1, tries + 1):
            try:
                await self._post(events)
                return True
            except _SendError as exc:
                if not exc.retry or attempt == tries:
                    self.metrics.lost(PLUGIN, len(events), str(exc))
                    return False
            await asyncio.sleep(delay * (1 + random.uniform(0, _BACKOFF_JITTER)))  # jitter, not a secret
            delay *= _BACKOFF_FACTOR
        return False

    async def _post(self, batch: list[dict[str, Any]]) -> None:
        assert self._session is not None
        body = {"kind": "EventList", "apiVersion": "audit.k8s.io/v1", "metadata": {}, "items": batch}
        try:
            async with self._session.post(self.url, json=body, headers=self._headers) as response:
                if response.status < 300:
                    return
                text = (await response.text())[:200]
                retry = response.status in _RETRIED_CODES or "Retry-After" in response.headers
                raise _SendError(f"{self.url} answered {response.status}: {text}", retry=retry)
        except aiohttp.ClientOSError as exc:
            raise _SendError(f"cannot reach {self.url}: {exc}", retry=exc.errno == errno.ECONNRESET) from exc
        except aiohttp.ServerDisconnectedError as exc:
            raise _SendError(f"{self.url} closed the connection", retry=True) from exc
        except (aiohttp.ClientError, TimeoutError) as exc:
            raise _SendError(f"cannot send to {self.url}: {exc or type(exc).__name__}", retry=False) from exc


def _load_client_certificate(context: ssl.SSLContext, cert_pem: bytes, key_pem: bytes, *, path: Path) -> None:
    """Present the kubeconfig's client certificate (the ssl module reads it from a file: a private
    one, removed at once)."""
    with tempfile.TemporaryDirectory(prefix="audit-webhook-") as directory:
        chain = Path(directory) / "client.pem"
        fd = os.open(chain, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as file:
            file.write(cert_pem.rstrip() + b"\n" + key_pem)
        try:
            context.load_cert_chain(chain)
        except ssl.SSLError as exc:
            raise KubeconfigError(f"{path}: client-certificate and client-key cannot be used: {exc.reason or exc}") from exc
