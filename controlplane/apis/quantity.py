"""Kubernetes resource quantities ("500m", "1Gi", "2") as integers.

Everything that compares capacity (the agent's reports, the estimator, the simulated
scheduler, the waste maths) works on integers in base units: CPU in millicores,
memory and storage in bytes, every other resource (GPUs, MIG slices) as a count.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from decimal import MAX_EMAX, MIN_EMIN, ROUND_CEILING, ROUND_UP, Context, Decimal, InvalidOperation
from enum import StrEnum

_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}

MILLI_RESOURCES = frozenset({"cpu"})


class QuantityError(ValueError):
    """A string that is not a Kubernetes quantity."""


#: ``resource.ErrFormatWrong``: the text is not a number followed by a suffix.
FORMAT_WRONG = "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"
#: The pattern controller-gen gives a ``resource.Quantity`` field of a CRD (with
#: ``x-kubernetes-int-or-string``): kube's CRD validation refuses a string that does not match it,
#: ``<path> in body should match '<this>'``, before anything parses it.
CRD_PATTERN = r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$"
#: ``resource.ErrSuffix``: the suffix is made of suffix characters but is none kube knows (``1KK``).
SUFFIX_WRONG = "unable to parse quantity's suffix"


class KubeQuantityError(QuantityError):
    """What ``resource.ParseQuantity`` answers for a text it cannot read: ``reason`` is its
    error, word for word (:data:`FORMAT_WRONG` or :data:`SUFFIX_WRONG`)."""

    def __init__(self, message: str, *, reason: str) -> None:
        super().__init__(message)
        self.reason = reason


def parse_quantity(value: str | int | float) -> Decimal:
    """Parse a quantity into its exact decimal value in base units ("1.5Gi" -> 1610612736), as
    kube's ``resource.ParseQuantity`` reads the text: a suffix alone ("Ki", "m") is 0, a space
    inside ("10 Gi") or a suffix kube does not know ("1KK") is refused."""
    if isinstance(value, bool):
        raise QuantityError(f"quantity must be a number or string, not {value!r}")
    if isinstance(value, int | float):
        return Decimal(str(value))
    if len(value) > _MEMO_MAX_CHARS:
        return _parsed_text(value)
    return _memo_parsed_text(value)


def _parsed_text(text: str) -> Decimal:
    try:
        return parse_kube_quantity(text).value
    except (InvalidOperation, ValueError) as exc:
        if isinstance(exc, QuantityError):
            raise
        raise QuantityError(f"{text!r} is not a valid quantity (e.g. 500m, 2, 1Gi)") from exc


_memo_parsed_text = functools.lru_cache(maxsize=4096)(_parsed_text)


def to_int(resource: str, value: str | int | float) -> int:
    """A quantity as an integer in gpufed's base unit for ``resource`` (cpu: millicores).

    Rounds up, as the scheduler does when it compares requests with capacity. A quantity past
    int64 (``1e400`` is one kube reads) saturates at int64's bounds, as the int64 Kueue and kube
    count in: every caller adds, compares and plots these, and a number thousands of digits long
    would overflow the floats of metrics or take seconds to build.
    """
    return _saturated_ceiling(parse_quantity(value), 3 if resource in MILLI_RESOURCES else 0)


def milli_value(number: Decimal) -> int:
    """A parsed quantity in thousandths, rounded up (kube's ``MilliValue``), saturating at
    int64's bounds as :func:`to_int` does."""
    return _saturated_ceiling(number, 3)


def _saturated_ceiling(number: Decimal, shift: int) -> int:
    """``ceil(number * 10**shift)`` clamped to int64 (compared before the shift, which then
    cannot overflow even ``1e999999999999999999``, the largest exponent kube parses)."""
    if not _MIN_INT64 <= number <= _MAX_INT64:
        return _MAX_INT64 if number > 0 else _MIN_INT64
    number = number.scaleb(shift, context=_EXACT)
    if not _MIN_INT64 <= number <= _MAX_INT64:
        return _MAX_INT64 if number > 0 else _MIN_INT64
    return int(number.to_integral_value(rounding=ROUND_CEILING, context=_EXACT))


def resources_to_int(resources: dict[str, str | int | float] | None) -> dict[str, int]:
    """A ``resources.requests``-style map as integers in base units."""
    return {name: to_int(name, qty) for name, qty in (resources or {}).items()}


def format_quantity(resource: str, amount: int) -> str:
    """The inverse of :func:`to_int`, in the form kubectl prints."""
    if resource in MILLI_RESOURCES:
        return str(amount // 1000) if amount % 1000 == 0 else f"{amount}m"
    if resource in ("memory", "ephemeral-storage") or resource.startswith("hugepages-"):
        for suffix in ("Ti", "Gi", "Mi", "Ki"):
            factor = _BINARY[suffix]
            if amount and amount % factor == 0:
                return f"{amount // factor}{suffix}"
    return str(amount)


# --- kube's canonical form ----------------------------------------------------------------
#
# k8s.io/apimachinery/pkg/api/resource: ParseQuantity, then Quantity.String(). A quantity keeps
# the suffix family it was written in (binary "Ki".."Ei", decimal "n".."E", or an exponent
# "e3"); it is printed as an integer mantissa with the largest suffix of that family that keeps
# it whole ("1.5" -> "1500m", "1024Mi" -> "1Gi", "0.5Gi" -> "512Mi", "1000" -> "1k"). A string
# that already looks canonical on kube's fast parse path is kept as written ("100Ki", "+1").


class QuantityFormat(StrEnum):
    DECIMAL_EXPONENT = "DecimalExponent"
    BINARY_SI = "BinarySI"
    DECIMAL_SI = "DecimalSI"


_SI_EXPONENTS = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
_SI_SUFFIXES = {exponent: suffix for suffix, exponent in _SI_EXPONENTS.items()}
_BINARY_EXPONENTS = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}
_BINARY_SUFFIXES = {exponent // 10: suffix for suffix, exponent in _BINARY_EXPONENTS.items()}
_SUFFIX_CHARS = frozenset("eEinumkKMGTP")
_DIGITS = frozenset("0123456789")
_MAX_INT64 = 2**63 - 1
_MIN_INT64 = -(2**63)
_MAX_INT64_FACTORS = 18
_NANO = -9


@dataclass(frozen=True, slots=True)
class KubeQuantity:
    """A parsed quantity as kube holds it: exact value, suffix family, and the input kept verbatim
    when kube's parser keeps it (``text``)."""

    value: Decimal
    format: QuantityFormat
    text: str | None = None

    def __str__(self) -> str:
        return self.text if self.text is not None else _canonical(self.value, self.format)

    def round_up_milli(self) -> KubeQuantity:
        """``SetDefaults_ResourceList``: round away from zero to a thousandth (``100n`` -> ``1m``)."""
        if _exponent(self.value) >= -3:
            return self
        return KubeQuantity(self.value.quantize(_MILLI, rounding=ROUND_UP, context=_EXACT), self.format)


_MILLI = Decimal("0.001")
_NANO_UNIT = Decimal("1e-9")
#: Wide enough for any quantity a bounded request body can hold: no arithmetic here rounds.
_EXACT = Context(prec=100_000, Emax=MAX_EMAX, Emin=MIN_EMIN)


def add_quantities(first: Decimal, second: Decimal) -> Decimal:
    """``first + second`` for parsed quantities, which may be as large as kube reads them
    (``1e999999999``): Python's default context would raise ``Overflow`` past 1e999999."""
    return _EXACT.add(first, second)


def _exponent(value: Decimal) -> int:
    exponent = value.as_tuple().exponent
    assert isinstance(exponent, int)  # finite: parse_kube_quantity makes no NaN or infinity
    return exponent


def _split(text: str) -> tuple[bool, str, str, str, str]:
    """kube's ``parseQuantityString``: sign, numerator (no leading zeros), denominator, the
    number as written, and the suffix."""
    positive, pos, end = True, 0, len(text)
    if text[:1] in ("-", "+"):
        positive = text[0] == "+"
        pos = 1
    while pos < end and text[pos] == "0":
        pos += 1
    if pos >= end:
        return positive, "0", "", "0", ""
    start = pos
    while pos < end and text[pos] in _DIGITS:
        pos += 1
    num = text[start:pos] or "0"
    denom = ""
    if pos < end and text[pos] == ".":
        pos += 1
        start = pos
        while pos < end and text[pos] in _DIGITS:
            pos += 1
        denom = text[start:pos]
    number = text[:pos]
    suffix_start = pos
    while pos < end and text[pos] in _SUFFIX_CHARS:
        pos += 1
    if pos < end and text[pos] in "-+":
        pos += 1
    while pos < end and text[pos] in _DIGITS:
        pos += 1
    if pos < end:
        raise KubeQuantityError(f"{text!r} is not a valid quantity (e.g. 500m, 2, 1Gi)", reason=FORMAT_WRONG)
    return positive, num, denom, number, text[suffix_start:]


def _interpret(suffix: str, original: str) -> tuple[int, int, QuantityFormat]:
    """Base, exponent and format of a suffix (kube's ``suffixHandler.interpret``)."""
    if suffix in _SI_EXPONENTS:
        return 10, _SI_EXPONENTS[suffix], QuantityFormat.DECIMAL_SI
    if suffix in _BINARY_EXPONENTS:
        return 2, _BINARY_EXPONENTS[suffix], QuantityFormat.BINARY_SI
    if len(suffix) > 1 and suffix[0] in "eE":
        exponent = suffix[1:]
        digits = exponent[1:] if exponent[0] in "+-" else exponent
        if digits and set(digits) <= _DIGITS and len(digits) <= 18:
            return 10, int(exponent), QuantityFormat.DECIMAL_EXPONENT
    raise KubeQuantityError(f"{original!r} is not a valid quantity: {SUFFIX_WRONG}", reason=SUFFIX_WRONG)


def parse_kube_quantity(value: str | int | float) -> KubeQuantity:
    """``resource.ParseQuantity`` (after JSON's whitespace trim); a JSON number is read from its text."""
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise QuantityError(f"quantity must be a number or string, not {value!r}")
    text = value.strip() if isinstance(value, str) else repr(value)
    if not text:
        raise KubeQuantityError("quantity is empty", reason=FORMAT_WRONG)
    if text == "0":
        return KubeQuantity(Decimal(0), QuantityFormat.DECIMAL_SI, "0")
    positive, num, denom, _number, suffix = _split(text)
    base, exponent, fmt = _interpret(suffix, text)
    sign = 1 if positive else -1
    # kube's int64 fast path, which keeps the text when it already looks canonical.
    if fmt is QuantityFormat.BINARY_SI:
        precision = 15 - len(num) - int(exponent * 3 / 10) - 1 if not denom else -1
    else:
        precision = _MAX_INT64_FACTORS - len(num) - len(denom)
    scale = (exponent if base == 10 else 0) - len(denom)
    if precision >= 0 and scale >= _NANO:
        shifted = num + denom
        digits = int(shifted)
        mantissa = 1 << exponent if base == 2 else 1
        if digits * mantissa <= _MAX_INT64:
            amount = Decimal(sign * digits * mantissa).scaleb(scale, context=_EXACT)
            if fmt is QuantityFormat.BINARY_SI:
                keep = digits & 0x07 != 0
            else:
                keep = scale % 3 == 0 and not shifted.endswith("000") and shifted[0] != "0"
            return KubeQuantity(amount, fmt, text if keep else None)
    amount = Decimal(f"{num}.{denom or '0'}")
    amount = amount.scaleb(exponent, context=_EXACT) if base == 10 else amount * (2**exponent)
    if amount != 0 and _exponent(amount) < _NANO:
        amount = amount.quantize(_NANO_UNIT, rounding=ROUND_UP, context=_EXACT)
    if fmt is QuantityFormat.BINARY_SI and amount > _MAX_INT64:
        amount = Decimal(_MAX_INT64)
    if fmt is QuantityFormat.BINARY_SI and 0 < amount < 1:
        fmt = QuantityFormat.DECIMAL_SI
    return KubeQuantity(amount if positive else amount.copy_negate(), fmt)  # exact: no context rounds it


@functools.lru_cache(maxsize=4096)
def unparsable_reason(text: str) -> str | None:
    """Why ``Quantity.UnmarshalJSON`` refuses the JSON string ``text`` (kube's error, which
    fails the decoding of the whole object), or None when kube reads it."""
    try:
        parse_kube_quantity(text)
    except KubeQuantityError as exc:
        return exc.reason
    except (QuantityError, InvalidOperation, ValueError):
        return None  # read by kube's parser; only this module's arithmetic gave up
    return None


def _canonical(value: Decimal, fmt: QuantityFormat) -> str:
    """kube's ``Quantity.CanonicalizeBytes`` of ``value`` in ``fmt``."""
    if value == 0:
        return "0"
    if fmt is QuantityFormat.BINARY_SI:
        if -1024 < value < 1024 or value != value.to_integral_value():
            fmt = QuantityFormat.DECIMAL_SI
        else:
            amount, power = _remove_factors(int(value), 1024)
            return f"{amount}{_BINARY_SUFFIXES.get(power, '')}"
    sign, digits, _ = value.as_tuple()
    # On the digits as text: a coefficient thousands of digits long (a sum of 1e100000 and 1) is
    # no integer to divide by ten over and over (seconds), nor to print (Python refuses past 4,300).
    coefficient = "".join(map(str, digits)).lstrip("0") or "0"
    mantissa = coefficient.rstrip("0") or "0"
    exponent = _exponent(value) + len(coefficient) - len(mantissa)
    padding = exponent % 3
    mantissa += "0" * padding
    exponent -= padding
    number = f"{'-' if sign else ''}{mantissa}"
    if fmt is QuantityFormat.DECIMAL_EXPONENT:
        return number if exponent == 0 else f"{number}e{exponent}"
    # kube prints no suffix past "E" (10^18): it has none.
    return number + _SI_SUFFIXES.get(exponent, "")


def _remove_factors(value: int, base: int) -> tuple[int, int]:
    negative = value < 0
    value = abs(value)
    times = 0
    while value >= base and value % base == 0:
        value //= base
        times += 1
    return (-value if negative else value), times


def canonical_quantity(value: str | int | float, *, round_milli: bool = False) -> str:
    """The string kube stores and returns for ``value`` (QuantityError when it does not parse).

    ``round_milli``: as a ``ResourceList`` entry, rounded up to a thousandth first.
    """
    if isinstance(value, bool) or (isinstance(value, str) and len(value) > _MEMO_MAX_CHARS):
        return _canonical_quantity(value, round_milli)
    return _memo_canonical_quantity(value, round_milli)


#: Objects repeat the same few quantities ("1", "24Gi"): parsing each once is most of the cost.
_MEMO_MAX_CHARS = 64


@functools.lru_cache(maxsize=4096, typed=True)
def _memo_canonical_quantity(value: str | int | float, round_milli: bool) -> str:
    return _canonical_quantity(value, round_milli)


def _canonical_quantity(value: str | int | float, round_milli: bool) -> str:
    try:
        quantity = parse_kube_quantity(value)
        return str(quantity.round_up_milli() if round_milli else quantity)
    except (InvalidOperation, ValueError) as exc:
        if isinstance(exc, QuantityError):
            raise
        raise QuantityError(f"{value!r} is not a valid quantity (e.g. 500m, 2, 1Gi)") from exc
