"""The end-to-end tests' garbage collection (e2e/conftest.py): what is alive after an end-to-end
test is frozen, so that the next test's collection does not walk it again, and a cycle a shared
fixture lets go after that is still collected before the unit tests that follow."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest_plugins = ["pytester"]

E2E_CONFTEST = Path(__file__).parents[2] / "e2e" / "conftest.py"

#: What the end-to-end conftest imports of the harness.
HARNESS = """
class ProcessGroup:
    def __init__(self, root):
        self.root = root
"""

END_TO_END = """
import gc
import os
import weakref

import pytest

LONG_LIVED = []


class Node:
    pass


@pytest.fixture(scope="module")
def shared():
    # Held by this fixture alone: its teardown leaves a cycle to the garbage collector.
    cycle = Node()
    cycle.me = cycle
    weakref.finalize(cycle, lambda: open(os.environ["COLLECTED"], "a").write("cycle\\n"))
    yield "up"


def test_builds_what_outlives_it(shared):
    LONG_LIVED.extend(Node() for _ in range(5000))


def test_what_the_test_before_left_is_frozen(shared):
    assert gc.get_freeze_count() >= 5000
"""

UNIT = """
import os


def test_the_shared_fixtures_cycle_was_collected_before_the_unit_tests():
    assert open(os.environ["COLLECTED"]).read() == "cycle\\n"
"""


def test_what_outlives_an_end_to_end_test_is_frozen_and_a_released_cycle_collected(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    e2e = pytester.mkpydir("e2e")
    (e2e / "conftest.py").write_text(E2E_CONFTEST.read_text())
    (e2e / "harness.py").write_text(HARNESS)
    (e2e / "test_garbage.py").write_text(END_TO_END)
    tests = pytester.mkdir("tests")
    (tests / "test_after.py").write_text(UNIT)
    collected = pytester.path / "collected"
    collected.write_text("")
    monkeypatch.setenv("COLLECTED", str(collected))
    # The unit test is collected first; the end-to-end conftest runs the end-to-end tests first.
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-v", "tests", "e2e")
    result.assert_outcomes(passed=3)
    order = [line.split("::")[1].split()[0] for line in result.outlines if " PASSED" in line]
    assert order[-1] == "test_the_shared_fixtures_cycle_was_collected_before_the_unit_tests", result.outlines
