"""The member agent's state, which its concerns share: the configuration, the two clients, the
informers, and the bookkeeping of capacity reports and of Works.

:class:`AgentBase` only holds that state; :class:`~member_agent.reporting.CapacityReporting` (capacity
reports, the member API probe, DCGM) and :class:`~member_agent.syncing.WorkSyncing` (applying Works
and writing their status) build on it, and :class:`member_agent.agent.Agent` joins them into the
running process.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from controlplane.apis import constants as c
from controlplane.apis.apienablements import Collected
from controlplane.lifecycle import Service
from member_agent import probing
from member_agent.capacity import PodRequests
from member_agent.claims import ClaimStates
from member_agent.collecting import EndpointSliceCollector
from member_agent.config import AgentConfig
from member_agent.draclaims import DraClaims
from member_agent.drift import AppliedVersions, DriftBackoff
from member_agent.electing import LeaderElector
from member_agent.holding import StatusHold
from member_agent.informing import Informer
from member_agent.interpreting import MemberInterpreters
from member_agent.kubeapi import KubeApi, KubeTransport
from member_agent.metrics import AgentMetrics, MetricsServer
from member_agent.nodetotals import NodeTotals
from member_agent.podstates import PendingPods
from member_agent.reachability import Reachability
from member_agent.reclaims import ReclaimLog
from member_agent.tunnel import AgentTunnel
from member_agent.unserved import UnservedRetries

WORK_API = f"/apis/{c.WORK_GROUP}/{c.VERSION}"
MAX_BACKOFF = 30.0
Clock = Callable[[], datetime]

#: How the agent gets its member client: :func:`member_agent.agent.member_api` (kubeconfig or
#: in-cluster), or an in-process client of a hollow member (``gpufed sim-fleet``), which sits
#: below this seam.
MemberClient = Callable[[AgentConfig], Awaitable[KubeTransport]]

#: A member kind as a Work's manifest names it: (apiVersion, kind).
Kind = tuple[str, str]


def utc_now() -> datetime:
    return datetime.now(UTC)


@dataclass(frozen=True, slots=True)
class KindWatch:
    """The informer on one member kind the Works hold, and the task that runs it."""

    informer: Informer
    task: asyncio.Task[None]


class AgentBase(Service):
    """The state of one member agent (see :mod:`member_agent.agent` for what it runs)."""

    def __init__(self, config: AgentConfig, *, clock: Clock, member_client: MemberClient) -> None:
        super().__init__(f"agent-{config.cluster_name}")
        self.config = config
        self.clock = clock
        #: Builds the member client (a hollow member's in-process one in a hollow fleet).
        self._member_client = member_client
        self.hub: KubeApi | None = None
        #: Whether the hub answers, logged once per change by every loop that talks to it.
        self.hub_reachability = Reachability("hub", config.hub)
        self.member: KubeTransport | None = None
        self.cluster: dict[str, Any] | None = None
        self.lease: dict[str, Any] | None = None
        self.last_status: dict[str, Any] | None = None
        self.reports_written = 0
        self.metrics = AgentMetrics(config.cluster_name)
        self.metrics_server: MetricsServer | None = None
        self.registered = asyncio.Event()
        self._report_due = asyncio.Event()
        self._work_due = asyncio.Event()
        self._dirty_works: set[str] = set()
        #: Works the periodic resync applies again, a few at a time after the Works events made dirty.
        self._resync_due: set[str] = set()
        #: Works whose status must be recomputed (a pod or workload object of theirs changed).
        self._status_dirty: set[str] = set()
        #: Works whose held status is due now (see :mod:`member_agent.holding`), and the timers.
        self._hold = StatusHold(config.status_hold)
        self._hold_timers: dict[str, asyncio.TimerHandle] = {}
        self._hold_over = False
        #: (namespace, kind, name) of every object a Work holds -> that Work's key.
        self._work_objects: dict[tuple[str, str, str], str] = {}
        self._work_index: dict[str, list[tuple[str, str, str]]] = {}
        #: The Work a member object (pod or workload) was last seen to belong to, by its key
        #: (``Pod:<namespace>/<name>``, or ``<informer name>:<object key>`` for the kinds Works
        #: hold), so its deletion still finds the Work.
        self._owner_of: dict[str, str] = {}
        self._watched_kinds: dict[Kind, KindWatch] = {}
        #: The kinds each Work held when it was last applied, and the Works holding each kind;
        #: a kind no Work holds is not watched.
        self._kinds_of_work: dict[str, frozenset[Kind]] = {}
        self._holders: dict[Kind, set[str]] = {}
        #: Work status passes made (every ``_refresh_work_status``), for tests and measurements.
        self.status_passes = 0
        self._group: asyncio.TaskGroup | None = None
        self._applied_generation: dict[str, int] = {}
        #: Works waiting for a kind the member does not serve yet (see :mod:`member_agent.unserved`).
        self._unserved = UnservedRetries()
        self._unserved_timers: dict[str, asyncio.TimerHandle] = {}
        #: What each apply answered, per object, and the repairs of drift in the member due
        #: (see :mod:`member_agent.drift`).
        self.applied_versions = AppliedVersions()
        self._drift_backoff = DriftBackoff()
        self._drift_timers: dict[str, asyncio.TimerHandle] = {}
        #: Per Work, its ``preserveResourcesOnDeletion`` as last seen on the hub: a deleted Work's
        #: objects are released rather than deleted when it was set (the hub clears it before
        #: deleting a Work whose cluster left the placement, and waits until this agent has
        #: applied that generation, whose flag the ledger then holds across restarts).
        self._preserve_on_deletion: dict[str, bool] = {}
        self._utilization: dict[str, list[dict[str, Any]]] | None = None
        self._utilization_time: str | None = None
        #: The requests of the pods the last capacity report read (by object identity).
        self._pod_requests = PodRequests()
        #: The node part of the capacity report, kept over the node informer's changes (a new
        #: one with each new node informer).
        self.node_totals = NodeTotals()
        self._kubernetes_version: str | None = None
        #: The APIs the member serves, as last gathered (None before the first pass), and the
        #: signal to gather them again now (a Work brought a CRD).
        self.api_enablements: Collected | None = None
        self._api_enablements_due = asyncio.Event()
        #: The member API's health by the probe; None until the member client exists.
        self.member_api_health: probing.MemberApiHealth | None = None
        self.nodes: Informer | None = None
        self.pods: Informer | None = None
        #: The member's DRA claims and claim templates (the GPUs pods hold through them).
        self.dra: DraClaims | None = None
        #: The pods no node holds yet, from the pod cache's changes (for the Works' status).
        self.pending_pods = PendingPods()
        #: Why claims that pods wait for are unbound, as the Works' status passes read them (the
        #: capacity report counts those pods as waiting for storage too); None before the first.
        self.claims: ClaimStates | None = None
        self.works: Informer | None = None
        #: The EndpointSlices the hub's MultiClusterServices collect from this cluster (set once the member is known).
        self.endpoint_slices: EndpointSliceCollector | None = None
        #: The hub's ResourceInterpreterCustomizations, and their member-side hooks in force.
        self.customizations: Informer | None = None
        self.interpreters = MemberInterpreters()
        #: Spot nodes and the pods workloads lost when one was reclaimed.
        self.reclaims = ReclaimLog()
        #: The cluster proxy's tunnel to the hub (``--enable-proxy``).
        self.tunnel: AgentTunnel | None = None
        #: This agent's candidacy for its cluster's leader Lease (``--leader-elect``).
        self.elector: LeaderElector | None = None
