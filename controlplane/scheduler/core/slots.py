"""Building frozen, slotted dataclasses without their ``__init__`` where the scheduler makes many.

A frozen dataclass's ``__init__`` goes through ``object.__setattr__`` for every field (its own
``__setattr__`` refuses), which is a noticeable part of the cost where the scheduler builds one
per cluster or per piece of a node shape. The slot descriptors' own setters store the same
values for less: a fast constructor takes ``object.__new__(cls)`` and calls the setter of each
field, every field, so that the value is complete as ``__init__`` would have left it. The setters
are looked up once, when the module that uses them is imported, never per object.

Results whose explanation is rarely read (a verdict, an estimate, a decision) keep a function
that works it out instead, in their ``_explain`` slot: :func:`worked_out` runs it on first read.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")

SlotSetter = Callable[[Any, Any], None]
"""Stores a value in one slot of an instance: ``setter(instance, value)``."""


def slot_setters(cls: type) -> dict[str, SlotSetter]:
    """The setter of each slot ``cls`` declares (its ``__slots__``: a dataclass's fields with
    ``slots=True``), by field name."""
    members = cls.__dict__
    return {name: members[name].__set__ for name in members["__slots__"]}


def worked_out(result: object, slot: str, explain: Callable[[], T] | None) -> T:
    """Run ``explain`` (``result``'s ``_explain``, kept until its answer is first read), keep the
    answer in ``result``'s ``slot`` and drop the function. Called by the property that found
    ``slot`` empty; frozen results included (it stores through ``object.__setattr__``)."""
    assert explain is not None
    value = explain()
    object.__setattr__(result, slot, value)
    object.__setattr__(result, "_explain", None)
    return value
