"""kube-apiserver's allocation of a Service's cluster IP and node ports
(``pkg/registry/core/service/storage/alloc.go``), over records in the hub's store.

On create a ClusterIP, NodePort or LoadBalancer Service gets ``ipFamilyPolicy``,
``ipFamilies`` and an address of the service range (the one it asks for, when in range and
free); a NodePort Service, and a LoadBalancer one unless ``allocateLoadBalancerNodePorts:
false``, gets a node port for each port (two ports with one number, TCP and UDP, share one);
a LoadBalancer with ``externalTrafficPolicy: Local`` a ``healthCheckNodePort``. Headless and
ExternalName Services get no address. An update takes what the new object holds that the
stored one did not (ExternalName turned ClusterIP, a new port) and, once stored, frees what
it gave up; a delete frees everything the Service held. Refusals are kube's, word for word.

Values are taken through :class:`~.records.Records` (one create-if-absent key per value), so
every API server of the hub shares them; a dry run checks and fills, and takes nothing.
"""

from __future__ import annotations

import logging
import random
from dataclasses import dataclass, field
from typing import Any, Final

from controlplane.apis.kube import field as kube_field
from controlplane.apis.kube import services as svc
from controlplane.apis.kube.field import FieldError
from controlplane.apis.kube.objects import items
from controlplane.apiserver import errors
from controlplane.apiserver.allocating import NOTHING_RESERVED, Reserved
from controlplane.apiserver.resources import ResourceType
from controlplane.apiserver.serviceallocation.ranges import IPRange, PortRange, next_free, random_slot
from controlplane.apiserver.serviceallocation.records import (
    SERVICE_IPS_PREFIX,
    SERVICE_NODE_PORTS_PREFIX,
    Owner,
    Records,
)
from controlplane.storage import interface as storage

log = logging.getLogger(__name__)

#: Random values tried before the taken ones are read to find a free one.
_RANDOM_TRIES: Final = 8
#: Rounds of "read what is taken, take a free one" before giving up on a race.
_SCAN_ROUNDS: Final = 3
ALREADY_ALLOCATED_IP: Final = "provided IP is already allocated"
ALREADY_ALLOCATED_PORT: Final = "provided port is already allocated"
RANGE_FULL: Final = "range is full"


def is_service(rt: ResourceType) -> bool:
    return rt.group == "" and rt.kind == "Service"


@dataclass
class Reservation:
    """What one write took and gave up (:class:`~controlplane.apiserver.allocating.Reserved`)."""

    owner: Owner
    dry_run: bool
    taken: list[tuple[Records, str | int]] = field(default_factory=list)
    given_up: list[tuple[Records, str | int]] = field(default_factory=list)
    #: Node ports a dry run would take (kube's dry run draws 32769, 32770...).
    dry_ports: list[int] = field(default_factory=list)

    async def commit(self) -> None:
        if not self.dry_run:
            await _release_all(self.given_up, self.owner)

    async def revert(self) -> None:
        if not self.dry_run:
            taken, self.taken = self.taken, []
            await _release_all(taken, self.owner)


async def _release_all(values: list[tuple[Records, str | int]], owner: Owner) -> None:
    for records, value in values:
        try:
            await records.release(value, owner)
        except storage.StorageError as exc:  # the repair frees it later
            log.warning("could not free %s%s of Service %s: %s", records.prefix, value, owner, exc)


class ServiceAllocator:
    """The hub's :class:`~controlplane.apiserver.allocating.Allocations`: Services' cluster IPs
    from ``cluster_ips`` and node ports from ``node_ports``, recorded in ``store``."""

    def __init__(
        self,
        store: storage.Store,
        *,
        cluster_ips: IPRange,
        node_ports: PortRange,
        rng: random.Random | None = None,
    ) -> None:
        self.cluster_ips = cluster_ips
        self.node_ports = node_ports
        self.ip_records = Records(store, SERVICE_IPS_PREFIX)
        self.port_records = Records(store, SERVICE_NODE_PORTS_PREFIX)
        self._rng = rng or random.SystemRandom()

    async def on_create(self, rt: ResourceType, obj: dict[str, Any], *, dry_run: bool) -> Reserved:
        if not is_service(rt):
            return NOTHING_RESERVED  # every other kind's write takes nothing from the pools
        return await self._allocate(rt, obj, None, dry_run=dry_run)

    async def on_update(
        self, rt: ResourceType, old: dict[str, Any], new: dict[str, Any], *, dry_run: bool
    ) -> Reserved:
        if not is_service(rt):
            return NOTHING_RESERVED
        return await self._allocate(rt, new, old, dry_run=dry_run)

    async def on_delete(self, rt: ResourceType, obj: dict[str, Any]) -> None:
        if not is_service(rt):
            return
        spec = obj.get("spec") or {}
        owner = Owner.of(obj)
        await _release_all(
            [(self.ip_records, ip) for ip in svc.cluster_ips(spec) if self.cluster_ips.offset_of(ip) is not None]
            + [(self.port_records, port) for port in svc.node_ports(spec) if self.node_ports.offset_of(port) is not None],
            owner,
        )

    async def _allocate(
        self, rt: ResourceType, obj: dict[str, Any], old: dict[str, Any] | None, *, dry_run: bool
    ) -> Reservation:
        reservation = Reservation(Owner.of(obj), dry_run)
        spec = obj.get("spec")
        if not is_service(rt) or not isinstance(spec, dict):
            return reservation
        old_spec = (old or {}).get("spec") or {}
        name = reservation.owner.name
        found = svc.init_ip_families(spec, family=self.cluster_ips.family)
        if found:
            raise _invalid(name, found)
        try:
            held_ips = set(svc.cluster_ips(old_spec))
            await self._allocate_cluster_ip(spec, held_ips, reservation)
            held_ports = set(svc.node_ports(old_spec))
            await self._allocate_node_ports(spec, held_ports, reservation, creating=old is None)
            await self._allocate_health_check_port(spec, old_spec, reservation)
        except BaseException:
            await reservation.revert()
            raise
        if old is not None:
            kept_ips, kept_ports = set(svc.cluster_ips(spec)), set(svc.node_ports(spec))
            reservation.given_up += [(self.ip_records, ip) for ip in held_ips - kept_ips]
            reservation.given_up += [(self.port_records, port) for port in held_ports - kept_ports]
        return reservation

    # --- cluster IPs ---------------------------------------------------------------------

    async def _allocate_cluster_ip(self, spec: dict[str, Any], held: set[str], reservation: Reservation) -> None:
        if not svc.needs_cluster_ip(spec) or svc.is_headless(spec):
            return
        ips = spec.get("clusterIPs")
        if isinstance(ips, list) and ips:
            ip = str(ips[0])
            if ip in held:
                return
            name = reservation.owner.name
            if self.cluster_ips.offset_of(ip) is None:
                detail = f"provided IP is not in the valid range. The range of valid IPs is {self.cluster_ips}"
                raise _invalid(name, [_ip_error(ips, ip, detail)])
            if reservation.dry_run:
                return  # kube's dry run does not check whether the address is free
            if not await self.ip_records.claim(ip, reservation.owner):
                raise _invalid(name, [_ip_error(ips, ip, ALREADY_ALLOCATED_IP)])
            reservation.taken.append((self.ip_records, ip))
            return
        if reservation.dry_run:
            ip = str(self.cluster_ips.network.network_address)  # kube's dry run shows the range's base
        else:
            drawn = await self._draw(self.ip_records, self.cluster_ips, reservation)
            if drawn is None:
                raise _exhausted(reservation.owner.name, "spec.clusterIPs", f"failed to allocate a serviceIP: {RANGE_FULL}")
            ip = str(drawn)
        spec["clusterIP"] = ip
        spec["clusterIPs"] = [ip]

    # --- node ports ----------------------------------------------------------------------

    async def _allocate_node_ports(
        self, spec: dict[str, Any], held: set[int], reservation: Reservation, *, creating: bool
    ) -> None:
        if not svc.needs_node_ports(spec):
            return
        ports = [p for p in spec.get("ports") or [] if isinstance(p, dict)]
        by_port: dict[Any, int] = {}  # a port number's node port, shared by its TCP and UDP entries
        for i, port in enumerate(ports):
            wanted = port.get("nodePort")
            number = port.get("port")
            if not wanted:
                if not svc.allocates_node_ports(spec):
                    continue  # named ones are still taken, none is drawn
                if creating:
                    wanted = by_port.get(number) or next(
                        (p.get("nodePort") for p in ports[i + 1:] if p.get("port") == number and p.get("nodePort")), 0
                    )
                if not wanted:
                    port["nodePort"] = by_port[number] = await self._next_port(reservation)
                    continue
                port["nodePort"] = wanted
            if wanted in held or (creating and by_port.get(number) == wanted):
                continue
            refused = await self._take_port(wanted, reservation)
            if refused is not None:
                path = f"spec.ports[{i}].nodePort"
                raise _invalid(reservation.owner.name, [kube_field.invalid(path, wanted, refused)])
            by_port[number] = wanted

    async def _allocate_health_check_port(
        self, spec: dict[str, Any], old_spec: dict[str, Any], reservation: Reservation
    ) -> None:
        if not svc.needs_health_check_node_port(spec):
            return
        wanted = spec.get("healthCheckNodePort")
        if not wanted:
            spec["healthCheckNodePort"] = await self._next_port(reservation, what="a HealthCheck NodePort 0")
            return
        if wanted == old_spec.get("healthCheckNodePort"):
            return
        # The Service's own node ports (the stored ones are released only once the write is
        # done) are taken as any other Service's are: kube's allocator refuses them too.
        own = {port.get("nodePort") for each in (spec, old_spec) for port in items(each, "ports")}
        refused = ALREADY_ALLOCATED_PORT if wanted in own else await self._take_port(wanted, reservation)
        if refused is not None:
            detail = f"failed to allocate requested HealthCheck NodePort {wanted}: {refused}"
            raise _invalid(reservation.owner.name, [kube_field.invalid("spec.healthCheckNodePort", wanted, detail)])

    async def _take_port(self, port: Any, reservation: Reservation) -> str | None:
        """Take ``port`` for the reservation; kube's reason when it cannot be taken."""
        if not isinstance(port, int) or self.node_ports.offset_of(port) is None:
            return f"provided port is not in the valid range. The range of valid ports is {self.node_ports}"
        if reservation.dry_run:
            if port in reservation.dry_ports or await self.port_records.held(port):
                return ALREADY_ALLOCATED_PORT
            reservation.dry_ports.append(port)
            return None
        if not await self.port_records.claim(port, reservation.owner):
            return ALREADY_ALLOCATED_PORT
        reservation.taken.append((self.port_records, port))
        return None

    async def _next_port(self, reservation: Reservation, *, what: str = "a nodePort") -> int:
        if reservation.dry_run:
            port = max(reservation.dry_ports, default=32768) + 1
            reservation.dry_ports.append(port)
            return port
        drawn = await self._draw(self.port_records, self.node_ports, reservation)
        if drawn is None:
            raise _exhausted(reservation.owner.name, "spec.ports", f"failed to allocate {what}: {RANGE_FULL}")
        return int(drawn)

    # --- drawing a free value ------------------------------------------------------------

    async def _draw(self, records: Records, pool: IPRange | PortRange, reservation: Reservation) -> str | int | None:
        """A free value of ``pool``, taken for the reservation's owner; None when it is full."""
        for _ in range(_RANDOM_TRIES):
            value = pool.value_at(random_slot(pool.size, pool.static_band, self._rng))
            if await records.claim(value, reservation.owner):
                reservation.taken.append((records, value))
                return value
        for _ in range(_SCAN_ROUNDS):
            taken = set()
            for record in await records.read_all():
                offset = _offset_in(pool, record.value)
                if offset is not None:
                    taken.add(offset)
            slot = next_free(pool.size, pool.static_band, taken, self._rng)
            if slot is None:
                return None
            value = pool.value_at(slot)
            if await records.claim(value, reservation.owner):
                reservation.taken.append((records, value))
                return value
        return None


def _ip_error(ips: list[Any], ip: str, detail: str) -> FieldError:
    return kube_field.invalid("spec.clusterIPs", svc.go_cluster_ips(ips), f"failed to allocate IP {ip}: {detail}")


def _invalid(name: str, found: list[FieldError]) -> errors.Invalid:
    causes = [errors.Cause(str(e.type), e.message, e.field) for e in found]
    return errors.invalid(kind="Service", group="", name=name, causes=causes)


def _offset_in(pool: IPRange | PortRange, value: str) -> int | None:
    """The slot of a record's value (its key's last part) in ``pool``; None when outside it."""
    if isinstance(pool, IPRange):
        return pool.offset_of(value)
    return pool.offset_of(int(value)) if value.isdigit() else None


def _exhausted(name: str, path: str, detail: str) -> errors.Invalid:
    """A range with no free value left. kube answers ``NewInternalError`` (500); the request
    cannot succeed until a Service is deleted or the range widened, which a 500 does not say, so
    the hub answers 422 with kube's words as the cause at ``path``."""
    return _invalid(name, [FieldError(kube_field.CauseType.FIELD_VALUE_INVALID, path, detail)])
