"""The scheduler's own placement writes, recognised when their watch events come back (issue 19).

Writing a decision changes the binding's spec, so its generation, and the watch event of that
write queued the binding again: a fresh read from etcd and a decision that changed nothing.
:class:`OwnPlacements` lets exactly that event pass, by resourceVersion. The reconcile that
writes a placement opens a window for its binding (:meth:`~OwnPlacements.begin`): a
generation-changing event that comes while it is open is held, and one that comes after it
(:meth:`~OwnPlacements.end`) is compared with the resourceVersion written. Held events of any
other resourceVersion queue the binding once the write is done; the write's own event queues
nothing, whether it came before the write returned (the hub's watch cache may hand it out
first) or after. A change by anyone else, whenever it comes, is decided.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from controlplane.apis.work_v1alpha1 import BindingKey


class OwnPlacements:
    """Per binding, the placement write in flight (with the events held meanwhile), or the
    resourceVersion of the last one when its event is still to come."""

    def __init__(self) -> None:
        self._held: dict[BindingKey, list[str]] = {}
        self._written: dict[BindingKey, str] = {}

    def is_own(self, key: BindingKey, resource_version: object) -> bool:
        """Whether the generation-changing event of ``key`` at ``resource_version`` needs no
        reconcile now: it is this scheduler's own write, or a write is in flight (the event is
        then held and judged when the write is done)."""
        held = self._held.get(key)
        if held is not None:
            held.append(str(resource_version))
            return True
        written = self._written.pop(key, None)
        return written is not None and written == str(resource_version)

    def begin(self, key: BindingKey) -> None:
        """A placement write of ``key`` starts: its generation-changing events are held."""
        self._held[key] = []

    def end(self, key: BindingKey, stored: Mapping[str, Any] | None) -> bool:
        """The write is done (``stored``: the binding as its spec write stored it, None when the
        spec was not written). Whether an event held meanwhile was another write's: then the
        binding must be decided again."""
        held = self._held.pop(key, [])
        version = str((stored.get("metadata") or {}).get("resourceVersion")) if stored is not None else None
        if version is not None and version not in held:
            self._written[key] = version  # its event is still to come
        return any(v != version for v in held)

    def forget(self, key: BindingKey) -> None:
        self._held.pop(key, None)
        self._written.pop(key, None)
