"""Go's ``encoding/json`` text, as kube writes JSON into objects and messages.

One function, :func:`go_json`, for the two layers that write it and may not import each other:
the kube API rules (``apis.kube``: the autoscaling/v1 annotations, patch error messages) and the
API server's pure patch logic (``apiserver.patching``: the last-applied annotation). A leaf:
the standard library only, no I/O.
"""

from __future__ import annotations

import json
from typing import Any

#: What Go's encoder escapes that Python's leaves as is: HTML's special characters and the two
#: line separators JavaScript does not allow in strings.
_GO_ESCAPES = (("<", "\\u003c"), (">", "\\u003e"), ("&", "\\u0026"), ("\u2028", "\\u2028"), ("\u2029", "\\u2029"))


def go_json(value: Any, *, sort_keys: bool = False) -> str:
    """``json.Marshal``'s text of ``value``: compact, keys in the order given (``sort_keys``: as
    Go orders a map's), and ``<``, ``>``, ``&``, U+2028 and U+2029 escaped as Go escapes them."""
    text = json.dumps(value, sort_keys=sort_keys, separators=(",", ":"), ensure_ascii=False)
    for raw, escaped in _GO_ESCAPES:
        text = text.replace(raw, escaped)
    return text
