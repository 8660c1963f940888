"""`gpufed sim-fleet` refuses what it cannot run with one line that says what to change."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from gpufed.commands import simfleet


def run(tmp_path: Path, *argv: str) -> int:
    parser = argparse.ArgumentParser()
    simfleet.add_arguments(parser)
    return simfleet.run(parser.parse_args(["--state-dir", str(tmp_path / "fleet"), *argv]))


@pytest.mark.parametrize(("argv", "message"), [
    (("--clusters", "0", "--nodes", "1", "--hub-kubeconfig", "k"), "--clusters must be 1..1000"),
    (("--clusters", "1", "--nodes", "1"), "give either --hub-kubeconfig"),
    (("--clusters", "1", "--nodes", "1", "--token-file", "t"), "--token-file needs --hub and --hub-ca-hash"),
    (("--clusters", "1", "--nodes", "1", "--hub-kubeconfig", "k", "--models", "Bogus-GPU"),
     "--models: memoryMiB is required for GPU product 'Bogus-GPU'"),
    (("--clusters", "1", "--nodes", "1", "--hub-kubeconfig", "k", "--models", " , "), "--models names no GPU product"),
])
def test_bad_arguments_exit_2_with_the_reason(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                              argv: tuple[str, ...], message: str) -> None:
    assert run(tmp_path, *argv) == 2
    assert capsys.readouterr().err.startswith(f"error: {message}")


def test_too_few_tokens_and_a_malformed_ca_hash_are_named(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    tokens = tmp_path / "tokens"
    tokens.write_text("abcdef.0123456789abcdef\n")
    common = ("--nodes", "1", "--hub", "https://127.0.0.1:1", "--token-file", str(tokens))
    assert run(tmp_path, "--clusters", "2", *common, "--hub-ca-hash", "sha256:" + "0" * 64) == 1
    assert "has 1 tokens; 2 clusters need one each" in capsys.readouterr().err
    assert run(tmp_path, "--clusters", "1", *common, "--hub-ca-hash", "sha256:00") == 1
    assert capsys.readouterr().err == "error: --hub-ca-hash must look like sha256:<64 hex digits>, got 'sha256:00'\n"
