"""The CEL functions kube's CRD validation environment has beyond core CEL, for rules.

cel-go's sets extension comes from the ``cel`` package's ``cel.stdlib`` (kube declares neither its
math, nor its encoders, nor its bindings: a rule calling ``math.abs`` or ``cel.bind`` is refused), its
strings extension (with ``format``) from :mod:`.cel_strings`; kube's own libraries are here: lists (``isSorted``, ``sum``, ``min``,
``max``, ``indexOf``, ``lastIndexOf``), regex (``find``, ``findAll``; RE2, as kube) and
quantities (``quantity("1Gi")``, ``isQuantity``, and on a quantity ``isGreaterThan``,
``isLessThan``, ``compareTo``, ``add``, ``sub``, ``asInteger``, ``isInteger``,
``asApproximateFloat``, ``sign``); URLs (:mod:`.cel_url`), IPs and CIDRs (:mod:`.cel_ip`), formats
(:mod:`.cel_format`) and semantic versions (:mod:`.cel_semver`); and the calls
:func:`.cel_parse.plain` writes cel-go's optional syntax, a string's ``size`` (in code points),
``string()`` and two-variable comprehensions as. A quantity is carried between calls as a map holding its
exact value in canonical form, so two equal quantities compare equal (``1Gi == 1024Mi``).
Pure: no I/O.
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Iterator
from decimal import Decimal
from typing import Any

import cel
from cel import OptionalValue, stdlib

from controlplane.apis.apiextensions import cel_format, cel_ip, cel_semver, cel_strings, cel_url
from controlplane.apis.apiextensions.cel_parse import (
    FROM_PAIRS,
    MERGED,
    OPTIONAL,
    OPTIONAL_LIST,
    OPTIONAL_MAP,
    PAIRS,
    STRING_SIZE,
    TO_STRING,
    TOLERANT,
)
from controlplane.apis.apiextensions.schema import compiled_pattern, parses
from controlplane.apis.quantity import QuantityError, parse_quantity

_QUANTITY_KEY = "kubernetes.io/quantity"
_INT64_MAX = 2**63 - 1


def _is_sorted(items: list[Any]) -> bool:
    return all(a <= b for a, b in itertools.pairwise(items))


def _index_of(container: Any, item: Any, *offset: int) -> int:
    if isinstance(container, str):
        return cel_strings.index_of(container, item, *offset)
    return container.index(item) if item in container else -1


def _last_index_of(container: Any, item: Any, *offset: int) -> int:
    if isinstance(container, str):
        return cel_strings.last_index_of(container, item, *offset)
    return len(container) - 1 - container[::-1].index(item) if item in container else -1


def _regex(pattern: str) -> Any:
    compiled = compiled_pattern(pattern)
    if isinstance(compiled, str):
        raise ValueError(f"invalid regular expression: {compiled}")
    return compiled


def _find(text: str, pattern: str) -> str:
    match = _regex(pattern).search(text)
    return match.group(0) if match else ""


def _find_all(text: str, pattern: str, *limit: int) -> list[str]:
    found = [m.group(0) for m in _regex(pattern).finditer(text)]
    return found[: limit[0]] if limit and limit[0] >= 0 else found


# --- quantities ----------------------------------------------------------------------------


def _quantity_of(value: Decimal) -> dict[str, str]:
    return {_QUANTITY_KEY: str(value.normalize())}


def _value(quantity: Any) -> Decimal:
    if isinstance(quantity, dict) and _QUANTITY_KEY in quantity:
        return Decimal(quantity[_QUANTITY_KEY])
    if isinstance(quantity, int) and not isinstance(quantity, bool):
        return Decimal(quantity)
    raise ValueError(f"no such overload: expected a quantity, got {quantity!r}")


def _quantity(text: str) -> dict[str, str]:
    try:
        return _quantity_of(parse_quantity(text))
    except QuantityError as exc:
        raise ValueError(f"quantities must match the regular expression: {exc}") from None


def _is_quantity(text: str) -> bool:
    return parses(parse_quantity, text)


def _compare(a: Any, b: Any) -> int:
    """``compareTo``: of two quantities, or of two versions (:mod:`.cel_semver`)."""
    if cel_semver.is_version(a):
        return cel_semver.compare(a, b)
    left, right = _value(a), _value(b)
    return (left > right) - (left < right)


def _as_integer(quantity: Any) -> int:
    value = _value(quantity)
    if value != value.to_integral_value() or abs(value) > _INT64_MAX:
        raise ValueError("cannot convert value to integer")
    return int(value)


def _is_integer(quantity: Any) -> bool:
    value = _value(quantity)
    return value == value.to_integral_value() and abs(value) <= _INT64_MAX


# --- optional syntax ----------------------------------------------------------------------


def _optional(value: Any) -> OptionalValue:
    """``value`` as an optional (an optional as it is), for ``.?`` and ``[?``."""
    return value if isinstance(value, OptionalValue) else OptionalValue.of(value)


def _present(value: Any) -> list[Any]:
    """The value of a ``?`` entry, or nothing for ``optional.none()``: cel-go requires an optional."""
    if not isinstance(value, OptionalValue):
        raise ValueError(f"no such overload: a '?' entry takes an optional value, got {type(value).__name__}")
    return [value.value()] if value.has_value() else []


def _optional_list(items: list[Any], marked: list[int]) -> list[Any]:
    """A list literal whose ``marked`` elements were written ``?x``."""
    chosen = set(marked)
    return [kept for i, item in enumerate(items) for kept in (_present(item) if i in chosen else [item])]


def _optional_map(flat: list[Any], marked: list[int]) -> dict[Any, Any]:
    """A map literal from its keys and values in turn, whose ``marked`` entries were written ``?k: v``."""
    chosen = set(marked)
    out: dict[Any, Any] = {}
    for entry, (key, value) in enumerate(zip(flat[::2], flat[1::2], strict=True)):
        for kept in _present(value) if entry in chosen else [value]:
            out[key] = kept
    return out


# --- two-variable comprehensions -------------------------------------------------------------


def _pairs(value: Any) -> list[list[Any]]:
    """A list's ``[index, value]`` pairs, a map's ``[key, value]`` ones."""
    if isinstance(value, dict):
        return [[key, item] for key, item in value.items()]
    if isinstance(value, list):
        return [[index, item] for index, item in enumerate(value)]
    raise ValueError(
        f"no such overload: a comprehension ranges over a list or a map, not {type(value).__name__}"
    )


def _from_pairs(pairs: list[list[Any]]) -> dict[Any, Any]:
    return {key: value for key, value in pairs}


def _merged(maps: list[Any]) -> dict[Any, Any]:
    """``transformMapEntry``'s map: the entries of each result, a key given twice an error."""
    out: dict[Any, Any] = {}
    for entry in maps:
        if not isinstance(entry, dict):
            raise ValueError("no such overload: transformMapEntry's expression must give a map")
        for key, value in entry.items():
            if key in out:
                raise ValueError(f"insert failed: key {key} already exists")
            out[key] = value
    return out


# --- all and exists as cel-go evaluates them ----------------------------------------------


@functools.lru_cache(maxsize=256)
def _predicate(text: str) -> Any:
    return cel.compile(text)


def _each(items: Any, read: dict[str, Any], text: str, variable: str) -> Iterator[Any]:
    """Each element's predicate (a map's keys'), an error as its exception: one failing does
    not stop the others."""
    program = _predicate(text)
    # The variables read are converted once; the element is bound per run by a resolver (which the
    # package consults first, falling through for a None to the registered null), not by a new
    # context that would convert them all again for each element.
    context = cel.Context({**read, variable: None}, FUNCTIONS)
    bound: list[Any] = [None]
    context.set_variable_resolver(lambda name: bound[0] if name == variable else None)
    for item in list(items):
        bound[0] = item
        try:
            yield program.execute(context)
        except KeyError as exc:
            yield ValueError(f"no such key: {exc.args[0] if exc.args else ''}")
        except Exception as exc:  # the element's error, reported if no other element decides
            yield exc


def _decided(items: Any, read: dict[str, Any], text: str, variable: str, *, deciding: bool) -> bool:
    """cel-go's ``all`` (``deciding`` False) or ``exists`` (True): an element whose predicate is
    ``deciding`` decides; else the first error; else ``not deciding``."""
    error: Exception | None = None
    for result in _each(items, read, text, variable):
        if isinstance(result, bool):
            if result == deciding:
                return deciding
        else:
            error = error or (result if isinstance(result, Exception) else ValueError("no such overload"))
    if error is not None:
        raise ValueError(str(error).strip() or type(error).__name__)
    return not deciding


def _to_string(value: Any) -> str:
    """``string(x)``: an IP's or a CIDR's text (:mod:`.cel_ip`), else cel-go's of a scalar."""
    if isinstance(value, dict):
        return str(cel_ip.FUNCTIONS["string"](value))
    return cel_strings.to_string(value)


def _kube_functions() -> dict[str, Any]:
    out: dict[str, Any] = {}
    # kube's base environment (apiserver/pkg/cel/environment/base.go) has cel-go's sets and strings
    # extensions, not its math, encoders or bindings ones.
    for library in ("core", "sets"):
        out.update(stdlib.EXTENSIONS[library])
    out.update(cel_strings.FUNCTIONS)
    out.update(
        isSorted=_is_sorted,
        indexOf=_index_of,
        lastIndexOf=_last_index_of,
        find=_find,
        findAll=_find_all,
        quantity=_quantity,
        isQuantity=_is_quantity,
        compareTo=_compare,
        isGreaterThan=lambda a, b: _compare(a, b) > 0,
        isLessThan=lambda a, b: _compare(a, b) < 0,
        add=lambda a, b: _quantity_of(_value(a) + _value(b)),
        sub=lambda a, b: _quantity_of(_value(a) - _value(b)),
        asInteger=_as_integer,
        isInteger=_is_integer,
        asApproximateFloat=lambda q: float(_value(q)),
        sign=lambda q: _compare(q, 0),
    )
    out.update(cel_url.FUNCTIONS)
    out.update(cel_ip.FUNCTIONS)
    out.update(cel_format.FUNCTIONS)
    out.update(cel_semver.FUNCTIONS)
    out.update(
        {OPTIONAL: _optional, OPTIONAL_LIST: _optional_list, OPTIONAL_MAP: _optional_map, STRING_SIZE: len}
    )
    out.update({PAIRS: _pairs, FROM_PAIRS: _from_pairs, MERGED: _merged, TO_STRING: _to_string})
    out[TOLERANT["all"]] = functools.partial(_decided, deciding=False)
    out[TOLERANT["exists"]] = functools.partial(_decided, deciding=True)
    return out


#: Every function a rule may call beyond core CEL, by name.
FUNCTIONS: dict[str, Any] = _kube_functions()
