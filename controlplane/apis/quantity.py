"""Kubernetes resource quantities ("500m", "1Gi", "2") as integers.

Everything that compares capacity (the agent's reports, the estimator, the simulated
scheduler, the waste maths) works on integers in base units: CPU in millicores,
memory and storage in bytes, every other resource (GPUs, MIG slices) as a count.
"""

from __future__ import annotations

from decimal import ROUND_CEILING, Decimal, InvalidOperation

_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {
    "n": Decimal("1e-9"),
    "u": Decimal("1e-6"),
    "m": Decimal("1e-3"),
    "": Decimal(1),
    "k": Decimal("1e3"),
    "M": Decimal("1e6"),
    "G": Decimal("1e9"),
    "T": Decimal("1e12"),
    "P": Decimal("1e15"),
    "E": Decimal("1e18"),
}

MILLI_RESOURCES = frozenset({"cpu"})


class QuantityError(ValueError):
    """A string that is not a Kubernetes quantity."""


def parse_quantity(value: str | int | float) -> Decimal:
    """Parse a quantity into its exact decimal value in base units ("1.5Gi" -> 1610612736)."""
    if isinstance(value, bool):
        raise QuantityError(f"quantity must be a number or string, not {value!r}")
    if isinstance(value, int | float):
        return Decimal(str(value))
    text = value.strip()
    if not text:
        raise QuantityError("quantity is empty")
    for suffix, factor in _BINARY.items():
        if text.endswith(suffix):
            return _number(text[: -len(suffix)], value) * factor
    if len(text) > 1 and text[-1] in "eE" and text[-2].isdigit():
        return _number(text, value)
    suffix = text[-1] if text[-1] in _DECIMAL and not text[-1].isdigit() else ""
    number = text[: -len(suffix)] if suffix else text
    return _number(number, value) * _DECIMAL[suffix]


def _number(text: str, original: str) -> Decimal:
    try:
        number = Decimal(text)
    except InvalidOperation as exc:
        raise QuantityError(f"{original!r} is not a valid quantity (e.g. 500m, 2, 1Gi)") from exc
    if not number.is_finite():
        raise QuantityError(f"{original!r} is not a valid quantity (e.g. 500m, 2, 1Gi)")
    return number


def to_int(resource: str, value: str | int | float) -> int:
    """A quantity as an integer in gpufed's base unit for ``resource`` (cpu: millicores).

    Rounds up, as the scheduler does when it compares requests with capacity.
    """
    number = parse_quantity(value)
    if resource in MILLI_RESOURCES:
        number *= 1000
    return int(number.to_integral_value(rounding=ROUND_CEILING))


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
