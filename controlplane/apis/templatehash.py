"""The short hash kube's controllers name a template's children by (``pod-template-hash``,
``controller-revision-hash``), in one home for the hub's rollout history and the simulated members.

In: a template (or any JSON value) and an optional collision count. Out: up to 10 characters of
kube's safe alphabet. Pure.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Final

#: kube's ``rand.SafeEncodeString`` alphabet: no vowels, no characters that look alike.
SAFE_ALPHABET: Final = "bcdfghjklmnpqrstvwxz2456789"
_FNV32_OFFSET: Final = 0x811C9DC5
_FNV32_PRIME: Final = 0x01000193


def template_hash(template: Mapping[str, Any], *, collision_count: int | None = None) -> str:
    """A stable short hash of a pod template, made as kube's ``controller.ComputeHash``:
    FNV-32a (over the canonical JSON of the template, then the collision count), its
    decimal digits mapped to kube's safe alphabet (``rand.SafeEncodeString``), so up to
    10 characters such as ``6d9f7b8c5``. Kube hashes the Go struct's dump, so the value
    differs from a real cluster's for the same template; its shape and stability do not."""
    data = json.dumps(template, sort_keys=True, separators=(",", ":")).encode()
    if collision_count is not None:
        data += str(collision_count).encode()
    value = _FNV32_OFFSET
    for byte in data:
        value = ((value ^ byte) * _FNV32_PRIME) & 0xFFFFFFFF
    return "".join(SAFE_ALPHABET[ord(ch) % len(SAFE_ALPHABET)] for ch in str(value))
