"""kube's CRDValidationRatcheting, as the validation of an update reads it: whether the update
leaves the value at a field path as stored (an error on such a value is not the update's). Values
are compared as Go's ``reflect.DeepEqual`` compares decoded JSON. Pure: no I/O.
"""

from __future__ import annotations

import re
from typing import Any

from controlplane.gojson import deep_equal

#: One step of a field path as kube writes it: ``.name``, ``[3]`` or ``[key]``.
_PATH_STEP = re.compile(r"\.?([^.\[\]]+)|\[([^\]]*)\]")
_MISSING = object()


def _value_at(obj: Any, path: str) -> Any:
    """The value at kube's field ``path`` in ``obj`` (``status.podSetAssignments[0].name``), or
    :data:`_MISSING` where there is none or the path does not read."""
    value, at = obj, 0
    for step in _PATH_STEP.finditer(path):
        if step.start() != at:
            return _MISSING
        at = step.end()
        name, key = step.groups()
        if isinstance(value, dict) and (name if name is not None else key) in value:
            value = value[name if name is not None else key]
        elif isinstance(value, list) and key is not None and key.isdigit() and int(key) < len(value):
            value = value[int(key)]
        else:
            return _MISSING
    return value if at == len(path) and path else _MISSING


def unchanged_at(path: str, obj: dict[str, Any], old: dict[str, Any]) -> bool:
    """Whether an update leaves the value at ``path`` as stored (kube's CRDValidationRatcheting:
    an error on such a value is not the update's)."""
    value = _value_at(obj, path)
    return value is not _MISSING and deep_equal(value, _value_at(old, path))

