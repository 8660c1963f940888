"""`gpufed controlplane --etcd-max-response-bytes`: a number of bytes no smaller than what one
etcd object may take (below it a stored object could not be read back)."""

from __future__ import annotations

import argparse

import pytest

from gpufed.commands.controlplane import MIN_ETCD_RESPONSE_BYTES, add_arguments


def parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    return parser.parse_args(list(argv))


def test_the_default_leaves_the_hubs_own() -> None:
    assert parse().etcd_max_response_bytes is None


def test_a_limit_at_or_above_the_minimum_is_taken() -> None:
    assert parse("--etcd-max-response-bytes", str(MIN_ETCD_RESPONSE_BYTES)).etcd_max_response_bytes == (
        MIN_ETCD_RESPONSE_BYTES
    )


@pytest.mark.parametrize("value", [str(MIN_ETCD_RESPONSE_BYTES - 1), "0", "-5", "2MiB", ""])
def test_anything_else_is_refused(value: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        parse("--etcd-max-response-bytes", value)
    assert "--etcd-max-response-bytes" in capsys.readouterr().err
