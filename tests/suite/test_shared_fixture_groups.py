"""The suite's own distribution (the root conftest.py): the tests that share a module's fixture run
on one pytest-xdist worker, so the fixture is set up once a run, and the order stays load's; the
worker busy with such a group is sent nothing more until the group is nearly done."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

pytest_plugins = ["pytester"]

ROOT_CONFTEST = Path(__file__).parents[2] / "conftest.py"

SHARED = """
import os
import pytest

@pytest.fixture(scope="module")
def fleet(tmp_path_factory):
    with open(os.environ["SETUPS"], "a") as setups:
        setups.write(os.environ.get("PYTEST_XDIST_WORKER", "-") + "\\n")
    return "up"

@pytest.mark.parametrize("n", range(6))
def test_uses_the_fleet(fleet, n):
    assert fleet == "up"
"""

ALONE = """
import pytest

@pytest.mark.parametrize("n", range(6))
def test_alone(n):
    pass
"""


def test_a_module_fixture_is_set_up_once_on_one_worker(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    pytester.makeconftest(ROOT_CONFTEST.read_text())
    pytester.makepyfile(test_a_shared=SHARED, test_b_alone=ALONE)
    setups = pytester.path / "setups"
    monkeypatch.setenv("SETUPS", str(setups))
    # Handed out two at a time, load alone gives each of the 3 workers two of the fleet's tests.
    result = pytester.runpytest_subprocess("-n", "3", "--maxschedchunk", "2", "-p", "no:cacheprovider", "-v")
    result.assert_outcomes(passed=12)
    assert len(setups.read_text().split()) == 1, setups.read_text()
    workers = {line.split()[0] for line in result.outlines if "test_uses_the_fleet" in line and "PASSED" in line}
    assert len(workers) == 1, result.outlines


class _Config:
    """What the scheduler reads of pytest's config: ``-n N``, ``load``, no ``--maxschedchunk``."""

    stash = pytest.Stash()

    def __init__(self, workers: int) -> None:
        self.workers = workers

    def getvalue(self, name: str) -> Any:
        return {"dist": "load", "tx": [f"{self.workers}*popen"]}[name]

    def getoption(self, name: str) -> Any:
        assert name == "maxschedchunk"
        return None


class _Worker:
    """A worker as the controller sees it: it records what it is sent, and the grouped tests it
    still had pending at the time."""

    def __init__(self, name: str, scheduler: Any, groups: list[str | None]) -> None:
        self.gateway = SimpleNamespace(id=name)
        self.shutting_down = False
        self.scheduler = scheduler
        self.groups = groups
        self.sends: list[tuple[int, list[int]]] = []
        #: For each send, the lanes of the tests still waiting to be handed out.
        self.left: list[set[str]] = []

    def send_runtest_some(self, indices: list[int]) -> None:
        before = self.scheduler.node2pending[self][: -len(indices)]
        self.sends.append((sum(self.groups[i] is not None for i in before), list(indices)))
        self.left.append({self.scheduler.lanes[i] for i in self.scheduler.pending})

    def shutdown(self) -> None:
        self.shutting_down = True

    def received(self) -> list[int]:
        return [index for _, indices in self.sends for index in indices]


def _run(groups: list[str | None], lanes: list[str], workers: int) -> tuple[Any, list[_Worker], list[int]]:
    """The root conftest's scheduler handing out tests with these groups and lanes to this many
    workers, which take turns finishing the first test they hold, each report at once, till
    done: the scheduler, the workers and the tests in the order they finished."""
    spec = importlib.util.spec_from_file_location("_root_conftest_for_scheduling", ROOT_CONFTEST)
    assert spec is not None and spec.loader is not None
    root_conftest = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(root_conftest)
    scheduler = root_conftest.pytest_xdist_make_scheduler(
        _Config(workers), SimpleNamespace(loadsched=lambda *args: None)
    )
    scheduler.groups, scheduler.lanes = groups, lanes
    nodes = [_Worker(f"gw{n}", scheduler, groups) for n in range(workers)]
    for worker in nodes:
        scheduler.add_node(worker)
        scheduler.add_node_collection(worker, [f"test_{n}" for n in range(len(groups))])
    scheduler.schedule()
    done: list[int] = []
    while scheduler.has_pending:
        for worker in nodes:
            if scheduler.node2pending[worker]:
                index = scheduler.node2pending[worker][0]
                done.append(index)
                scheduler.mark_test_complete(worker, index)
    assert sorted(done) == list(range(len(groups)))
    return scheduler, nodes, done


def test_a_worker_busy_with_a_group_is_sent_nothing_more_until_the_group_is_nearly_done() -> None:
    # Four quick tests, a module of 30 that share its fixture, then 300 quick ones: ``load`` would
    # top the group's worker up with quick tests as soon as it finished one of the group's.
    groups: list[str | None] = [None] * 4 + ["test_fleet.py"] * 30 + [None] * 300
    _, workers, _ = _run(groups, [""] * len(groups), workers=2)
    (busy,) = [w for w in workers if any(groups[i] is not None for i in w.received())]
    grouped = [index for index in busy.received() if groups[index] is not None]
    assert sorted(grouped) == list(range(4, 34)), busy.sends
    assert [(pending, indices) for pending, indices in busy.sends if pending >= 2] == []
    # Once the group is nearly done, the worker is topped up again like any other.
    assert any(pending == 1 for pending, _ in busy.sends), busy.sends


def test_the_last_of_four_workers_runs_the_waiting_tests_while_the_others_run_the_fleets() -> None:
    # 60 end-to-end tests first (as e2e/conftest.py orders them), then unit tests where every
    # third is marked waiting, and a module of waiting tests sharing a fixture.
    lanes = ["fleet"] * 60 + ["waiting" if n % 3 == 0 else "" for n in range(240)] + ["waiting"] * 10
    groups: list[str | None] = [None] * 300 + ["test_leases.py"] * 10
    _, workers, _ = _run(groups, lanes, workers=4)
    *others, lane = workers
    assert lane.gateway.id == "gw3"
    received = [lanes[index] for index in lane.received()]
    # The lane never runs a fleet; it runs waiting tests first, the others once those are all
    # handed out (here, it gets most of them).
    assert "fleet" not in received, received
    first_other = received.index("") if "" in received else len(received)
    assert set(received[:first_other]) == {"waiting"} and "waiting" not in received[first_other:], received
    assert received.count("waiting") > lanes.count("waiting") // 2, received
    # The others start on the fleets, in order, and are sent a waiting test only when nothing
    # else is left to hand out.
    for worker in others:
        assert [lanes[index] for index in worker.received()[:2]] == ["fleet", "fleet"]
        for (_, indices), left in zip(worker.sends, worker.left, strict=True):
            if any(lanes[index] == "waiting" for index in indices):
                assert left <= {"waiting"}, (indices, left)
    # The module of waiting tests that share a fixture all go to one worker.
    (holder,) = [w for w in workers if any(groups[i] is not None for i in w.received())]
    assert sorted(i for i in holder.received() if groups[i] is not None) == list(range(300, 310))


def test_fewer_than_four_workers_have_no_waiting_lane() -> None:
    lanes = ["fleet"] * 6 + ["waiting"] * 6 + [""] * 6
    _, workers, _ = _run([None] * len(lanes), lanes, workers=3)
    # Plain load: each worker's first send is the head of the collection's order.
    assert sorted(worker.sends[0][1][0] for worker in workers) == [0, 2, 4]
