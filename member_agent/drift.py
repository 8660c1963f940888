"""Drift in the member: an object a Work applied, deleted or edited there since, is applied again at once.

Karmada's work status controller does this on the member object's watch event: a deleted object
is recreated, and one whose version differs from the version recorded when it was applied is
updated (``ObjectWatcher.NeedsUpdate``: the version is the object's ``metadata.generation`` when
it has one, else its ``resourceVersion``). :class:`AppliedVersions` records that version from
each apply's answer; :func:`drifted` compares an object the watch sees with it. A generation
only grows, so an event older than the apply's answer (a generation below the recorded one) is
not drift; a resourceVersion is opaque, so any other one is.

An apply puts back only the fields the Work sets (it is a server-side apply, forced for the
agent's field manager): a label or annotation added in the member is kept, as Karmada's retain
step keeps them, and so are the fields a retention keeps (``retain-replicas``, a Kueue member's
suspend flag, a customization's ``retention``). An object whose ownership labels were removed
by hand looks deleted to the agent's label-selected watch: the apply then meets an object it does
not own, and ``conflictResolution`` decides (``Abort`` leaves it and says so).

A member fighting the agent (another controller rewriting a field the Work sets) would have it
apply in a loop: :class:`DriftBackoff` delays each repair of a Work after the first, doubling
up to :data:`MAX_DRIFT_DELAY`, and forgets a Work that has not drifted for
:data:`DRIFT_RESET` seconds.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

#: (API group, kind, namespace ("" for a cluster-scoped object), name).
ObjectRef = tuple[str, str, str, str]

#: The first repair after a quiet spell is at once; the next ones wait this, doubled each time.
FIRST_DRIFT_DELAY = 1.0
MAX_DRIFT_DELAY = 300.0
#: Seconds without a repair after which a Work's next one is at once again.
DRIFT_RESET = 600.0


def object_version(obj: Mapping[str, Any]) -> tuple[str, int | str]:
    """Karmada's object version: ``("gen", generation)`` when the object has one, else
    ``("rv", resourceVersion)``."""
    metadata = obj.get("metadata") or {}
    generation = metadata.get("generation")
    if isinstance(generation, int) and generation > 0:
        return ("gen", generation)
    return ("rv", str(metadata.get("resourceVersion") or ""))


def drifted(recorded: tuple[str, int | str], live: Mapping[str, Any]) -> bool:
    """Whether ``live`` was changed in the member since the apply that ``recorded`` its version."""
    current = object_version(live)
    if current[0] == "gen" and recorded[0] == "gen":
        return int(current[1]) > int(recorded[1])
    return current != recorded


class AppliedVersions:
    """The version of each object as the agent's last apply of it answered (this process's)."""

    __slots__ = ("_versions",)

    def __init__(self) -> None:
        self._versions: dict[ObjectRef, tuple[str, int | str]] = {}

    def applied(self, ref: ObjectRef, answer: Mapping[str, Any]) -> None:
        self._versions[ref] = object_version(answer)

    def forget(self, ref: ObjectRef) -> None:
        """The agent removes the object (pruned, or its Work deleted): its going is no drift."""
        self._versions.pop(ref, None)

    def get(self, ref: ObjectRef) -> tuple[str, int | str] | None:
        return self._versions.get(ref)


class DriftBackoff:
    """How long to wait before repairing a Work's drift (see the module's docstring)."""

    __slots__ = ("_repairs",)

    def __init__(self) -> None:
        #: Per Work: repairs in the current spell, and when the last one was due.
        self._repairs: dict[str, tuple[int, float]] = {}

    def delay(self, key: str, *, now: float) -> float:
        count, last = self._repairs.get(key, (0, now))
        if now - last >= DRIFT_RESET:
            count = 0
        wait = 0.0 if count == 0 else min(MAX_DRIFT_DELAY, FIRST_DRIFT_DELAY * 2 ** (count - 1))
        self._repairs[key] = (count + 1, now + wait)
        return wait

    def forget(self, key: str) -> None:
        self._repairs.pop(key, None)
