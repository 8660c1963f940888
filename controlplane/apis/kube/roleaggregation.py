"""ClusterRole aggregation, the pure part: which rules an aggregated ClusterRole gathers.

A ClusterRole with an ``aggregationRule`` has, as its ``rules``, the rules of every other
ClusterRole matched by one of its ``clusterRoleSelectors`` (selectors in order, matched roles
by name, each rule once), as kube-controller-manager's ``clusterrole-aggregation`` controller
computes them. :func:`aggregate_all` repeats that until nothing changes, since aggregated
roles aggregate each other (``view`` into ``edit`` into ``admin``): the authorizer's bootstrap
roles and the hub's ClusterRole aggregation controller both use it. Pure: no I/O.
"""

from __future__ import annotations

from typing import Any

from controlplane.apis.kube.selectors import LabelSelector, SelectorError


def aggregated_rules(role: dict[str, Any], roles: list[dict[str, Any]]) -> list[dict[str, Any]] | None:
    """The rules ``role`` aggregates from ``roles``, or None when it has no aggregationRule."""
    rule = role.get("aggregationRule")
    if not isinstance(rule, dict):
        return None
    own = role["metadata"]["name"]
    by_name = sorted((r for r in roles if r["metadata"]["name"] != own), key=lambda r: r["metadata"]["name"])
    out: list[dict[str, Any]] = []
    for raw in rule.get("clusterRoleSelectors") or []:
        try:
            selector = LabelSelector.from_dict(raw if isinstance(raw, dict) else {})
        except SelectorError:
            continue  # an invalid selector matches nothing, as in kube
        for other in by_name:
            if not selector.matches(other["metadata"].get("labels")):
                continue
            for policy_rule in other.get("rules") or []:
                if policy_rule not in out:
                    out.append(policy_rule)
    return out


def aggregate_all(roles: list[dict[str, Any]]) -> None:
    """Fill every aggregated role of ``roles`` in place, until no role changes."""
    for _ in range(len(roles) + 1):
        changed = False
        for role in roles:
            rules = aggregated_rules(role, roles)
            if rules is not None and rules != role.get("rules"):
                role["rules"] = rules
                changed = True
        if not changed:
            return
