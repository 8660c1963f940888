"""`gpufed controlplane --kueue-admission-fair-sharing` and its settings: Kueue's
``admissionFairSharing`` defaults (half-life 0, sampling every 5m, every resource weighing 1),
its validation (a negative half-life, a sampling interval not above 0, a negative weight), Go's
durations, and a setting given without the flag that turns it on."""

from __future__ import annotations

import argparse

import pytest

from controlplane.admission.core.admissionfairsharing import AdmissionFairSharing
from gpufed.commands.controlplane import add_arguments, conflicting_flags, controller_settings


def parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    return parser.parse_args(list(argv))


def test_off_by_default_and_kueues_defaults_when_on() -> None:
    assert controller_settings(parse()).kueue_admission_fair_sharing is None
    assert controller_settings(parse("--kueue-admission-fair-sharing")).kueue_admission_fair_sharing == AdmissionFairSharing(
        usage_half_life_seconds=0.0, usage_sampling_interval_seconds=300.0, resource_weights={})


def test_the_settings_are_read_as_kueue_writes_them() -> None:
    args = parse("--kueue-admission-fair-sharing", "--kueue-usage-half-life-time", "168h",
                 "--kueue-usage-sampling-interval", "1m30s", "--kueue-resource-weights", "nvidia.com/gpu=4,cpu=0.5")
    assert conflicting_flags(args) is None
    assert controller_settings(args).kueue_admission_fair_sharing == AdmissionFairSharing(
        usage_half_life_seconds=168 * 3600, usage_sampling_interval_seconds=90, resource_weights={"nvidia.com/gpu": 4, "cpu": 0.5})


@pytest.mark.parametrize(("flag", "value", "message"), [
    ("--kueue-usage-half-life-time", "-1s", "must be greater than or equal to 0, not '-1s'"),
    ("--kueue-usage-half-life-time", "7d", 'time: unknown unit "d" in duration "7d"'),
    ("--kueue-usage-sampling-interval", "0", "must be greater than 0, not '0'"),
    ("--kueue-usage-sampling-interval", "5", 'time: missing unit in duration "5"'),
    ("--kueue-resource-weights", "cpu=-0.5", "the weight of cpu must be greater than or equal to 0, not '-0.5'"),
    ("--kueue-resource-weights", "cpu", "expected RESOURCE=WEIGHT pairs separated by commas"),
    ("--kueue-resource-weights", "cpu=a lot", "the weight of cpu must be a number, not 'a lot'"),
    ("--kueue-resource-weights", "cpu=1,cpu=2", "cpu is given a weight twice"),
])
def test_a_bad_setting_is_refused_naming_its_flag(flag: str, value: str, message: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        parse("--kueue-admission-fair-sharing", f"{flag}={value}")
    err = capsys.readouterr().err
    assert f"argument {flag}: {message}" in err


def test_a_setting_without_the_flag_that_turns_it_on_is_refused() -> None:
    assert conflicting_flags(parse("--kueue-usage-half-life-time", "1h")) == (
        "--kueue-usage-half-life-time is a setting of admission fair sharing: add --kueue-admission-fair-sharing to turn it on")
