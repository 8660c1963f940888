"""`gpufed controlplane --kueue-fair-sharing-preemption-strategies`: Kueue's
``fairSharing.preemptionStrategies``, its default pair when not given, the lists Kueue's
configuration validation accepts (one strategy alone, or the two in Kueue's order) and its
messages for the others, and the setting refused without ``--kueue-fair-sharing``."""

from __future__ import annotations

import argparse

import pytest

from controlplane.admission.core.fairsharing import PreemptionStrategy
from gpufed.commands.controlplane import add_arguments, conflicting_flags, controller_settings

FINAL, INITIAL = PreemptionStrategy.LESS_THAN_OR_EQUAL_TO_FINAL_SHARE, PreemptionStrategy.LESS_THAN_INITIAL_SHARE
SUPPORTED = 'supported values: "LessThanOrEqualToFinalShare", "LessThanInitialShare", "LessThanOrEqualToFinalShare,LessThanInitialShare"'


def parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    return parser.parse_args(list(argv))


def test_kueues_default_pair_when_not_given() -> None:
    assert controller_settings(parse("--kueue-fair-sharing")).kueue_fair_sharing_preemption_strategies == (FINAL, INITIAL)


@pytest.mark.parametrize(("value", "want"), [
    ("LessThanOrEqualToFinalShare", (FINAL,)),
    ("LessThanInitialShare", (INITIAL,)),
    ("LessThanOrEqualToFinalShare,LessThanInitialShare", (FINAL, INITIAL)),
])
def test_the_lists_kueue_accepts(value: str, want: tuple[PreemptionStrategy, ...]) -> None:
    args = parse("--kueue-fair-sharing", "--kueue-fair-sharing-preemption-strategies", value)
    assert conflicting_flags(args) is None
    settings = controller_settings(args)
    assert settings.kueue_fair_sharing and settings.kueue_fair_sharing_preemption_strategies == want


@pytest.mark.parametrize(("value", "message"), [
    ("LessThanInitialShare,LessThanOrEqualToFinalShare", f'Unsupported value: "LessThanInitialShare,LessThanOrEqualToFinalShare": {SUPPORTED}'),
    ("LessThanInitialShare,LessThanInitialShare", f'Unsupported value: "LessThanInitialShare,LessThanInitialShare": {SUPPORTED}'),
    ("LessThanOrEqualToFinalShare,LessThanInitialShare,LessThanInitialShare",
     f'Unsupported value: "LessThanOrEqualToFinalShare,LessThanInitialShare,LessThanInitialShare": {SUPPORTED}'),
    ("Fairly", f'Unsupported value: "Fairly": {SUPPORTED}'),
    ("", "Required value: must be specified"),
])
def test_other_lists_are_refused_with_kueues_words(value: str, message: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        parse("--kueue-fair-sharing", f"--kueue-fair-sharing-preemption-strategies={value}")
    assert f"argument --kueue-fair-sharing-preemption-strategies: {message}" in capsys.readouterr().err


def test_the_setting_without_fair_sharing_is_refused() -> None:
    assert conflicting_flags(parse("--kueue-fair-sharing-preemption-strategies", "LessThanInitialShare")) == (
        "--kueue-fair-sharing-preemption-strategies is a setting of fair sharing: add --kueue-fair-sharing to turn it on")
