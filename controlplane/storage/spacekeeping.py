"""Keeping the hub's etcd small: its size on ``/metrics``, defragmentation, and the NOSPACE alarm.

In: the hub's :class:`~controlplane.storage.etcd.EtcdStore`, a :class:`SpacePolicy` (the
``--etcd-defrag-*`` and ``--etcd-quota-backend-bytes`` flags) and whether the hub runs the etcd
itself (the embedded one) or only uses it (``--etcd-endpoints``). Out: a loop that, every
``check_interval``, reads etcd's ``Status`` and alarms into two gauges and acts on them.

Why: etcd compacts old revisions (every 5 minutes for the embedded etcd, as kube-apiserver
asks of its etcd), but compaction only marks pages free; the backend file keeps its size until
it is defragmented. With churn the file grows towards the backend quota, and at the quota etcd
raises the NOSPACE alarm and refuses every write (``etcdserver: mvcc: database space
exceeded``) until space is freed and the alarm disarmed (etcd's "Maintenance" guide).

* Metrics, for every etcd: ``apiserver_storage_size_bytes{storage_cluster_id}`` (kube-apiserver's
  stable name for the backend file's size) and ``gpufed_etcd_db_size_in_use_bytes``.
* Defragmentation, for the embedded etcd only: when the file is over ``min_db_bytes`` and more
  than ``ratio`` times what it uses. A defragmentation blocks the single member for as long as
  it takes to rewrite the file (well under a second for tens of MB), so the thresholds make it
  rare: right after one the file is what it uses, and it must double again before the next.
  One INFO line says the sizes before and after.
* NOSPACE: one WARNING says what happened and what to do. With the embedded etcd the hub frees
  space itself: it compacts at the current revision (watchers older than that relist), defragments,
  and disarms the alarm once what etcd uses is under the quota again, so writes resume. An
  external etcd is the operator's: the hub says which commands to run and does not touch it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import dataclass

from prometheus_client import CollectorRegistry, Gauge

from controlplane.metricstability import Stability, kube_help
from controlplane.storage.embedded import QUOTA_BACKEND_BYTES
from controlplane.storage.etcd import EtcdStore
from controlplane.storage.etcd.maintenance import NOSPACE, EtcdStatus
from controlplane.storage.interface import StorageError

logger = logging.getLogger(__name__)

MiB = 1024 * 1024
DEFAULT_CHECK_INTERVAL = 60.0
DEFAULT_MIN_DB_BYTES = 100 * MiB
DEFAULT_RATIO = 2.0


@dataclass(frozen=True, slots=True)
class SpacePolicy:
    """When the hub defragments its embedded etcd, and the quota it gave it."""

    check_interval: float = DEFAULT_CHECK_INTERVAL
    min_db_bytes: int = DEFAULT_MIN_DB_BYTES
    ratio: float = DEFAULT_RATIO
    #: The embedded etcd's quota (None: etcd's default, 2 GiB).
    quota_backend_bytes: int | None = None

    def wants_defragment(self, status: EtcdStatus) -> bool:
        return status.db_size >= self.min_db_bytes and status.db_size > self.ratio * status.db_size_in_use


class StorageSizeMetrics:
    """The two size gauges, in the hub's registry."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.size = Gauge(
            "apiserver_storage_size_bytes",
            kube_help(Stability.STABLE, "Size of the storage database file physically allocated in bytes."),
            ["storage_cluster_id"], registry=registry,
        )
        self.in_use = Gauge(
            "gpufed_etcd_db_size_in_use_bytes",
            "Size of the storage database in use in bytes; the rest is freed by a defragmentation.",
            ["storage_cluster_id"], registry=registry,
        )

    def observe(self, status: EtcdStatus) -> None:
        cluster = f"{status.cluster_id:x}"
        self.size.labels(cluster).set(status.db_size)
        self.in_use.labels(cluster).set(status.db_size_in_use)


def _mib(size: int) -> str:
    return f"{size / MiB:.1f} MiB"


class SpaceKeeper:
    """The loop described in the module docstring; ``run()`` until cancelled."""

    def __init__(
        self, store: EtcdStore, *, policy: SpacePolicy, metrics: StorageSizeMetrics, embedded: bool
    ) -> None:
        self._store = store
        self._maintenance = store.maintenance
        self.policy = policy
        self._metrics = metrics
        self._embedded = embedded
        self._warned = False

    async def run(self) -> None:
        while True:
            try:
                await self.check()
            except StorageError as exc:
                logger.debug("cannot check etcd's size: %s", exc)
            await asyncio.sleep(self.policy.check_interval)

    async def check(self) -> EtcdStatus:
        """Read etcd's status into the gauges, then defragment or recover from NOSPACE if due."""
        status = await self._maintenance.status()
        self._metrics.observe(status)
        if NOSPACE in status.alarms:
            return await self._out_of_space(status)
        self._warned = False
        if self._embedded and self.policy.wants_defragment(status):
            after = await self._defragment()
            logger.info(
                "defragmented etcd: its database file went from %s to %s (%s in use)",
                _mib(status.db_size), _mib(after.db_size), _mib(after.db_size_in_use),
            )
            return after
        return status

    async def _defragment(self) -> EtcdStatus:
        await self._maintenance.defragment()
        status = await self._maintenance.status()
        self._metrics.observe(status)
        return status

    async def _out_of_space(self, status: EtcdStatus) -> EtcdStatus:
        if not self._warned:
            self._warned = True
            if self._embedded:
                logger.warning(
                    "etcd's database reached its space quota (%s; alarm NOSPACE): every write fails with "
                    "'database space exceeded' until space is freed. The hub compacts and defragments it now "
                    "and disarms the alarm when it fits; if it does not, delete objects, or restart the hub "
                    "with a larger --etcd-quota-backend-bytes", _mib(status.db_size),
                )
            else:
                logger.warning(
                    "etcd at %s reached its space quota (%s; alarm NOSPACE): every write fails until space is "
                    "freed. Compact it (etcdctl compact <revision>), defragment every member (etcdctl defrag), "
                    "then disarm the alarm (etcdctl alarm disarm), or raise etcd's --quota-backend-bytes",
                    self._maintenance.endpoint, _mib(status.db_size),
                )
        if not self._embedded:
            return status
        # Keep no history: under the quota every freed page counts. Watchers older than this relist.
        with contextlib.suppress(ValueError):
            await self._store.compact(status.revision, physical=True)
        after = await self._defragment()
        quota = self.policy.quota_backend_bytes or QUOTA_BACKEND_BYTES
        if after.db_size_in_use >= quota:
            logger.warning(
                "etcd still uses %s of its %s quota after compaction and defragmentation; the NOSPACE alarm "
                "stays: delete objects, or restart the hub with a larger --etcd-quota-backend-bytes",
                _mib(after.db_size_in_use), _mib(quota),
            )
            return after
        await self._maintenance.disarm_nospace()
        self._warned = False
        logger.info(
            "freed etcd's space: its database file went from %s to %s; the NOSPACE alarm is disarmed and "
            "writes resume", _mib(status.db_size), _mib(after.db_size),
        )
        return await self._maintenance.status()
