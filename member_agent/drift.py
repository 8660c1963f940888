"""Drift in the member: an object a Work applied, deleted or edited there since, is applied again at once.

Karmada's work status controller does this on the member object's watch event: a deleted object
is recreated, and one whose version differs from the version recorded when it was applied is
updated (``ObjectWatcher.NeedsUpdate``: the version is the object's ``metadata.generation`` when
it has one, else its ``resourceVersion``; here, else the digest of its content). :class:`AppliedVersions` records that version from
each apply's answer; :func:`drifted` compares an object the watch sees with it. A generation
only grows, so an event older than the apply's answer (a generation below the recorded one) is
not drift; any other content digest is.

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

import hashlib
from collections.abc import Mapping
from typing import Any

import orjson

#: (API group, kind, namespace ("" for a cluster-scoped object), name).
ObjectRef = tuple[str, str, str, str]

#: The first repair after a quiet spell is at once; the next ones wait this, doubled each time.
FIRST_DRIFT_DELAY = 1.0
MAX_DRIFT_DELAY = 300.0
#: Seconds without a repair after which a Work's next one is at once again.
DRIFT_RESET = 600.0


#: Where the member watch's trimmed copy of an object without a generation keeps
#: :func:`content_digest` (its ``resourceVersion`` would move with every write, a status or an
#: annotation of another controller's, each taken for drift).
CONTENT_DIGEST = "contentDigest"


def content_digest(obj: Mapping[str, Any]) -> str:
    """What an object without a generation holds besides its metadata and status (a ConfigMap's
    data, a Service's spec), as a digest: what an edit by hand of what a Work sets changes."""
    content = {k: v for k, v in obj.items() if k not in ("apiVersion", "kind", "metadata", "status")}
    return hashlib.blake2b(orjson.dumps(content, option=orjson.OPT_SORT_KEYS), digest_size=8).hexdigest()


def object_version(obj: Mapping[str, Any]) -> tuple[str, int | str]:
    """Karmada's object version: ``("gen", generation)`` when the object has one, else, where
    Karmada takes the ``resourceVersion``, the digest of its content (:func:`content_digest`;
    read from :data:`CONTENT_DIGEST` in the watch's trimmed copy), so a write of another
    controller's to its metadata or status is no drift."""
    metadata = obj.get("metadata") or {}
    generation = metadata.get("generation")
    if isinstance(generation, int) and generation > 0:
        return ("gen", generation)
    digest = obj.get(CONTENT_DIGEST)
    return ("content", digest if isinstance(digest, str) else content_digest(obj))


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
