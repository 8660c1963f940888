"""kube's canonical quantity strings (k8s.io/apimachinery resource/quantity_test.go cases)."""

from __future__ import annotations

import math
from decimal import Decimal

import pytest

from controlplane.apis.quantity import (
    QuantityError,
    QuantityFormat,
    canonical_quantity,
    parse_kube_quantity,
    parse_quantity,
    to_int,
)


@pytest.mark.parametrize(
    ("written", "canonical"),
    [
        # Written canonically: kept as written.
        ("1", "1"),
        ("500m", "500m"),
        ("24Gi", "24Gi"),
        ("100Ki", "100Ki"),
        ("100M", "100M"),
        ("1e3", "1e3"),
        ("1E6", "1E6"),
        ("1k", "1k"),
        ("0", "0"),
        # TestQuantityString's alternate spellings, and their canonical form.
        ("1024Mi", "1Gi"),
        ("307200Ki", "300Mi"),
        ("1025024Mi", "1001Gi"),
        ("1024Gi", "1Ti"),
        ("5000m", "5"),
        ("0.5", "500m"),
        ("1000M", "1G"),
        ("0.001T", "1G"),
        ("1000u", "1m"),
        ("1.08", "1080m"),
        ("1080000000n", "1080m"),
        (".001e12", "1e9"),
        ("0.001e0", "1e-3"),
        ("1000e-12", "1e-9"),
        ("00", "0"),
        # Floats, suffix families, rounding.
        ("1.5", "1500m"),
        ("0.5Gi", "512Mi"),
        ("1.5Gi", "1536Mi"),
        ("1000m", "1"),
        ("1000", "1k"),
        ("0.5Ki", "512"),
        ("0Gi", "0"),
        ("1e4", "10e3"),
        ("1.2e3", "1200"),
        ("100.035k", "100.035k"),  # looks canonical to kube's fast path: kept
        ("0.0005k", "500m"),
        ("3.001n", "4n"),
        ("0.0000000001", "1n"),
        ("0.00000012345", "124n"),
        ("9Ei", "9223372036854775807"),  # capped at the int64 maximum
        ("0.000000000001Ki", "2n"),
        ("-1.5", "-1500m"),
        ("+1", "+1"),
        (" 2 ", "2"),  # JSON's decoder trims spaces
        # JSON numbers are read from their text.
        (1, "1"),
        (1.5, "1500m"),
        (2048, "2048"),
    ],
)
def test_canonical_quantity_matches_kube(written: str | int | float, canonical: str) -> None:
    assert canonical_quantity(written) == canonical


def test_binary_below_one_becomes_decimal() -> None:
    assert parse_kube_quantity("0.5Mi").format is QuantityFormat.BINARY_SI
    assert parse_kube_quantity("0.000000000001Ki").format is QuantityFormat.DECIMAL_SI


@pytest.mark.parametrize(
    ("written", "canonical"),
    [("100n", "1m"), ("1.0001", "1001m"), ("1500u", "2m"), ("9.01", "9010m"), ("1Gi", "1Gi"), ("-0.0001", "-1m")],
)
def test_resource_lists_round_up_to_milli(written: str, canonical: str) -> None:
    assert canonical_quantity(written, round_milli=True) == canonical


@pytest.mark.parametrize(
    "written", ["1.1.M", "1+1.0M", "0.1mi", "0.1am", "aoeu", ".5i", "1i", "-3.01i", "-3.01e-", "", "1e", True]
)
def test_invalid_quantities_are_refused(written: str | bool) -> None:
    with pytest.raises(QuantityError):
        canonical_quantity(written)


@pytest.mark.parametrize(("written", "value"), [
    ("Ki", 0), ("m", 0), ("+Mi", 0), (".", 0), ("500m", Decimal("0.5")), (" 2 ", 2), ("1e-12", Decimal("1e-9")),
])
def test_every_reader_parses_as_kubes_parse_quantity(written: str, value: Decimal) -> None:
    """The scheduler's, the agent's and validation's reading agrees with what the API stores:
    a suffix alone is 0 (kube's parser takes no digits as zero), as ``canonical_quantity`` says."""
    assert parse_quantity(written) == value
    assert to_int("memory", written) == math.ceil(value)
    if value == 0:
        assert canonical_quantity(written) == "0"


@pytest.mark.parametrize("written", ["10 Gi", "1_000", "1KK", "abc", ""])
def test_every_reader_refuses_what_kube_refuses(written: str) -> None:
    with pytest.raises(QuantityError):
        parse_quantity(written)


@pytest.mark.parametrize(("resource", "written", "counted"), [
    ("memory", "1e400", 2**63 - 1), ("cpu", "1e400", 2**63 - 1), ("cpu", "9223372036854776", 2**63 - 1),
    ("cpu", "9223372036854775", 9223372036854775000), ("memory", "1e999999999999999999", 2**63 - 1),
    ("memory", "-1e400", -(2**63)), ("cpu", "1e-400", 1),
])
def test_counts_past_int64_saturate(resource: str, written: str, counted: int) -> None:
    """A quantity kube reads but int64 cannot hold counts as int64's bound, as Kueue's int64 counts
    do, at once: not a number of 400 digits (or of 10^18, which would never finish)."""
    assert to_int(resource, written) == counted


def test_a_coefficient_of_thousands_of_digits_prints_at_once() -> None:
    """kube keeps and prints every digit. The parser rounded such a number to 28 digits (``1``
    stored for this one), Python refuses to print an integer past 4,300 digits (a 500 for a quota
    summing such a request), and removing factors of ten one by one took seconds."""
    written = "1" + "0" * 5000 + "1"
    assert canonical_quantity(written) == written
    assert canonical_quantity(written + "000") == written + "k"
