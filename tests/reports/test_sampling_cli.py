"""`gpufed waste` command lines -> the WasteReport request they make."""

from __future__ import annotations

import argparse
from datetime import UTC, datetime

import pytest

from gpufed.commands.waste import add_arguments, request_path

NOW = datetime(2024, 5, 1, 12, 0, tzinfo=UTC)
REPORTS = "/apis/reports.gpufed.io/v1alpha1/wastereports"


def _parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    return parser.parse_args(list(argv))


@pytest.mark.parametrize(
    ("argv", "path", "params"),
    [
        ((), f"{REPORTS}/last-1d", {"top": "10"}),
        (("--since", "90m", "--by", "cluster,model", "--by", "cluster"), f"{REPORTS}/last-1h30m",
         {"top": "10", "by": "cluster,model"}),
        (("--from", "2024-04-30T00:00:00Z", "--to", "6h", "--top", "3"), f"{REPORTS}/custom",
         {"top": "3", "from": "2024-04-30T00:00:00Z", "to": "2024-05-01T06:00:00Z"}),
        (("--from", "48h"), f"{REPORTS}/custom", {"top": "10", "from": "2024-04-29T12:00:00Z"}),
        (("-n", "team-a", "--since", "1h"), "/apis/reports.gpufed.io/v1alpha1/namespaces/team-a/wastereports/last-1h",
         {"top": "10"}),
    ],
)
def test_command_lines(argv: tuple[str, ...], path: str, params: dict[str, str]) -> None:
    assert request_path(_parse(*argv), now=NOW) == (path, params)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (("--to", "1h"), "--to needs --from"),
        (("--by", "team"), "not one of"),
        (("--top", "-1"), "must not be negative"),
    ],
)
def test_bad_command_lines(argv: tuple[str, ...], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        request_path(_parse(*argv), now=NOW)
