"""Leader election among the agents of one cluster, on a ``coordination.k8s.io/v1`` Lease in the member.

Two agents for one cluster (a Deployment of two replicas, or a rolling update's old and new pod
side by side) must not both apply Works, report and hold the proxy tunnel. As karmada-agent does
with ``--leader-elect``, each agent is a candidate for a Lease (``gpufed-agent-<cluster>`` in
``--leader-elect-resource-namespace``, default ``gpufed-system``) and only its holder runs.

The algorithm is client-go's ``tools/leaderelection`` with a Lease lock:

* a candidate tries at once, then every retry period (plus up to 1.2 times it again at random):
  it reads the Lease (creating it when there is none, which wins at once); a Lease held by
  another whose record has not changed for ``leaseDurationSeconds`` (timed by the candidate's
  own clock from when it last saw the record change, so the members' clocks need not agree)
  or whose ``holderIdentity`` is empty is taken over by an update carrying the resourceVersion
  read, ``leaseTransitions`` one higher and ``acquireTime`` now; two candidates racing for it
  meet the API server's 409 and only one wins;
* the leader renews every retry period (``renewTime`` now; ``acquireTime`` and
  ``leaseTransitions`` kept), by one update of the Lease as it last wrote it (client-go's fast
  path; on any error it reads the Lease and tries again as a candidate would); when no renewal
  has succeeded for the renew deadline since the round began, it has lost the Lease and
  :meth:`LeaderElector.hold` raises :class:`LeadershipLost`: its caller stops everything the
  leader runs (the agent fences its clients first,
  :attr:`~member_agent.kubeapi.KubeTransport.fenced`, so no write leaves once the loss is known).
  The renew deadline is a hard bound whatever made the renewals fail: a leader cut off from the
  member while a follower still reaches it must stop before the follower takes over. So a member
  API outage longer than the renew deadline ends the term too (why ``--leader-elect`` is off by
  default: the Lease lives in the member the agent reports on);
* on a clean shutdown the leader releases the Lease (``holderIdentity`` emptied,
  ``leaseDurationSeconds: 1``; one renew deadline bounds the release as a whole), so a follower
  takes over at its next try rather than after a lease duration.

Pure asyncio over the agent's :class:`~member_agent.kubeapi.KubeTransport` of the member. The
Lease's namespace is created when missing (an agent run outside the member, with a kubeconfig).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import random
import socket
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from controlplane.apis.timestamps import format_micro_time
from member_agent.kubeapi import AlreadyExists, ApiError, Conflict, KubeTransport, NotFound
from member_agent.reachability import failure_level

logger = logging.getLogger(__name__)

#: client-go's ``JitterFactor``: a candidate's retries wait the retry period plus up to this much of it again.
JITTER_FACTOR = 1.2
#: The Lease's name: Karmada's ``karmada-agent-<cluster>``, in gpufed's words.
LEASE_PREFIX = "gpufed-agent-"
DEFAULT_NAMESPACE = "gpufed-system"
#: karmada-agent's defaults (client-go's too).
DEFAULT_LEASE_DURATION = 15.0
DEFAULT_RENEW_DEADLINE = 10.0
DEFAULT_RETRY_PERIOD = 2.0
#: The least time a request of the election is given (one started just before its deadline).
MIN_REQUEST_TIMEOUT = 0.01


class LeadershipLost(Exception):
    """The leader could not renew its Lease within the renew deadline (or another took it)."""


def lease_name(cluster: str) -> str:
    return f"{LEASE_PREFIX}{cluster}"


def default_identity() -> str:
    """client-go's usual identity: the host name (a pod's name) and a unique suffix."""
    return f"{socket.gethostname() or os.getpid()}_{uuid.uuid4()}"


def timing_problem(lease_duration: float, renew_deadline: float, retry_period: float) -> str | None:
    """What client-go's ``NewLeaderElector`` refuses in these timings, in its words; None when they hold."""
    if lease_duration <= renew_deadline:
        return "leaseDuration must be greater than renewDeadline"
    if renew_deadline <= JITTER_FACTOR * retry_period:
        return f"renewDeadline must be greater than retryPeriod*JitterFactor({JITTER_FACTOR:.1f})"
    for name, value in (
        ("leaseDuration", lease_duration),
        ("renewDeadline", renew_deadline),
        ("retryPeriod", retry_period),
    ):
        if value <= 0:
            return f"{name} must be greater than zero"
    return None


@dataclass(frozen=True, slots=True)
class ElectionTiming:
    lease_duration: float = DEFAULT_LEASE_DURATION
    renew_deadline: float = DEFAULT_RENEW_DEADLINE
    retry_period: float = DEFAULT_RETRY_PERIOD


def _time_left(deadline: float) -> float:
    """What a request may still take before ``deadline`` (the running loop's clock)."""
    return max(deadline - asyncio.get_running_loop().time(), MIN_REQUEST_TIMEOUT)


def _spec(record: Mapping[str, Any] | None) -> dict[str, Any]:
    return dict((record or {}).get("spec") or {})


class LeaderElector:
    """One candidate for the Lease ``namespace/name`` in the member ``api`` (see the module docstring)."""

    def __init__(
        self,
        api: KubeTransport,
        *,
        namespace: str,
        name: str,
        identity: str,
        timing: ElectionTiming = ElectionTiming(),
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
        on_change: Callable[[bool], None] | None = None,
    ) -> None:
        self.api = api
        self.namespace, self.name, self.identity = namespace, name, identity
        self.timing = timing
        self.clock = clock
        self._on_change = on_change
        self._collection = f"/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases"
        #: The Lease as last read or written, and when (this process's monotonic clock) its
        #: record last changed: the lease duration counts from then.
        self._lease: dict[str, Any] | None = None
        self._observed_spec: dict[str, Any] = {}
        self._observed_at = 0.0
        self.leading = False
        #: What made the last attempt fail (None: it succeeded, or the Lease is another's).
        self._last_error: BaseException | None = None

    @property
    def description(self) -> str:
        return f"{self.namespace}/{self.name}"

    # the lock -----------------------------------------------------------------------------

    def _is_leader(self) -> bool:
        return self._observed_spec.get("holderIdentity") == self.identity

    def _valid(self, now: float) -> bool:
        duration = self._observed_spec.get("leaseDurationSeconds") or 0
        return self._observed_at + float(duration) > now

    def _observe(self, lease: dict[str, Any], now: float) -> None:
        self._lease = lease
        spec = _spec(lease)
        if spec != self._observed_spec:
            self._observed_spec, self._observed_at = spec, now

    def _record(
        self, *, acquired: str, transitions: int, holder: str, duration: int, now: str
    ) -> dict[str, Any]:
        return {
            "holderIdentity": holder,
            "leaseDurationSeconds": duration,
            "acquireTime": acquired,
            "renewTime": now,
            "leaseTransitions": transitions,
        }

    async def _ensure_namespace(self, limit: float) -> None:
        body = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": self.namespace}}
        with contextlib.suppress(AlreadyExists):
            await self.api.request("POST", "/api/v1/namespaces", body=body, request_timeout=limit)

    async def _try_acquire_or_renew(self, deadline: float) -> bool:
        """One attempt of client-go's ``tryAcquireOrRenew``, each of its requests given the time
        left until ``deadline`` (the loop's clock): True when this candidate holds the Lease
        afterwards. Errors are logged and count as a failed attempt."""
        loop = asyncio.get_running_loop()

        now_text = format_micro_time(self.clock())
        duration = max(1, int(self.timing.lease_duration))
        mine = self._record(
            acquired=now_text, transitions=0, holder=self.identity, duration=duration, now=now_text
        )
        path = f"{self._collection}/{self.name}"
        if self._lease is not None and self._is_leader() and self._valid(loop.time()):
            # client-go's fast path: the leader updates the Lease as it last wrote it, unread.
            mine["acquireTime"] = self._observed_spec.get("acquireTime") or now_text
            mine["leaseTransitions"] = int(self._observed_spec.get("leaseTransitions") or 0)
            body = {**self._lease, "spec": {**_spec(self._lease), **mine}}
            try:
                updated = await self.api.request("PUT", path, body=body, request_timeout=_time_left(deadline))
            except (ApiError, OSError, TimeoutError) as exc:
                logger.debug("renewing the Lease %s unread failed (%s); reading it", self.description, exc)
            else:
                self._observe(updated, loop.time())
                self._last_error = None
                return True
        try:
            try:
                lease = await self.api.request("GET", path, request_timeout=_time_left(deadline))
            except NotFound:
                body = {
                    "apiVersion": "coordination.k8s.io/v1",
                    "kind": "Lease",
                    "metadata": {"name": self.name, "namespace": self.namespace},
                    "spec": mine,
                }
                try:
                    created = await self.api.request(
                        "POST", self._collection, body=body, request_timeout=_time_left(deadline)
                    )
                except NotFound:  # no such namespace: create it, then the Lease
                    await self._ensure_namespace(_time_left(deadline))
                    created = await self.api.request(
                        "POST", self._collection, body=body, request_timeout=_time_left(deadline)
                    )
                self._observe(created, loop.time())
                self._last_error = None
                return True
            self._observe(lease, loop.time())
            spec = self._observed_spec
            if spec.get("holderIdentity") and self._valid(loop.time()) and not self._is_leader():
                self._last_error = None
                return False
            if self._is_leader():
                mine["acquireTime"] = spec.get("acquireTime") or now_text
                mine["leaseTransitions"] = int(spec.get("leaseTransitions") or 0)
            else:
                mine["leaseTransitions"] = int(spec.get("leaseTransitions") or 0) + 1
            updated = await self.api.request(
                "PUT",
                path,
                body={**lease, "spec": {**_spec(lease), **mine}},
                request_timeout=_time_left(deadline),
            )
            self._observe(updated, loop.time())
            self._last_error = None
            return True
        except (ApiError, OSError, TimeoutError) as exc:
            self._last_error = exc
            level = logging.DEBUG if isinstance(exc, Conflict | AlreadyExists) else failure_level(exc)
            logger.log(level, "leader election on Lease %s: %s", self.description, exc)
            return False

    def _set_leading(self, leading: bool) -> None:
        if leading != self.leading:
            self.leading = leading
            if self._on_change is not None:
                self._on_change(leading)

    # the loops ----------------------------------------------------------------------------

    async def acquire(self) -> None:
        """Return once this candidate holds the Lease: tries at once, then every retry period
        with jitter (client-go's ``acquire``)."""
        logger.info("attempting to acquire leader lease %s...", self.description)
        loop = asyncio.get_running_loop()
        period = self.timing.retry_period
        attempt = min(period * JITTER_FACTOR, self.timing.renew_deadline)
        while not await self._try_acquire_or_renew(loop.time() + attempt):
            holder = self._observed_spec.get("holderIdentity")
            logger.debug("Lease %s is held by %s", self.description, holder)
            await asyncio.sleep(period + random.random() * JITTER_FACTOR * period)
        logger.info("successfully acquired lease %s", self.description)
        self._set_leading(True)

    async def hold(self) -> None:
        """Renew the Lease every retry period for as long as it can (client-go's ``renew``); raise
        :class:`LeadershipLost` once the member shows another holder, or no renewal has succeeded
        for the renew deadline, whatever the reason (refusals, timeouts, a member that cannot be
        reached): a follower that still reaches the member takes the Lease over once it has not
        changed for the lease duration, so the leader must have stopped by then."""
        loop = asyncio.get_running_loop()
        timing = self.timing
        while True:
            await asyncio.sleep(timing.retry_period)
            if await self._renew_round(loop.time() + timing.renew_deadline):
                continue
            self._set_leading(False)
            holder = self._observed_spec.get("holderIdentity") or "nobody"
            raise LeadershipLost(
                f"leader election lost: the Lease {self.description} was not renewed within "
                f"{timing.renew_deadline:g}s (held by {holder}; last error: {self._last_error or 'none'})"
            )

    async def _renew_round(self, deadline: float) -> bool:
        """Try to renew every retry period until ``deadline``, which bounds the whole round, its
        requests and waits included (client-go's ``context.WithTimeout(RenewDeadline)``): True
        once renewed, False when the deadline passed or the member shows another holder."""
        loop = asyncio.get_running_loop()
        try:
            async with asyncio.timeout_at(deadline):
                while not await self._try_acquire_or_renew(deadline):
                    if not self._is_leader() or loop.time() + self.timing.retry_period >= deadline:
                        return False
                    await asyncio.sleep(self.timing.retry_period)
                return True
        except TimeoutError:
            if self._last_error is None:
                self._last_error = TimeoutError("the renew deadline passed")
            return False

    async def release(self) -> None:
        """Give the Lease up (client-go's ``release``): only when leading; an error is logged."""
        if not self.leading or self._lease is None:
            return
        now_text = format_micro_time(self.clock())
        spec = self._record(
            acquired=now_text,
            transitions=int(self._observed_spec.get("leaseTransitions") or 0),
            holder="",
            duration=1,
            now=now_text,
        )
        try:
            await self._release(spec)
        finally:
            self._set_leading(False)

    async def _release(self, spec: dict[str, Any]) -> None:
        """One renew deadline bounds the release as a whole (client-go's ``release`` runs under
        ``context.WithTimeout(RenewDeadline)``), each request given the time left."""
        assert self._lease is not None
        loop = asyncio.get_running_loop()
        path = f"{self._collection}/{self.name}"
        deadline = loop.time() + self.timing.renew_deadline

        try:
            async with asyncio.timeout_at(deadline):
                try:
                    await self.api.request(
                        "PUT", path, body={**self._lease, "spec": spec}, request_timeout=_time_left(deadline)
                    )
                except Conflict:  # a renewal cut short by the shutdown may have written it meanwhile
                    lease = await self.api.request("GET", path, request_timeout=_time_left(deadline))
                    if _spec(lease).get("holderIdentity") != self.identity:
                        return
                    await self.api.request(
                        "PUT", path, body={**lease, "spec": spec}, request_timeout=_time_left(deadline)
                    )
        except (ApiError, OSError, TimeoutError) as exc:
            logger.warning("could not release the leader Lease %s: %s", self.description, exc or "timed out")
            return
        logger.info("released leader lease %s", self.description)
