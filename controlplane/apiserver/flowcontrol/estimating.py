"""kube's work estimate of a request: the seats it takes in its priority level (its width).

A LIST takes one seat per 100 objects it is estimated to go through, at least 1 and at most 10
(kube's ``listWorkEstimator``): the objects of its resource the server holds (the watch cache's
count, of every namespace, as kube's object-count tracker keeps it): all of them for a list served
from the cache (``resourceVersion=0``), twice its ``limit`` (or twice every object) for one read
from the store, and the count plus the limit for a selector read from the store. A resource whose count is unknown (not cached)
takes one seat, as kube gives an unknown count. Every other request takes one seat (the hub's
watches take none, see the middleware).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Final

from controlplane.apiserver.routing import RequestInfo

#: kube's ``DefaultWorkEstimatorConfig``.
MINIMUM_SEATS: Final = 1
MAXIMUM_SEATS: Final = 10
OBJECTS_PER_SEAT: Final = 100.0

#: The objects a resource (group, plural) holds; None: not known.
ObjectCount = Callable[[str, str], int | None]


def lists_from_storage(query: Mapping[str, str]) -> bool:
    """kube's ``shouldListFromStorage`` as the hub serves lists: a consistent list (no
    ``resourceVersion``) reads the store, as in kube without ``ConsistentListFromCache``."""
    resource_version = query.get("resourceVersion", "")
    match = query.get("resourceVersionMatch", "")
    limit = _int(query.get("limit"))
    has_limit = limit > 0 and resource_version != "0"
    legacy_exact = limit > 0 and match == "" and resource_version != ""
    unsupported_match = (match not in ("", "NotOlderThan")) or legacy_exact
    return resource_version == "" or bool(query.get("continue")) or has_limit or unsupported_match


def list_seats(stored: int | None, query: Mapping[str, str], *, maximum: int = MAXIMUM_SEATS) -> int:
    """The seats of a LIST of a resource holding ``stored`` objects."""
    if stored is None:
        return MINIMUM_SEATS
    limit = _int(query.get("limit"))
    limit = limit if 0 < limit < stored else stored
    if not lists_from_storage(query):
        objects = stored
    elif query.get("labelSelector") or query.get("fieldSelector"):
        objects = stored + limit
    else:
        objects = 2 * limit
    return min(max(math.ceil(objects / OBJECTS_PER_SEAT), MINIMUM_SEATS), maximum)


def request_seats(info: RequestInfo | None, query: Mapping[str, str], count: ObjectCount) -> int:
    """A request's width: :func:`list_seats` for a LIST of a resource, one seat otherwise."""
    if info is None or info.verb != "list" or not info.is_resource:
        return MINIMUM_SEATS
    return list_seats(count(info.group, info.resource), query)


def _int(value: str | None) -> int:
    try:
        return int(value) if value else 0
    except ValueError:
        return 0
