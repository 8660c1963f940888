"""One process at a time on an embedded etcd's data directory: a second launcher (a second hub on
the same state dir) and a restore are refused while a hub's etcd runs, and the lock goes with it.

What would break unseen: a restore swapping the data under a running etcd, or a hub starting on
data a restore is replacing."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from controlplane.storage import EmbeddedEtcd, EtcdStartError
from controlplane.storage.datalock import DataDirBusy, DataLock


async def test_a_running_embedded_etcd_holds_its_data_directory(tmp_path: Path) -> None:
    first = EmbeddedEtcd(tmp_path / "etcd", unsafe_no_fsync=True)
    await first.start()
    try:
        with pytest.raises(EtcdStartError, match=rf"in use by a hub's embedded etcd \(pid {os.getpid()}\)"):
            await EmbeddedEtcd(tmp_path / "etcd", unsafe_no_fsync=True).start()
        with pytest.raises(DataDirBusy):
            DataLock.take(tmp_path / "etcd", role="gpufed backup restore")
    finally:
        await first.stop()
    DataLock.take(tmp_path / "etcd", role="gpufed backup restore").release()


async def test_a_restore_in_progress_keeps_a_hub_from_starting(tmp_path: Path) -> None:
    lock = DataLock.take(tmp_path / "etcd", role="gpufed backup restore")
    etcd = EmbeddedEtcd(tmp_path / "etcd", unsafe_no_fsync=True)
    try:
        with pytest.raises(EtcdStartError, match=r"in use by gpufed backup restore"):
            await etcd.start()
        assert not etcd.running
    finally:
        lock.release()
        await etcd.stop()
