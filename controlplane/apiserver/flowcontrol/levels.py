"""Priority levels and flow schemas: which level serves a request, and as whose flow.

A simplified form of kube-apiserver's API Priority and Fairness defaults, fixed in code
(no FlowSchema or PriorityLevelConfiguration objects). Flow schemas in matching order:

========================  ==================  ==============================================
flow schema               priority level      matches (flow = the user's name)
========================  ==================  ==============================================
``exempt``                ``exempt``          ``system:masters`` (admin tokens): never limited
``system-agents``         ``system``          member agents (``system:gpufed:agents``): their
                                              leases, Cluster status reports, Work status
``leader-election``       ``workload-high``   get/create/update/patch of ``coordination.k8s.io``
                                              leases by other users (electors)
``global-default``        ``global-default``  every other authenticated user
``catch-all``             ``catch-all``       anything else (unauthenticated)
========================  ==================  ==============================================

Each limited level gets ``ceil(total * share / sum of shares)`` of the server's total
concurrency (``--max-requests-inflight``), as kube computes its nominal concurrency limits.
"""

from __future__ import annotations

import math
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Final

from controlplane.apiserver.identity import AGENTS, AUTHENTICATED, SYSTEM_MASTERS, UserInfo


class Level(StrEnum):
    EXEMPT = "exempt"
    SYSTEM = "system"
    WORKLOAD_HIGH = "workload-high"
    GLOBAL_DEFAULT = "global-default"
    CATCH_ALL = "catch-all"


#: kube's default nominalConcurrencyShares for the levels kept here.
DEFAULT_SHARES: Final[Mapping[Level, int]] = {
    Level.SYSTEM: 30,
    Level.WORKLOAD_HIGH: 40,
    Level.GLOBAL_DEFAULT: 20,
    Level.CATCH_ALL: 5,
}
#: Queues per level a flow is hashed into, and requests one queue holds (kube's defaults
#: for global-default: 128 queues of 50; fewer queues here, no shuffle sharding).
DEFAULT_QUEUES: Final = 64
DEFAULT_QUEUE_LENGTH: Final = 50
#: Seconds a request may wait in its queue (kube: a quarter of the 60 s request timeout).
DEFAULT_QUEUE_WAIT_SECONDS: Final = 15.0

_LEASE_VERBS = frozenset({"get", "create", "update", "patch"})


@dataclass(frozen=True, slots=True)
class FlowControlConfig:
    #: The server's total concurrency (``--max-requests-inflight``); 0: no limit at all.
    total_concurrency: int
    shares: Mapping[Level, int] = field(default_factory=lambda: dict(DEFAULT_SHARES))
    queues: int = DEFAULT_QUEUES
    #: 0: no queueing, a request beyond the level's seats is rejected at once.
    queue_length: int = DEFAULT_QUEUE_LENGTH
    queue_wait_seconds: float = DEFAULT_QUEUE_WAIT_SECONDS

    def seats(self) -> dict[Level, int]:
        """Each limited level's concurrency limit (at least 1)."""
        total_shares = sum(self.shares.values()) or 1
        return {
            level: max(1, math.ceil(self.total_concurrency * share / total_shares))
            for level, share in self.shares.items()
        }


@dataclass(frozen=True, slots=True)
class Classification:
    flow_schema: str
    level: Level
    #: The flow's distinguisher within its level (the user's name).
    flow: str

    @property
    def flow_schema_uid(self) -> str:
        uid = _FLOW_SCHEMA_UIDS.get(self.flow_schema)
        return uid if uid is not None else object_uid("flowschemas", self.flow_schema)

    @property
    def level_uid(self) -> str:
        return _LEVEL_UIDS[self.level]


def object_uid(kind: str, name: str) -> str:
    """A stable UID for a built-in flow schema or priority level (same on every replica)."""
    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"https://gpufed.io/flowcontrol/{kind}/{name}"))


#: The built-in flow schemas (:func:`classify`'s) and levels, whose UIDs every response names:
#: worked out once rather than a uuid5 per request.
FLOW_SCHEMAS: Final = ("exempt", "system-agents", "leader-election", "global-default", "catch-all")
_FLOW_SCHEMA_UIDS: Final = {name: object_uid("flowschemas", name) for name in FLOW_SCHEMAS}
_LEVEL_UIDS: Final = {level: object_uid("prioritylevelconfigurations", level.value) for level in Level}


def classify(
    user: UserInfo | None, *, verb: str | None, group: str | None, resource: str | None
) -> Classification:
    """The flow schema, priority level and flow of a request by ``user`` (None: unauthenticated)."""
    if user is None:
        return Classification("catch-all", Level.CATCH_ALL, "")
    groups = user.groups
    if SYSTEM_MASTERS in groups:
        return Classification("exempt", Level.EXEMPT, user.name)
    if AGENTS in groups:
        return Classification("system-agents", Level.SYSTEM, user.name)
    if group == "coordination.k8s.io" and resource == "leases" and verb in _LEASE_VERBS:
        return Classification("leader-election", Level.WORKLOAD_HIGH, user.name)
    if AUTHENTICATED in groups:
        return Classification("global-default", Level.GLOBAL_DEFAULT, user.name)
    return Classification("catch-all", Level.CATCH_ALL, user.name)


def parse_shares(text: str) -> dict[Level, int]:
    """``system=30,global-default=10``: the defaults with the levels named changed.

    Raises ValueError naming what is wrong."""
    shares = dict(DEFAULT_SHARES)
    for item in filter(None, (part.strip() for part in text.split(","))):
        name, sep, value = item.partition("=")
        try:
            level = Level(name.strip())
        except ValueError:
            level = None
        if level is None or level is Level.EXEMPT:
            limited = ", ".join(lv.value for lv in DEFAULT_SHARES)
            raise ValueError(f"unknown priority level {name.strip()!r}; the limited levels are {limited}")
        if not sep or not value.strip().isdigit() or int(value) < 1:
            raise ValueError(f"expected LEVEL=SHARES with whole SHARES >= 1, not {item!r}")
        shares[level] = int(value)
    return shares
