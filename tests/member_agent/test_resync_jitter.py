"""The agent's periodic Work passes vary by a tenth either way, so that agents started together
(a fleet after a hub upgrade, a hollow fleet) do not all reapply Works or recompute every Work's
status in the same second: the Work resync (``--resync-interval``) and the status resync
(``--status-resync-interval``) alike."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from member_agent.config import AgentConfig
from member_agent.syncing import RESYNC_JITTER, Resync, work_resyncs


def intervals(resync: Resync, draws: int) -> list[float]:
    """The gaps between ``draws`` passes, each run the moment it is due."""
    gaps = []
    for _ in range(draws):
        before = resync.at
        assert not resync.due(before - 1e-6)
        assert resync.due(before)
        gaps.append(resync.at - before)
    return gaps


@pytest.mark.parametrize("which", ["work", "status"])
def test_both_resyncs_vary_by_a_tenth_either_way(tmp_path: Path, which: str) -> None:
    config = AgentConfig(hub="https://hub:6443", cluster_name="c", state_dir=tmp_path,
                         resync_interval=300.0, status_resync_interval=60.0)
    work, status = work_resyncs(config, now=1000.0, rng=random.Random(7))
    resync, interval = (work, 300.0) if which == "work" else (status, 60.0)
    assert interval * (1 - RESYNC_JITTER) <= resync.at - 1000.0 <= interval * (1 + RESYNC_JITTER)
    gaps = intervals(resync, 500)
    assert all(interval * (1 - RESYNC_JITTER) <= gap <= interval * (1 + RESYNC_JITTER) for gap in gaps)
    assert len(set(gaps)) > 400  # drawn anew each time, not one fixed offset
    # Spread over the whole band, both ways.
    assert min(gaps) < interval * (1 - RESYNC_JITTER / 2) and max(gaps) > interval * (1 + RESYNC_JITTER / 2)


def test_agents_started_together_resync_apart(tmp_path: Path) -> None:
    config = AgentConfig(hub="https://hub:6443", cluster_name="c", state_dir=tmp_path, status_resync_interval=60.0)
    firsts = {work_resyncs(config, now=0.0)[1].at for _ in range(20)}
    assert len(firsts) == 20  # each agent draws from a source of its own


def test_a_pass_that_came_late_counts_the_next_from_when_it_ran() -> None:
    resync = Resync(10.0, now=0.0, rng=random.Random(1))
    assert resync.due(100.0)
    assert 109.0 <= resync.at <= 111.0
