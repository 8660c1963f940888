"""Building frozen, slotted dataclasses without their ``__init__`` where the scheduler makes many.

A frozen dataclass's ``__init__`` goes through ``object.__setattr__`` for every field (its own
``__setattr__`` refuses), which is a noticeable part of the cost where the scheduler builds one
per cluster or per piece of a node shape. The slot descriptors' own setters store the same
values for less: a fast constructor takes ``object.__new__(cls)`` and calls the setter of each
field, every field, so that the value is complete as ``__init__`` would have left it. The setters
are looked up once, when the module that uses them is imported, never per object.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

SlotSetter = Callable[[Any, Any], None]
"""Stores a value in one slot of an instance: ``setter(instance, value)``."""


def slot_setters(cls: type) -> dict[str, SlotSetter]:
    """The setter of each slot ``cls`` declares (its ``__slots__``: a dataclass's fields with
    ``slots=True``), by field name."""
    members = cls.__dict__
    return {name: members[name].__set__ for name in members["__slots__"]}
