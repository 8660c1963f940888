"""The media type of a resource response, from the request's ``Accept`` header, as kube negotiates it.

kube-apiserver writes a resource (an object, a list, a Status) as JSON, YAML or protobuf,
whichever the client's ``Accept`` prefers (``q`` weights first, then the order given;
``*/*`` and ``application/*`` mean JSON), JSON indented for ``?pretty=true`` or a curl, Wget or
browser client. A client that accepts none of them gets 406
``only the following media types are accepted: application/json, application/yaml,
application/vnd.kubernetes.protobuf``. The hub writes JSON where protobuf is asked for (kubectl
asks for protobuf with JSON as its fallback, and reads either). A custom resource is served in
JSON and YAML only, as kube's CRD handler serves it: a protobuf clause asking for no conversion
is passed over, so that a client accepting protobuf alone gets the same 406. A clause may ask for the answer
converted (``;as=Table;g=meta.k8s.io;v=v1``, ``as=PartialObjectMetadata`` or
``PartialObjectMetadataList``): :func:`conversion_asked`.

Pure: in a header, out a media type (or the 406) and the conversion asked for.
"""

from __future__ import annotations

from dataclasses import dataclass
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


#: The ``meta.k8s.io`` versions kube converts an answer into, and the kinds it converts to.
CONVERSION_GROUP: Final = "meta.k8s.io"
CONVERSION_VERSIONS: Final = ("v1", "v1beta1")
TABLE: Final = "Table"
PARTIAL_OBJECT: Final = "PartialObjectMetadata"
PARTIAL_LIST: Final = "PartialObjectMetadataList"


@dataclass(frozen=True)
class Conversion:
    """What the ``as``, ``g`` and ``v`` parameters of the Accept clause kube picks ask the answer
    to be: a Table, a PartialObjectMetadata or a PartialObjectMetadataList of ``meta.k8s.io``."""

    kind: str
    version: str

    @property
    def api_version(self) -> str:
        return f"{CONVERSION_GROUP}/{self.version}"


def _negotiated(accept: str | None, *, protobuf: bool = True) -> tuple[str, Conversion | None]:
    """The media type written and the conversion asked, from the first clause (by weight, the
    client's order among equals) of a served media type that asks for no conversion or for one
    kube makes there (a Table in JSON or YAML, PartialObjectMetadata or its list in any;
    ``g=meta.k8s.io``, ``v=v1`` or ``v1beta1``): kube passes over a clause asking for another,
    and, for a resource served without ``protobuf`` (a custom resource), a protobuf clause asking
    for none (kube's ``AllowsMediaTypeTransform`` over the CRD handler's standard serializers)."""
    if not accept or not accept.strip():
        return JSON, None
    clauses = [media_params(entry) for entry in accept.split(",") if entry.strip()]
    for media, params in sorted(clauses, key=lambda clause: -_weight(clause[1])):
        if _weight(params) <= 0 or media not in _WRITTEN:
            continue
        if not {"as", "g", "v"} & params.keys():
            if media == PROTOBUF and not protobuf:
                continue
            return _WRITTEN[media], None
        kind = params.get("as", "")
        if params.get("g") != CONVERSION_GROUP or params.get("v") not in CONVERSION_VERSIONS:
            continue
        if kind in (PARTIAL_OBJECT, PARTIAL_LIST) or (kind == TABLE and media != PROTOBUF):
            return _WRITTEN[media], Conversion(kind, params["v"])
    raise NotAcceptable(f"only the following media types are accepted: {', '.join(ACCEPTED)}")


def response_media(accept: str | None, *, protobuf: bool = True) -> str:
    """JSON or YAML, as the client prefers; :class:`NotAcceptable` (406) when it takes neither
    nor protobuf (nor any of them converted as kube converts). No header (or an empty one) is JSON.
    ``protobuf=False``: the resource is not served in protobuf (a custom resource's), whose
    clause then counts only to ask for a conversion."""
    return _negotiated(accept, protobuf=protobuf)[0]


def conversion_asked(accept: str | None, *, protobuf: bool = True) -> Conversion | None:
    """The conversion the client asks for (None: the resource itself, or no acceptable clause);
    ``protobuf=False`` as for :func:`response_media`: a protobuf clause asking for none is passed
    over, so a later clause's conversion is the one made (a custom resource's Table)."""
    try:
        return _negotiated(accept, protobuf=protobuf)[1]
    except NotAcceptable:
        return None


#: User agents kube writes indented JSON for, without being asked (curl, Wget, browsers).
_PRETTY_AGENTS: Final = ("curl", "Wget", "Mozilla/5.0")


def pretty(asked: str | None, user_agent: str | None) -> bool:
    """kube's ``isPrettyPrint``: ``?pretty=`` when given (Go's ParseBool), else a human's client."""
    if asked:
        return parse_bool(asked) is True
    return bool(user_agent) and str(user_agent).startswith(_PRETTY_AGENTS)
