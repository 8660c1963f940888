"""RFC 3339 timestamps as Kubernetes writes and reads them: written in UTC to the second
(``2024-05-01T10:00:00Z``; kube's ``MicroTime`` with microseconds), read strictly (:func:`parse_time`) or leniently, by a reader that
must go on with what it can use (:func:`parse_time_or_none`).

Pure and standard-library only, so that kube's API rules (``controlplane.apis.kube``), the
models (``controlplane.apis.meta`` re-exports these), the agent and the commands share them.
"""

from __future__ import annotations

from datetime import UTC, datetime


def format_time(moment: datetime) -> str:
    """An RFC 3339 timestamp in UTC with second precision, as Kubernetes writes it (the year in
    4 digits, as Go writes it: ``0001-01-01T00:00:00Z``, which ``strftime("%Y")`` writes ``1-...``)."""
    if moment.tzinfo is not None:
        moment = moment.astimezone(UTC).replace(tzinfo=None)
    return moment.isoformat(timespec="seconds") + "Z"


def format_micro_time(moment: datetime) -> str:
    """kube's ``MicroTime``: :func:`format_time` with microseconds (a Lease's renew time, an audit
    event's stages, Karmada's reschedule and decision times), for times that must keep their
    order within one second."""
    if moment.tzinfo is not None:
        moment = moment.astimezone(UTC).replace(tzinfo=None)
    return moment.isoformat(timespec="microseconds") + "Z"


def parse_time(value: str) -> datetime:
    """Parse an RFC 3339 timestamp ("2024-05-01T10:00:00Z") into an aware datetime."""
    moment = datetime.fromisoformat(value)
    if moment.tzinfo is None:
        raise ValueError(f"timestamp {value!r} has no time zone (expected e.g. 2024-05-01T10:00:00Z)")
    return moment


def parse_time_or_none(value: object, *, naive_as_utc: bool = False) -> datetime | None:
    """:func:`parse_time` of a timestamp read from an object: None when it is absent, not a
    string or not RFC 3339 (a reader that must go on with what it can use). With
    ``naive_as_utc``, a timestamp without a time zone is read as UTC rather than dropped (the
    lenient reading of the API server's table columns and of the simulated members)."""
    if not isinstance(value, str) or not value:
        return None
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        return None
    if moment.tzinfo is None:
        return moment.replace(tzinfo=UTC) if naive_as_utc else None
    return moment
