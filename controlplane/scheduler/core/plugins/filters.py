"""Filter plugins for the placement rules: which clusters may take a binding at all.

Each returns a :class:`~controlplane.scheduler.core.framework.Status`; the reasons end
up in the binding's explanation. Placement rules (affinity, taints, cordon, readiness,
spread fields) come from the policy language in :mod:`policies.affinity`; capacity is
:mod:`~controlplane.scheduler.core.plugins.feasibility`'s. Clusters that already run the
binding get two allowances, as in Karmada: NoSchedule taints do not push them out (only
NoExecute does), and a cordoned or not-Ready cluster keeps what it runs but takes nothing
more; so does a cluster the request names in ``keep_only`` (its member reported replicas it
cannot place, which move elsewhere). A cluster that does not serve the workload's kind takes
none of it (:class:`APIEnablement`, Karmada's plugin of that name).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from controlplane.apis.meta import Toleration, taints_tolerated
from controlplane.scheduler.core.framework import SUCCESS, Code, CycleState, Status
from controlplane.scheduler.core.snapshot import ClusterSnapshot
from policies.affinity import ClusterView, cluster_matches_affinity, spread_group, tolerates_cluster_taints
from policies.models import ClusterAffinityTerm, Placement

AFFINITY = "ClusterAffinity"
TOLERATION = "TaintToleration"
API_ENABLEMENT = "APIEnablement"
#: Karmada's APIEnablement plugin's reason, word for word.
NO_API_RESOURCE = "cluster(s) did not have the API resource"


def affinity_status(view: ClusterView, term: ClusterAffinityTerm) -> Status:
    """The :class:`ClusterAffinity` verdict: whether affinity ``term`` admits the cluster."""
    verdict = cluster_matches_affinity(view, term)
    if verdict.fits:
        return SUCCESS
    return Status(Code.UNRESOLVABLE, (verdict.reason,), AFFINITY)


def taints_status(view: ClusterView, tolerations: Sequence[Toleration], *, running: bool) -> Status:
    """The :class:`TaintToleration` verdict: whether ``tolerations`` tolerate the cluster's taints,
    for a binding that runs there (only NoExecute counts) or not (NoSchedule and NoExecute)."""
    if not view.taints:
        return SUCCESS
    if running:
        ok, taint = taints_tolerated(view.taints, tolerations, effects=("NoExecute",))
        if ok or taint is None:
            return SUCCESS
        value = f"={taint.value}" if taint.value else ""
        return Status(
            Code.UNRESOLVABLE,
            (f"cluster has taint {taint.key}{value}:NoExecute that the placement does not tolerate",),
            TOLERATION,
        )
    verdict = tolerates_cluster_taints(view, tolerations)
    return SUCCESS if verdict.fits else Status(Code.UNRESOLVABLE, (verdict.reason,), TOLERATION)


def admitted_clusters(views: Iterable[ClusterView], placement: Placement) -> frozenset[str]:
    """The clusters ``placement`` lets a binding that runs nowhere go to: some affinity term admits
    the cluster (:func:`affinity_status`) and its taints are tolerated (:func:`taints_status`).

    The scheduler's own verdicts, for readers outside the scheduler (the reports' pending demand),
    so the two cannot disagree about where a workload may run.
    """
    terms = placement.affinity_terms()
    tolerations = placement.cluster_tolerations or ()
    return frozenset(
        view.name
        for view in views
        if any(affinity_status(view, term).ok for term in terms)
        and taints_status(view, tolerations, running=False).ok
    )


class ClusterAffinity:
    """The current affinity term (``clusterAffinity`` or one ``clusterAffinities[]`` term)."""

    name = AFFINITY
    placement_only = True

    def filter(self, state: CycleState, cluster: ClusterSnapshot) -> Status:
        return affinity_status(cluster.view, state.term)


class TaintToleration:
    """Cluster taints against ``placement.clusterTolerations``."""

    name = TOLERATION
    placement_only = True

    def filter(self, state: CycleState, cluster: ClusterSnapshot) -> Status:
        if not cluster.taints:
            return SUCCESS
        request = state.request
        return taints_status(cluster.view, request.tolerations, running=cluster.name in request.previous)


def _keep_current(state: CycleState, cluster: ClusterSnapshot, refusal: Status) -> Status:
    """A cluster closed to new replicas keeps the ones it runs (capped at them); with none, ``refusal``."""
    current = state.request.previous.get(cluster.name, 0)
    if not current:
        return refusal
    state.caps[cluster.name] = current
    return SUCCESS


class Cordon:
    """A cordoned cluster (``spec.unschedulable``) takes no new replicas; it keeps the ones it runs."""

    name = "Cordon"
    placement_only = True

    def filter(self, state: CycleState, cluster: ClusterSnapshot) -> Status:
        if not cluster.unschedulable:
            return SUCCESS
        return _keep_current(
            state,
            cluster,
            Status(Code.UNRESOLVABLE, ("cluster is cordoned (spec.unschedulable)",), self.name),
        )


class ClusterReady:
    """A cluster that is not Ready has no trustworthy capacity: no new replicas, keeps the ones it runs.

    Moving replicas off a failed cluster is failover's job (NoExecute taints with
    tolerationSeconds), not the scheduler's.
    """

    name = "ClusterReady"
    placement_only = True

    def filter(self, state: CycleState, cluster: ClusterSnapshot) -> Status:
        if cluster.ready:
            return SUCCESS
        return _keep_current(state, cluster, Status(Code.UNSCHEDULABLE, ("cluster is not Ready",), self.name))


class SpreadConstraint:
    """Clusters lacking the field or label a spread constraint groups by cannot be counted in a group."""

    name = "SpreadConstraint"
    placement_only = True

    def filter(self, state: CycleState, cluster: ClusterSnapshot) -> Status:
        for constraint in state.request.placement.spread_constraints or ():
            if spread_group(cluster.view, constraint) is None:
                what = (
                    f"label {constraint.spread_by_label}"
                    if constraint.spread_by_label
                    else constraint.effective_field or "cluster"
                )
                return Status(
                    Code.UNRESOLVABLE, (f"cluster has no {what} to spread by (spreadConstraints)",), self.name
                )
        return SUCCESS


class KeepOnly:
    """Clusters the request lists in ``keep_only`` keep what they run of it and take nothing new.

    One that runs none of it is rejected with the request's reason; one that runs some keeps
    them (a cap, as for a cordoned cluster) and says why in the explanation.
    """

    name = "KeepOnly"
    placement_only = False

    def filter(self, state: CycleState, cluster: ClusterSnapshot) -> Status:
        reason = state.request.keep_only.get(cluster.name)
        if reason is None:
            return SUCCESS
        current = state.request.previous.get(cluster.name, 0)
        if current:
            state.caps[cluster.name] = current
            state.cap_reasons[cluster.name] = reason
            return SUCCESS
        return Status(Code.UNSCHEDULABLE, (reason,), self.name)

    def filter_all(
        self, state: CycleState, clusters: Sequence[ClusterSnapshot]
    ) -> tuple[list[ClusterSnapshot], dict[str, Status]]:
        if not state.request.keep_only:  # the usual case: nothing to look at
            return list(clusters), {}
        passed: list[ClusterSnapshot] = []
        failed: dict[str, Status] = {}
        for cluster in clusters:
            status = self.filter(state, cluster)
            if status.ok:
                passed.append(cluster)
            else:
                failed[cluster.name] = status
        return passed, failed


class APIEnablement:
    """A cluster whose ``status.apiEnablements`` does not list the workload's kind takes none of it
    (Karmada's APIEnablement: ``helper.IsAPIEnabled``, then "cluster(s) did not have the API
    resource"). As in Karmada's ``pkg/scheduler/framework/plugins/apienablement/api_enablement.go``
    (``bindingSpec.TargetContains``: "the scheduler never deletes scheduled resources by this
    plugin", since karmada-io/karmada#6462, which dropped the earlier pass of an incomplete list
    only, #5216), a cluster already in the binding's ``spec.clusters`` always passes, whatever its
    list says: a CRD removed from a member, or a partial discovery, must not push a workload off a
    cluster that runs it (the Work is applied again once the kind is served again).

    Unlike Karmada, a cluster that lists no APIs at all passes: its agent is older than the list
    (a hub upgraded before its agents, as a rolling upgrade does) or has not reported yet (a fresh
    Cluster), and refusing it would leave every workload unplaceable until each agent is upgraded.
    Such a member still refuses an unserved kind at apply time (the Work's ``KindNotServed``).

    Cheap: the snapshot holds the listed kinds as a frozenset built once per report, and the kind
    is part of the placement key, so the verdicts on clusters that do not run the binding are
    remembered per fleet with the other placement-only ones (a decision of a kind already judged
    on an unchanged fleet costs no lookup at all).
    """

    name = API_ENABLEMENT
    placement_only = True

    def filter(self, state: CycleState, cluster: ClusterSnapshot) -> Status:
        request = state.request
        kinds = cluster.api_kinds
        if kinds is None or not request.kind or (request.api_version, request.kind) in kinds:
            return SUCCESS
        if cluster.name in request.previous:
            return SUCCESS
        return Status(Code.UNSCHEDULABLE, (NO_API_RESOURCE,), API_ENABLEMENT)
