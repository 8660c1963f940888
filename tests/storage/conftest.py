"""Storage tests also run over TLS: one embedded etcd on TCP with TLS and client-certificate auth
(``--embedded-etcd-transport tls``) for the session, and ``store`` extended with a third kind, an
``EtcdStore`` that reaches it with the launcher's client certificate."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from controlplane.storage import Store
from controlplane.storage.connecting import EtcdClientTls


@pytest.fixture(scope="session")
def etcd_tls_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, EtcdClientTls]]:
    """Client URL and client TLS settings of one TLS embedded etcd shared by the session."""
    from controlplane.storage.embedded import EmbeddedEtcd, EtcdClientTransport

    data_dir: Path = tmp_path_factory.mktemp("etcd-tls")
    etcd = EmbeddedEtcd(
        data_dir / "data", log_file=data_dir / "etcd.log", unsafe_no_fsync=True, transport=EtcdClientTransport.TLS
    )
    # As tests/conftest.py's etcd_endpoint: started and stopped on a loop of its own.
    with ThreadPoolExecutor(max_workers=1) as pool:
        url = pool.submit(asyncio.run, etcd.start()).result()
        try:
            assert etcd.client_tls is not None
            yield url, etcd.client_tls
        finally:
            pool.submit(asyncio.run, etcd.stop()).result()


@pytest.fixture(params=["memory", "etcd", "etcd-tls"])
async def store(request: pytest.FixtureRequest) -> AsyncIterator[Store]:
    """A fresh, empty store of each kind, etcd over its Unix socket and over TCP with TLS."""
    from controlplane.storage import EtcdStore, MemoryStore

    prefix = f"/gpufed-test/{uuid.uuid4().hex}"
    if request.param == "memory":
        async with MemoryStore() as memory:
            yield memory
    elif request.param == "etcd":
        endpoint: str = request.getfixturevalue("etcd_endpoint")
        async with EtcdStore([endpoint], prefix=prefix) as etcd:
            yield etcd
    else:
        url, tls = request.getfixturevalue("etcd_tls_server")
        assert url.startswith("https://")
        async with EtcdStore([url], prefix=prefix, tls=tls) as etcd:
            yield etcd
