"""Shared fixtures: one real embedded etcd per test session, and a fresh store per test.

``store`` runs a test against both stores behind the same contract: a new
``MemoryStore``, and an ``EtcdStore`` on the session's etcd under a key prefix unique to
the test, so tests never see each other's keys. The etcd server starts only when a test
first asks for it.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from controlplane.storage import Store


@pytest.fixture(scope="session")
def etcd_endpoint(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """Client URL of one embedded etcd shared by the whole session."""
    from controlplane.storage.embedded import EmbeddedEtcd

    data_dir: Path = tmp_path_factory.mktemp("etcd")
    # The hub's own way to its embedded etcd, a private Unix socket without TLS, so that a bare
    # URL is all a test needs; tests/storage runs the contract over TCP with TLS and
    # client-certificate auth as well.
    etcd = EmbeddedEtcd(data_dir / "data", log_file=data_dir / "etcd.log", unsafe_no_fsync=True)
    # The etcd process outlives every test's event loop. This fixture may be first
    # requested from inside a running loop (an async fixture), so start and stop run
    # on a short-lived loop in a worker thread.
    with ThreadPoolExecutor(max_workers=1) as pool:
        url = pool.submit(asyncio.run, etcd.start()).result()
        try:
            yield url
        finally:
            pool.submit(asyncio.run, etcd.stop()).result()


@pytest.fixture(params=["memory", "etcd"])
async def store(request: pytest.FixtureRequest) -> AsyncIterator[Store]:
    """A fresh, empty store of each kind."""
    if request.param == "memory":
        from controlplane.storage import MemoryStore

        async with MemoryStore() as memory:
            yield memory
        return
    from controlplane.storage import EtcdStore

    endpoint: str = request.getfixturevalue("etcd_endpoint")
    async with EtcdStore([endpoint], prefix=f"/gpufed-test/{uuid.uuid4().hex}") as etcd:
        yield etcd
