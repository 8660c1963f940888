"""etcd's Maintenance service as the hub uses it: sizes, defragmentation, alarms and snapshots.

In: an open :class:`~controlplane.storage.etcd.calls.EtcdCalls` (the store's own channel and
credentials). Out: :class:`EtcdStatus` (the backend's size on disk and in use, the revision,
the cluster id, the raised alarms), :meth:`EtcdMaintenance.defragment`,
:meth:`EtcdMaintenance.disarm_nospace` and :meth:`EtcdMaintenance.snapshot`, the chunks of a
consistent snapshot of the whole backend as ``etcdctl snapshot save`` streams it.

These calls are about the etcd member the channel reaches, not about keys: with several
endpoints they answer for whichever member gRPC picked, as ``etcdctl endpoint status`` does for one.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

from aetcd import rpc

from controlplane.storage.etcd.calls import EtcdCalls

#: Defragmenting rewrites the whole backend; etcd blocks the member meanwhile.
DEFRAGMENT_TIMEOUT = 300.0
NOSPACE = "NOSPACE"


@dataclass(frozen=True, slots=True)
class EtcdStatus:
    """One etcd member's ``Status`` and alarms."""

    #: The backend file's size (``dbSize``), free pages included.
    db_size: int
    #: What the backend uses of it (``dbSizeInUse``); the rest is freed by a defragmentation.
    db_size_in_use: int
    revision: int
    cluster_id: int
    alarms: frozenset[str]


class EtcdMaintenance:
    """The Maintenance calls of one store's etcd."""

    def __init__(self, calls: EtcdCalls) -> None:
        self._calls = calls

    @property
    def endpoint(self) -> str:
        return self._calls.endpoint

    async def status(self) -> EtcdStatus:
        response = await self._calls.maintenance("status", "Status", rpc.StatusRequest())
        return EtcdStatus(
            db_size=int(response.dbSize),
            db_size_in_use=int(response.dbSizeInUse),
            revision=int(response.header.revision),
            cluster_id=int(response.header.cluster_id),
            alarms=frozenset(rpc.AlarmType.Name(member.alarm) for member in await self._alarms()),
        )

    async def _alarms(self) -> list[Any]:
        """Every member's raised alarms (``AlarmMember``: memberID, alarm)."""
        response = await self._calls.maintenance(
            "alarm list", "Alarm", rpc.AlarmRequest(action=rpc.AlarmRequest.GET, memberID=0, alarm=rpc.NONE)
        )
        return list(response.alarms)

    async def defragment(self) -> None:
        await self._calls.maintenance("defragment", "Defragment", rpc.DefragmentRequest(), deadline=DEFRAGMENT_TIMEOUT)

    async def disarm_nospace(self) -> None:
        """Disarm the NOSPACE alarm of every member that raised it (as ``etcdctl alarm disarm``,
        member by member: etcd deactivates an alarm only for the member it names): writes resume."""
        for member in await self._alarms():
            if member.alarm == rpc.NOSPACE:
                request = rpc.AlarmRequest(action=rpc.AlarmRequest.DEACTIVATE, memberID=member.memberID, alarm=rpc.NOSPACE)
                await self._calls.maintenance("alarm disarm", "Alarm", request)

    async def snapshot(self) -> AsyncIterator[tuple[bytes, int]]:
        """A consistent snapshot of etcd's backend: each chunk with the bytes still to come."""
        stream = self._calls.snapshot_stream()
        try:
            async for response in stream:
                yield bytes(response.blob), int(response.remaining_bytes)
        except rpc.AioRpcError as exc:
            raise self._calls.storage_error("snapshot", exc) from exc
        finally:
            stream.cancel()
