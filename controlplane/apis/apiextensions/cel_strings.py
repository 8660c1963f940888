"""cel-go's strings extension (``ext/strings.go``, ``ext/formatting.go``), as kube's CEL environments have it.

Character positions count Unicode code points (Go's runes); ``lowerAscii`` and ``upperAscii``
change ASCII letters only; ``trim`` strips what Go's ``unicode.IsSpace`` calls space. Errors are
cel-go's (``index out of range: 5``). ``"%s is %d".format([a, b])`` is cel-go's string
formatting with its default locale, ``en_US``: ``%s`` (any value, lists and maps written as CEL
literals), ``%d``, ``%f`` and ``%.Nf`` (grouped thousands), ``%e`` (``1.052033`` times ``10`` to the superscript ``⁰³``), ``%x``,
``%X``, ``%o``, ``%b`` and ``%%``. Values come as the ``cel`` package hands them over: ``int``,
``float``, ``bool``, ``str``, ``bytes``, ``None``, ``list``, ``dict``, ``timedelta`` (a duration),
``datetime`` (a timestamp). Pure: no I/O.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any, Final

from cel import stdlib

from controlplane.apis.kube.field import go_float
from controlplane.gojson import go_quote

#: Go's unicode.IsSpace.
_GO_SPACE: Final = "\t\n\v\f\r \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000"
_DEFAULT_PRECISION: Final = 6
_SUPERSCRIPT: Final = str.maketrans("0123456789-", "⁰¹²³⁴⁵⁶⁷⁸⁹⁻")
#: x/text's English exponent separator: narrow no-break spaces around the times sign.
_TIMES_TEN: Final = "\u202f\u00d7\u202f10"


def _out_of_range(index: int) -> ValueError:
    return ValueError(f"index out of range: {index}")


def char_at(text: str, index: int) -> str:
    if index < 0 or index > len(text):
        raise _out_of_range(index)
    return text[index] if index < len(text) else ""


def index_of(text: str, sub: str, offset: int = 0) -> int:
    if sub == "":
        return offset
    if offset < 0:
        raise _out_of_range(offset)
    if offset >= len(text):
        return -1
    return text.find(sub, offset)


def last_index_of(text: str, sub: str, *offset: int) -> int:
    if not offset:
        if sub == "":
            return len(text)
        return last_index_of(text, sub, len(text) - 1)
    at = offset[0]
    if sub == "":
        return at
    if at < 0:
        raise _out_of_range(at)
    if at >= len(text):
        return -1
    return text.rfind(sub, 0, min(at, len(text) - len(sub)) + len(sub))


def substring(text: str, start: int, *end: int) -> str:
    if not end:
        if start < 0 or start > len(text):
            raise _out_of_range(start)
        return text[start:]
    stop = end[0]
    if start > stop:
        raise ValueError(f"invalid substring range. start: {start}, end: {stop}")
    for index in (start, stop):
        if index < 0 or index > len(text):
            raise _out_of_range(index)
    return text[start:stop]


def trim(text: str) -> str:
    return text.strip(_GO_SPACE)


def lower_ascii(text: str) -> str:
    return "".join(c.lower() if c <= "\x7f" else c for c in text)


def upper_ascii(text: str) -> str:
    return "".join(c.upper() if c <= "\x7f" else c for c in text)


# --- format --------------------------------------------------------------------------------


class _FormatError(ValueError):
    """A clause that cannot format its argument (cel-go's ``formatError``)."""


def _cel_type(value: Any) -> str:
    """The CEL type name cel-go's messages give a value."""
    if value is None:
        return "null_type"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, timedelta):
        return "google.protobuf.Duration"
    if isinstance(value, datetime):
        return "google.protobuf.Timestamp"
    names = {int: "int", float: "double", str: "string", bytes: "bytes", list: "list", dict: "map"}
    return next((name for kind, name in names.items() if isinstance(value, kind)), type(value).__name__)


def _timestamp(value: datetime) -> str:
    """Go's RFC3339Nano of a timestamp (fraction without trailing zeros)."""
    value = value if value.tzinfo is not None else value.replace(tzinfo=UTC)
    text = value.strftime("%Y-%m-%dT%H:%M:%S")
    if value.microsecond:
        text += f".{value.microsecond:06d}".rstrip("0")
    offset = value.utcoffset()
    if not offset:
        return text + "Z"
    minutes = int(offset.total_seconds()) // 60
    sign = "-" if minutes < 0 else "+"
    return f"{text}{sign}{abs(minutes) // 60:02d}:{abs(minutes) % 60:02d}"


def _duration(value: timedelta) -> str:
    """cel-go's string of a duration: seconds in Go's shortest ``'f'`` form, then ``s``."""
    seconds = Decimal(value.days * 86400 + value.seconds) + Decimal(value.microseconds) / 1_000_000
    return format(seconds.normalize(), "f") + "s" if seconds else "0s"


def to_string(value: Any) -> str:
    """cel-go's ``string()`` of a scalar: ``true``, Go's shortest float, a duration in seconds
    (``3600s``), a timestamp in RFC 3339 (``Z`` for UTC), bytes that are UTF-8."""
    if isinstance(value, bytes):
        try:
            return value.decode("utf-8")
        except UnicodeDecodeError:
            raise ValueError("invalid UTF-8 in bytes, cannot convert to string") from None
    if isinstance(value, list | dict) or value is None:
        raise ValueError(f"no such overload: string({_cel_type(value)})")
    return format_string(value)


def format_string(value: Any) -> str:
    """``%s``: cel-go's ``FormatString``."""
    if isinstance(value, list):
        return "[" + ", ".join(_literal(item) for item in value) + "]"
    if isinstance(value, dict):
        return _map(value)
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return go_float(value)
    if isinstance(value, str):
        return value
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    if isinstance(value, timedelta):
        return _duration(value)
    if isinstance(value, datetime):
        return _timestamp(value)
    raise _FormatError(
        "string clause can only be used on strings, bools, bytes, ints, doubles, maps, lists, types, durations, "
        f"and timestamps, was given {_cel_type(value)}"
    )


def _literal(value: Any) -> str:
    """A list item or map value as cel-go writes it inside ``%s`` of a list or map: a CEL literal."""
    if isinstance(value, float):
        text = f"{value:.{_DEFAULT_PRECISION}f}" if math.isfinite(value) else go_float(value)
        return text if math.isfinite(value) else go_quote(text)
    if isinstance(value, str):
        return go_quote(value)
    if isinstance(value, bytes):
        return "b" + go_quote(value.decode("utf-8", errors="replace"))
    if isinstance(value, timedelta):
        return f"duration({go_quote(_duration(value))})"
    if isinstance(value, datetime):
        return f"timestamp({go_quote(_timestamp(value))})"
    return format_string(value)


def _map(value: dict[Any, Any]) -> str:
    pairs = []
    for key, item in value.items():
        if not isinstance(key, (str, bool, int)):
            raise _FormatError(f"no formatting function for map key of type {_cel_type(key)}")
        pairs.append((_literal(key), _literal(item)))
    pairs.sort(key=lambda pair: pair[0])
    return "{" + ", ".join(f"{key}:{item}" for key, item in pairs) + "}"


def _decimal(value: Any) -> str:
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    raise _FormatError(f"decimal clause can only be used on integers, was given {_cel_type(value)}")


def _as_double(value: Any, clause: str) -> float:
    """A double, or a string cel-go accepts for ``%f``/``%e`` ("NaN", "Infinity", "-Infinity")."""
    if isinstance(value, float):
        return value
    if isinstance(value, str) and value in ("NaN", "Infinity", "-Infinity"):
        return float(value.replace("Infinity", "inf"))
    raise _FormatError(f"{clause} clause can only be used on doubles, was given {_cel_type(value)}")


def _special(number: float) -> str | None:
    """x/text's English NaN and infinities."""
    if math.isnan(number):
        return "NaN"
    if math.isinf(number):
        return "∞" if number > 0 else "-∞"
    return None


def _fixed(precision: int | None) -> Callable[[Any], str]:
    digits = _DEFAULT_PRECISION if precision is None else precision

    def clause(value: Any) -> str:
        number = _as_double(value, "fixed-point")
        special = _special(number)
        return special if special is not None else f"{number:,.{digits}f}"

    return clause


def _scientific(precision: int | None) -> Callable[[Any], str]:
    # cel-go writes the precision as a width ("%6e"): x/text then pads to it, and always
    # prints its default six fraction digits.
    width = _DEFAULT_PRECISION if precision is None else precision

    def clause(value: Any) -> str:
        number = _as_double(value, "scientific")
        special = _special(number)
        if special is None:
            mantissa, _, exponent = f"{number:.{_DEFAULT_PRECISION}e}".partition("e")
            power = int(exponent)
            special = mantissa + _TIMES_TEN + f"{'-' if power < 0 else ''}{abs(power):02d}".translate(_SUPERSCRIPT)
        return special.rjust(width)

    return clause


def _binary(value: Any) -> str:
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, int):
        return format(value, "b")
    raise _FormatError(f"only integers and bools can be formatted as binary, was given {_cel_type(value)}")


def _hex(upper: bool) -> Callable[[Any], str]:
    def clause(value: Any) -> str:
        if isinstance(value, int) and not isinstance(value, bool):
            text = format(value, "x")
        elif isinstance(value, str):
            text = value.encode().hex()
        elif isinstance(value, bytes):
            text = value.hex()
        else:
            raise _FormatError(
                f"only integers, byte buffers, and strings can be formatted as hex, was given {_cel_type(value)}"
            )
        return text.upper() if upper else text

    return clause


def _octal(value: Any) -> str:
    if isinstance(value, int) and not isinstance(value, bool):
        return format(value, "o")
    raise _FormatError(f"octal clause can only be used on integers, was given {_cel_type(value)}")


def _clause(spec: str) -> tuple[int, Callable[[Any], str]]:
    """The clause at the start of ``spec`` (after its ``%``): how many characters it takes and
    its formatter; ValueError with cel-go's reason."""
    i, precision = 0, None
    if spec[0] == ".":
        i = 1
        while True:
            if i >= len(spec):
                raise ValueError("error while parsing precision: could not find end of precision specifier")
            if not ("0" <= spec[i] <= "9"):
                break
            i += 1
        digits = spec[1:i]
        if not digits:
            raise ValueError(
                'error while parsing precision: error while converting precision to integer: '
                'strconv.Atoi: parsing "": invalid syntax'
            )
        precision = int(digits)
    verb = spec[i]
    clauses: dict[str, Callable[[Any], str]] = {
        "s": format_string, "d": _decimal, "f": _fixed(precision), "e": _scientific(precision),
        "b": _binary, "x": _hex(False), "X": _hex(True), "o": _octal,
    }
    if verb not in clauses:
        raise ValueError(f'unrecognized formatting clause "{verb}"')
    return i + 1, clauses[verb]


def string_format(template: str, args: list[Any]) -> str:
    """``template.format(args)``: cel-go's ``parseFormatString`` with its errors."""
    out: list[str] = []
    i = index = 0
    while i < len(template):
        if template[i] != "%":
            out.append(template[i])
            i += 1
            continue
        if template[i + 1:i + 2] == "%":
            out.append("%")
            i += 2
            continue
        if index >= len(args):
            raise ValueError(f"index {index} out of range")
        if i + 1 >= len(template):
            raise ValueError("unexpected end of string")
        try:
            read, clause = _clause(template[i + 1:])
        except ValueError as exc:
            raise ValueError(f"could not parse formatting clause: {exc}") from None
        try:
            out.append(clause(args[index]))
        except _FormatError as exc:
            raise ValueError(f"error during formatting: {exc}") from None
        i += 1 + read
        index += 1
    return "".join(out)


#: The strings extension by CEL function name (``reverse``, ``join``, ``split``, ``replace`` and
#: ``strings.quote`` are the ``cel`` package's, which match cel-go's).
FUNCTIONS: Final[dict[str, Any]] = {
    **stdlib.EXTENSIONS["strings"],
    "charAt": char_at,
    "indexOf": index_of,
    "lastIndexOf": last_index_of,
    "substring": substring,
    "trim": trim,
    "lowerAscii": lower_ascii,
    "upperAscii": upper_ascii,
    "format": string_format,
}
