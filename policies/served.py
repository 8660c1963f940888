"""Warnings for policies that select a kind gpufed cannot propagate.

A ``resourceSelectors`` entry naming a kind the hub does not serve (a CRD not installed, a typo
in ``apiVersion``), a cluster-scoped kind (gpufed propagates namespaced objects) or one of the
hub's own kinds (Events, Leases, Works…) is accepted — the kind may be served later — but the
policy selects nothing through it, which the author should hear at apply time (kubectl prints
each as ``Warning: ...``).

In: a policy document and :data:`KindLookup`, what the hub knows of a kind. Out: warning strings.
Pure.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from enum import StrEnum
from typing import Any


class KindStatus(StrEnum):
    PROPAGATABLE = "propagatable"
    UNSERVED = "unserved"
    CLUSTER_SCOPED = "cluster-scoped"
    HUB_ONLY = "hub-only"


#: (apiVersion, kind) -> what the hub knows of it.
KindLookup = Callable[[str, str], KindStatus]


def unpropagatable_selector_warnings(policy: Mapping[str, Any], lookup: KindLookup) -> list[str]:
    """One warning per ``spec.resourceSelectors[i]`` whose kind cannot be propagated."""
    out: list[str] = []
    selectors = (policy.get("spec") or {}).get("resourceSelectors")
    if not isinstance(selectors, list):
        return out
    for index, selector in enumerate(selectors):
        if not isinstance(selector, Mapping):
            continue
        api_version, kind = str(selector.get("apiVersion") or ""), str(selector.get("kind") or "")
        if not api_version or not kind:
            continue
        where = f"spec.resourceSelectors[{index}]"
        status = lookup(api_version, kind)
        if status is KindStatus.UNSERVED:
            out.append(
                f"{where}: the hub does not serve kind {kind} in {api_version}, so this selector matches "
                "nothing; check apiVersion and kind (kubectl api-resources lists what the hub serves)"
            )
        elif status is KindStatus.CLUSTER_SCOPED:
            out.append(
                f"{where}: {kind} ({api_version}) is cluster-scoped and gpufed propagates namespaced kinds "
                "only, so this selector matches nothing"
            )
        elif status is KindStatus.HUB_ONLY:
            out.append(
                f"{where}: {kind} ({api_version}) is part of the hub's own machinery and never propagates, "
                "so this selector matches nothing"
            )
    return out
