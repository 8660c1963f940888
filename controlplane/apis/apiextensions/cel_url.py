"""kube's CEL URL library (k8s.io/apiserver/pkg/cel/library urls.go).

``url(s)`` accepts what Go's ``url.ParseRequestURI`` accepts (an absolute URI or an absolute
path), with Go's error texts, and reads its parts as ``url.Parse`` does (a fragment is not part
of the path or query). A URL travels between calls as a one-key map holding its text. Pure: no I/O.
"""

from __future__ import annotations

import re
import urllib.parse
from typing import Any

from controlplane.gojson import go_quote

_URL_KEY = "kubernetes.io/url"
#: Bytes Go's url.escape leaves alone in a path (shouldEscape in encodePath mode).
_PATH_UNESCAPED = frozenset(b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.~$&+,/:;=@")
#: Bytes an already escaped path may hold (Go's validEncoded).
_PATH_SAFE = _PATH_UNESCAPED | frozenset(b"!'()*[]%")
#: Bytes a host may hold as they are (Go's shouldEscape in encodeHost mode).
_HOST_SAFE = frozenset(b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.~!$&'()*+,;=:[]<>\"%")
_USERINFO_SAFE = frozenset(b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-._:~!$&'()*+,;=%@")
_SCHEME_REST = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*")
_HEX = "0123456789abcdefABCDEF"
_BAD_ESCAPE = re.compile(r"%(?![0-9A-Fa-f]{2})")


class _URLError(ValueError):
    def __init__(self, raw: str, reason: str) -> None:
        super().__init__(f"parse {go_quote(raw)}: {reason}")


def _check_escapes(raw: str, text: str) -> None:
    i = text.find("%")
    while i != -1:
        if i + 2 >= len(text) or text[i + 1] not in _HEX or text[i + 2] not in _HEX:
            raise _URLError(raw, f"invalid URL escape {go_quote(text[i:i + 3])}")
        i = text.find("%", i + 3)


def _valid_port(colon_port: str) -> bool:
    return colon_port == "" or (colon_port[0] == ":" and all(c in "0123456789" for c in colon_port[1:]))


def _host(raw: str, host: str) -> str:
    if host.startswith("["):
        end = host.rfind("]")
        if end < 0:
            raise _URLError(raw, "missing ']' in host")
        if not _valid_port(host[end + 1:]):
            raise _URLError(raw, f"invalid port {go_quote(host[end + 1:])} after host")
    elif (colon := host.rfind(":")) != -1 and not _valid_port(host[colon:]):
        raise _URLError(raw, f"invalid port {go_quote(host[colon:])} after host")
    _check_escapes(raw, host)
    for ch in host:
        if ord(ch) < 0x80 and ord(ch) not in _HOST_SAFE:
            raise _URLError(raw, f"invalid character {go_quote(ch)} in host name")
    return host


def _parse(raw: str, request: bool) -> dict[str, str]:
    """Go's url.parse: the parts of ``raw`` (``request``: ParseRequestURI's stricter rules)."""
    if any(ord(c) < 0x20 or ord(c) == 0x7F for c in raw):
        raise _URLError(raw, "net/url: invalid control character in URL")
    if raw == "" and request:
        raise _URLError(raw, "empty url")
    parts = {"scheme": "", "host": "", "path": "", "query": ""}
    if raw == "*":
        return {**parts, "path": "*"}
    rest = raw
    scheme = _SCHEME_REST.match(raw)
    if raw.startswith(":"):
        raise _URLError(raw, "missing protocol scheme")
    if scheme and raw[scheme.end():scheme.end() + 1] == ":":
        parts["scheme"], rest = scheme.group(0).lower(), raw[scheme.end() + 1:]
    if rest.endswith("?") and rest.count("?") == 1:
        rest = rest[:-1]
    else:
        rest, _, parts["query"] = rest.partition("?")
    if not rest.startswith("/"):
        if parts["scheme"]:
            return parts  # opaque
        if request:
            raise _URLError(raw, "invalid URI for request")
    if (parts["scheme"] or (not request and not rest.startswith("///"))) and rest.startswith("//"):
        authority, slash, path = rest[2:].partition("/")
        rest = slash + path
        user, at, host = authority.rpartition("@")
        if at and any(ord(c) >= 0x80 or ord(c) not in _USERINFO_SAFE for c in user):
            raise _URLError(raw, "net/url: invalid userinfo")
        parts["host"] = _host(raw, host if at else authority)
    _check_escapes(raw, rest)
    parts["path"] = rest
    return parts


def _url_parts(raw: str) -> dict[str, str]:
    _parse(raw, request=True)
    return _parse(raw.partition("#")[0], request=False)


def _url(raw: str) -> dict[str, str]:
    try:
        _url_parts(raw)
    except _URLError as exc:
        raise ValueError(f"URL parse error during conversion from string: {exc}") from None
    return {_URL_KEY: raw}


def uri_errors(raw: str) -> list[str]:
    """Why Go's url.ParseRequestURI refuses ``raw`` (kube's ``uri`` format)."""
    try:
        _parse(raw, request=True)
    except _URLError as exc:
        return [str(exc)]
    return []


def _is_url(raw: str) -> bool:
    return not uri_errors(raw)


def _url_of(value: Any) -> dict[str, str]:
    if isinstance(value, dict) and _URL_KEY in value:
        return _url_parts(value[_URL_KEY])
    raise ValueError(f"no such overload: expected a URL, got {value!r}")


def _split_host_port(host: str) -> tuple[str, str]:
    port = ""
    colon = host.rfind(":")
    if colon != -1 and _valid_port(host[colon:]):
        host, port = host[:colon], host[colon + 1:]
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    return host, port


def _escaped_path(value: Any) -> str:
    path = _url_of(value)["path"]
    if all(ord(c) < 0x80 and ord(c) in _PATH_SAFE for c in path):
        return path
    decoded = urllib.parse.unquote_to_bytes(path)
    return "".join(chr(b) if b in _PATH_UNESCAPED else f"%{b:02X}" for b in decoded)


def _query(value: Any) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for pair in _url_of(value)["query"].split("&"):
        if not pair or ";" in pair:
            continue
        if _BAD_ESCAPE.search(pair):  # Go's ParseQuery skips a pair it cannot unescape
            continue
        key, _, val = pair.partition("=")
        out.setdefault(urllib.parse.unquote_plus(key), []).append(urllib.parse.unquote_plus(val))
    return out


FUNCTIONS: dict[str, Any] = {
    "url": _url, "isURL": _is_url,
    "getScheme": lambda u: _url_of(u)["scheme"],
    "getHost": lambda u: _url_of(u)["host"],
    "getHostname": lambda u: _split_host_port(_url_of(u)["host"])[0],
    "getPort": lambda u: _split_host_port(_url_of(u)["host"])[1],
    "getEscapedPath": _escaped_path, "getQuery": _query,
}
