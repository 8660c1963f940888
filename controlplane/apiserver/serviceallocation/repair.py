"""The repair of the allocation records, as kube-apiserver's repair controllers of its service
IP and node port ranges: records and Services compared, every ``interval`` seconds.

* A value a Service holds without a record (a record lost, or a Service stored before the hub
  allocated) is recorded for it again; one recorded for another Service is logged, as kube
  logs an address assigned to two Services.
* A record no Service holds is a leak: a write whose store call failed after its values
  were taken, or a hub that stopped between the two. It is freed once it has been seen
  leaked, unchanged, in :data:`LEAK_PASSES` passes in a row (kube's
  ``numRepairsBeforeLeakCleanup``), so that a create in flight between the two reads of one
  pass does not lose its address. The free is a delete at the record's revision.

Safe to run in several hub replicas at once (each write is a create-if-absent or a
compare-and-swap); the hub runs it on the leader only.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from typing import Final

from controlplane.apis.kube import services as svc
from controlplane.apiserver import errors
from controlplane.apiserver.objects import ObjectStore
from controlplane.apiserver.serviceallocation.allocator import ServiceAllocator
from controlplane.apiserver.serviceallocation.records import Owner, Record, Records
from controlplane.storage import interface as storage

log = logging.getLogger(__name__)

LEAK_PASSES: Final = 3
DEFAULT_REPAIR_INTERVAL: Final = 60.0


@dataclass(frozen=True, slots=True)
class RepairResult:
    #: Values recorded again for the Service that holds them.
    recorded: int = 0
    #: Leaked records freed.
    freed: int = 0


class AllocationRepair:
    """Repairs ``allocator``'s records against the Services in ``objects``."""

    def __init__(
        self, objects: ObjectStore, allocator: ServiceAllocator, *, interval: float = DEFAULT_REPAIR_INTERVAL
    ) -> None:
        self._objects = objects
        self._allocator = allocator
        self._interval = interval
        self._services = objects.registry.require("v1", "Service")
        #: (prefix, value, revision) of a leaked record → passes it has been seen leaked in.
        self._leaks: dict[tuple[str, str, int], int] = {}

    async def run(self) -> None:
        while True:
            try:
                await self.repair_once()
            except (storage.StorageError, errors.ApiError) as exc:
                log.warning("the service allocation repair failed this pass: %s", exc)
            await asyncio.sleep(self._interval)

    async def repair_once(self) -> RepairResult:
        allocator = self._allocator
        # Records first: a Service created after this read is not mistaken for missing records.
        ip_records = await allocator.ip_records.read_all()
        port_records = await allocator.port_records.read_all()
        wanted_ips: dict[str, Owner] = {}
        wanted_ports: dict[str, Owner] = {}
        for service in (await self._objects.list(self._services)).items:
            owner, spec = Owner.of(service), service.get("spec") or {}
            for ip in svc.cluster_ips(spec):
                if allocator.cluster_ips.offset_of(ip) is not None:
                    _want(wanted_ips, ip, owner, "cluster IP")
            for port in svc.node_ports(spec):
                if allocator.node_ports.offset_of(port) is not None:
                    _want(wanted_ports, str(port), owner, "node port")
        ips = await self._repair(allocator.ip_records, ip_records, wanted_ips)
        ports = await self._repair(allocator.port_records, port_records, wanted_ports)
        return RepairResult(ips.recorded + ports.recorded, ips.freed + ports.freed)

    async def _repair(self, records: Records, found: list[Record], wanted: dict[str, Owner]) -> RepairResult:
        recorded = freed = 0
        held = {record.value: record for record in found}
        for value, owner in wanted.items():
            record = held.get(value)
            if record is None:
                if await records.claim(value, owner):
                    recorded += 1
                    log.warning("%s%s held by Service %s was not recorded as allocated; repaired", records.prefix, value, owner)
                else:
                    log.error("%s%s is held by Service %s and allocated to another", records.prefix, value, owner)
            elif record.owner != owner:
                log.error(
                    "%s%s is allocated to Service %s but Service %s holds it; recreate one of them",
                    records.prefix, value, record.owner, owner,
                )
        leaked_now: set[tuple[str, str, int]] = set()
        for record in found:
            if wanted.get(record.value) == record.owner:
                continue
            leak = (records.prefix, record.value, record.revision)
            passes = self._leaks.get(leak, 0) + 1
            if passes < LEAK_PASSES:
                leaked_now.add(leak)
                self._leaks[leak] = passes
            elif await records.remove(record):
                freed += 1
                log.info("freed %s%s: no Service holds it", records.prefix, record.value)
        for leak in [leak for leak in self._leaks if leak[0] == records.prefix and leak not in leaked_now]:
            del self._leaks[leak]
        return RepairResult(recorded, freed)


def _want(wanted: dict[str, Owner], value: str, owner: Owner, what: str) -> None:
    first = wanted.setdefault(value, owner)
    if first != owner:
        log.error("%s %s is held by Services %s and %s; recreate one of them", what, value, first, owner)
