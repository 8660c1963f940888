"""kube-scheduler's preference scores in the simulated member: NodeAffinity and TaintToleration.

kube's default profile adds to NodeResourcesFit (weight 1; here the member's :class:`~.model.Scoring`)
two score plugins that read preferences, each normalised over the feasible nodes it scores
(``helper.DefaultNormalizeScore``: ``100 * score // max``, all 0 when the max is 0) and weighed as
``apis/config/v1/default_plugins.go`` weighs them:

* **NodeAffinity**, weight 2: the sum of the weights of the pod's
  ``preferredDuringSchedulingIgnoredDuringExecution`` terms the node matches (a term of weight 0
  is skipped, an empty term matches no node);
* **TaintToleration**, weight 3: the node's ``PreferNoSchedule`` taints the pod does not
  tolerate, normalised in reverse (``100 - 100 * count // max``; all 100 when no node has one).

A pod with no preferred terms on nodes without ``PreferNoSchedule`` taints gets the same
preference score on every node (0 and 300), which changes no choice: :meth:`Preferences.scores`
then returns None and the member scores as before. In: a :class:`~.model.PodRequest` and the
member's nodes in row order; out: per row, the weighted sum to add to the resource score. Pure.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

import numpy as np

from simulator.scheduling.demand import IndexArray, IntArray
from simulator.scheduling.model import NodeState, PodRequest, PreferredTerm

#: kube's ``framework.MaxNodeScore``.
MAX_NODE_SCORE: Final = 100
#: The default profile's plugin weights (NodeResourcesFit, the member's scoring here, weighs 1).
NODE_AFFINITY_WEIGHT: Final = 2
TAINT_TOLERATION_WEIGHT: Final = 3


def normalized(raw: IntArray, *, reverse: bool) -> IntArray:
    """kube's ``DefaultNormalizeScore(MaxNodeScore, reverse, scores)`` over one pod's feasible nodes."""
    top = int(raw.max(initial=0))
    if top == 0:
        return np.full(len(raw), MAX_NODE_SCORE if reverse else 0, dtype=np.int64)
    scores: IntArray = MAX_NODE_SCORE * raw // top
    return MAX_NODE_SCORE - scores if reverse else scores


def affinity_count(terms: Sequence[PreferredTerm], node: NodeState) -> int:
    """NodeAffinity's raw score: the weights of the preferred terms ``node`` matches."""
    return sum(
        weight
        for weight, term in terms
        if weight and term and all(req.matches(node.name, node.labels) for req in term)
    )


def untolerated_count(pod: PodRequest, node: NodeState) -> int:
    """TaintToleration's raw score: ``node``'s PreferNoSchedule taints ``pod`` does not tolerate."""
    return sum(
        1
        for taint in node.taints
        if taint.effect == "PreferNoSchedule" and not any(t.tolerates(taint) for t in pod.tolerations)
    )


class Preferences:
    """Per-row raw preference counts of a member's nodes, remembered per pod constraint.

    The owner (:class:`~.cluster_state.ClusterState`) calls :meth:`clear` whenever its node rows
    change; the counts depend on labels and taints only, never on usage.
    """

    def __init__(self) -> None:
        self._rows: dict[tuple[Any, ...], tuple[IntArray, IntArray] | None] = {}

    def clear(self) -> None:
        self._rows.clear()

    def _raw(self, pod: PodRequest, order: Sequence[NodeState]) -> tuple[IntArray, IntArray] | None:
        key = (pod.preferred, pod.tolerations)
        if key in self._rows:
            return self._rows[key]
        affinity = np.array([affinity_count(pod.preferred, node) for node in order], dtype=np.int64)
        taints = np.array([untolerated_count(pod, node) for node in order], dtype=np.int64)
        found = None if not affinity.any() and not taints.any() else (affinity, taints)
        self._rows[key] = found
        return found

    def scores(self, pod: PodRequest, rows: IndexArray, order: Sequence[NodeState]) -> IntArray | None:
        """The weighted NodeAffinity and TaintToleration scores of ``rows`` (the feasible nodes
        kube scores), or None when they are equal on every node of the member."""
        raw = self._raw(pod, order)
        if raw is None:
            return None
        affinity, taints = raw
        weighted: IntArray = NODE_AFFINITY_WEIGHT * normalized(affinity[rows], reverse=False)
        return weighted + TAINT_TOLERATION_WEIGHT * normalized(taints[rows], reverse=True)
