"""The argument types commands share: what they take, what they refuse and how they say it."""

from __future__ import annotations

import argparse

import pytest

from gpufed.argtypes import positive_number, tail_lines, whole_number


@pytest.mark.parametrize(("minimum", "text", "value"), [(0, "0", 0), (0, "17", 17), (1, "1", 1), (2, "40", 40)])
def test_a_whole_number_at_or_above_the_minimum_is_taken(minimum: int, text: str, value: int) -> None:
    assert whole_number(minimum)(text) == value


@pytest.mark.parametrize(("minimum", "text"), [(1, "0"), (2, "1"), (0, "-1"), (0, "1.5"), (0, " 3"), (0, "x"), (0, ""), (0, "²"), (0, "١٢")])
def test_anything_else_is_refused_naming_the_minimum(minimum: int, text: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError, match=rf"^expected a whole number >= {minimum}, not {text!r}$"):
        whole_number(minimum)(text)


def test_the_refusal_says_what_and_why() -> None:
    parse = whole_number(2, what="whole seconds", why=" (etcd's minimum lease)")
    with pytest.raises(argparse.ArgumentTypeError) as caught:
        parse("1")
    assert str(caught.value) == "expected whole seconds >= 2 (etcd's minimum lease), not '1'"


def test_argparse_reports_the_refusal_for_the_flag(capsys: pytest.CaptureFixture[str]) -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--workers", type=whole_number(1))
    with pytest.raises(SystemExit):
        parser.parse_args(["--workers", "0"])
    assert "argument --workers: expected a whole number >= 1, not '0'" in capsys.readouterr().err


@pytest.mark.parametrize(("text", "value"), [("1", 1.0), ("0.5", 0.5), ("1e3", 1000.0)])
def test_a_positive_number_is_taken(text: str, value: float) -> None:
    assert positive_number()(text) == value


def test_a_number_at_or_below_zero_is_refused() -> None:
    for text in ("0", "-2", "-0.1"):
        with pytest.raises(argparse.ArgumentTypeError, match=r"^must be positive$"):
            positive_number()(text)


def test_text_that_is_no_number_is_refused_naming_what_was_expected() -> None:
    with pytest.raises(argparse.ArgumentTypeError) as caught:
        positive_number("a number of seconds")("soon")
    assert str(caught.value) == "expected a number of seconds, not 'soon'"


@pytest.mark.parametrize("command", ["up", "sim-cluster"])
def test_time_scale_at_zero_is_refused_by_the_commands(command: str, capsys: pytest.CaptureFixture[str]) -> None:
    from gpufed.cli import build_parser

    with pytest.raises(SystemExit) as exited:
        build_parser().parse_args([command, "--time-scale", "0"])
    assert exited.value.code == 2
    assert "argument --time-scale: must be positive" in capsys.readouterr().err


@pytest.mark.parametrize(("text", "value"), [("-1", -1), ("0", 0), ("20", 20)])
def test_tail_takes_a_number_of_lines_or_minus_one_for_all(text: str, value: int) -> None:
    assert tail_lines(text) == value


@pytest.mark.parametrize(("text", "message"), [
    ("-5", "must be greater than or equal to -1, not '-5'"),
    ("ten", "expected a number of lines (-1: all), not 'ten'"),
])
def test_tail_refuses_what_kubectl_refuses(text: str, message: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError) as caught:
        tail_lines(text)
    assert str(caught.value) == message


@pytest.mark.parametrize("argv", [["up", "--port", "99999"], ["controlplane", "--listen", "127.0.0.1:70000"],
                                  ["sim-cluster", "--listen", "[::1]:65536"]])
def test_a_port_past_65535_is_a_usage_error(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    from gpufed.cli import main

    with pytest.raises(SystemExit) as exited:
        main([*argv, "--state-dir", "unused"])
    assert exited.value.code == 2
    port = argv[-1].rpartition(":")[2] if ":" in argv[-1] else argv[-1]
    assert capsys.readouterr().err.splitlines()[-1].endswith(f"expected a port 0-65535, not '{port}'")


@pytest.mark.parametrize("argv", [["cordon", ""], ["uncordon", " "], ["taint", "", "a=b:NoSchedule"],
                                  ["token", "revoke", ""]])
def test_an_empty_name_is_a_usage_error(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    """An empty name would address the collection (the hub's 405 or 404 for the whole of it)."""
    from gpufed.cli import main

    with pytest.raises(SystemExit) as exited:
        main(argv)
    assert exited.value.code == 2
    assert capsys.readouterr().err.splitlines()[-1].endswith(": a name is required, not an empty one")
