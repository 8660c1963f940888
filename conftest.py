"""Fixtures shared by the unit and the end-to-end tests."""

from __future__ import annotations

import gc
import os
import tempfile
from collections.abc import Iterator

import pytest


def pytest_collection_finish(session: pytest.Session) -> None:
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
