"""The dispatcher's configuration, worked out from the FlowSchema and PriorityLevelConfiguration objects.

:func:`configuration` compiles the objects once per change (kube's config controller digests them
the same way): the schemas in matching order (``matchingPrecedence``, then name), those whose level
does not exist left out (they are ``Dangling``), and each level's limits. The bootstrap objects
(:mod:`controlplane.apis.kube.flowcontrol_bootstrap`) stand in for any that are not stored: the
leader's ensurer creates them again, and until it has, requests are served as they will be then.

Each Limited level gets ``ceil(total * nominalConcurrencyShares / sum of every level's shares)`` of
the server's concurrency as its nominal limit (none for 0 shares, as in kube: such a level serves
only the seats it borrows), with the bounds its
``lendablePercent`` and ``borrowingLimitPercent`` set on what :mod:`.borrowing` gives it; queues
and hand size from its ``queuing`` (a ``Reject`` level queues nothing), and for a level that queues
the most seats one request may take in it (:func:`~.estimating.level_max_seats`). Pure: no I/O.
"""

from __future__ import annotations

import math
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from controlplane.apis.kube.flowcontrol_bootstrap import FLOW_SCHEMAS, PRIORITY_LEVELS
from controlplane.apis.untyped import dig
from controlplane.apiserver.flowcontrol.borrowing import Bounds, bounds
from controlplane.apiserver.flowcontrol.estimating import level_max_seats
from controlplane.apiserver.flowcontrol.matching import RequestDigest, SchemaMatcher, schema_matcher
from controlplane.apiserver.flowcontrol.queueing import LevelLimits

#: Seconds a request may wait in its queue (kube: a quarter of the 60 s request timeout).
DEFAULT_QUEUE_WAIT_SECONDS: Final = 15.0
#: kube's ``--max-requests-inflight`` and ``--max-mutating-requests-inflight``: APF's total is their sum.
DEFAULT_MAX_REQUESTS_INFLIGHT: Final = 400
DEFAULT_MAX_MUTATING_REQUESTS_INFLIGHT: Final = 200
#: Classifications a configuration remembers (users x requests seen), at most.
KNOWN_CLASSIFICATIONS: Final = 4096
EXEMPT: Final = "exempt"
CATCH_ALL: Final = "catch-all"


@dataclass(frozen=True, slots=True)
class FlowControlConfig:
    #: The server's total concurrency (``--max-requests-inflight`` + ``--max-mutating-requests-inflight``);
    #: 0: no limit at all.
    total_concurrency: int
    queue_wait_seconds: float = DEFAULT_QUEUE_WAIT_SECONDS


@dataclass(frozen=True, slots=True)
class Classification:
    flow_schema: str
    level: str
    #: The flow's distinguisher within its level (the user's name, the namespace, or none).
    flow: str
    flow_schema_uid: str
    level_uid: str


@dataclass(frozen=True, slots=True)
class Level:
    name: str
    uid: str
    #: None: exempt (never limited).
    limits: LevelLimits | None
    #: Its nominal limit and the bounds of its current one (borrowing).
    bounds: Bounds
    #: The most seats one request takes in it (kube's ``MaxSeatsTracker``; 0: not set, a level
    #: that does not queue), before the estimators' own limit.
    max_seats: int = 0


def object_uid(kind: str, name: str) -> str:
    """A stable UID for a bootstrap object not stored yet (the same on every replica)."""
    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"https://gpufed.io/flowcontrol/{kind}/{name}"))


class Configuration:
    """The schemas in matching order and the levels, compiled from the objects."""

    def __init__(self, schemas: tuple[SchemaMatcher, ...], levels: Mapping[str, Level]) -> None:
        self.schemas = schemas
        self.levels = levels
        catch_all = next(s for s in schemas if s.name == CATCH_ALL)
        self._fallback = catch_all
        #: Classifications already made (a request like one seen before is not matched again);
        #: emptied when full, and gone with the configuration when the objects change.
        self._known: dict[RequestDigest, Classification] = {}

    def classify(self, request: RequestDigest) -> Classification:
        """The first schema ``request`` matches (kube's catch-all when none does)."""
        found = self._known.get(request)
        if found is None:
            if len(self._known) >= KNOWN_CLASSIFICATIONS:
                self._known.clear()
            found = self._known[request] = self._match(request)
        return found

    def _match(self, request: RequestDigest) -> Classification:
        for schema in self.schemas:
            if schema.matches(request):
                break
        else:
            schema = self._fallback
        level = self.levels[schema.level]
        return Classification(schema.name, level.name, schema.flow(request), schema.uid, level.uid)


def _with_bootstrap(stored: Iterable[dict[str, Any]], bootstrap: Mapping[str, dict[str, Any]]) -> list[dict[str, Any]]:
    objects = {str(obj["metadata"]["name"]): obj for obj in stored}
    for name, obj in bootstrap.items():
        if name not in objects:
            objects[name] = obj
    return list(objects.values())


def _uid(obj: dict[str, Any], kind: str) -> str:
    return str(dig(obj, "metadata", "uid") or object_uid(kind, str(obj["metadata"]["name"])))


def level_limits(spec: dict[str, Any], *, total: int, share_sum: int) -> LevelLimits:
    """A Limited level's seats, queues, hand size and queue length."""
    limited = spec.get("limited") or {}
    shares = int(limited.get("nominalConcurrencyShares") or 0)
    seats = math.ceil(total * shares / share_sum) if share_sum else 1
    queuing = dig(limited, "limitResponse", "queuing")
    if dig(limited, "limitResponse", "type") != "Queue" or not isinstance(queuing, dict):
        return LevelLimits(seats, queues=1, queue_length=0, hand_size=1)
    return LevelLimits(
        seats, queues=int(queuing.get("queues") or 1), queue_length=int(queuing.get("queueLengthLimit") or 0),
        hand_size=int(queuing.get("handSize") or 1),
    )


def level_bounds(spec: dict[str, Any], limits: LevelLimits | None, *, total: int, share_sum: int) -> Bounds:
    """A level's nominal limit and bounds (an exempt one's nominal limit from its own shares, default 0)."""
    if limits is None:
        exempt = spec.get("exempt") or {}
        shares = int(exempt.get("nominalConcurrencyShares") or 0)
        nominal = math.ceil(total * shares / share_sum) if share_sum else 0
        return bounds(nominal, int(exempt.get("lendablePercent") or 0), None, total=total)
    limited = spec.get("limited") or {}
    borrowing = limited.get("borrowingLimitPercent")
    return bounds(
        limits.seats, int(limited.get("lendablePercent") or 0), None if borrowing is None else int(borrowing),
        total=total,
    )


def configuration(
    flow_schemas: Iterable[dict[str, Any]], priority_levels: Iterable[dict[str, Any]], *, total: int
) -> Configuration:
    """The configuration the stored objects (and the bootstrap ones missing) make, over ``total`` seats."""
    level_objects = _with_bootstrap(priority_levels, PRIORITY_LEVELS)
    share_sum = 0
    for obj in level_objects:
        spec = obj.get("spec") or {}
        part = spec.get("limited") if spec.get("type") == "Limited" else spec.get("exempt")
        share_sum += int(dig(part, "nominalConcurrencyShares") or 0) if isinstance(part, dict) else 0
    levels: dict[str, Level] = {}
    for obj in level_objects:
        spec, name = obj.get("spec") or {}, str(obj["metadata"]["name"])
        limits = None if spec.get("type") == "Exempt" else level_limits(spec, total=total, share_sum=share_sum)
        levels[name] = Level(name, _uid(obj, "prioritylevelconfigurations"), limits, level_bounds(
            spec, limits, total=total, share_sum=share_sum,
        ), 0 if limits is None or limits.queue_length <= 0 else level_max_seats(limits.seats, limits.hand_size))
    schemas = [
        schema_matcher(obj, uid=_uid(obj, "flowschemas"))
        for obj in _with_bootstrap(flow_schemas, FLOW_SCHEMAS)
    ]
    ordered = sorted((s for s in schemas if s.level in levels), key=lambda s: (s.precedence, s.name))
    return Configuration(tuple(ordered), levels)


def bootstrap_configuration(total: int) -> Configuration:
    """The configuration of the bootstrap objects alone (before any is read from the store)."""
    return configuration((), (), total=total)
