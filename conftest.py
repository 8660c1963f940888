"""Fixtures shared by the unit and the end-to-end tests."""

from __future__ import annotations

import gc
import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from itertools import islice
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from xdist.workermanage import WorkerController

#: workerinput key: the directory where each pytest-xdist worker writes its tests' groups and lanes.
GROUPS_DIR = "gpufed_test_groups_dir"
_groups_dir_key = pytest.StashKey[str]()


def shared_fixture_group(item: pytest.Item) -> str | None:
    """The node id whose instance of a shared fixture the test uses: its package's when it uses
    a package-scoped fixture of the project (its module's are then shared along), else its
    module's when it uses a module-scoped one or runs on its module's event loop, else None.
    Autouse fixtures do not count: every test of their scope has them, whatever they cost. An
    ``xdist_group`` mark names a group of its own."""
    marker = item.get_closest_marker("xdist_group")
    if marker is not None:
        return str(marker.args[0] if marker.args else marker.kwargs.get("name", "default"))
    module = item.getparent(pytest.Module)
    if not isinstance(item, pytest.Function) or module is None:
        return None
    group = None
    for name in item.fixturenames:
        fixturedefs = item._fixtureinfo.name2fixturedefs.get(name)
        if not fixturedefs or getattr(fixturedefs[-1], "_autouse", False):
            continue
        fixturedef = fixturedefs[-1]
        if fixturedef.scope == "package" and fixturedef.baseid:
            return str(fixturedef.baseid)
        if fixturedef.scope == "module":
            group = module.nodeid
    loop = item.get_closest_marker("asyncio")
    if loop is not None and loop.kwargs.get("loop_scope") == "module":
        # On its module's event loop: it shares what the module's async fixtures started, such
        # as tests/apiserver/auth's hub, asked for by name (request.getfixturevalue).
        group = module.nodeid
    return group


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: WorkerController) -> None:
    """Controller side: tell each worker where to write its tests' groups."""
    config = node.config
    if _groups_dir_key not in config.stash:
        config.stash[_groups_dir_key] = tempfile.mkdtemp(prefix="pytest-test-groups-")
    node.workerinput[GROUPS_DIR] = config.stash[_groups_dir_key]


def pytest_unconfigure(config: pytest.Config) -> None:
    if _groups_dir_key in config.stash:
        shutil.rmtree(config.stash[_groups_dir_key], ignore_errors=True)


#: A test's lane: where the scheduler prefers to run it (:func:`scheduling_lane`).
FLEET, WAITING, ANY = "fleet", "waiting", ""

#: With this many test workers or more, the last one is the waiting lane.
WAITING_LANE_FROM = 4


def scheduling_lane(item: pytest.Item) -> str:
    """``fleet`` for an end-to-end test (``e2e`` mark: it starts real processes and keeps the CPU
    busy), ``waiting`` for a test marked so (it mostly waits on timers, leases or other
    processes), else any."""
    if item.get_closest_marker("e2e") is not None:
        return FLEET
    if item.get_closest_marker("waiting") is not None:
        return WAITING
    return ANY


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """pytest-xdist's ``load`` distribution, with two changes.

    The tests sharing a module- or package-scoped fixture (:func:`shared_fixture_group`: an
    end-to-end fleet or hub, an in-process hub, a costly report) all go to the worker that gets
    the first of them, so the fixture is set up once a run instead of once on each worker one of
    them reaches. xdist's own ``loadgroup`` cannot do it here: its workers pass a test's group to
    the controller as a suffix they write into the item's old ``_nodeid`` field, which pytest
    9.2's structured node ids no longer read, so it groups nothing (pytest-dev/pytest-xdist#1386).
    These workers write the groups to a file the controller names them instead; without it, this
    is plain ``load``. ``loadgroup`` would also make every other test a group of one, hand the
    largest groups out first (ahead of the slow tests) and go over every group a worker ever had
    on each report; this keeps ``load``'s order (e2e/conftest.py's: the end-to-end tests first,
    the slow ones first of all) and its bookkeeping.

    With :data:`WAITING_LANE_FROM` workers or more, the last one is a lane for the tests marked
    ``waiting`` (:func:`scheduling_lane`): it runs them from the start, while the CPU is busy with
    the end-to-end tests on the other workers, instead of their waits holding the run's end with
    the CPU idle. It never takes an end-to-end test (a fourth fleet at once slows the others down
    more than it gains); once the waiting tests are all handed out it takes the other unit tests,
    and the other workers are sent waiting tests only when nothing else is left."""
    if config.getvalue("dist") not in ("load", "loadgroup"):
        return None
    from xdist.scheduler import LoadScheduling

    class GroupedLoadScheduling(LoadScheduling):
        groups: list[str | None] | None = None
        lanes: list[str] | None = None

        def _read_groups(self) -> tuple[list[str | None], list[str]]:
            assert self.collection is not None
            directory = config.stash.get(_groups_dir_key, None)
            for node in self.node2collection:
                path = Path(directory or "", f"{node.gateway.id}.json")
                if directory and path.exists():
                    written = json.loads(path.read_text())
                    if len(written["groups"]) == len(self.collection):
                        return written["groups"], written["lanes"]
            return [None] * len(self.collection), [ANY] * len(self.collection)

        def check_schedule(self, node: WorkerController, duration: float = 0) -> None:
            """A worker busy with a group gets nothing more until the group is nearly done:
            ``load`` tops up a worker whose tests are short, and what it queued behind a group of
            330 (e2e/clients) would wait there while the other workers run dry."""
            groups = self.groups
            if self.pending and groups and sum(groups[i] is not None for i in self.node2pending[node]) >= 2:
                return
            super().check_schedule(node, duration)

        def _is_waiting_lane(self, node: WorkerController) -> bool:
            return bool(self.numnodes >= WAITING_LANE_FROM and node.gateway.id == f"gw{self.numnodes - 1}")

        def _positions(self, node: WorkerController, num: int) -> list[int]:
            """The positions in ``pending`` of the first ``num`` tests this worker prefers."""
            lanes = self.lanes
            if not lanes or self.numnodes < WAITING_LANE_FROM:
                return list(range(min(num, len(self.pending))))
            # The lanes this worker takes tests of, first choice first.
            if self._is_waiting_lane(node):
                preferences = [{WAITING}, {WAITING, ANY}]
            else:
                preferences = [{FLEET, ANY}, {FLEET, ANY, WAITING}]
            for takes in preferences:
                chosen = list(islice((n for n, index in enumerate(self.pending) if lanes[index] in takes), num))
                if chosen:
                    return chosen
            return []

        def _send_tests(self, node: WorkerController, num: int) -> None:
            if self.groups is None or self.lanes is None:
                self.groups, self.lanes = self._read_groups()
            groups = self.groups
            positions = self._positions(node, num)
            first = [self.pending[n] for n in positions]
            wanted = {groups[index] for index in first} - {None}
            if wanted:
                # The rest of each group goes along.
                taken = set(first)
                positions = [n for n, index in enumerate(self.pending) if index in taken or groups[index] in wanted]
            chosen = [self.pending[n] for n in positions]
            for n in reversed(positions):
                del self.pending[n]
            if chosen:
                self.node2pending[node].extend(chosen)
                node.send_runtest_some(chosen)

    return GroupedLoadScheduling(config, log)


@pytest.hookimpl(tryfirst=True)
def pytest_collection_finish(session: pytest.Session) -> None:
    """A worker's tests' groups, in the order it reports the tests to the controller (which it
    does after this hook)."""
    directory = getattr(session.config, "workerinput", {}).get(GROUPS_DIR)
    if directory:
        worker = session.config.workerinput["workerid"]  # type: ignore[attr-defined]
        written = {
            "groups": [shared_fixture_group(item) for item in session.items],
            "lanes": [scheduling_lane(item) for item in session.items],
        }
        Path(directory, f"{worker}.json").write_text(json.dumps(written))
    _freeze_what_collection_built()


def _freeze_what_collection_built() -> None:
    """What collection built (every module, test item and parameter: about half a million
    objects) lives until the session ends, so the garbage collector is told to leave it alone
    (``gc.freeze``). Otherwise each full collection walks all of it again: the end-to-end tests
    collect after every test (e2e/conftest.py), about a third of a CPU-second each, hundreds of
    times a run, and the automatic full collections during the unit tests pay the same walk."""
    gc.collect()
    gc.freeze()


@pytest.fixture(scope="session", autouse=True)
def _temporary_files_in_the_test_session(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Temporary files anything in the run creates (client libraries write a kubeconfig's CA to
    one, and remove it only at a normal interpreter exit) go below pytest's own temporary
    directory, which pytest prunes, instead of piling up in /tmp; the processes the tests start
    inherit the same TMPDIR."""
    directory = tmp_path_factory.mktemp("tmp", numbered=True)
    saved = os.environ.get("TMPDIR")
    os.environ["TMPDIR"] = str(directory)
    tempfile.tempdir = None
    yield
    if saved is None:
        os.environ.pop("TMPDIR", None)
    else:
        os.environ["TMPDIR"] = saved
    tempfile.tempdir = None
