"""The README's configuration reference lists exactly the flags each command accepts."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import pytest

from gpufed.cli import build_parser

README = Path(__file__).resolve().parents[2] / "README.md"
COMMANDS = ("controlplane", "agent", "sim-cluster", "sim-fleet", "up")


def _documented() -> dict[str, set[str]]:
    text = README.read_text()
    section = text.split("## Configuration reference", 1)[1].split("\n## ", 1)[0]
    flags: dict[str, set[str]] = {}
    current: str | None = None
    for line in section.splitlines():
        heading = re.match(r"\*\*`gpufed ([a-z-]+)`\*\*", line)
        if heading:
            current = heading.group(1)
            flags[current] = set()
        elif current and line.startswith("| `--"):
            first_cell = line.split("|")[1]
            flags[current].update(re.findall(r"`(--[a-z0-9-]+)", first_cell))
    return flags


def _accepted(command: str) -> set[str]:
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return {
        option
        for action in sub.choices[command]._actions
        if action.help != argparse.SUPPRESS
        for option in action.option_strings
        if option.startswith("--") and option != "--help"
    }


@pytest.mark.parametrize("command", COMMANDS)
def test_readme_lists_every_flag_of(command: str) -> None:
    documented = _documented()
    assert command in documented, f"no table for gpufed {command} in the README's configuration reference"
    accepted = _accepted(command)
    assert documented[command] - accepted == set(), "documented but not accepted"
    assert accepted - documented[command] == set(), "accepted but not documented"
