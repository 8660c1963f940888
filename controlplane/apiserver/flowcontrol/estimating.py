"""kube's work estimate of a request (``request/width.go`` and its estimators): the seats it takes
in its priority level while it runs (its width), and for a write the seats it keeps, and for how
long, after it finishes, for the watchers it notifies.

* A LIST takes one seat per 100 objects it is estimated to go through, at least 1 and at most the
  level's maximum (kube's ``listWorkEstimator``): the objects of its resource the server holds (the
  watch cache's count, of every namespace, as kube's object-count tracker keeps it): all of them
  for a list served from the cache (``resourceVersion=0``), twice its ``limit`` (or twice every
  object) for one read from the store, and the count plus the limit for a selector read from the
  store. A resource whose count is unknown (not cached) takes one seat, as kube gives an unknown
  count; a list of one name (``fieldSelector=metadata.name=...``) one seat.
* A WATCH takes one seat while it starts (the middleware holds it until its initial events are
  sent); one with ``sendInitialEvents=true`` is estimated as a LIST served from the cache.
* A create, update, patch or delete takes one seat, and when 10 or more watches may see its event
  (:class:`~.counting.WatchCounts`) kube's ``mutatingWorkEstimator`` keeps ``ceil(watches / 10)``
  seats (at most the level's maximum) for ``watches x 5 ms / those seats`` after it finishes: the
  work of sending the event, accounted in the level without delaying the answer.
* Every other request takes one seat.

A level's maximum is kube's ``max(1, min(ceil(15 % of its nominal limit), nominal limit / handSize))``
for a level that queues, at most 10 (:func:`level_max_seats`). Pure: no I/O.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Final

from controlplane.apiserver.queryparams import query_optional_bool
from controlplane.apiserver.routing import RequestInfo

#: kube's ``DefaultWorkEstimatorConfig``: ``minimumSeats``, ``maximumSeatsLimit`` (of LISTs and
#: writes alike), ``objectsPerSeat``, ``watchesPerSeat`` and ``eventAdditionalDuration``.
MINIMUM_SEATS: Final = 1
MAXIMUM_SEATS: Final = 10
OBJECTS_PER_SEAT: Final = 100.0
WATCHES_PER_SEAT: Final = 10.0
EVENT_ADDITIONAL_SECONDS: Final = 0.005
#: kube's ``priorityLevelMaxSeatsPercent``.
LEVEL_MAX_SEATS_FRACTION: Final = 0.15
_MUTATING: Final = frozenset({"create", "update", "patch", "delete"})

#: The objects a resource (group, plural) holds; None: not known.
ObjectCount = Callable[[str, str], int | None]
#: The watches that may see a write (its request info and its object's name, if known).
WatchCount = Callable[[RequestInfo, str | None], int]


@dataclass(frozen=True, slots=True)
class WorkEstimate:
    """kube's ``WorkEstimate``: the seats a request takes while it runs, the seats it keeps after
    it finishes and for how many seconds."""

    initial_seats: int = MINIMUM_SEATS
    final_seats: int = 0
    additional_latency: float = 0.0

    @property
    def max_seats(self) -> int:
        """The seats held from its start until the end of its additional latency."""
        return max(self.initial_seats, self.final_seats)


ONE_SEAT: Final = WorkEstimate()


def level_max_seats(nominal: int, hand_size: int) -> int:
    """The most seats one request takes in a level that queues (kube's ``MaxSeatsTracker``, before
    the estimators' own limit of 10)."""
    return max(1, min(math.ceil(nominal * LEVEL_MAX_SEATS_FRACTION), nominal // max(hand_size, 1)))


def seats_limit(level_max: int) -> int:
    """The estimators' limit for a level: its maximum, none (0) or above 10 being 10."""
    return MAXIMUM_SEATS if level_max <= 0 or level_max > MAXIMUM_SEATS else level_max


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


def list_seats(
    stored: int | None, query: Mapping[str, str], *, maximum: int = MAXIMUM_SEATS, from_cache: bool = False
) -> int:
    """The seats of a LIST of a resource holding ``stored`` objects (``from_cache``: a watch's
    initial events, which the cache serves)."""
    if stored is None:
        return MINIMUM_SEATS
    limit = _int(query.get("limit"))
    limit = limit if 0 < limit < stored else stored
    if from_cache or not lists_from_storage(query):
        objects = stored
    elif query.get("labelSelector") or query.get("fieldSelector"):
        objects = stored + limit
    else:
        objects = 2 * limit
    return min(max(math.ceil(objects / OBJECTS_PER_SEAT), MINIMUM_SEATS), maximum)


def mutating_estimate(watches: int, *, maximum: int = MAXIMUM_SEATS) -> WorkEstimate:
    """kube's ``mutatingWorkEstimator`` for a write ``watches`` watches may see: each takes a tenth
    of a seat for 5 ms, reshaped to at most ``maximum`` seats for longer (the same seat-seconds)."""
    if watches < WATCHES_PER_SEAT:
        return ONE_SEAT
    final_seats = math.ceil(watches / WATCHES_PER_SEAT)
    final_work = final_seats * EVENT_ADDITIONAL_SECONDS
    final_seats = min(final_seats, maximum)
    return WorkEstimate(MINIMUM_SEATS, final_seats, final_work / final_seats)


def exact_field(query: Mapping[str, str], field: str) -> str | None:
    """The value ``fieldSelector`` requires ``field`` to equal (kube's ``RequiresExactMatch``), if any."""
    for term in (query.get("fieldSelector") or "").split(","):
        key, equals, value = term.partition("=")
        if equals and key.strip() == field and not key.endswith("!"):
            return value.removeprefix("=").strip()
    return None


def requested_name(info: RequestInfo, query: Mapping[str, str]) -> str | None:
    """The object a request names: in its path, or a list's or watch's ``metadata.name`` field
    selector (kube's RequestInfo takes it as the name)."""
    if info.name:
        return info.name
    if info.verb in ("list", "watch"):
        name = exact_field(query, "metadata.name")
        if name and name not in (".", "..") and "/" not in name and "%" not in name:
            return name
    return None


def request_estimate(
    info: RequestInfo | None, query: Mapping[str, str], *, objects: ObjectCount | None, watches: WatchCount,
    level_max: int = 0, observe_watches: Callable[[int], None] | None = None,
) -> WorkEstimate:
    """A request's estimate in a level whose maximum is ``level_max`` (0: none);
    ``observe_watches`` is given the watch count of each write (kube's ``watch_count_samples``)."""
    if info is None or not info.is_resource:
        return ONE_SEAT
    maximum = seats_limit(level_max)
    if info.verb in ("list", "watch"):
        if requested_name(info, query) is not None or objects is None:
            return ONE_SEAT
        if info.verb == "watch" and query_optional_bool(query, "sendInitialEvents") is not True:
            return ONE_SEAT
        stored = objects(info.group, info.resource)
        return WorkEstimate(list_seats(stored, query, maximum=maximum, from_cache=info.verb == "watch"))
    if info.verb in _MUTATING:
        if info.resource == "serviceaccounts" and info.subresource == "token":
            return ONE_SEAT  # kube: a token request notifies no watcher
        count = watches(info, requested_name(info, query))
        if observe_watches is not None:
            observe_watches(count)
        return mutating_estimate(count, maximum=maximum)
    return ONE_SEAT


def _int(value: str | None) -> int:
    try:
        return int(value) if value else 0
    except ValueError:
        return 0
