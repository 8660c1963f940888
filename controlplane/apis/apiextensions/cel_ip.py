"""kube's CEL IP and CIDR libraries (k8s.io/apiserver/pkg/cel/library ip.go, cidr.go).

``ip(s)`` and ``cidr(s)`` accept what Go's ``netip.ParseAddr``/``ParsePrefix`` accept, with
their error texts, and refuse zones and IPv4-mapped IPv6 addresses as kube does. Values travel
between calls as one-key maps holding their canonical text, so equal addresses compare equal
(``ip('::1') == ip('0:0::1')``); a CIDR keeps its address as written (``192.168.0.1/24``),
``masked()`` clears the host bits. Pure: no I/O.
"""

from __future__ import annotations

import ipaddress
from typing import Any

from controlplane.apis.apiextensions.schema import parses
from controlplane.gojson import go_quote

_IP_KEY = "kubernetes.io/ip"
_CIDR_KEY = "kubernetes.io/cidr"
_IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
_Network = ipaddress.IPv4Network | ipaddress.IPv6Network
_HEXDIGITS = "0123456789abcdefABCDEF"


class _AddrError(ValueError):
    def __init__(self, raw: str, message: str, at: str | None = None) -> None:
        suffix = f" (at {go_quote(at)})" if at else ""
        super().__init__(f"ParseAddr({go_quote(raw)}): {message}{suffix}")


def _ipv4_fields(raw: str, text: str) -> list[int]:
    fields: list[int] = []
    value, digits = 0, 0
    for i, ch in enumerate(text):
        if "0" <= ch <= "9":
            if digits == 1 and value == 0:
                raise _AddrError(raw, "IPv4 field has octet with leading zero")
            value, digits = value * 10 + int(ch), digits + 1
            if value > 255:
                raise _AddrError(raw, "IPv4 field has value >255")
        elif ch == ".":
            if i == 0 or i == len(text) - 1 or text[i - 1] == ".":
                raise _AddrError(raw, "IPv4 field must have at least one digit", text[i:])
            if len(fields) == 3:
                raise _AddrError(raw, "IPv4 address too long")
            fields.append(value)
            value, digits = 0, 0
        else:
            raise _AddrError(raw, "unexpected character", text[i:])
    if len(fields) < 3:
        raise _AddrError(raw, "IPv4 address too short")
    return [*fields, value]


def _ipv6(raw: str) -> tuple[int, str]:
    """Go's parseIPv6: the address as an integer and its zone."""
    text, percent, zone = raw.partition("%")
    if percent and not zone:
        raise _AddrError(raw, "zone must be a non-empty string")
    groups: list[int] = []  # 16-bit groups
    ellipsis = -1
    if text.startswith("::"):
        ellipsis, text = 0, text[2:]
        if not text:
            return 0, zone
    while len(groups) < 8:
        off = 0
        acc = 0
        while off < len(text) and text[off] in _HEXDIGITS:
            acc = (acc << 4) + int(text[off], 16)
            if off > 3:
                raise _AddrError(raw, "each group must have 4 or less digits", text)
            off += 1
        if off == 0:
            raise _AddrError(raw, "each colon-separated field must have at least one digit", text)
        if off < len(text) and text[off] == ".":
            if ellipsis < 0 and len(groups) != 6:
                raise _AddrError(raw, "embedded IPv4 address must replace the final 2 fields of the address", text)
            if len(groups) > 6:
                raise _AddrError(raw, "too many hex fields to fit an embedded IPv4 at the end of the address", text)
            a, b, c, d = _ipv4_fields(raw, text)
            groups += [a << 8 | b, c << 8 | d]
            text = ""
            break
        groups.append(acc)
        text = text[off:]
        if not text:
            break
        if text[0] != ":":
            raise _AddrError(raw, "unexpected character, want colon", text)
        if len(text) == 1:
            raise _AddrError(raw, "colon must be followed by more characters", text)
        text = text[1:]
        if text[0] == ":":
            if ellipsis >= 0:
                raise _AddrError(raw, "multiple :: in address", text)
            ellipsis, text = len(groups), text[1:]
            if not text:
                break
    if text:
        raise _AddrError(raw, "trailing garbage after address", text)
    if len(groups) < 8:
        if ellipsis < 0:
            raise _AddrError(raw, "address string too short")
        groups[ellipsis:ellipsis] = [0] * (8 - len(groups))
    elif ellipsis >= 0:
        raise _AddrError(raw, "the :: must expand to at least one field of zeros", text)
    value = 0
    for group in groups:
        value = value << 16 | group
    return value, zone


def _parse_addr(raw: str) -> tuple[_IPAddress, str]:
    """Go's netip.ParseAddr: the address and its zone."""
    for ch in raw:
        if ch == ".":
            return ipaddress.IPv4Address(bytes(_ipv4_fields(raw, raw))), ""
        if ch == ":":
            value, zone = _ipv6(raw)
            return ipaddress.IPv6Address(value), zone
        if ch == "%":
            raise _AddrError(raw, "missing IPv6 address")
    raise _AddrError(raw, "unable to parse IP")


def _address(raw: str) -> _IPAddress:
    """kube's parseIPAddr."""
    try:
        addr, zone = _parse_addr(raw)
    except _AddrError as exc:
        raise ValueError(f"IP Address {go_quote(raw)} parse error during conversion from string: {exc}") from None
    if zone:
        raise ValueError(f"IP address {go_quote(raw)} with zone value is not allowed")
    if isinstance(addr, ipaddress.IPv6Address) and addr.ipv4_mapped is not None:
        raise ValueError(f"IPv4-mapped IPv6 address {go_quote(raw)} is not allowed")
    return addr


def _ip(value: Any) -> dict[str, str]:
    if isinstance(value, dict) and _CIDR_KEY in value:  # cidr.ip(): the address as written
        return {_IP_KEY: value[_CIDR_KEY].partition("/")[0]}
    return {_IP_KEY: str(_address(value))}


def _is_canonical(raw: str) -> bool:
    return str(_address(raw)) == raw


def _addr(value: Any) -> _IPAddress:
    if isinstance(value, dict) and _IP_KEY in value:
        return ipaddress.ip_address(value[_IP_KEY])
    if isinstance(value, str):
        return _address(value)
    raise ValueError(f"no such overload: expected an IP, got {value!r}")


def _is_link_local_multicast(value: Any) -> bool:
    addr = _addr(value)
    if addr.version == 4:
        return addr in ipaddress.IPv4Network("224.0.0.0/24")
    return int(addr) >> 112 & 0xFF0F == 0xFF02


def _is_global_unicast(value: Any) -> bool:
    addr = _addr(value)
    if addr == ipaddress.IPv4Address("255.255.255.255"):
        return False
    return not (addr.is_unspecified or addr.is_loopback or addr.is_multicast or addr.is_link_local)


def _prefix(raw: str) -> tuple[_IPAddress, int]:
    """kube's parseCIDR (Go's netip.ParsePrefix, then no IPv4-mapped address)."""

    def refuse(reason: str) -> ValueError:
        return ValueError(f"network address parse error during conversion from string: netip.ParsePrefix({go_quote(raw)}): {reason}")

    text, slash, bits = raw.rpartition("/")
    if not slash:
        raise refuse("no '/'")
    try:
        addr, zone = _parse_addr(text)
    except _AddrError as exc:
        raise refuse(str(exc)) from None
    if zone:
        raise refuse("IPv6 zones cannot be present in a prefix")
    if (len(bits) > 1 and not "1" <= bits[0] <= "9") or not bits.isascii() or not bits.isdigit():
        raise refuse(f"bad bits after slash: {go_quote(bits)}")
    if int(bits) > addr.max_prefixlen:
        raise refuse("prefix length out of range")
    if isinstance(addr, ipaddress.IPv6Address) and addr.ipv4_mapped is not None:
        raise ValueError(f"IPv4-mapped IPv6 address {go_quote(raw)} is not allowed")
    return addr, int(bits)


def _cidr(raw: str) -> dict[str, str]:
    try:
        addr, bits = _prefix(raw)
    except ValueError as exc:  # kube wraps parseCIDR's error once more
        raise ValueError(f"network address parse error during conversion from string: {exc}") from None
    return {_CIDR_KEY: f"{addr}/{bits}"}


def _network(value: Any) -> _Network:
    if isinstance(value, dict) and _CIDR_KEY in value:
        return ipaddress.ip_network(value[_CIDR_KEY], strict=False)
    if isinstance(value, str):
        return ipaddress.ip_network(_cidr(value)[_CIDR_KEY], strict=False)
    raise ValueError(f"no such overload: expected a CIDR, got {value!r}")


def _contains_ip(cidr: Any, ip: Any) -> bool:
    network, addr = _network(cidr), _addr(ip)
    return network.version == addr.version and addr in network


def _contains_cidr(cidr: Any, other: Any) -> bool:
    network, inner = _network(cidr), _network(other)
    return network.version == inner.version and inner.subnet_of(network)  # type: ignore[arg-type]


def _to_string(value: Any) -> str:
    """``string(ip)`` and ``string(cidr)``: the canonical text (a CIDR's address as written)."""
    if isinstance(value, dict) and len(value) == 1 and (_IP_KEY in value or _CIDR_KEY in value):
        return str(next(iter(value.values())))
    raise ValueError(f"no such overload: string({value!r})")


FUNCTIONS: dict[str, Any] = {
    "string": _to_string,
    "ip": _ip, "isIP": lambda s: parses(_address, s), "ip.isCanonical": _is_canonical,
    "family": lambda v: _addr(v).version,
    "isUnspecified": lambda v: _addr(v).is_unspecified,
    "isLoopback": lambda v: _addr(v).is_loopback,
    "isLinkLocalMulticast": _is_link_local_multicast,
    "isLinkLocalUnicast": lambda v: _addr(v).is_link_local,
    "isGlobalUnicast": _is_global_unicast,
    "cidr": _cidr, "isCIDR": lambda s: parses(_prefix, s), "containsIP": _contains_ip, "containsCIDR": _contains_cidr,
    "masked": lambda c: {_CIDR_KEY: str(_network(c))},
    "prefixLength": lambda c: _network(c).prefixlen,
}
