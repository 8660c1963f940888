"""kube's watch tracker (``util/flowcontrol/watch_tracker.go``): the watches open on this server,
counted by API group, resource, namespace and name, for the work estimate of a write
(:func:`~.estimating.mutating_estimate`).

A write may be seen by the watches of its whole resource, of its namespace and of its object: the
sum of those three counts (a read sees none). As in kube, a watch's label and field selectors are
not looked at (an event is filtered for every watch anyway), except the index kube's watch cache
keeps: a watch of pods selecting one ``spec.nodeName`` is left out, since only the pods of that
node reach it. Pure state, no I/O.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Final

from controlplane.apiserver.flowcontrol.estimating import exact_field, requested_name
from controlplane.apiserver.routing import RequestInfo

#: kube's ``readOnlyVerbs``: requests no watch sees.
_READ_ONLY: Final = frozenset({"get", "list", "watch", "proxy"})
#: kube's ``getBuiltinIndexes``: the resources whose watches the watch cache indexes, by field.
_INDEXED: Final = {"pods": "spec.nodeName"}

_Key = tuple[str, str, str, str]


class WatchCounts:
    """The watches open, by (group, resource, namespace, name); "" where a watch has none."""

    def __init__(self) -> None:
        self._counts: dict[_Key, int] = {}

    def register(self, info: RequestInfo, query: Mapping[str, str]) -> Callable[[], None]:
        """Count a watch from now; the returned function forgets it (call it once, when it ends)."""
        index = _INDEXED.get(info.resource)
        if index is not None and exact_field(query, index):
            return _nothing  # kube: only the watches without the index's value are counted
        key = (info.group, info.resource, info.namespace or "", requested_name(info, query) or "")
        self._counts[key] = self._counts.get(key, 0) + 1

        def forget() -> None:
            left = self._counts[key] - 1
            if left:
                self._counts[key] = left
            else:
                del self._counts[key]

        return forget

    def interested(self, info: RequestInfo, name: str | None) -> int:
        """The watches that may see a request's event (kube's ``GetInterestedWatchCount``)."""
        if info.verb in _READ_ONLY:
            return 0
        counts, group, resource = self._counts, info.group, info.resource
        count = counts.get((group, resource, "", ""), 0)
        if info.namespace:
            count += counts.get((group, resource, info.namespace, ""), 0)
        if name:
            count += counts.get((group, resource, info.namespace or "", name), 0)
        return count

    def __len__(self) -> int:
        return sum(self._counts.values())


def _nothing() -> None:
    return None
