"""kube-apiserver's audit webhook backend in batch mode (``--audit-webhook-config-file``,
``--audit-webhook-mode=batch``): events are POSTed as ``audit.k8s.io/v1`` EventLists to the server
of a kubeconfig, from a buffer, by a task of their own, so that a slow or absent receiver never
holds a request up.

As kube's buffered backend: :meth:`AuditWebhook.write` puts an event in a buffer of
``--audit-webhook-batch-buffer-size`` events (10000), or drops it when the buffer is full (counted in
``apiserver_audit_error_total{plugin="webhook"}``, logged at most once a minute). :meth:`run` takes a
batch once ``--audit-webhook-batch-max-size`` events (400) wait or ``--audit-webhook-batch-max-wait``
(30 s) has passed, and sends it; a send that fails as kube's webhook client retries (connection reset,
``429``, ``500``, ``504``, an answer with ``Retry-After``) is retried with kube's backoff (from
``--audit-webhook-initial-backoff``, 10 s, times 1.5 with 20 % jitter, 5 tries), any other failure
drops the batch (counted). :meth:`close` sends what is left, within :data:`FLUSH_SECONDS`.

In: events (dicts). Out: EventLists to the receiver. I/O: HTTPS to the receiver only.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import logging
import random
import time
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import aiohttp

from controlplane.apiserver.audit.metrics import AuditMetrics
from controlplane.apiserver.kubeconfig import load_kubeconfig
from controlplane.apiserver.tls import client_ssl_context

log = logging.getLogger(__name__)

PLUGIN: Final = "webhook"
#: How long one POST may take (kube's webhook client default).
REQUEST_TIMEOUT_SECONDS: Final = 30.0
#: How long :meth:`AuditWebhook.close` may spend sending what the buffer holds.
FLUSH_SECONDS: Final = 10.0
#: kube's retry backoff: factor, jitter and tries (``DefaultRetryBackoffWithInitialDelay``).
_BACKOFF_FACTOR: Final = 1.5
_BACKOFF_JITTER: Final = 0.2
_BACKOFF_STEPS: Final = 5
_RETRIED_CODES: Final = frozenset({429, 500, 504})
_ERROR_LOG_PERIOD_SECONDS: Final = 60.0


@dataclass(frozen=True, slots=True)
class WebhookSettings:
    """``--audit-webhook-config-file`` and the batch flags, with kube's defaults."""

    config_file: Path
    batch_max_size: int = 400
    batch_max_wait_seconds: float = 30.0
    buffer_size: int = 10000
    initial_backoff_seconds: float = 10.0


class _SendError(Exception):
    def __init__(self, message: str, *, retry: bool) -> None:
        super().__init__(message)
        self.retry = retry


class AuditWebhook:
    """The batch-mode webhook backend; :meth:`write` never waits."""

    def __init__(self, settings: WebhookSettings, metrics: AuditMetrics) -> None:
        credentials = load_kubeconfig(settings.config_file, token_required=False)
        self.settings = settings
        self.url = credentials.server
        self.metrics = metrics
        self._ssl = client_ssl_context(credentials.ca_pem)
        self._headers = {"Content-Type": "application/json"}
        if credentials.token:
            self._headers["Authorization"] = f"Bearer {credentials.token}"
        self._buffer: deque[dict[str, Any]] = deque()
        self._full = asyncio.Event()
        self._session: aiohttp.ClientSession | None = None
        self._task: asyncio.Task[None] | None = None
        self._last_error_log = 0.0

    def write(self, event: dict[str, Any]) -> None:
        if len(self._buffer) >= self.settings.buffer_size:
            self._lost(1, "audit buffer queue blocked")
            return
        self._buffer.append(event)
        if len(self._buffer) >= self.settings.batch_max_size:
            self._full.set()

    def start(self) -> None:
        self._session = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(ssl=self._ssl),
            timeout=aiohttp.ClientTimeout(total=REQUEST_TIMEOUT_SECONDS),
        )
        self._task = asyncio.create_task(self.run(), name="audit-webhook")

    async def run(self) -> None:
        """Send a batch whenever one is full or the oldest has waited ``batch_max_wait``."""
        while True:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self.settings.batch_max_wait_seconds):
                    await self._full.wait()
            self._full.clear()
            while self._buffer:
                await self._send(self._take(), retries=True)
                if len(self._buffer) < self.settings.batch_max_size:
                    break

    async def close(self) -> None:
        """Stop the sending task, then send what the buffer holds within :data:`FLUSH_SECONDS`
        (once each: what cannot be sent then is counted lost)."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        if self._session is None:
            return
        try:
            async with asyncio.timeout(FLUSH_SECONDS):
                while self._buffer:
                    await self._send(self._take(), retries=False)
        except TimeoutError:
            pass
        finally:
            if self._buffer:
                self._lost(len(self._buffer), "shutting down")
                self._buffer.clear()
            await self._session.close()
            self._session = None

    def _take(self) -> list[dict[str, Any]]:
        count = min(len(self._buffer), self.settings.batch_max_size)
        return [self._buffer.popleft() for _ in range(count)]

    async def _send(self, batch: list[dict[str, Any]], *, retries: bool) -> None:
        delay = self.settings.initial_backoff_seconds
        tries = _BACKOFF_STEPS if retries else 1
        for attempt in range(1, tries + 1):
            try:
                await self._post(batch)
                return
            except _SendError as exc:
                if not exc.retry or attempt == tries:
                    self._lost(len(batch), str(exc))
                    return
            except asyncio.CancelledError:
                # Shutting down: what was being sent goes back first, for close() to flush.
                self._buffer.extendleft(reversed(batch))
                raise
            await asyncio.sleep(delay * (1 + random.uniform(0, _BACKOFF_JITTER)))  # jitter, not a secret
            delay *= _BACKOFF_FACTOR

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

    def _lost(self, count: int, reason: str) -> None:
        self.metrics.lost(PLUGIN, count)
        now = time.monotonic()
        if now - self._last_error_log >= _ERROR_LOG_PERIOD_SECONDS:
            self._last_error_log = now
            log.error("Error in audit plugin 'webhook' affecting %d audit events: %s", count, reason)
