"""The etcd store's outage gate, on a clock the test moves."""

from __future__ import annotations

import logging

import pytest

from controlplane.storage import Unavailable
from controlplane.storage.outage import OutageGate


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def gate_on(clock: Clock) -> OutageGate:
    return OutageGate(trip_after=2.0, trial_interval=1.0, clock=clock)


def test_failures_trip_the_gate_only_after_trip_after_seconds_without_a_success() -> None:
    clock = Clock()
    gate = gate_on(clock)
    gate.succeeded()
    assert gate.failed() is False
    clock.now += 1.9
    assert gate.failed() is False and gate.admit() is False
    clock.now += 0.1
    assert gate.failed() is True and gate.down
    with pytest.raises(Unavailable, match="etcd is unreachable"):
        gate.admit()


def test_a_success_in_between_restarts_the_count() -> None:
    clock = Clock()
    gate = gate_on(clock)
    gate.succeeded()
    gate.failed()
    clock.now += 1.5
    gate.succeeded()
    clock.now += 1.5
    assert gate.failed() is False and not gate.down


def test_a_store_that_never_reached_etcd_keeps_retrying() -> None:
    clock = Clock()
    gate = gate_on(clock)
    gate.failed()
    clock.now += 60
    assert gate.failed() is False and not gate.down


def test_while_down_one_trial_per_interval_goes_through_and_a_success_reopens(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock = Clock()
    gate = gate_on(clock)
    gate.succeeded()
    gate.failed()
    clock.now += 2
    with caplog.at_level(logging.WARNING, logger="controlplane.storage.outage"):
        assert gate.failed()
        assert gate.failed()  # still down: not logged again
        with pytest.raises(Unavailable):
            gate.admit()  # the first trial waits one interval
        clock.now += 1
        assert gate.admit() is True
        with pytest.raises(Unavailable):
            gate.admit()  # one trial at a time
        gate.failed()
        gate.end_trial()
        with pytest.raises(Unavailable):
            gate.admit()  # and one per interval
        clock.now += 1
        assert gate.admit() is True
        gate.succeeded()
        gate.end_trial()
        assert not gate.down and gate.admit() is False
    assert [r.getMessage().split(";")[0] for r in caplog.records] == [
        "etcd has not answered for 2.0s",
        "etcd answers again after 2.0s",
    ]
