"""kube's impersonation headers: ``Impersonate-User``, ``Impersonate-Group``, ``Impersonate-Uid``
and ``Impersonate-Extra-<key>``, as client-go writes them and kube-apiserver reads them.

An extra's key is part of a header name, so client-go %-escapes each byte a header name may not
hold, and ``%`` itself (``headerKeyEscape``); kube-apiserver lower-cases and unescapes it
(``unescapeExtraKey``). The hub's impersonation filter reads the headers
(:mod:`controlplane.apiserver.impersonation`), the agent writes them for a hub user at its member
(the cluster proxy) and a simulated member reads them back. Pure: names and strings only.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Final
from urllib.parse import unquote

USER_HEADER: Final = "Impersonate-User"
GROUP_HEADER: Final = "Impersonate-Group"
UID_HEADER: Final = "Impersonate-Uid"
#: Followed by the extra's key, %-escaped (``Impersonate-Extra-Scopes: view``).
EXTRA_HEADER_PREFIX: Final = "Impersonate-Extra-"
_EXTRA_PREFIX_LOWER: Final = EXTRA_HEADER_PREFIX.lower()
#: The bytes of an HTTP header name (RFC 7230 ``tchar``) but ``%``, which starts an escape.
_HEADER_NAME_BYTES: Final = frozenset(
    b"!#$&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
)


def impersonation_headers(
    user: str, *, groups: Sequence[str] = (), uid: str = "", extra: Mapping[str, Sequence[str]] | None = None
) -> list[tuple[str, str]]:
    """The headers that act as ``user`` (client-go's impersonating transport): ``Impersonate-User``,
    one ``Impersonate-Group`` per group, ``Impersonate-Uid`` when there is one, one
    ``Impersonate-Extra-<escaped key>`` per value of each extra."""
    headers = [(USER_HEADER, user), *((GROUP_HEADER, group) for group in groups)]
    if uid:
        headers.append((UID_HEADER, uid))
    for key, values in (extra or {}).items():
        headers += [(EXTRA_HEADER_PREFIX + escape_extra_key(key), value) for value in values]
    return headers


def escape_extra_key(key: str) -> str:
    """client-go's ``headerKeyEscape``: each byte of ``key`` a header name may not hold, and ``%``,
    as ``%XX`` (``authentication.kubernetes.io/credential-id`` is
    ``authentication.kubernetes.io%2Fcredential-id``)."""
    return "".join(chr(byte) if byte in _HEADER_NAME_BYTES else f"%{byte:02X}" for byte in key.encode())


def extra_of_headers(headers: Iterable[tuple[str, str]]) -> dict[str, list[str]]:
    """The extras the ``Impersonate-Extra-<key>`` headers among ``headers`` ask for: each key
    lower-cased and %-unescaped (kube's ``unescapeExtraKey``), with its values in order."""
    extra: dict[str, list[str]] = {}
    for name, value in headers:
        if name.lower().startswith(_EXTRA_PREFIX_LOWER):
            extra.setdefault(unquote(name[len(EXTRA_HEADER_PREFIX):].lower()), []).append(value)
    return extra
