"""The hub's flags for Kueue's fair sharing and admission fair sharing (its Configuration's
``fairSharing`` and ``admissionFairSharing``).

``--kueue-fair-sharing`` turns fair sharing on (Kueue's ``fairSharing.enable``);
``--kueue-fair-sharing-preemption-strategies`` is its ``preemptionStrategies``, one of the lists
Kueue's configuration validation accepts. ``--kueue-admission-fair-sharing`` turns admission
fair sharing on, as the section's presence does in Kueue's Configuration;
``--kueue-usage-half-life-time`` (default 0), ``--kueue-usage-sampling-interval`` (default 5m)
and ``--kueue-resource-weights`` (none: every resource weighs 1) are its fields, durations
written as Go writes them and checked as Kueue's configuration validation checks them. A setting
given without the flag that turns its feature on is refused, naming that flag. ``gpufed whatif
run`` takes the same flags for its replay (fair sharing itself it turns on with ``--fair-sharing``).
"""

from __future__ import annotations

import argparse
import math

from controlplane.admission.core.admissionfairsharing import (
    DEFAULT_SAMPLING_INTERVAL_SECONDS,
    AdmissionFairSharing,
)
from controlplane.admission.core.fairsharing import (
    DEFAULT_PREEMPTION_STRATEGIES,
    VALID_PREEMPTION_STRATEGIES,
    PreemptionStrategy,
)
from controlplane.apis.durations import go_duration_error, go_duration_seconds

_SETTINGS = ("--kueue-usage-half-life-time", "--kueue-usage-sampling-interval", "--kueue-resource-weights")


def _go_duration(text: str) -> float:
    if (error := go_duration_error(text)) is not None:
        raise argparse.ArgumentTypeError(f"{error} (a duration such as 168h, 30m or 90s)")
    return go_duration_seconds(text)


def _half_life(text: str) -> float:
    seconds = _go_duration(text)
    if seconds < 0:
        raise argparse.ArgumentTypeError(f"must be greater than or equal to 0, not {text!r} (0: no usage history)")
    return seconds


def _sampling_interval(text: str) -> float:
    seconds = _go_duration(text)
    if seconds <= 0:
        raise argparse.ArgumentTypeError(f"must be greater than 0, not {text!r} (Kueue's default is 5m)")
    return seconds


def _resource_weights(text: str) -> dict[str, float]:
    """``RESOURCE=WEIGHT,...`` (``nvidia.com/gpu=4,cpu=0.5``)."""
    weights: dict[str, float] = {}
    for part in text.split(","):
        name, sep, value = part.strip().partition("=")
        if not sep or not name.strip():
            raise argparse.ArgumentTypeError(
                f"expected RESOURCE=WEIGHT pairs separated by commas (nvidia.com/gpu=4,cpu=0.5), not {part.strip()!r}")
        try:
            weight = float(value)
        except ValueError:
            raise argparse.ArgumentTypeError(f"the weight of {name.strip()} must be a number, not {value!r}") from None
        if not math.isfinite(weight) or weight < 0:
            raise argparse.ArgumentTypeError(f"the weight of {name.strip()} must be greater than or equal to 0, not {value!r}")
        if name.strip() in weights:
            raise argparse.ArgumentTypeError(f"{name.strip()} is given a weight twice")
        weights[name.strip()] = weight
    return weights


def _preemption_strategies(text: str) -> tuple[PreemptionStrategy, ...]:
    """A comma-separated ``preemptionStrategies``, refused with Kueue's words unless it is one of
    the lists Kueue accepts."""
    if not text.strip():
        raise argparse.ArgumentTypeError("Required value: must be specified")
    names = tuple(part.strip() for part in text.split(","))
    for valid in VALID_PREEMPTION_STRATEGIES:
        if names == tuple(valid):
            return valid
    supported = ", ".join(f'"{",".join(valid)}"' for valid in VALID_PREEMPTION_STRATEGIES)
    raise argparse.ArgumentTypeError(f'Unsupported value: "{",".join(names)}": supported values: {supported}')


def add_fair_sharing_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--kueue-fair-sharing", action="store_true",
                        help="fleet quotas: Kueue's fair sharing (its fairSharing.enable): queues that borrow are "
                             "admitted by their dominant resource share over fairSharing.weight, and preempt within "
                             "the cohort by fair share (default off, as in Kueue)")
    add_preemption_strategies_argument(parser)


def add_preemption_strategies_argument(parser: argparse.ArgumentParser) -> None:
    """``--kueue-fair-sharing-preemption-strategies`` alone, for a command that turns fair sharing
    on with a flag of its own (``gpufed whatif run --fair-sharing``)."""
    parser.add_argument("--kueue-fair-sharing-preemption-strategies", type=_preemption_strategies, default=None,
                        metavar="STRATEGY[,STRATEGY]",
                        help="fair sharing: when a workload of another queue may be preempted (Kueue's "
                             "fairSharing.preemptionStrategies): LessThanOrEqualToFinalShare, LessThanInitialShare, "
                             "or both in that order (default, as in Kueue)")


def fair_sharing_conflicts(
    args: argparse.Namespace, *, enabled: bool | None = None, turn_on: str = "--kueue-fair-sharing"
) -> str | None:
    """A fair-sharing setting given without fair sharing on (``--kueue-fair-sharing``, or
    ``enabled`` by the flag ``turn_on`` names), as the error to print."""
    on = args.kueue_fair_sharing if enabled is None else enabled
    if args.kueue_fair_sharing_preemption_strategies is not None and not on:
        return f"--kueue-fair-sharing-preemption-strategies is a setting of fair sharing: add {turn_on} to turn it on"
    return None


def pods_ready_conflicts(args: argparse.Namespace) -> str | None:
    """A recovery timeout given without waitForPodsReady on, as the error to print."""
    if args.kueue_wait_for_pods_ready_recovery_timeout is not None and not args.kueue_wait_for_pods_ready_timeout:
        return ("--kueue-wait-for-pods-ready-recovery-timeout is a setting of waitForPodsReady: "
                "add --kueue-wait-for-pods-ready-timeout to turn it on")
    return None


def preemption_strategies(args: argparse.Namespace) -> tuple[PreemptionStrategy, ...]:
    """Kueue's ``fairSharing.preemptionStrategies`` from the flags (its default pair when not given)."""
    given: tuple[PreemptionStrategy, ...] | None = args.kueue_fair_sharing_preemption_strategies
    return given if given is not None else DEFAULT_PREEMPTION_STRATEGIES


def add_admission_fair_sharing_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--kueue-admission-fair-sharing", action="store_true",
                        help="fleet quotas: Kueue's admission fair sharing (its admissionFairSharing): a "
                             "ClusterQueue with admissionScope.admissionMode UsageBasedAdmissionFairSharing "
                             "admits the workloads of the LocalQueue that consumed least lately first (default off)")
    parser.add_argument("--kueue-usage-half-life-time", type=_half_life, default=None, metavar="DURATION",
                        help="admission fair sharing: after this long a LocalQueue's consumed usage counts half "
                             "(Kueue's usageHalfLifeTime; default 0: no history, only what runs now)")
    parser.add_argument("--kueue-usage-sampling-interval", type=_sampling_interval, default=None, metavar="DURATION",
                        help="admission fair sharing: how often each LocalQueue's consumed usage is sampled "
                             "(Kueue's usageSamplingInterval; default 5m)")
    parser.add_argument("--kueue-resource-weights", type=_resource_weights, default=None, metavar="RESOURCE=WEIGHT,...",
                        help="admission fair sharing: what a unit of each resource counts for in a LocalQueue's "
                             "usage, e.g. nvidia.com/gpu=4,cpu=0.5 (Kueue's resourceWeights; default 1 each)")


def admission_fair_sharing_conflicts(args: argparse.Namespace) -> str | None:
    """The settings given without the flag that turns them on, as the error to print."""
    given = [flag for flag in _SETTINGS if getattr(args, flag[2:].replace("-", "_")) is not None]
    if given and not args.kueue_admission_fair_sharing:
        return f"{given[0]} is a setting of admission fair sharing: add --kueue-admission-fair-sharing to turn it on"
    return None


def admission_fair_sharing(args: argparse.Namespace) -> AdmissionFairSharing | None:
    """Kueue's ``admissionFairSharing`` from the flags, with Kueue's defaults (None: off)."""
    if not args.kueue_admission_fair_sharing:
        return None
    return AdmissionFairSharing(
        usage_half_life_seconds=args.kueue_usage_half_life_time or 0.0,
        usage_sampling_interval_seconds=args.kueue_usage_sampling_interval or DEFAULT_SAMPLING_INTERVAL_SECONDS,
        resource_weights=args.kueue_resource_weights or {},
    )
