"""`gpufed waste` command lines -> the WasteReport request they make."""

from __future__ import annotations

import argparse
from datetime import UTC, datetime
from pathlib import Path

import pytest

from gpufed.cli import main
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
        (("--from", "0001-01-01T00:00:00Z"), f"{REPORTS}/custom",
         {"top": "10", "from": "0001-01-01T00:00:00Z"}),
        (("-n", "team-a", "--since", "1h"), "/apis/reports.gpufed.io/v1alpha1/namespaces/team-a/wastereports/last-1h",
         {"top": "10"}),
    ],
)
def test_command_lines(argv: tuple[str, ...], path: str, params: dict[str, str]) -> None:
    assert request_path(_parse(*argv), now=NOW) == (path, params)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (("--to", "5m"), "error: --to needs --from"),
        (("--by", "team"), "error: argument --by: 'team' is not one of cluster, model, profile,"),
        (("--by", "cluster,foo"), "error: argument --by: 'foo' is not one of"),
        (("--top", "-1"), "error: argument --top: expected a number of workloads 0-1000, not '-1'"),
        (("--top", "1001"), "error: argument --top: expected a number of workloads 0-1000, not '1001'"),
        (("--since", "9999d"), "error: argument --since: must be at most 3660d, not '9999d'"),
    ],
)
def test_a_bad_command_line_is_a_usage_error_naming_the_flag(
    argv: tuple[str, ...], message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Exit status 2 and argparse's words, before any hub is asked (there is none here)."""
    with pytest.raises(SystemExit) as exited:
        main(["waste", *argv, "--kubeconfig", str(tmp_path / "missing")])
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("usage: gpufed waste ")
    assert err.splitlines()[-1].startswith(f"gpufed waste: {message}")
