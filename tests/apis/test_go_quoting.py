"""Go's quoting: ``strconv.Quote`` (kube's ``%q``) and the ``time`` package's own, in one module.

The expected texts are what Go 1.22 prints: ``fmt.Sprintf("%q", s)`` and ``time.ParseDuration``'s
error for the same input.
"""

from __future__ import annotations

import pytest

from controlplane.apis.durations import go_duration_error
from controlplane.gojson import go_quote, go_time_quote


@pytest.mark.parametrize(
    ("text", "quoted"),
    [
        ("", '""'),
        ("plain text", '"plain text"'),
        ('say "hi"\\', '"say \\"hi\\"\\\\"'),
        ("a\nb\tc\rd", '"a\\nb\\tc\\rd"'),
        ("\a\b\f\v", '"\\a\\b\\f\\v"'),
        ("\x00\x01\x1f", '"\\x00\\x01\\x1f"'),
        ("del\x7f", '"del\\x7f"'),
        ("café ☃ 日本 😀", '"café ☃ 日本 😀"'),
        ("nb\u00a0sp", '"nb\\u00a0sp"'),
        ("line\u2028sep", '"line\\u2028sep"'),
        ("zero\u200bwidth", '"zero\\u200bwidth"'),
        ("\U000e0001", '"\\U000e0001"'),
        ("bad\udcff", '"bad\\xff"'),
        ("<&>", '"<&>"'),
    ],
)
def test_go_quote_is_strconv_quote(text: str, quoted: str) -> None:
    assert go_quote(text) == quoted


@pytest.mark.parametrize(
    ("text", "quoted"),
    [
        ("5d", '"5d"'),
        ('a"b\\', '"a\\"b\\\\"'),
        ("1µs\n", '"1\\xc2\\xb5s\\x0a"'),
        ("del\x7f", '"del\x7f"'),
    ],
)
def test_go_time_quote_is_the_time_packages(text: str, quoted: str) -> None:
    assert go_time_quote(text) == quoted


def test_duration_errors_quote_as_the_time_package() -> None:
    assert go_duration_error("5é") == 'time: unknown unit "\\xc3\\xa9" in duration "5\\xc3\\xa9"'
