"""`gpufed controlplane --etcd-max-response-bytes`: a number of bytes no smaller than what one
etcd object may take (below it a stored object could not be read back). The ``--kueue-*`` flags:
Kueue's waitForPodsReady (off) and requeuing strategy defaults. kube's
``--legacy-service-account-token-clean-up-period``: a duration, a year by default."""

from __future__ import annotations

import argparse
import datetime as dt

import pytest

from controlplane.admission.requeuing import WaitForPodsReady
from gpufed.commands.controlplane import (
    MIN_ETCD_RESPONSE_BYTES,
    add_arguments,
    conflicting_flags,
    wait_for_pods_ready,
)


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


def test_the_requeuing_defaults_are_kueues() -> None:
    settings = wait_for_pods_ready(parse())
    assert settings == WaitForPodsReady(timeout_seconds=0, backoff_base_seconds=60, backoff_max_seconds=3600)
    assert not settings.enabled and settings.backoff_limit_count is None


def test_the_requeuing_flags() -> None:
    args = parse("--kueue-wait-for-pods-ready-timeout", "300", "--kueue-requeuing-backoff-base-seconds", "10",
                 "--kueue-requeuing-backoff-max-seconds", "600", "--kueue-requeuing-backoff-limit-count", "0")
    assert wait_for_pods_ready(args) == WaitForPodsReady(300, 10, 600, 0)
    args = parse("--kueue-wait-for-pods-ready-timeout", "300", "--kueue-wait-for-pods-ready-recovery-timeout", "60")
    assert wait_for_pods_ready(args).recovery_timeout_seconds == 60 and conflicting_flags(args) is None
    assert wait_for_pods_ready(parse()).recovery_timeout_seconds is None


def test_a_recovery_timeout_needs_wait_for_pods_ready() -> None:
    assert conflicting_flags(parse("--kueue-wait-for-pods-ready-recovery-timeout", "60")) == (
        "--kueue-wait-for-pods-ready-recovery-timeout is a setting of waitForPodsReady: "
        "add --kueue-wait-for-pods-ready-timeout to turn it on")


@pytest.mark.parametrize(("flag", "value"), [("--kueue-requeuing-backoff-base-seconds", "0"),
                                             ("--kueue-wait-for-pods-ready-timeout", "-1"),
                                             ("--kueue-wait-for-pods-ready-recovery-timeout", "0"),
                                             ("--kueue-requeuing-backoff-limit-count", "x")])
def test_bad_requeuing_values_are_refused(flag: str, value: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        parse(flag, value)
    assert flag in capsys.readouterr().err


def test_the_garbage_collector_policy_flags() -> None:
    assert (parse().gc_freeze_interval, parse().gc_full_interval) == (10, 3600)
    args = parse("--gc-freeze-interval", "0", "--gc-full-interval", "0")
    assert (args.gc_freeze_interval, args.gc_full_interval) == (0, 0)


@pytest.mark.parametrize(("flag", "value"), [("--gc-freeze-interval", "-1"), ("--gc-full-interval", "1.5")])
def test_bad_garbage_collector_values_are_refused(flag: str, value: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        parse(flag, value)
    assert flag in capsys.readouterr().err


@pytest.mark.parametrize(("value", "seconds"), [(None, 1.0), ("0", 0.0), ("2.5", 2.5), ("0.0", 0.0)])
def test_the_loop_stall_warning_flag(value: str | None, seconds: float) -> None:
    args = parse() if value is None else parse("--loop-stall-warning", value)
    assert args.loop_stall_warning == seconds


@pytest.mark.parametrize(("flag", "value", "why"), [
    ("--loop-stall-warning", "-1", "expected a number of seconds >= 0 (0: off), not '-1'"),
    ("--loop-stall-warning", "nan", "expected a number of seconds >= 0 (0: off), not 'nan'"),
    ("--loop-stall-warning", "soon", "expected a number of seconds (0: off), not 'soon'"),
    ("--service-account-issuer", "http://hub.example.com", "issuer URL must use https scheme, got: http://hub.example.com"),
    ("--service-account-issuer", "hub", "issuer URL must use https scheme, got: hub"),
    ("--service-account-issuer", "https://hub.example.com/?a=b", "issuer URL must not contain a query or fragment"),
])
def test_bad_flag_values_are_refused(flag: str, value: str, why: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        parse(flag, value)
    err = capsys.readouterr().err
    assert flag in err and why in err


@pytest.mark.parametrize("flag", ["--anonymous-auth", "--enable-priority-and-fairness", "--audit-log-compress",
                                  "--audit-webhook-truncate-enabled"])
@pytest.mark.parametrize(("text", "value"), [("true", True), ("T", True), ("1", True), ("FALSE", False), ("f", False)])
def test_boolean_flags_read_their_value_as_kubes_do(flag: str, text: str, value: bool) -> None:
    assert getattr(parse(f"{flag}={text}"), flag[2:].replace("-", "_")) is value
    assert getattr(parse(flag), flag[2:].replace("-", "_")) is True


@pytest.mark.parametrize("flag", ["--anonymous-auth", "--audit-log-compress"])
@pytest.mark.parametrize("text", ["tRUE", "yes", ""])
def test_a_boolean_flag_refuses_what_go_does_not_read(flag: str, text: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        parse(f"{flag}={text}")
    assert f"argument {flag}: expected true or false, not {text!r}" in capsys.readouterr().err


def test_the_legacy_token_clean_up_period_has_kubes_name_and_default() -> None:
    assert parse().legacy_service_account_token_clean_up_period == dt.timedelta(days=365)
    assert parse("--legacy-service-account-token-clean-up-period", "2h").legacy_service_account_token_clean_up_period == (
        dt.timedelta(hours=2)
    )


@pytest.mark.parametrize("value", ["0s", "soon", ""])
def test_a_clean_up_period_that_is_no_duration_is_refused(value: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        parse("--legacy-service-account-token-clean-up-period", value)
    assert "--legacy-service-account-token-clean-up-period" in capsys.readouterr().err


def test_the_service_account_issuer_is_kubeadms_by_default_and_an_https_url() -> None:
    assert parse().service_account_issuers == ("https://kubernetes.default.svc.cluster.local",)
    assert parse("--service-account-issuer", "https://hub.example.com:6443").service_account_issuers == [
        "https://hub.example.com:6443"
    ]
