"""kube-apiserver's words for a request body that does not decode, per verb and content type.

A create or an update (a subresource's too: status, scale) decodes its body with kube's
serializer, which first reads the body's apiVersion and kind (``couldn't get version/kind; json
parse error: ...`` with Go's JSON error; a YAML body is first converted to JSON, and go-yaml's
error is given as it is); kube's handler then says which kind it wanted and sums the body up,
its first 30 bytes as text when it starts with ``{``, in hex otherwise (``<empty>`` when empty):
400 ``the object provided is unrecognized (must be of type Pod): couldn't get version/kind; json
parse error: invalid character 'x' looking for beginning of value (782c79)`` for the body ``x,y``. A body that is
JSON but not an object is the same 400, Go's error then being about the type it decodes into.
A delete's body (DeleteOptions) that does not decode is a 400 with the serializer's error alone
(a protobuf body's from :func:`~controlplane.apiserver.protobuf.decode_delete_options`).

A create's, an update's or a delete's body of a media type kube's decoders do not take (JSON,
YAML, protobuf) is kube's 415 ``the body of the request was in an unknown format - accepted media
types include: application/json, application/yaml, application/vnd.kubernetes.protobuf``, before
anything else of it is read (:func:`body_media`).

A patch's body is decoded by its patch type, each with its own words (400 every time):

- JSON patch: ``error decoding patch: <Go's error>``; with ``fieldValidation=Ignore``, Go's
  error alone (the JSON patch library's decoding).
- merge patch: ``error decoding patch: <Go's error>``; with ``fieldValidation=Ignore``, the
  JSON patch library's ``Invalid JSON Patch``.
- strategic merge patch: Go's error alone.
- apply (YAML): ``error decoding YAML: error converting YAML to JSON: <go-yaml's error>``.

kube decodes all but an apply against the stored object, so a missing object is their 404 first.

In: the raw body and the decoding error (:class:`~controlplane.apiserver.decoding.MalformedBody`)
or the decoded value. Out: the :class:`~controlplane.apiserver.errors.BadRequest` to raise. No I/O of
its own (a patch's refusal awaits the read of the object it is handed).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, Final, cast

from controlplane.apiserver import errors, protobuf
from controlplane.apiserver.decoding import MalformedBody, decode_body
from controlplane.apiserver.patches import PatchType
from controlplane.gojson import cannot_unmarshal, json_kind

#: What kube's serializers for an object or for DeleteOptions decode, as its 415 lists them.
_DECODED_MEDIA: Final = ["application/json", "application/yaml", protobuf.MEDIA_TYPE]
#: The media types a body is taken in: JSON, YAML by any of its names, protobuf, and none at all
#: (a body sent without a Content-Type), read as JSON as kube reads it. An explicit
#: ``application/octet-stream`` is kube's 415 like any other type it does not decode.
_TAKEN_MEDIA: Final = frozenset(
    ("application/json", "application/yaml", "text/yaml", "application/x-yaml", protobuf.MEDIA_TYPE, "")
)

#: The Go type kube's serializer reads a body's apiVersion and kind into (as Go prints it).
_TYPE_META: Final = 'struct { APIVersion string "json:\\"apiVersion,omitempty\\""; Kind string "json:\\"kind,omitempty\\"" }'
_VERSION_KIND: Final = "couldn't get version/kind; json parse error: "
#: How many bytes of the body kube quotes in its refusal.
_SUMMARY_BYTES: Final = 30


def summarize(raw: bytes) -> str:
    """kube's ``summarizeData``: the body's first bytes as text if it starts with ``{``, else in hex."""
    if not raw:
        return "<empty>"
    head = raw[:_SUMMARY_BYTES]
    text = head.decode("utf-8", "replace") if raw[:1] == b"{" else head.hex()
    return text + " ..." if len(raw) > _SUMMARY_BYTES else text


def unrecognized(kind: str, raw: bytes, error: str) -> errors.BadRequest:
    """kube's refusal of a create's or an update's body it cannot read as a ``kind``."""
    return errors.BadRequest(f"the object provided is unrecognized (must be of type {kind}): {error} ({summarize(raw)})")


def object_refusal(kind: str, raw: bytes, malformed: MalformedBody) -> errors.BadRequest:
    """A create's or an update's body that does not parse."""
    return unrecognized(kind, raw, _decoder_error(malformed))


def _decoder_error(malformed: MalformedBody) -> str:
    """kube's serializer's error: go-yaml's for YAML, its failure to read the apiVersion and kind for JSON."""
    return malformed.cause if malformed.is_yaml else _VERSION_KIND + malformed.cause


def type_meta_error(body: Any) -> str | None:
    """The error kube's serializer gives reading the apiVersion and kind of a decoded body that is
    not an object (null is one, empty), or whose apiVersion or kind is not a string."""
    if body is None:
        return None
    if not isinstance(body, dict):
        return _VERSION_KIND + cannot_unmarshal(body, _TYPE_META)
    if all(isinstance(body.get(key), str | None) for key in ("apiVersion", "kind")):
        return None
    for key, value in body.items():  # Go's first error, in the body's order
        if key in ("apiVersion", "kind") and value is not None and not isinstance(value, str):
            return f"{_VERSION_KIND}json: cannot unmarshal {json_kind(value)} into Go struct field .{key} of type string"
    return None


def patch_refusal(patch_type: PatchType, malformed: MalformedBody, *, strict: bool) -> errors.BadRequest:
    """A patch body that does not parse, in the words of its patch type's decoder (``strict``:
    fieldValidation is Strict or Warn, kube's default, under which kube decodes it strictly first)."""
    cause = malformed.cause
    if patch_type is PatchType.APPLY:
        return errors.BadRequest(f"error decoding YAML: error converting YAML to JSON: {cause}")
    if patch_type is PatchType.STRATEGIC:
        return errors.BadRequest(cause)
    if strict:
        return errors.BadRequest(f"error decoding patch: {cause}")
    return errors.BadRequest(cause if patch_type is PatchType.JSON else "Invalid JSON Patch")


async def decode_object(raw: bytes, *, media: str, kind: str) -> Any:
    """A create's or an update's body decoded, or refused in kube's words for a ``kind``."""
    try:
        body = await decode_body(raw, media=media)
    except MalformedBody as malformed:
        raise object_refusal(kind, raw, malformed) from None
    error = type_meta_error(body)
    if error is not None:
        raise unrecognized(kind, raw, error)
    return body


def body_media(content_type: str | None) -> str:
    """The media type of a create's, an update's or a delete's body (its Content-Type header
    without parameters, lower-cased; ``""`` when the request sent none), or kube's 415 when kube
    would not decode it (``text/plain``, ``application/octet-stream``). The header itself, not
    aiohttp's ``request.content_type``, which reports ``application/octet-stream`` for none."""
    media = (content_type or "").split(";", 1)[0].strip().lower()
    if media not in _TAKEN_MEDIA:
        raise errors.unknown_body_format(_DECODED_MEDIA)
    return media


async def decode_options(raw: bytes, *, media: str) -> dict[str, Any] | None:
    """A delete's body (DeleteOptions), refused with its decoder's error alone, as kube's delete
    handler refuses it (400): a protobuf body's error is its decoder's."""
    if media == protobuf.MEDIA_TYPE:
        return protobuf.decode_delete_options(raw)
    try:
        body = await decode_body(raw, media=media)
    except MalformedBody as malformed:
        raise errors.BadRequest(_decoder_error(malformed)) from None
    error = type_meta_error(body)
    if error is not None:
        raise errors.BadRequest(error)
    return cast(dict[str, Any] | None, body)


async def decode_patch(raw: bytes, patch_type: PatchType, *, strict: bool, read: Callable[[], Awaitable[object]]) -> Any:
    """A patch's body decoded (YAML for an apply, JSON otherwise), or refused in kube's words. kube
    decodes a JSON, merge or strategic merge patch against the stored object, so ``read`` (that
    object's read) runs before such a patch is refused: a missing object is its 404 first."""
    try:
        return await decode_body(raw, media="application/yaml" if patch_type is PatchType.APPLY else "application/json")
    except errors.BadRequest as refused:
        if patch_type is not PatchType.APPLY:
            await read()
        if isinstance(refused, MalformedBody):
            raise patch_refusal(patch_type, refused, strict=strict) from None
        raise
