"""The agent's ledger of applied Works: a change is one synced journal line, whatever the number
of Works; the whole ledger is written only now and then; a restart reads the same ledger, also
after a crash cut the journal's last line short or fell between the two steps of a compaction."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from member_agent import ledger as ledger_module
from member_agent.ledger import JOURNAL_FILE, LEDGER_FILE, Ledger


def ident(name: str) -> dict[str, str]:
    return {"group": "", "version": "v1", "kind": "ConfigMap", "namespace": "ml", "name": name}


def contents(ledger: Ledger) -> dict[str, tuple[list[dict[str, str]], bool]]:
    return {key: (ledger.get(key), ledger.preserves(key)) for key in ledger}


def test_each_change_appends_one_line_and_does_not_rewrite_the_ledger(tmp_path: Path) -> None:
    ledger = Ledger(tmp_path)
    for index in range(300):
        ledger.set(f"ns/w{index}", [ident(f"c{index}")], preserve=index % 3 == 0)
    for index in range(0, 300, 2):
        ledger.drop(f"ns/w{index}")
    ledger.set("ns/w1", [ident("c1")])  # unchanged: nothing written
    lines = (tmp_path / JOURNAL_FILE).read_text().splitlines()
    assert len(lines) == 450
    assert json.loads(lines[-1]) == {"drop": "ns/w298"}
    assert not (tmp_path / LEDGER_FILE).exists()
    again = Ledger(tmp_path)
    assert contents(again) == contents(ledger)
    assert len(again.keys()) == 150 and again.preserves("ns/w3") and not again.preserves("ns/w1")


def test_a_long_journal_is_folded_into_the_ledger_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ledger_module, "COMPACT_AFTER", 10)
    ledger = Ledger(tmp_path)
    for index in range(25):
        ledger.set(f"ns/w{index % 4}", [ident(f"c{index}")], preserve=index % 2 == 0)
    assert (tmp_path / LEDGER_FILE).exists()
    assert len((tmp_path / JOURNAL_FILE).read_text().splitlines()) < 10
    assert contents(Ledger(tmp_path)) == contents(ledger)


def test_a_restart_after_a_crash_reads_what_was_recorded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ledger = Ledger(tmp_path)
    ledger.set("ns/a", [ident("a")], preserve=True)
    ledger.set("ns/b", [ident("b")])
    expected = contents(ledger)
    # A crash while the next line was written: its start is on disk, its end is not.
    with (tmp_path / JOURNAL_FILE).open("a") as journal:
        journal.write('{"objects":[{"kind":"Conf')
    assert contents(Ledger(tmp_path)) == expected

    # A crash between writing the whole ledger and emptying the journal: the journal is read
    # again over the ledger it is already in, to the same result.
    monkeypatch.setattr(ledger_module, "COMPACT_AFTER", 4)
    other = tmp_path / "other"
    ledger = Ledger(other)
    for index in range(4):
        ledger.set(f"ns/w{index % 2}", [ident(str(index))], preserve=index % 2 == 1)
    expected = {**contents(ledger), "ns/w0": ([ident("newest")], False)}
    real_open = os.open

    def crash_before_emptying(path: str | os.PathLike[str], flags: int, *args: int) -> int:
        if Path(path).name == JOURNAL_FILE and flags & os.O_TRUNC:
            raise Crash
        return real_open(path, flags, *args)

    monkeypatch.setattr(os, "open", crash_before_emptying)
    with pytest.raises(Crash):
        ledger.set("ns/w0", [ident("newest")])  # the fifth line: the ledger is written whole
    monkeypatch.setattr(os, "open", real_open)
    assert (other / LEDGER_FILE).exists() and len((other / JOURNAL_FILE).read_text().splitlines()) == 5
    assert contents(Ledger(other)) == expected
    ledger = Ledger(other)
    ledger.set("ns/w2", [ident("later")])  # and it goes on from there
    assert contents(Ledger(other)) == {**expected, "ns/w2": ([ident("later")], False)}


class Crash(Exception):
    """The agent dies here."""
