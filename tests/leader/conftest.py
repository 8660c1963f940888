"""The leader tests' shared parts: one etcd for hub replicas."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from controlplane.storage import EmbeddedEtcd


@pytest.fixture
async def etcd(tmp_path: Path) -> AsyncIterator[EmbeddedEtcd]:
    """One etcd over TLS with client-certificate auth, as the replicas of a real hub share."""
    etcd = EmbeddedEtcd(tmp_path / "etcd", log_file=tmp_path / "etcd.log", unsafe_no_fsync=True)
    await etcd.start()
    try:
        yield etcd
    finally:
        await etcd.stop()
