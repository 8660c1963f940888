"""The WasteReport resource's pure parts: report names and parameters, windows, and the way
back from the JSON contract to the report that `gpufed waste` renders as a table or CSV."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from controlplane.reports.accounting import Accumulator
from controlplane.reports.fleet import PendingReason
from controlplane.reports.report import render_csv, render_table, to_json
from controlplane.reports.resource import (
    QueryError,
    QueryParams,
    ReportQuery,
    format_duration,
    parse_duration,
    parse_query,
    report_from_json,
    report_object,
)
from controlplane.reports.summary import Dimension

from .builders import A100, at, cluster, demand, fleet, gpu, mig, node, pod


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("90s", 90), ("15m", 900), ("24h", 86400), ("7d", 604800), ("2w", 1209600), ("1h30m", 5400)],
)
def test_durations(text: str, seconds: int) -> None:
    assert parse_duration(text) == timedelta(seconds=seconds)
    assert parse_duration(format_duration(timedelta(seconds=seconds))) == timedelta(seconds=seconds)


@pytest.mark.parametrize("text", ["", "h", "10", "1.5h", "-1h", "0s", "1y", "1h 30m"])
def test_bad_durations(text: str) -> None:
    with pytest.raises(ValueError, match="invalid duration"):
        parse_duration(text)


@pytest.mark.parametrize(
    ("name", "params", "expected"),
    [
        ("last-24h", QueryParams(), ReportQuery("last-24h", since=timedelta(hours=24))),
        ("last-1h30m", QueryParams(by=("cluster,model", "cluster")), ReportQuery(
            "last-1h30m", since=timedelta(minutes=90), by=(Dimension.CLUSTER, Dimension.MODEL))),
        ("custom", QueryParams(start="2024-05-01T00:00:00Z", top="3"), ReportQuery(
            "custom", start=datetime(2024, 5, 1, tzinfo=UTC), top=3)),
        (None, QueryParams(since="2h", step="5m"), ReportQuery(
            "last-2h", since=timedelta(hours=2), step=timedelta(minutes=5))),
        (None, QueryParams(start="2024-05-01T00:00:00Z", end="2024-05-01T01:00:00Z"), ReportQuery(
            "custom", start=datetime(2024, 5, 1, tzinfo=UTC), end=datetime(2024, 5, 1, 1, tzinfo=UTC))),
    ],
)
def test_report_requests(name: str | None, params: QueryParams, expected: ReportQuery) -> None:
    assert parse_query(name, params) == expected


@pytest.mark.parametrize(
    ("name", "params", "field", "not_found"),
    [
        ("yesterday", QueryParams(), "", True),
        ("last-soon", QueryParams(), "", True),
        ("custom", QueryParams(), "from", False),
        ("last-1h", QueryParams(by=("gpu",)), "by", False),
        ("last-1h", QueryParams(since="2h"), "since", False),
        ("last-1h", QueryParams(top="-1"), "top", False),
        ("last-1h", QueryParams(step="30s"), "step", False),
        (None, QueryParams(end="2024-05-01T00:00:00Z"), "from", False),
        (None, QueryParams(), "since", False),
        ("custom", QueryParams(start="2024-05-01"), "from", False),
    ],
)
def test_bad_report_requests(name: str | None, params: QueryParams, field: str, not_found: bool) -> None:
    with pytest.raises(QueryError) as caught:
        parse_query(name, params)
    assert caught.value.field == field
    assert caught.value.not_found is not_found


@pytest.mark.parametrize(
    ("name", "reason"),
    [
        ("last-9999d", "duration '9999d' is longer than the maximum of 3660d"),
        ("last-soon", "invalid duration 'soon': use forms like 90s, 15m, 24h, 7d or 1h30m"),
    ],
)
def test_a_report_name_of_no_valid_duration_says_what_is_wrong_with_it(name: str, reason: str) -> None:
    with pytest.raises(QueryError) as caught:
        parse_query(name, QueryParams())
    assert str(caught.value).startswith(f'wastereports.reports.gpufed.io "{name}" not found: {reason} (')


NOW = datetime(2024, 5, 1, 12, 0, 0, 750000, tzinfo=UTC)


@pytest.mark.parametrize(
    ("query", "newest", "expected"),
    [
        # Ends at the minute of the newest accounted sample: every minute before it is complete.
        (ReportQuery("last-1h", since=timedelta(hours=1)), NOW - timedelta(seconds=30.5),
         (datetime(2024, 5, 1, 10, 59, tzinfo=UTC), datetime(2024, 5, 1, 11, 59, tzinfo=UTC))),
        # Nothing accounted yet: ends at the current minute.
        (ReportQuery("last-1h", since=timedelta(hours=1)), None,
         (datetime(2024, 5, 1, 11, 0, tzinfo=UTC), datetime(2024, 5, 1, 12, 0, tzinfo=UTC))),
        # A fixed window is kept as asked.
        (ReportQuery("custom", start=datetime(2024, 5, 1, 1, tzinfo=UTC), end=datetime(2024, 5, 1, 2, tzinfo=UTC)),
         NOW, (datetime(2024, 5, 1, 1, tzinfo=UTC), datetime(2024, 5, 1, 2, tzinfo=UTC))),
    ],
)
def test_windows(query: ReportQuery, newest: datetime | None, expected: tuple[datetime, datetime]) -> None:
    assert query.window(newest=newest, now=NOW) == expected


def test_a_workload_starting_mid_minute_is_classified_alike_in_the_named_and_the_custom_window() -> None:
    """A pod holds its GPU at 0 % for its first two samples (bound, not yet running), then is
    busy; it starts mid-minute. ``last-1h`` as the dashboard asks for it (``step``, ``top``) and
    ``custom`` over the window it reports give the same numbers, and both count exactly those
    two seconds as idle-allocated (allocated, utilization under the threshold: DESIGN.md); a
    window after the start has none."""
    accumulator = Accumulator()
    started = at(61.5 / 60)
    moment = at(0)
    while moment <= at(3) + timedelta(seconds=10):
        held = (gpu(0, pod("i", workload="idle-infer"), 0.03),)
        if moment >= started:
            utilization = 0.0 if moment - started < timedelta(seconds=2) else 0.8
            held += (gpu(1, pod("t", workload="busy-train"), utilization),)
        accumulator.add(fleet(cluster("a", [node("n1", held)], pricing={A100: 1.2}), time=moment))
        moment += timedelta(seconds=1)
    now = at(3) + timedelta(seconds=11)

    named = report_object(parse_query("last-1h", QueryParams(step="1m", top="10")), accumulator, now=now)["status"]
    window = named["window"]
    assert (window["from"], window["to"]) == ("2024-04-30T23:03:00Z", "2024-05-01T00:03:00Z")
    custom = report_object(parse_query("custom", QueryParams(start=window["from"], end=window["to"])),
                           accumulator, now=now)["status"]
    assert {k: v for k, v in named.items() if k != "series"} == custom
    idle = {w["workload"]: w["idle_gpu_hours"] for w in custom["top_idle_workloads"]}
    assert idle == {"Deployment/idle-infer": pytest.approx(3 / 60, abs=1e-4),
                    "Deployment/busy-train": pytest.approx(2 / 3600, abs=1e-4)}
    assert custom["totals"]["gpu_hours"]["idle-allocated"] == pytest.approx(3 / 60 + 2 / 3600, abs=1e-4)

    after = report_object(parse_query("custom", QueryParams(start="2024-05-01T00:02:00Z", end=window["to"])),
                          accumulator, now=now)["status"]
    assert [w["workload"] for w in after["top_idle_workloads"]] == ["Deployment/idle-infer"]


def _report_accumulator() -> Accumulator:
    """Idle and busy GPUs in a cheap cluster, stranded MIG slices in an expensive one while a
    3g.40gb replica waits: every part of the report (groups, idle workloads, recommendations)."""
    accumulator = Accumulator()
    onprem = cluster("onprem", [node("n1", (gpu(0, pod("a", workload="idle"), 0.02), gpu(1, pod("b", workload="busy"), 0.9), gpu(2)))],
                     pricing={A100: 1.5})
    migs = cluster("cloud", [node("m1", tuple(mig(0, "1g.10gb", instance=i) for i in range(7)))],
                   pricing={A100: 4.0}, provider="aws", tier=1)
    huge = replace(demand({"nvidia.com/gpu": 64}, workload="Deployment/huge"), reason=PendingReason.NEVER_FITS,
                   message="can never fit: needs 64 nvidia.com/gpu in one pod; the largest node in the fleet has 3")
    for minute in range(31):
        accumulator.add(fleet(onprem, migs, pending=[demand({"nvidia.com/mig-3g.40gb": 1}), huge], time=at(minute)))
    return accumulator


@pytest.mark.parametrize("by", [(), (Dimension.CLUSTER,), (Dimension.NAMESPACE, Dimension.MODEL), (Dimension.WORKLOAD,)])
def test_the_json_contract_renders_like_the_report_itself(by: tuple[Dimension, ...]) -> None:
    report = _report_accumulator().query(at(0), at(30), by=by)
    decoded = report_from_json(to_json(report))
    assert render_table(decoded) == render_table(report)
    assert render_csv(decoded) == render_csv(report)
    assert decoded.recommendations and [r.text for r in decoded.recommendations] == [r.text for r in report.recommendations]
    assert decoded.never_fit == report.never_fit and report.never_fit


@pytest.mark.parametrize("doc", [{}, {"window": {}}, {"window": {"from": "x", "to": "y"}, "totals": {}}])
def test_a_document_that_is_not_a_report_is_refused(doc: dict[str, object]) -> None:
    with pytest.raises(ValueError):
        report_from_json(doc)
