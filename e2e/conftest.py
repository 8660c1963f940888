"""Fixtures for the end-to-end tests; the helpers live in e2e/harness.py."""

from __future__ import annotations

import gc
import sys
import warnings
from collections.abc import Iterator
from pathlib import Path

import pytest

from e2e.harness import ProcessGroup


@pytest.fixture
def processes(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[ProcessGroup]:
    group = ProcessGroup(root=tmp_path)
    yield group
    group.stop_all()
    report = getattr(request.node, "rep_call", None)
    if report is not None and report.failed:
        sys.stderr.write(group.dump_logs())


@pytest.hookimpl(tryfirst=True, hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    outcome = yield
    report = outcome.get_result()  # type: ignore[attr-defined]
    setattr(item, f"rep_{report.when}", report)


#: End-to-end tests start several processes and wait for them; on a loaded 2-core machine
#: that takes minutes, so they get a longer per-test limit than the unit tests' default.
E2E_TIMEOUT_SECONDS = 420


#: Third-party clients (kubernetes_asyncio's aiohttp session, the official client's urllib3 pool)
#: close their connections as the test ends, but a transport closed just before its event loop is
#: (``asyncio.run`` returning) is finalized by the garbage collector and reported as an unraisable
#: ResourceWarning at whichever collection comes next: a race in code this project does not own,
#: seen failing a CI run once the filter was dropped. The end-to-end tests ignore exactly that
#: report; the unit tests, where the project's own code runs in-process, still fail on it.
FOREIGN_LEAKED_SOCKETS = (
    r"ignore:Exception ignored in. <(function _SelectorTransport.__del__|socket.socket fd=)"
    r":pytest.PytestUnraisableExceptionWarning"
)


def _is_e2e(item: pytest.Item) -> bool:
    return "e2e" in item.nodeid.split("/")[0]


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if not _is_e2e(item):
            continue
        if item.get_closest_marker("e2e") is None:
            item.add_marker(pytest.mark.e2e)
        if item.get_closest_marker("timeout") is None:
            item.add_marker(pytest.mark.timeout(E2E_TIMEOUT_SECONDS))
        item.add_marker(pytest.mark.filterwarnings(FOREIGN_LEAKED_SOCKETS))
    # pytest-xdist hands tests out in this order: the end-to-end tests (up to minutes each) go
    # first, the ones marked slow (a minute or more by design) first of all, so the workers
    # share them from the start and the many short unit tests fill in around them, instead of
    # a long test started last holding up the end of the run (the Makefile's small
    # --maxschedchunk keeps one worker from queueing many of them at once). The sort is stable:
    # within each group the tests keep the order they were collected in.
    items.sort(key=lambda item: (not _is_e2e(item), item.get_closest_marker("slow") is None))


#: The test the last end-to-end teardown of this worker named as the next one: nothing ran since
#: that teardown collected the garbage.
_collected_before: list[pytest.Item | None] = [None]


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    """An end-to-end test drives separate processes; the pytest worker it runs in may have run
    in-process tests before it. A client socket one of those left unclosed would be collected
    (and reported as an unraisable ResourceWarning) whenever the garbage collector next runs,
    often during a long end-to-end test, which would then fail for something it did not do. So
    unless the teardown of the end-to-end test before it just collected, what came before is
    collected first, its unclosed sockets let go without a word (the unit tests, where such a
    leak is made, still fail on one)."""
    if _collected_before[0] is item:
        return
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ResourceWarning)
        gc.collect()


def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> None:
    _collected_before[0] = nextitem


@pytest.fixture(scope="package", autouse=True)
def _collect_what_the_end_to_end_tests_left() -> Iterator[None]:
    """What the package's shared fixtures left when they were torn down after their last test,
    and what the modules' shared fixtures left that :func:`_collect_what_the_test_left` had
    frozen while they were still in use: this runs after them, still within the teardown of the
    worker's last end-to-end test. What outlives it (modules, classes, caches) is frozen again,
    with what collection built, for the unit tests that follow on the worker."""
    yield
    gc.unfreeze()
    gc.collect()
    gc.freeze()


@pytest.fixture(scope="module", autouse=True)
def _collect_what_the_module_left() -> Iterator[None]:
    """The same for a module's shared fixtures (a fleet, a hub, a client), torn down before this,
    after the module's last test on the worker; what of theirs had been frozen waits for the
    package's teardown."""
    yield
    gc.collect()


@pytest.fixture(autouse=True)
def _collect_what_the_test_left() -> Iterator[None]:
    """The end-to-end tests run first, then unit tests in the same workers: what an end-to-end
    test's clients left for the garbage collector is collected at its own teardown (where
    FOREIGN_LEAKED_SOCKETS applies), not during a later unit test that did not leak it (pytest
    checks for such reports right after the teardown's fixtures, so this is a fixture's).

    What is still alive then is frozen (``gc.freeze``), as what collection built is: what the
    client libraries and the shared fixtures keep grows as the tests go on (past 200,000 objects
    in e2e/clients) and would otherwise be walked again at every test's collection, a tenth of
    a CPU-second and more each by the end of e2e/clients. Only the garbage collector
    leaves frozen objects alone: one freed by its last reference is freed as ever, and a cycle
    of them that a shared fixture's teardown lets go is collected at the package's teardown
    (:func:`_collect_what_the_end_to_end_tests_left`)."""
    yield
    gc.collect()
    gc.freeze()
