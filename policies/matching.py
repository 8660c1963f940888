"""Which policy claims a workload, and which override rules apply to it, in Karmada's order.

In: a workload as a plain dict (``apiVersion``, ``kind``, ``metadata``) and policy models.
Out: :class:`PolicyMatch` / :class:`OverrideRule` values. No I/O.

PropagationPolicy selection (Karmada's detector):

1. Workloads in reserved namespaces (``gpufed-system``, ``gpufed-cluster-lease``,
   ``gpufed-es-*``, ``kube-*``) are never propagated, nor what every cluster creates for itself
   (:func:`is_cluster_builtin`). Policies being deleted are skipped.
2. A PropagationPolicy applies only to workloads in its own namespace (its selectors'
   ``namespace`` is not needed); a ClusterPropagationPolicy honours the selector's namespace.
3. A matching namespaced policy always beats a cluster-scoped one, whatever the priorities:
   Karmada looks for a PropagationPolicy first and only then for a ClusterPropagationPolicy.
4. Within one scope: higher ``priority`` wins; on a tie, the more precise match wins (name >
   labelSelector > apiVersion/kind only, the best selector of each policy counts); then the
   alphabetically lower policy name.
5. Claims stick: a workload claimed by a policy that still matches stays with it, unless the
   best candidate has ``preemption: Always`` and may preempt — a PropagationPolicy preempts a
   ClusterPropagationPolicy claim whatever the priorities and a lower-priority
   PropagationPolicy claim; a ClusterPropagationPolicy preempts only a lower-priority
   ClusterPropagationPolicy claim. Only the best candidate is considered for preemption.
6. A selector's ``apiVersion`` is the workload's own, or another version serving the same
   objects when the caller says so (``served_as``: a CRD's other served versions, its objects
   read in its storage version); override policies' selectors alike.

Override order (Karmada's override manager): all matching ClusterOverridePolicies first, then
the OverridePolicies of the workload's namespace (namespaced workloads only); within each group
policies sort by how precisely they match, *least* precise first (match-all, kind, label
selector, name), then by name; within a policy, rules keep their order. A policy without
``resourceSelectors`` matches everything (least precise). Later rules win because they apply
last, so the most specific policy has the final word. The deprecated
``targetCluster``/``overriders`` pair is used only when ``overrideRules`` is empty.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from enum import IntEnum
from typing import Any

from policies.models import AnyPropagationPolicy, ClusterAffinity, PropagationPolicy, ResourceSelector
from policies.override_models import AnyOverridePolicy, ClusterOverridePolicy, OverridePolicy, Overriders

# TODO: move to controlplane/apis/constants.py (owned by the lead) once agreed.
_RESERVED_NAMESPACE = re.compile(r"^(gpufed-system|gpufed-cluster-lease|gpufed-es-.*|kube-.*)\Z")


class ImplicitPriority(IntEnum):
    """How precisely a resource selector matches (Karmada's ``ImplicitPriority``)."""

    MISMATCH = 0
    MATCH_ALL = 1
    MATCH_LABEL_SELECTOR = 2
    MATCH_NAME = 3


#: Whether an apiVersion other than the workload's own serves the workload's objects (a served
#: version of its CRD): a resource selector naming it selects the workload.
ServedAs = Callable[[str], bool]


def is_reserved_namespace(namespace: str | None) -> bool:
    """Namespaces whose objects are never propagated."""
    return bool(namespace) and _RESERVED_NAMESPACE.match(namespace or "") is not None


#: The label kube-apiserver (and the hub) put on the RBAC objects they create at start-up.
_BOOTSTRAPPING_LABEL = "kubernetes.io/bootstrapping"
_RBAC_DEFAULTS = "rbac-defaults"
#: The prefix of the PriorityClasses every cluster creates itself (``system-node-critical``...).
_SYSTEM_PRIORITY_CLASS_PREFIX = "system-"


def is_cluster_builtin(workload: Mapping[str, Any]) -> bool:
    """An object every cluster makes for itself at start-up, never propagated: the hub's default
    ClusterRoles and ClusterRoleBindings (``cluster-admin``, ``system:*``, labelled
    ``kubernetes.io/bootstrapping: rbac-defaults``; each member has its own, which the hub's
    must not overwrite) and the ``system-`` PriorityClasses (each member has them already and
    refuses their deletion)."""
    meta = _meta(workload)
    labels = meta.get("labels")
    if isinstance(labels, Mapping) and labels.get(_BOOTSTRAPPING_LABEL) == _RBAC_DEFAULTS:
        return True
    return workload.get("kind") == "PriorityClass" and str(meta.get("name") or "").startswith(
        _SYSTEM_PRIORITY_CLASS_PREFIX
    )


def _meta(workload: Mapping[str, Any]) -> Mapping[str, Any]:
    meta = workload.get("metadata")
    return meta if isinstance(meta, Mapping) else {}


def selector_match(
    workload: Mapping[str, Any], selector: ResourceSelector, *, ignore_namespace: bool = False,
    served_as: ServedAs | None = None,
) -> ImplicitPriority:
    """How ``selector`` matches ``workload`` (Karmada's ``ResourceMatches`` + its priority).

    ``name`` set: only the name counts and ``labelSelector`` is ignored.
    """
    meta = _meta(workload)
    if workload.get("kind") != selector.kind:
        return ImplicitPriority.MISMATCH
    if workload.get("apiVersion") != selector.api_version and not (served_as and served_as(selector.api_version)):
        return ImplicitPriority.MISMATCH
    if not ignore_namespace and selector.namespace and meta.get("namespace") != selector.namespace:
        return ImplicitPriority.MISMATCH
    if selector.name:
        return ImplicitPriority.MATCH_NAME if meta.get("name") == selector.name else ImplicitPriority.MISMATCH
    if selector.label_selector is None:
        return ImplicitPriority.MATCH_ALL
    labels = meta.get("labels") or {}
    if selector.label_selector.matches(labels):
        return ImplicitPriority.MATCH_LABEL_SELECTOR
    return ImplicitPriority.MISMATCH


def best_selector_match(
    workload: Mapping[str, Any], selectors: Sequence[ResourceSelector], *, ignore_namespace: bool = False,
    served_as: ServedAs | None = None,
) -> ImplicitPriority:
    """The most precise match among ``selectors``."""
    return max(
        (selector_match(workload, s, ignore_namespace=ignore_namespace, served_as=served_as) for s in selectors),
        default=ImplicitPriority.MISMATCH,
    )


@dataclass(frozen=True)
class PolicyRef:
    """Identifies a (Cluster)PropagationPolicy: what a binding records in ``spec.policy``."""

    kind: str
    name: str
    namespace: str | None = None


@dataclass(frozen=True)
class PolicyMatch:
    """The policy that claims a workload and how precisely it matched."""

    policy: AnyPropagationPolicy
    implicit_priority: ImplicitPriority
    preempted: PolicyRef | None = None
    """The previous claimant when this match takes the workload from it."""

    @property
    def ref(self) -> PolicyRef:
        return policy_ref(self.policy)

    @property
    def priority(self) -> int:
        return self.policy.spec.effective_priority

    @property
    def namespaced(self) -> bool:
        return isinstance(self.policy, PropagationPolicy)


def policy_ref(policy: AnyPropagationPolicy) -> PolicyRef:
    namespace = policy.metadata.namespace if isinstance(policy, PropagationPolicy) else None
    return PolicyRef(kind=policy.kind, name=policy.metadata.name or "", namespace=namespace)


def _match(workload: Mapping[str, Any], policy: AnyPropagationPolicy, served_as: ServedAs | None) -> PolicyMatch | None:
    if policy.metadata.deletion_timestamp:
        return None
    namespaced = isinstance(policy, PropagationPolicy)
    if namespaced and (policy.metadata.namespace or "default") != (_meta(workload).get("namespace") or ""):
        return None
    priority = best_selector_match(
        workload, policy.spec.resource_selectors, ignore_namespace=namespaced, served_as=served_as
    )
    if priority == ImplicitPriority.MISMATCH:
        return None
    return PolicyMatch(policy=policy, implicit_priority=priority)


def _rank(match: PolicyMatch) -> tuple[int, int, int, str]:
    """Sort key: smaller is better."""
    return (0 if match.namespaced else 1, -match.priority, -match.implicit_priority, match.policy.metadata.name or "")


def _may_preempt(candidate: PolicyMatch, claimed: PolicyMatch) -> bool:
    if candidate.policy.spec.preemption != "Always":
        return False
    if candidate.namespaced:
        return not claimed.namespaced or candidate.priority > claimed.priority
    return not claimed.namespaced and candidate.priority > claimed.priority


def matching_policies(
    workload: Mapping[str, Any], policies: Sequence[AnyPropagationPolicy], *, served_as: ServedAs | None = None
) -> list[PolicyMatch]:
    """Every policy that matches ``workload``, best first (see the module docstring)."""
    if is_reserved_namespace(_meta(workload).get("namespace")) or is_cluster_builtin(workload):
        return []
    matches = [m for m in (_match(workload, p, served_as) for p in policies) if m is not None]
    return sorted(matches, key=_rank)


def select_policy(
    workload: Mapping[str, Any],
    policies: Sequence[AnyPropagationPolicy],
    *,
    claimed_by: PolicyRef | None = None,
    served_as: ServedAs | None = None,
) -> PolicyMatch | None:
    """The policy that should own ``workload`` now, or ``None`` when no policy matches.

    ``claimed_by`` is the policy that owns it today (from the binding); see rule 5 of the module
    docstring for when it is kept.
    """
    matches = matching_policies(workload, policies, served_as=served_as)
    if not matches:
        return None
    best = matches[0]
    if claimed_by is None:
        return best
    claimed = next((m for m in matches if m.ref == claimed_by), None)
    if claimed is None or claimed is best:
        return best
    if _may_preempt(best, claimed):
        return PolicyMatch(policy=best.policy, implicit_priority=best.implicit_priority, preempted=claimed.ref)
    return claimed


# ---------------------------------------------------------------------------------------------
# Override policies
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class OverrideRule:
    """One rule of one override policy, in application order."""

    policy_kind: str
    policy_name: str
    policy_namespace: str | None
    rule_index: int
    target_cluster: ClusterAffinity | None
    overriders: Overriders

    @property
    def source(self) -> str:
        """``ClusterOverridePolicy/name`` or ``OverridePolicy/ns/name``, with the rule index."""
        scope = f"{self.policy_namespace}/" if self.policy_namespace else ""
        return f"{self.policy_kind}/{scope}{self.policy_name}#{self.rule_index}"


def _override_precision(
    workload: Mapping[str, Any], policy: AnyOverridePolicy, served_as: ServedAs | None
) -> ImplicitPriority:
    selectors = policy.spec.resource_selectors
    if not selectors:
        return ImplicitPriority.MATCH_ALL
    return best_selector_match(
        workload, selectors, ignore_namespace=isinstance(policy, OverridePolicy), served_as=served_as
    )


def collect_override_rules(
    workload: Mapping[str, Any], policies: Sequence[AnyOverridePolicy], *, served_as: ServedAs | None = None
) -> list[OverrideRule]:
    """Every override rule that applies to ``workload`` on some cluster, in application order.

    Target clusters are not checked here; :func:`policies.overriders.apply_overrides` checks
    each rule's ``targetCluster`` against the cluster it renders for.
    """
    namespace = _meta(workload).get("namespace")
    rules: list[OverrideRule] = []
    for scope in (ClusterOverridePolicy, OverridePolicy):
        ranked: list[tuple[int, str, AnyOverridePolicy]] = []
        for policy in policies:
            if not isinstance(policy, scope) or policy.metadata.deletion_timestamp:
                continue
            if isinstance(policy, OverridePolicy) and (
                not namespace or (policy.metadata.namespace or "default") != namespace
            ):
                continue
            precision = _override_precision(workload, policy, served_as)
            if precision == ImplicitPriority.MISMATCH:
                continue
            ranked.append((int(precision), policy.metadata.name or "", policy))
        ranked.sort(key=lambda item: (item[0], item[1]))
        for _, name, policy in ranked:
            for index, rule in enumerate(policy.spec.rules()):
                rules.append(
                    OverrideRule(
                        policy_kind=policy.kind,
                        policy_name=name,
                        policy_namespace=policy.metadata.namespace if isinstance(policy, OverridePolicy) else None,
                        rule_index=index,
                        target_cluster=rule.target_cluster,
                        overriders=rule.overriders,
                    )
                )
    return rules


__all__ = [
    "ImplicitPriority",
    "OverrideRule",
    "PolicyMatch",
    "PolicyRef",
    "ServedAs",
    "best_selector_match",
    "collect_override_rules",
    "is_cluster_builtin",
    "is_reserved_namespace",
    "matching_policies",
    "policy_ref",
    "select_policy",
    "selector_match",
]
