"""Is the member's API server up? The agent's probe of ``/readyz`` and ``/livez``.

The agent reports capacity from its informers' caches, which keep their last view when the
member's API goes away; without a probe the hub would go on seeing a healthy cluster. So the
agent asks the API server itself, as Karmada's cluster status controller does (``/readyz``,
``/healthz`` where ``/readyz`` is not served), and, as kube's own probes distinguish, ``/livez``
too. Both are asked with ``?verbose`` so a failing answer names its failed checks
(``[-]etcd failed: reason withheld``).

In: a :class:`~member_agent.kubeapi.KubeTransport` on the member. Out: a :class:`ProbeResult` per
probe (:func:`probe_member_api`, the only I/O here), and from a run of them, through
:class:`MemberApiHealth` (pure), the problem the Ready condition must report — or None while the
API answers, or has failed for less than the failure threshold (Karmada's
``--cluster-failure-threshold``, 30 s by default), so one lost probe does not taint a cluster.
One successful probe clears the problem.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from controlplane.apis.cluster_v1alpha1 import ClusterReadyReason
from member_agent.kubeapi import KubeTransport, Unavailable

#: Readiness, and its fallback for an API server that answers ``/readyz`` with 404; then
#: liveness (skipped when not served).
READINESS_ENDPOINTS = ("/readyz", "/healthz")
LIVENESS_ENDPOINT = "/livez"
#: Failed checks named in a report, at most (the rest are counted).
MAX_NAMED_CHECKS = 5


class ProbeOutcome(StrEnum):
    OK = "ok"
    UNREACHABLE = "unreachable"
    """No answer: connection refused or reset, TLS failure, timeout."""
    NOT_READY = "not-ready"
    """An answer other than 200 ``ok``."""


@dataclass(frozen=True, slots=True)
class ProbeResult:
    outcome: ProbeOutcome
    #: What went wrong, for a person: the endpoint and the cause or the failed checks.
    detail: str = ""


@dataclass(frozen=True, slots=True)
class MemberApiProblem:
    """What the Ready condition reports while the member's API is down."""

    reason: ClusterReadyReason
    message: str


def failed_checks(body: str) -> list[str]:
    """The failed checks of a kube ``?verbose`` health answer (lines ``[-]<name> failed: …``)."""
    return [line[3:].strip() for line in body.splitlines() if line.startswith("[-]")]


def _describe_failure(endpoint: str, status: int, body: str) -> str:
    checks = failed_checks(body)
    if checks:
        named = ", ".join(checks[:MAX_NAMED_CHECKS])
        more = f" and {len(checks) - MAX_NAMED_CHECKS} more" if len(checks) > MAX_NAMED_CHECKS else ""
        return f"GET {endpoint} answered {status}: {named}{more}"
    first = next((line.strip() for line in body.splitlines() if line.strip()), "")
    return f"GET {endpoint} answered {status}" + (f": {first[:200]}" if first else "")


def _cause(exc: Unavailable) -> str:
    cause = exc.__cause__
    if isinstance(cause, TimeoutError):
        return "no answer within the request timeout"
    if cause is not None:
        return str(cause) or type(cause).__name__
    return exc.message


async def probe_member_api(api: KubeTransport, *, request_timeout: float) -> ProbeResult:
    """Ask the member's API server whether it is ready and live (each request within ``request_timeout``)."""
    readiness, fallback = READINESS_ENDPOINTS
    try:
        endpoint = readiness
        status, body = await api.get_text(endpoint, query={"verbose": ""}, request_timeout=request_timeout)
        if status == 404:  # an API server without /readyz
            endpoint = fallback
            status, body = await api.get_text(endpoint, query={"verbose": ""}, request_timeout=request_timeout)
        if status != 200:
            return ProbeResult(ProbeOutcome.NOT_READY, _describe_failure(endpoint, status, body))
        endpoint = LIVENESS_ENDPOINT
        status, body = await api.get_text(endpoint, query={"verbose": ""}, request_timeout=request_timeout)
    except Unavailable as exc:
        return ProbeResult(ProbeOutcome.UNREACHABLE, f"GET {endpoint}: {_cause(exc)}")
    if status not in (200, 404):  # 404: an API server without /livez; readiness has spoken
        return ProbeResult(ProbeOutcome.NOT_READY, _describe_failure(endpoint, status, body))
    return ProbeResult(ProbeOutcome.OK)


class MemberApiHealth:
    """Turns a run of probe results into the problem to report (or None), by a failure threshold.

    Times are seconds on any monotonic clock (the caller's loop time).
    """

    def __init__(self, *, server: str, failure_threshold: float) -> None:
        self.server = server
        self.failure_threshold = failure_threshold
        self._failing_since: float | None = None
        self._problem: MemberApiProblem | None = None

    @property
    def problem(self) -> MemberApiProblem | None:
        return self._problem

    def observe(self, result: ProbeResult, *, now: float) -> MemberApiProblem | None:
        """Record one probe taken at ``now``; return the problem to report from now on."""
        if result.outcome is ProbeOutcome.OK:
            self._failing_since = None
            self._problem = None
            return None
        if self._failing_since is None:
            self._failing_since = now
        failing_for = now - self._failing_since
        if failing_for < self.failure_threshold:
            return self._problem  # a blip so far: what was reported stands
        if result.outcome is ProbeOutcome.UNREACHABLE:
            reason = ClusterReadyReason.MEMBER_API_UNREACHABLE
            what = f"the member's API server {self.server} has not answered for {failing_for:.0f}s"
            action = "check that the API server runs and that the agent can reach it"
        else:
            reason = ClusterReadyReason.MEMBER_API_NOT_READY
            what = f"the member's API server {self.server} has reported itself unhealthy for {failing_for:.0f}s"
            action = "check the failed checks with kubectl get --raw '/readyz?verbose' against the member"
        self._problem = MemberApiProblem(
            reason,
            f"{what} ({result.detail}); {action}. The capacity shown is the agent's last view of the member",
        )
        return self._problem


__all__ = [
    "MemberApiHealth",
    "MemberApiProblem",
    "ProbeOutcome",
    "ProbeResult",
    "failed_checks",
    "probe_member_api",
]
