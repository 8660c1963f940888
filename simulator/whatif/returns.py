"""Automatic returns to a cheaper tier in the what-if replay (the ``gpufed-rebalance`` strategy).

``gpufed-rebalance`` places jobs exactly as ``gpufed`` does and, in the replay, also does what
the hub's ``tieredOverflow.rebalance`` does for a running Deployment: when a job leaves a
cluster (a member's report would show more free GPUs), every running job outside its cheapest
cluster is offered to the hub's own pure core,
:func:`controlplane.scheduler.core.returning.propose_return`, with the policy's settings
(minimum saving per hour, minimum interval since the job's last move, surge budget). A job is
a one-replica binding: the move adds its replica in the cheaper member, then removes it from
the expensive one. In virtual time a pod is ready the moment the member binds it, so both
happen at the same instant and the job keeps its end time (a service's replicas are
interchangeable: no work is lost or repeated). Jobs waiting for room are tried first; a
return only takes room nothing waits for.

The strategy (:class:`~simulator.whatif.strategies.ReturningGpufedStrategy`) makes the moves;
this module holds what they produce: :class:`Returned` per move, the replay's
:class:`ReturnTally`, and which running jobs a freed cluster is worth offering. Pure; no I/O.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from controlplane.scheduler.core.returning import Move
from simulator.whatif.member import Placed


@dataclass(frozen=True)
class Returned:
    """``job`` moved as ``move`` says; ``placed`` is where it runs now."""

    job: str
    move: Move
    placed: Placed


@dataclass
class ReturnTally:
    """What a replay's returns did: moves, replicas and GPUs moved, the saving they promised."""

    moves: int = 0
    replicas_moved: int = 0
    gpus_moved: float = 0.0
    #: The sum of every move's saving per hour times the hours its job still ran after it.
    estimated_saving_usd: float = 0.0
    by_route: dict[str, int] = field(default_factory=dict)

    def count(self, move: Move, *, gpus: float, hours_left: float) -> None:
        self.moves += 1
        self.replicas_moved += move.replicas
        self.gpus_moved += gpus * move.replicas
        self.estimated_saving_usd += move.saving_per_hour * hours_left
        route = f"{move.source} -> {move.target}"
        self.by_route[route] = self.by_route.get(route, 0) + move.replicas

    def to_json(self) -> dict[str, Any]:
        return {
            "moves": self.moves,
            "replicas_moved": self.replicas_moved,
            "gpus_moved": round(self.gpus_moved, 3),
            "estimated_saving_usd": round(self.estimated_saving_usd, 2),
            "by_route": dict(sorted(self.by_route.items())),
        }


def return_candidates(
    running: Mapping[str, str], order: Mapping[str, tuple[int, float]], freed: Iterable[str]
) -> list[str]:
    """Jobs (name -> cluster) running in a cluster ranked above some freed cluster (``order``:
    the rank returns use, tier then price band, from
    :func:`~controlplane.scheduler.core.returning.return_order`), worst-ranked cluster first,
    then by name: the ones a return into the freed room could save on."""
    ranks = [order[name] for name in freed if name in order]
    if not ranks:
        return []
    cheapest_freed = min(ranks)
    out = [(order[c], job) for job, c in running.items() if c in order and order[c] > cheapest_freed]
    return [job for _, job in sorted(out, key=lambda item: (-item[0][0], -item[0][1], item[1]))]
