"""Keep the hub's embedded etcd running: when its process exits, start it again.

In: the hub's :class:`~controlplane.storage.embedded.EmbeddedEtcd` (started), a restart
schedule (:class:`~controlplane.processes.Backoff`: 1 s doubling to 30 s, without jitter, and
from 1 s again once etcd had stayed up 60 s) and the hub's metrics registry.
Out: :func:`keep_etcd_running`, a task the hub runs until it shuts down, and
``gpufed_embedded_etcd_restarts_total`` on ``/metrics``.

etcd that is killed (the OOM killer, ``kill -9``) or crashes would otherwise stay gone while the
hub keeps answering ``503`` (``/livez`` leaves etcd out, as kube's does, so nothing restarts the
hub either). It comes back on the same data directory, ports, transport and certificates, so the
store's gRPC channel, which redials by itself, finds it at the same URL, and the hub serves again
as soon as it answers (:mod:`controlplane.storage.outage`). Each exit is logged once, as a
warning with its exit code and when the next start is due; a start that fails is one more exit.
A stop the hub asked for (:meth:`EmbeddedEtcd.stop`) is not an exit: the task returns.

A write etcd acknowledged before it was killed survives (etcd fsyncs its log before answering),
except with etcd releases that lose writes when killed (3.5.0 to 3.5.2, which the launcher warns
of when it starts).
"""

from __future__ import annotations

import asyncio
import logging
import signal
from collections.abc import Awaitable, Callable

from prometheus_client import CollectorRegistry, Counter

from controlplane.processes import Backoff
from controlplane.storage.embedded import EmbeddedEtcd, EtcdStartError

logger = logging.getLogger(__name__)

#: The embedded etcd's restart schedule: 1, 2, 4, 8, 16, 30, 30... seconds; from 1 again after 60 s up.
ETCD_RESTART_BACKOFF = Backoff(initial=1.0, cap=30.0, jitter=0.0, stable_after=60.0)


class EtcdRestartMetrics:
    """``gpufed_embedded_etcd_restarts_total``, in the hub's registry."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.restarts = Counter(
            "gpufed_embedded_etcd_restarts_total",
            "Times the hub started its embedded etcd again after the etcd process exited.",
            registry=registry,
        )


def exit_reason(code: int) -> str:
    """``code`` as a person reads it: ``exit code 2``, or ``exit code -9 (SIGKILL)``."""
    if code < 0:
        try:
            return f"exit code {code} ({signal.Signals(-code).name})"
        except ValueError:
            pass
    return f"exit code {code}"


async def keep_etcd_running(
    etcd: EmbeddedEtcd,
    *,
    backoff: Backoff = ETCD_RESTART_BACKOFF,
    metrics: EtcdRestartMetrics | None = None,
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
) -> None:
    """Restart ``etcd`` whenever its process exits, until it is stopped (or this is cancelled)."""
    restarts = 0  # in a row, without etcd staying up ``backoff.stable_after`` seconds
    while True:
        code = await etcd.wait_exit()
        if code is None:
            return  # stopped on purpose
        if etcd.uptime >= backoff.stable_after:
            restarts = 0
        restarts += 1
        delay = backoff.delay(restarts, uniform=0.0)
        logger.warning(
            "embedded etcd exited with %s after %.0fs up; restarting it in %gs (restart %d in a row; its log: %s)",
            exit_reason(code),
            etcd.uptime,
            delay,
            restarts,
            etcd.log_file,
        )
        while True:
            await sleep(delay)
            if metrics is not None:
                metrics.restarts.inc()
            try:
                url = await etcd.restart()
            except (EtcdStartError, OSError) as exc:  # OSError: the binary gone, a full disk
                restarts += 1
                delay = backoff.delay(restarts, uniform=0.0)
                reason = str(exc).splitlines()[0]
                logger.warning("embedded etcd did not start again (%s); next try in %gs", reason, delay)
                continue
            logger.warning("embedded etcd is running again at %s (pid %s)", url, etcd.pid)
            break
