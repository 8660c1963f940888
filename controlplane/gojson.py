"""Go's text of values, as kube writes it into objects and messages.

:func:`go_json` is ``encoding/json``'s text, for the two layers that write it and may not import
each other: the kube API rules (``apis.kube``: the autoscaling/v1 annotations, patch error
messages) and the API server's pure patch logic (``apiserver.patching``: the last-applied
annotation). :func:`go_quote` is ``strconv.Quote`` (``%q``), which kube's messages use, and
:func:`go_time_quote` the ``time`` package's own quoting in its duration errors;
:func:`go_json_value` is ``json.Marshal`` of a decoded JSON value (a CRD's printer columns). A leaf: the
standard library only, no I/O.
"""

from __future__ import annotations

import json
import math
from decimal import Decimal
from typing import Any

#: What Go's encoder escapes that Python's leaves as is: HTML's special characters and the two
#: line separators JavaScript does not allow in strings.
_GO_ESCAPES = (("<", "\\u003c"), (">", "\\u003e"), ("&", "\\u0026"), ("\u2028", "\\u2028"), ("\u2029", "\\u2029"))


#: The escapes strconv.Quote writes for these control characters (others are ``\\xNN``).
_GO_CONTROL = {"\a": "\\a", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t", "\v": "\\v"}


def go_quote(text: str) -> str:
    """``strconv.Quote``: ``"`` and ``\\`` escaped, printable runes as they are, the control
    characters ``\\a \\b \\f \\n \\r \\t \\v`` by name, other ASCII controls and DEL as ``\\xNN``,
    other unprintable runes (spaces but U+0020, format characters, line separators) as ``\\uNNNN``
    or ``\\UNNNNNNNN``, and what is not UTF-8 (a lone surrogate) as its bytes, ``\\xNN`` each."""
    out = ['"']
    for ch in text:
        code = ord(ch)
        if ch in '"\\':
            out.append("\\" + ch)
        elif ch.isprintable():  # Python's printable runes are Go's unicode.IsPrint ones
            out.append(ch)
        elif ch in _GO_CONTROL:
            out.append(_GO_CONTROL[ch])
        elif code < 0x20 or code == 0x7F:
            out.append(f"\\x{code:02x}")
        elif 0xD800 <= code <= 0xDFFF:
            out.extend(f"\\x{b:02x}" for b in ch.encode("utf-8", "surrogateescape" if code >= 0xDC80 else "surrogatepass"))
        elif code < 0x10000:
            out.append(f"\\u{code:04x}")
        else:
            out.append(f"\\U{code:08x}")
    out.append('"')
    return "".join(out)


def go_time_quote(text: str) -> str:
    """The ``time`` package's quoting of a duration in its errors (not strconv's): ``"`` and
    ``\\`` escaped, every byte of a control or non-ASCII character as ``\\xNN``."""
    out = ['"']
    for byte in text.encode("utf-8", "surrogatepass"):
        char = chr(byte)
        if char in '"\\':
            out.append("\\" + char)
        elif 0x20 <= byte < 0x80:
            out.append(char)
        else:
            out.append(f"\\x{byte:02x}")
    out.append('"')
    return "".join(out)


def go_json(value: Any, *, sort_keys: bool = False) -> str:
    """``json.Marshal``'s text of ``value``: compact, keys in the order given (``sort_keys``: as
    Go orders a map's), and ``<``, ``>``, ``&``, U+2028 and U+2029 escaped as Go escapes them."""
    text = json.dumps(value, sort_keys=sort_keys, separators=(",", ":"), ensure_ascii=False)
    for raw, escaped in _GO_ESCAPES:
        text = text.replace(raw, escaped)
    return text


def go_json_value(value: Any) -> str:
    """``json.Marshal`` of a decoded JSON value (``map[string]interface{}`` and what it holds): as
    :func:`go_json` with a map's keys sorted as Go sorts them, and a float64 as Go writes it (``1``
    for 1.0, ``0.5``, ``1e-7``, ``1e+21``). ValueError for NaN and infinities, which Go refuses."""
    if isinstance(value, float):
        return _go_json_float(value)
    if not isinstance(value, dict | list):
        return go_json(value)
    if isinstance(value, list):
        return "[" + ",".join(map(go_json_value, value)) + "]"
    return "{" + ",".join(f"{go_json(str(k))}:{go_json_value(v)}" for k, v in sorted(value.items())) + "}"


def _go_json_float(value: float) -> str:
    # encoding/json: strconv's shortest 'f' form, or its 'e' form below 1e-6 and from 1e21 on,
    # with a one-digit negative exponent written as such (1e-7, not 1e-07).
    if not math.isfinite(value):
        raise ValueError(f"json: unsupported value: {value}")
    magnitude = abs(value)
    if magnitude != 0 and (magnitude < 1e-6 or magnitude >= 1e21):
        text = repr(value)
        return text[:-2] + text[-1] if text[-4:-1] == "e-0" else text
    return format(Decimal(repr(value)).normalize(), "f")
