"""The media type of a resource response, from the request's ``Accept`` header, as kube negotiates it.

kube-apiserver writes a resource (an object, a list, a Status) as JSON, YAML or protobuf,
whichever the client's ``Accept`` prefers (``q`` weights first, then the order given;
``*/*`` and ``application/*`` mean JSON), JSON indented for ``?pretty=true`` or a curl, Wget or
browser client. A client that accepts none of them gets 406
``only the following media types are accepted: application/json, application/yaml,
application/vnd.kubernetes.protobuf``. The hub writes JSON where protobuf is asked for (kubectl
asks for protobuf with JSON as its fallback, and reads either).

Pure: in a header, out a media type (or the 406).
"""

from __future__ import annotations

from typing import Final

from controlplane.apiserver.errors import NotAcceptable
from controlplane.gojson import parse_bool

JSON: Final = "application/json"
YAML: Final = "application/yaml"
PROTOBUF: Final = "application/vnd.kubernetes.protobuf"
#: What kube's serializers offer, in its order (the 406 names them so).
ACCEPTED: Final = (JSON, YAML, PROTOBUF)
_WRITTEN = {"*/*": JSON, "application/*": JSON, JSON: JSON, YAML: YAML, PROTOBUF: JSON}


def media_params(entry: str) -> tuple[str, dict[str, str]]:
    """One ``Accept`` clause: its media type (lower case) and its parameters."""
    media, *params = (part.strip() for part in entry.split(";"))
    parsed = {}
    for param in params:
        key, _, value = param.partition("=")
        parsed[key.strip().lower()] = value.strip()
    return media.lower(), parsed


def _weight(params: dict[str, str]) -> float:
    try:
        return float(params.get("q", "1"))
    except ValueError:
        return 0.0


def response_media(accept: str | None) -> str:
    """JSON or YAML, as the client prefers; :class:`NotAcceptable` (406) when it takes neither
    nor protobuf. No header (or an empty one) is JSON."""
    if not accept or not accept.strip():
        return JSON
    clauses = [media_params(entry) for entry in accept.split(",") if entry.strip()]
    # Stable: clauses of equal weight keep the client's order.
    for media, params in sorted(clauses, key=lambda clause: -_weight(clause[1])):
        if _weight(params) > 0 and media in _WRITTEN:
            return _WRITTEN[media]
    raise NotAcceptable(f"only the following media types are accepted: {', '.join(ACCEPTED)}")


#: User agents kube writes indented JSON for, without being asked (curl, Wget, browsers).
_PRETTY_AGENTS: Final = ("curl", "Wget", "Mozilla/5.0")


def pretty(asked: str | None, user_agent: str | None) -> bool:
    """kube's ``isPrettyPrint``: ``?pretty=`` when given (Go's ParseBool), else a human's client."""
    if asked:
        return parse_bool(asked) is True
    return bool(user_agent) and str(user_agent).startswith(_PRETTY_AGENTS)
