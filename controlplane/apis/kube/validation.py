"""kube-apiserver's validation of built-in kinds, per group and kind.

A validator gets the object to be stored and, on update, the stored one, and returns
kube's field errors (none: valid). Metadata (names, labels, annotations) is checked by
the API server for every kind and is not repeated here.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from controlplane.apis.kube.field import FieldError

#: (new object, stored object on update or None) → field errors.
Validator = Callable[[dict[str, Any], dict[str, Any] | None], list[FieldError]]

_VALIDATORS: dict[tuple[str, str], Validator] = {}


def for_kind(group: str, kind: str) -> Validator | None:
    """The validator of ``kind`` in API group ``group`` (``""`` for core), if kube has one."""
    return _VALIDATORS.get((group, kind))
