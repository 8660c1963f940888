"""The two ranges a Service draws from: cluster IPs (``--service-cluster-ip-range``) and node
ports (``--service-node-port-range``), as kube-apiserver's allocators see them.

A range is a count of slots and a mapping between slot numbers (offsets) and values. An IP
range leaves out the network address and, for IPv4, the broadcast address; an IPv6 range is
capped at 65535 slots, as kube caps its bitmap. Both keep kube's static band: the first
``min(max(16, size/16), 256)`` addresses (``min(max(16, size/32), 128)`` ports) are handed out
by :func:`next_free` only once the rest is full, so that values users pick themselves seldom
collide with drawn ones. Pure; no I/O; nothing of size proportional to the range is built.
"""

from __future__ import annotations

import ipaddress
import random
from collections.abc import Container
from dataclasses import dataclass
from typing import Final

DEFAULT_SERVICE_CLUSTER_IP_RANGE: Final = "10.96.0.0/12"
DEFAULT_SERVICE_NODE_PORT_RANGE: Final = "30000-32767"
_IPV6_MAX_SLOTS: Final = 65536


def _static_band(size: int, *, step: int, most: int) -> int:
    """kube's ``calculateRangeOffset``: min(max(16, size/step), most); 0 for a tiny range."""
    if size <= 16:
        return 0
    return min(max(16, size // step), most)


@dataclass(frozen=True, slots=True)
class IPRange:
    network: ipaddress.IPv4Network | ipaddress.IPv6Network

    @classmethod
    def parse(cls, text: str) -> IPRange:
        """``10.96.0.0/12``; ValueError for anything else (host bits set included, as kube's flag)."""
        network = ipaddress.ip_network(text.strip(), strict=True)
        out = cls(network)
        if out.size < 1:
            raise ValueError(f"{text} holds no address a Service can use")
        return out

    @property
    def family(self) -> str:
        return "IPv4" if self.network.version == 4 else "IPv6"

    @property
    def size(self) -> int:
        if self.network.version == 4:
            return self.network.num_addresses - 2  # neither the network nor the broadcast address
        return min(self.network.num_addresses, _IPV6_MAX_SLOTS) - 1  # kube's bitmap cap, less the network address

    @property
    def static_band(self) -> int:
        return _static_band(self.network.num_addresses, step=16, most=256)

    def offset_of(self, value: str) -> int | None:
        """The slot of address ``value``; None when it is not one this range hands out."""
        try:
            address = ipaddress.ip_address(value)
        except ValueError:
            return None
        if address.version != self.network.version or address not in self.network:
            return None
        offset = int(address) - int(self.network.network_address) - 1
        return offset if 0 <= offset < self.size else None

    def value_at(self, offset: int) -> str:
        return str(self.network.network_address + offset + 1)

    def __str__(self) -> str:
        return str(self.network)


@dataclass(frozen=True, slots=True)
class PortRange:
    base: int
    size: int

    @classmethod
    def parse(cls, text: str) -> PortRange:
        """``30000-32767`` (or one port); ValueError for anything else."""
        low, sep, high = text.strip().partition("-")
        first = int(low)
        last = int(high) if sep else first
        if not 0 < first <= last <= 65535:
            raise ValueError(f"{text} is not a port range (low-high, within 1-65535)")
        return cls(first, last - first + 1)

    @property
    def static_band(self) -> int:
        return _static_band(self.size, step=32, most=128)

    def offset_of(self, value: int) -> int | None:
        offset = value - self.base
        return offset if 0 <= offset < self.size else None

    def value_at(self, offset: int) -> int:
        return self.base + offset

    def __str__(self) -> str:
        return f"{self.base}-{self.base + self.size - 1}"


def next_free(size: int, static_band: int, taken: Container[int], rng: random.Random) -> int | None:
    """kube's random scan with an offset: from a random slot above ``static_band``, the first
    slot not ``taken``, wrapping; then the same below it; None when every slot is taken."""
    for low, high in ((static_band, size), (0, static_band)):
        span = high - low
        if span <= 0:
            continue
        start = rng.randrange(span)
        for i in range(span):
            slot = low + (start + i) % span
            if slot not in taken:
                return slot
    return None


def random_slot(size: int, static_band: int, rng: random.Random) -> int:
    """A random slot above the static band (anywhere when there is none above it)."""
    if size > static_band:
        return static_band + rng.randrange(size - static_band)
    return rng.randrange(size)
