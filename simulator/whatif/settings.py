"""What a what-if run is given: its :class:`Settings` and the progress callback.

Shared by the engine (:mod:`simulator.whatif.engine`) and its replay pass
(:mod:`simulator.whatif.replay`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from controlplane.admission.core.fairsharing import DEFAULT_PREEMPTION_STRATEGIES, PreemptionStrategy
from controlplane.reports.classify import DEFAULT_THRESHOLD
from policies.models import Placement
from simulator.whatif.member import MemberScoring
from simulator.whatif.quotas import Quotas

Progress = Callable[[str, int, int], None]
"""``progress(phase, done, total)``, called every few hundred jobs."""

PROGRESS_EVERY = 250


@dataclass(frozen=True)
class Settings:
    seed: int = 0
    #: The fill stops once arrived GPU demand reaches this multiple of capacity (at least 1.3).
    inflate: float = 1.3
    #: Member scoring for every cluster; None keeps each cluster profile's ``simulation.scoring``.
    scoring: MemberScoring | None = None
    placement: Placement | None = None
    #: kube's percentageOfNodesToScore for the members: 0 is kube's adaptive default, 100
    #: scores every feasible node (as the FGD paper's simulator does).
    percentage_of_nodes_to_score: int = 0
    utilization_threshold: float = DEFAULT_THRESHOLD
    #: Run the replay pass (off for allocation-only runs such as the paper validation).
    replay: bool = True
    #: Kueue quotas the replay admits jobs through (None: every job is placed on arrival).
    quotas: Quotas | None = None
    #: With quotas: the admission modes replayed, the first for the strategy's own figures.
    fair_sharing: tuple[bool, ...] = (False,)
    #: With fair sharing: when a job of another queue may be preempted (Kueue's
    #: ``fairSharing.preemptionStrategies``, the hub's ``--kueue-fair-sharing-preemption-strategies``).
    fair_sharing_preemption_strategies: tuple[PreemptionStrategy, ...] = DEFAULT_PREEMPTION_STRATEGIES

