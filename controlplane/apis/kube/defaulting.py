"""kube-apiserver's defaulting of built-in kinds (``SetDefaults_*``), per group and kind.

A defaulter fills, in place, the fields kube would set on an object that omits them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

#: Fills unset fields of one object in place.
Defaulter = Callable[[dict[str, Any]], None]

_DEFAULTERS: dict[tuple[str, str], Defaulter] = {}


def for_kind(group: str, kind: str) -> Defaulter | None:
    """The defaulter of ``kind`` in API group ``group`` (``""`` for core), if kube has one."""
    return _DEFAULTERS.get((group, kind))
