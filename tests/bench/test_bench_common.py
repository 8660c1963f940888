"""The pure helpers every benchmark shares: percentiles, targets, figures, the table."""

from __future__ import annotations

import math

import pytest

from bench.__main__ import result_from_run
from bench.common import (
    BenchmarkResult,
    Figure,
    Size,
    Status,
    at_least,
    at_most,
    failed_run,
    format_number,
    format_table,
    latency_summary,
    percentile,
    table_rows,
)


@pytest.mark.parametrize(
    ("values", "q", "expected"),
    [
        ([5.0], 50, 5.0),
        ([5.0], 99, 5.0),
        ([1.0, 2.0, 3.0, 4.0], 50, 2.0),
        ([4.0, 3.0, 2.0, 1.0], 50, 2.0),
        ([float(i) for i in range(1, 101)], 99, 99.0),
        ([float(i) for i in range(1, 101)], 100, 100.0),
        ([float(i) for i in range(1, 1001)], 99, 990.0),
        ([float(i) for i in range(1, 11)], 99, 10.0),
    ],
)
def test_percentile_is_nearest_rank(values: list[float], q: float, expected: float) -> None:
    assert percentile(values, q) == expected


@pytest.mark.parametrize(("values", "q"), [([], 50), ([1.0], 0), ([1.0], 101)])
def test_percentile_rejects_bad_input(values: list[float], q: float) -> None:
    with pytest.raises(ValueError):
        percentile(values, q)


def test_latency_summary_reports_milliseconds() -> None:
    summary = latency_summary([0.001, 0.002, 0.003, 0.100])
    assert summary == {"count": 4, "p50_ms": 2.0, "p99_ms": 100.0, "max_ms": 100.0, "mean_ms": 26.5}
    assert latency_summary([]) == {"count": 0}


@pytest.mark.parametrize(
    ("figure", "ok"),
    [
        (Figure("p99", 0.8, "ms", at_most(1.0)), True),
        (Figure("p99", 1.0, "ms", at_most(1.0)), True),
        (Figure("p99", 1.2, "ms", at_most(1.0)), False),
        (Figure("rate", 2500, "1/s", at_least(2000)), True),
        (Figure("rate", 1999, "1/s", at_least(2000)), False),
        (Figure("size", 12.0, "KiB"), None),
        (Figure("rate", None, "1/s", at_least(2000)), None),
        (Figure("rate", math.nan, "1/s", at_least(2000)), None),
    ],
)
def test_figure_judges_its_target(figure: Figure, ok: bool | None) -> None:
    assert figure.ok is ok
    assert figure.as_dict()["ok"] is ok


def test_result_round_trips_through_json_form() -> None:
    result = BenchmarkResult(
        benchmark="api",
        size=Size.QUICK,
        figures=[Figure("ratio", 0.42, "", at_least(0.5)), Figure("GET p50", 1.5, "ms")],
        details={"objects": 10},
        seconds=12.34,
    )
    again = BenchmarkResult.from_dict(result.as_dict())
    assert again == BenchmarkResult(
        benchmark="api", size=Size.QUICK, figures=result.figures, details={"objects": 10}, seconds=12.3
    )


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (None, "-"),
        (0.0, "0"),
        (0.4321, "0.432"),
        (2.5, "2.5"),
        (3.0, "3"),
        (12.34, "12.3"),
        (150.4, "150"),
        (60.0, "60"),
        (10000.0, "10,000"),
        (2050.7, "2,051"),
    ],
)
def test_format_number(value: float | None, text: str) -> None:
    assert format_number(value) == text


def test_table_has_a_row_per_figure_and_one_for_a_skipped_benchmark() -> None:
    results = [
        BenchmarkResult(
            benchmark="scheduler",
            size=Size.FULL,
            figures=[Figure("p99", 1.5, "ms", at_most(1.0)), Figure("rate", 2500.0, "1/s", at_least(2000))],
        ),
        BenchmarkResult(
            benchmark="e2e", size=Size.FULL, status=Status.SKIPPED, reason="controllers missing\nmore"
        ),
    ]
    rows = table_rows(results)
    assert rows == [
        ("scheduler", "p99", "1.5", "ms", "<= 1", "NO"),
        ("scheduler", "rate", "2,500", "1/s", ">= 2,000", "yes"),
        ("e2e", "SKIPPED", "controllers missing", "", "", ""),
    ]
    lines = format_table(rows).splitlines()
    assert lines[0].split() == ["benchmark", "figure", "value", "unit", "target", "ok?"]
    assert len(lines) == 2 + len(rows)


def test_run_results_of_every_accepted_form_become_a_result() -> None:
    native = BenchmarkResult(benchmark="whatif", size=Size.TINY, figures=[Figure("gpufed replay", 1.0, "s")])
    assert result_from_run("whatif", Size.TINY, native) is native
    as_json = result_from_run("whatif", Size.TINY, native.as_dict())
    assert as_json.figures == native.figures
    flat = result_from_run("whatif", Size.TINY, {"gpufed_seconds": 3, "ok": True, "details": {"tasks": 5}})
    assert flat.figures == [Figure("gpufed_seconds", 3.0)]
    assert flat.details == {"tasks": 5}
    with pytest.raises(TypeError):
        result_from_run("whatif", Size.TINY, [1, 2])


def test_a_run_that_raised_is_a_failed_result_with_the_error_and_the_logs() -> None:
    result = failed_run("api", Size.TINY, RuntimeError("hub did not start"), logs="tail of logs", started=0.0)
    assert (result.benchmark, result.size, result.status) == ("api", Size.TINY, Status.FAILED)
    assert result.reason == "RuntimeError: hub did not start"
    assert result.details == {"logs": "tail of logs"}
    assert result.seconds is not None and result.seconds > 0
