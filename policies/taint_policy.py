"""Karmada's ClusterTaintPolicy (``policy.karmada.io/v1alpha1``, cluster-scoped): taints added to and
removed from clusters by their status conditions.

In: a policy's wire form, a cluster's conditions and taints. Out: the validated model, Karmada's
webhook refusal (:func:`taint_policy_denial`) and the cluster's taints after the policies
(:func:`apply_taint_policies`), as Karmada's cluster-taint-policy controller computes them: the
policies in creation order; for each whose ``targetClusters`` the cluster matches, its taints
added when every ``addOnConditions`` entry matches the cluster's conditions, then removed when
every ``removeOnConditions`` entry does (an empty list never matches). A taint is its key and
effect: one already there is left as it is. Pure.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final, Literal

from pydantic import Field

from controlplane.apis.meta import ObjectMeta, SpecModel
from policies.models import ClusterAffinity

KIND: Final = "ClusterTaintPolicy"
WEBHOOK: Final = "clustertaintpolicy.karmada.io"
#: The effects the hub's clusters take (a Cluster's taints); Karmada's PreferNoExecute is not one.
CLUSTER_TAINT_EFFECTS: Final = ("NoSchedule", "PreferNoSchedule", "NoExecute")


class MatchCondition(SpecModel):
    condition_type: str
    """The cluster status condition, e.g. Ready."""
    operator: str
    """Whether the condition's status must be one of statusValues (In) or none of them (NotIn); any
    other operator is kept as written and never matches, as in Karmada."""
    status_values: list[str]
    """Condition statuses: True, False, Unknown."""


class PolicyTaint(SpecModel):
    key: str
    """The taint key put on the cluster."""
    effect: Literal["NoSchedule", "PreferNoExecute", "NoExecute"]
    """The taint effect."""
    value: str | None = None
    """The taint value."""


class ClusterTaintPolicySpec(SpecModel):
    target_clusters: ClusterAffinity | None = None
    """The clusters the policy watches (absent: every cluster); a cluster that stops matching keeps
    its taints."""
    add_on_conditions: list[MatchCondition] | None = None
    """All must match the cluster's conditions for the taints to be added (empty: never)."""
    remove_on_conditions: list[MatchCondition] | None = None
    """All must match the cluster's conditions for the taints to be removed (empty: never)."""
    taints: list[PolicyTaint] = Field(min_length=1)
    """The taints added and removed."""


class ClusterTaintPolicy(SpecModel):
    """Taints added to and removed from clusters by their conditions (Karmada's ClusterTaintPolicy)."""

    api_version: Literal["policy.karmada.io/v1alpha1"] = "policy.karmada.io/v1alpha1"
    kind: Literal["ClusterTaintPolicy"] = KIND
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: ClusterTaintPolicySpec
    """Which clusters, when, and which taints."""


def taint_policy_denial(obj: dict[str, Any], *, allow_no_execute: bool = False) -> tuple[str, str] | None:
    """karmada-webhook's refusal of a policy: a taint (key and effect) listed twice, or, unless
    ``allow_no_execute`` (karmada-webhook's ``--allow-no-execute-taint-policy``, off by default, as
    the hub's flag of that name), a ``NoExecute`` taint. None when it admits the policy."""
    spec = obj.get("spec")
    taints = spec.get("taints") if isinstance(spec, dict) else None  # a malformed spec is the model's 422
    listed = [t for t in taints if isinstance(t, dict)] if isinstance(taints, list) else []
    pairs = [(t.get("key"), t.get("effect")) for t in listed]
    errors: list[str] = []
    for index, (key, effect) in enumerate(pairs):
        if effect == "NoExecute" and not allow_no_execute:
            errors.append(
                f"spec.taints[{index}]: Forbidden: Configuring taint with NoExecute effect is not allowed, this "
                "capability must be explicitly enabled by administrators through command-line flags"
            )
        if (key, effect) in pairs[index + 1:]:
            errors.append(
                f'spec.taints[{index}]: Duplicate value: "Duplicate taint with the same key({key}) '
                f'and effect({effect}) is not allowed"'
            )
    if not errors:
        return None
    return WEBHOOK, errors[0] if len(errors) == 1 else "[" + ", ".join(errors) + "]"


def conditions_match(conditions: Sequence[Mapping[str, Any]], matches: Sequence[MatchCondition] | None) -> bool:
    """Whether every entry of ``matches`` holds for ``conditions`` (Karmada's ``conditionMatches``):
    a condition the cluster lacks matches neither In nor NotIn, an operator other than those two
    never matches; no entries never match."""
    if not matches:
        return False
    for match in matches:
        statuses = [str(c.get("status")) for c in conditions if c.get("type") == match.condition_type]
        if not statuses or match.operator not in ("In", "NotIn"):
            return False
        found = statuses[-1] in match.status_values
        if found != (match.operator == "In"):
            return False
    return True


def _same(taint: Mapping[str, Any], wanted: PolicyTaint) -> bool:
    return taint.get("key") == wanted.key and taint.get("effect") == wanted.effect


def apply_taint_policies(
    taints: Sequence[Mapping[str, Any]],
    conditions: Sequence[Mapping[str, Any]],
    policies: Iterable[ClusterTaintPolicy],
    *,
    now: str,
) -> list[dict[str, Any]]:
    """A cluster's taints after ``policies`` (those whose targetClusters it matches, in creation
    order): added taints carry ``timeAdded: now``; effects a Cluster cannot hold are skipped."""
    result = [dict(taint) for taint in taints]
    for policy in policies:
        spec = policy.spec
        if conditions_match(conditions, spec.add_on_conditions):
            for wanted in spec.taints:
                if wanted.effect in CLUSTER_TAINT_EFFECTS and not any(_same(t, wanted) for t in result):
                    added: dict[str, Any] = {"key": wanted.key, "effect": wanted.effect, "timeAdded": now}
                    if wanted.value:
                        added["value"] = wanted.value
                    result.append(added)
        if conditions_match(conditions, spec.remove_on_conditions):
            for wanted in spec.taints:
                match = next((t for t in result if _same(t, wanted)), None)
                if match is not None:
                    result.remove(match)
    return result
