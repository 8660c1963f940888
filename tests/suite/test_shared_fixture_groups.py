"""The suite's own distribution (the root conftest.py): the tests that share a module's fixture run
on one pytest-xdist worker, so the fixture is set up once a run, and the order stays load's."""

from __future__ import annotations

from pathlib import Path

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
