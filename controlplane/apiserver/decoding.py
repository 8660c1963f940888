"""The one place a request body becomes a value: JSON or YAML, decoded within bounds.

In: the raw bytes of a request body and its media type. Out: plain JSON data (dicts with
string keys, lists, strings, 64-bit integers, floats, booleans, None), or an
:class:`~controlplane.apiserver.errors.ApiError` (400) naming the bound it broke. Every
handler that reads a JSON or YAML body (create, update, the four patch types, delete
options, the scale subresource, the join and token endpoints) decodes it here, in the hub
and in the simulated member's API server alike.

The bounds are what kube-apiserver enforces through its decoders:

- **Depth** (:data:`MAX_DEPTH`): deeper values are refused before anything walks them
  recursively (a JSON array nested 1,000 deep otherwise ends in ``RecursionError``, and
  orjson refuses to write values deeper than 254).
- **YAML aliases** (:data:`MAX_ALIAS_EXPANSION`): aliases may add at most this many nodes
  to the document (goyaml's "document contains excessive aliasing"). A 542-byte alias bomb
  expands to 43 million nodes (kube fixed the same attack as CVE-2019-11253); its
  expansion is counted on the composed node graph, where it costs one step per distinct
  node, and refused before any value is built. An alias that refers to its own anchor (a
  recursive document) is refused too.
- **Types**: YAML tags that have no JSON form (``!!binary``, ``!!set``) are refused;
  timestamps stay the strings they were written as; keys are strings (YAML ``1: x``
  becomes ``"1": x``, as sigs.k8s.io/yaml converts it); integers must fit 64 bits, as in
  kube's int64 fields and in the store's JSON.

A body that is not JSON (or YAML) is a :class:`MalformedBody` carrying the error kube's Go
decoders give for it: ``encoding/json``'s syntax error (``invalid character 'x' looking for
beginning of value``, ``unexpected end of JSON input``), or go-yaml's (``yaml: line 3: did not find
expected key``, its line counted as go-yaml counts it). Each handler words the refusal as kube's
does for its verb and content type (:mod:`~controlplane.apiserver.body_refusals`). As Go's
decoder, a JSON string holding bytes that are not UTF-8 is taken, each such byte read as U+FFFD.
Go's scanner runs only on a body the fast parser refused, to word the error.

A YAML body of several documents is read to its first, as kube's (sigs.k8s.io/yaml's ``YAMLToJSON``,
go-yaml's ``Unmarshal``): the documents after it are not parsed, so no bound is spent on them.

A body larger than :data:`INLINE_BODY_BYTES` (YAML or JSON) is decoded in a worker thread, so a
large write does not stall ``/readyz`` or the watches of the event loop.
"""

from __future__ import annotations

import datetime
from typing import Any

import orjson
import yaml

from controlplane import gojson
from controlplane.apiserver import errors
from controlplane.apiserver.offloading import pure

#: How deep objects and arrays may nest in a request body (a Deployment is about 12 deep).
MAX_DEPTH = 100
#: How many nodes YAML aliases may add to a document, in total.
MAX_ALIAS_EXPANSION = 100_000
#: Bodies up to this size are decoded inline; larger ones in a worker thread.
INLINE_BODY_BYTES = 64 * 1024
INT64_MIN = -(2**63)
INT64_MAX = 2**63 - 1
#: Unsigned 64-bit values are accepted, as orjson stores them.
UINT64_MAX = 2**64 - 1

_BaseLoader: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class _Loader(_BaseLoader):  # type: ignore[misc]
    """The C (or pure-Python) safe loader; timestamps are left as the strings they were
    written as (kube reads a creationTimestamp as a string, not a date)."""


_Loader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag != "tag:yaml.org,2002:timestamp"]
    for first, resolvers in _BaseLoader.yaml_implicit_resolvers.items()
}

_JSON_SCALARS = (str, bool, float, type(None))


class MalformedBody(errors.BadRequest):
    """A body that does not parse: ``cause`` is the error kube's decoder gives for it (Go's
    ``encoding/json`` or go-yaml words), ``is_yaml`` says which."""

    def __init__(self, cause: str, *, is_yaml: bool) -> None:
        super().__init__(f"the request body is not valid {'YAML' if is_yaml else 'JSON'}: {cause}")
        self.cause = cause
        self.is_yaml = is_yaml


def is_yaml(media: str) -> bool:
    return media.endswith("yaml")


async def decode_body(raw: bytes, *, media: str) -> Any:
    """``raw`` decoded as JSON, or as YAML when ``media`` is a YAML type; 400 when it is
    malformed or breaks a bound. Large bodies are decoded off the event loop."""
    return await pure(len(raw) > INLINE_BODY_BYTES, decode_body_sync, raw, media=media)


def decode_body_sync(raw: bytes, *, media: str) -> Any:
    """:func:`decode_body` on the calling thread."""
    if is_yaml(media):
        if not raw.strip():
            raise errors.BadRequest("the request body is empty; send the object as JSON or YAML")
        return _decode_yaml(raw)
    try:
        value = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        value = _go_accepted(raw, exc)
    _check_json(value, depth=1)
    return value


def _go_accepted(raw: bytes, refused: orjson.JSONDecodeError) -> Any:
    """A JSON body orjson refused, as Go's decoder reads it: its syntax error, or the value of a
    body whose strings hold bytes that are not UTF-8 (Go reads each as U+FFFD)."""
    syntax = gojson.syntax_error(raw)
    if syntax is not None:
        raise MalformedBody(syntax, is_yaml=False) from None
    try:
        return orjson.loads(raw.decode("utf-8", "replace"))
    except orjson.JSONDecodeError:
        raise errors.BadRequest(f"the request body is not valid JSON: {refused}") from None


def go_yaml_error(error: yaml.MarkedYAMLError) -> str:
    """go-yaml's (v2's) words for a scanner or parser error: its problem, after the line of the
    problem (or of its context) as go-yaml counts it: one-based for a scanner error, the parser's
    zero-based line for a parser error, and none on the first line."""
    line = 0
    if error.problem_mark is not None and error.problem_mark.line != 0:
        line = error.problem_mark.line + (1 if isinstance(error, yaml.scanner.ScannerError) else 0)
    elif error.context_mark is not None and error.context_mark.line != 0:
        line = error.context_mark.line
    where = f"line {line}: " if line else ""
    return f"yaml: {where}{error.problem or 'unknown problem parsing YAML content'}"


def _undefined_alias(raw: bytes, error: yaml.MarkedYAMLError) -> str | None:
    """go-yaml's words for an alias whose anchor is not defined before it (``yaml: unknown anchor
    'x' referenced``), or None for another composer error."""
    mark = error.problem_mark
    if not (error.problem or "").startswith("found undefined alias") or mark is None:
        return None
    lines = raw.decode("utf-8", "replace").split("\n")
    at = lines[mark.line][mark.column:] if mark.line < len(lines) else ""
    name = at[1:].split(None, 1)[0].rstrip(",]}") if at.startswith("*") and len(at) > 1 else ""
    return f"yaml: unknown anchor '{name}' referenced"


def _decode_yaml(raw: bytes) -> Any:
    loader = _Loader(raw)
    try:
        # kube converts YAML with sigs.k8s.io/yaml, whose go-yaml Unmarshal parses the first
        # document alone: the documents after it are neither read nor refused.
        node = loader.get_node() if loader.check_node() else None
        if node is None:
            raise errors.BadRequest("the request body is empty; send the object as JSON or YAML")
        _check_nodes(node)
        constructed = loader.construct_document(node)
    except (yaml.scanner.ScannerError, yaml.parser.ParserError) as exc:
        raise MalformedBody(go_yaml_error(exc), is_yaml=True) from exc
    except yaml.composer.ComposerError as exc:
        unknown = _undefined_alias(raw, exc)
        if unknown is None:
            raise errors.BadRequest(f"the request body is not valid YAML: {exc}") from exc
        raise MalformedBody(unknown, is_yaml=True) from exc
    except yaml.YAMLError as exc:
        raise errors.BadRequest(f"the request body is not valid YAML: {exc}") from exc
    except (ValueError, TypeError, OverflowError) as exc:  # e.g. an unhashable mapping key
        raise errors.BadRequest(f"the request body is not valid YAML: {exc}") from exc
    finally:
        loader.dispose()
    return _to_json(constructed, depth=1)


def _check_nodes(root: yaml.Node) -> None:
    """Refuse a composed document that nests too deep, refers to itself, or whose aliases
    expand it by more than :data:`MAX_ALIAS_EXPANSION` nodes. One pass over the distinct
    nodes: a node's expanded size is computed once and reused wherever an alias repeats it."""
    sizes: dict[int, int] = {}
    on_path: set[int] = set()
    distinct = [0]

    def expanded(node: yaml.Node, depth: int) -> int:
        if type(node) is yaml.ScalarNode:
            distinct[0] += 1  # an alias of a scalar adds one node, as the scalar itself does
            return 1
        key = id(node)
        known = sizes.get(key)
        if known is not None:
            return known
        if key in on_path:
            raise errors.BadRequest(
                "the request body is not valid YAML: an alias refers to its own anchor (a recursive document)"
            )
        if depth > MAX_DEPTH:
            raise errors.BadRequest(f"the request body nests deeper than {MAX_DEPTH} levels")
        distinct[0] += 1
        on_path.add(key)
        total = 1
        if type(node) is yaml.SequenceNode:
            for child in node.value:
                total += expanded(child, depth + 1)
        else:
            for name, child in node.value:
                total += expanded(name, depth + 1) + expanded(child, depth + 1)
        on_path.discard(key)
        sizes[key] = total
        return total

    if expanded(root, 1) - distinct[0] > MAX_ALIAS_EXPANSION:
        raise errors.BadRequest(
            f"the request body is not valid YAML: its aliases expand it by more than {MAX_ALIAS_EXPANSION} "
            "nodes (excessive aliasing)"
        )


def _key(key: Any) -> str:
    if isinstance(key, str):
        return key
    if isinstance(key, bool):
        return "true" if key else "false"
    if key is None:
        return "null"
    if isinstance(key, int | float):
        return str(key)
    raise errors.BadRequest(
        f"the request body is not valid YAML: a mapping key must be a string, not {type(key).__name__}"
    )


def _to_json(value: Any, *, depth: int) -> Any:
    """A fresh JSON tree from constructed YAML (aliases become copies, bounded above)."""
    if isinstance(value, dict):
        return {_key(k): _to_json(v, depth=depth + 1) for k, v in value.items()}
    if isinstance(value, list):
        return [_to_json(v, depth=depth + 1) for v in value]
    if isinstance(value, int) and not isinstance(value, bool):
        _check_int(value)
        return value
    if isinstance(value, _JSON_SCALARS):
        return value
    if isinstance(value, datetime.date):  # an explicit !!timestamp tag
        return value.isoformat()
    if isinstance(value, bytes):
        raise errors.BadRequest(
            "the request body is not valid YAML for an API object: !!binary values have no JSON form; "
            "send base64 text (e.g. a Secret's data) as a plain string"
        )
    raise errors.BadRequest(
        f"the request body is not valid YAML for an API object: a {type(value).__name__} value has no JSON form"
    )


def _check_json(value: Any, *, depth: int) -> None:
    if depth > MAX_DEPTH:
        raise errors.BadRequest(f"the request body nests deeper than {MAX_DEPTH} levels")
    if isinstance(value, dict):
        for item in value.values():
            if isinstance(item, dict | list):
                _check_json(item, depth=depth + 1)
    elif isinstance(value, list):
        for item in value:
            if isinstance(item, dict | list):
                _check_json(item, depth=depth + 1)


def _check_int(value: int) -> None:
    if not INT64_MIN <= value <= UINT64_MAX:
        raise errors.BadRequest(
            f"the request body holds the integer {str(value)[:40]}, which does not fit in 64 bits"
        )
