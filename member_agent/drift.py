"""Drift in the member: an object a Work applied, deleted or edited there since, is applied again at once.

Karmada's work status controller does this on the member object's watch event: a deleted object
is recreated, and one whose version differs from the version recorded when it was applied is
updated (``ObjectWatcher.NeedsUpdate``: the version is the object's ``metadata.generation`` when
it has one, else its ``resourceVersion``; here, else the digest of its content), and so is one
whose labels or annotations differ from those the Work sets (Karmada's
``objectMetaObjectEquivalent``; a metadata edit moves no generation). :class:`AppliedVersions`
records that version, and the labels and annotations the Work set, from each apply's answer;
:func:`drifted` compares an object the watch sees with them. An event older than the apply's
answer (a generation below the recorded one, or an earlier ``resourceVersion``) is not drift.

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
from dataclasses import dataclass
from typing import Any

import orjson

#: (API group, kind, namespace ("" for a cluster-scoped object), name).
ObjectRef = tuple[str, str, str, str]
#: ``("gen", generation)`` or ``("content", digest)``: :func:`object_version`.
Version = tuple[str, int | str]

#: The first repair after a quiet spell is at once; the next ones wait this, doubled each time.
FIRST_DRIFT_DELAY = 1.0
MAX_DRIFT_DELAY = 300.0
#: Seconds without a repair after which a Work's next one is at once again.
DRIFT_RESET = 600.0


#: Where the member watch's trimmed copy of an object without a generation keeps
#: :func:`content_digest` (its ``resourceVersion`` would move with every write, a status or an
#: annotation of another controller's, each taken for drift).
CONTENT_DIGEST = "contentDigest"


#: Where the member watch's trimmed copy keeps :func:`annotation_digests` (an annotation may be
#: large; a digest of its value tells an edit; labels are short and kept as they are).
ANNOTATION_DIGESTS = "annotationDigests"


def _digest(value: object) -> str:
    return hashlib.blake2b(orjson.dumps(value, option=orjson.OPT_SORT_KEYS), digest_size=8).hexdigest()


def annotation_digests(obj: Mapping[str, Any]) -> dict[str, str]:
    """Each annotation of ``obj``, to the digest of its value."""
    annotations = (obj.get("metadata") or {}).get("annotations")
    if not isinstance(annotations, Mapping):
        return {}
    return {str(key): _digest(value) for key, value in annotations.items()}


def _labels(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    labels = (obj.get("metadata") or {}).get("labels")
    return labels if isinstance(labels, Mapping) else {}


def content_digest(obj: Mapping[str, Any]) -> str:
    """What an object without a generation holds besides its metadata and status (a ConfigMap's
    data, a Service's spec), as a digest: what an edit by hand of what a Work sets changes."""
    return _digest({k: v for k, v in obj.items() if k not in ("apiVersion", "kind", "metadata", "status")})


def object_version(obj: Mapping[str, Any]) -> Version:
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


def _resource_version(obj: Mapping[str, Any]) -> int | None:
    value = (obj.get("metadata") or {}).get("resourceVersion")
    return int(value) if isinstance(value, str) and value.isdigit() else None


@dataclass(frozen=True, slots=True)
class Applied:
    """What the agent's last apply of an object answered: its version, its ``resourceVersion``
    (when a number, as every member's is in practice), and the labels and the annotations'
    digests the Work set (as the answer has them, for the keys the applied manifest has)."""

    version: Version
    resource_version: int | None
    labels: Mapping[str, Any]
    annotations: Mapping[str, str]


def drifted(recorded: Applied, live: Mapping[str, Any]) -> bool:
    """Whether ``live`` was changed in the member since the apply that ``recorded`` it."""
    live_rv = _resource_version(live)
    if live_rv is not None and recorded.resource_version is not None and live_rv < recorded.resource_version:
        return False  # an event from before the apply's answer
    current = object_version(live)
    if current[0] == "gen" and recorded.version[0] == "gen":
        if int(current[1]) < int(recorded.version[1]):
            return False
        if int(current[1]) > int(recorded.version[1]):
            return True
    elif current != recorded.version:
        return True
    labels = _labels(live)
    if any(labels.get(key) != value for key, value in recorded.labels.items()):
        return True
    if not recorded.annotations:
        return False
    digests = live.get(ANNOTATION_DIGESTS)
    if not isinstance(digests, Mapping):
        digests = annotation_digests(live)
    return any(digests.get(key) != digest for key, digest in recorded.annotations.items())


class AppliedVersions:
    """What the agent's last apply of each object answered (this process's): :class:`Applied`."""

    __slots__ = ("_versions",)

    def __init__(self) -> None:
        self._versions: dict[ObjectRef, Applied] = {}

    def applied(
        self, ref: ObjectRef, answer: Mapping[str, Any], manifest: Mapping[str, Any] | None = None
    ) -> None:
        """Record the apply of ``manifest`` (the labels and annotations it sets are compared
        from now on; none when not given) that ``answer`` answered."""
        sets = (manifest or {}).get("metadata") or {}
        labels, annotations = _labels(answer), annotation_digests(answer)
        self._versions[ref] = Applied(
            object_version(answer),
            _resource_version(answer),
            {key: labels[key] for key in sets.get("labels") or () if key in labels},
            {key: annotations[key] for key in sets.get("annotations") or () if key in annotations},
        )

    def forget(self, ref: ObjectRef) -> None:
        """The agent removes the object (pruned, or its Work deleted): its going is no drift."""
        self._versions.pop(ref, None)

    def get(self, ref: ObjectRef) -> Applied | None:
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
