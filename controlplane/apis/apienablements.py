"""A Cluster's ``status.apiEnablements``: the APIs its member serves, as Karmada lists them.

In: the member's discovery documents (one ``APIResourceList`` per group version, as
client-go's ``ServerGroupsAndResources`` gathers them) and whether some group version failed
to answer. Out: the ``apiEnablements`` list (Karmada's ``APIEnablement``: ``groupVersion`` and
its ``resources`` ``{name, kind}``, subresources left out, group versions and resources sorted
by name, so the same member always gives the same list) and its ``CompleteAPIEnablements``
condition with Karmada's reasons and messages (``pkg/controllers/status/cluster_status_controller.go``).
For the scheduler: the set of ``(groupVersion, kind)`` a reported Cluster serves, built once per
report.

The list is bounded: a member serving more than :data:`MAX_API_RESOURCES` resources is listed
up to the bound (whole group versions, in order) and its condition says ``Partial``, so a
hostile or very large member cannot grow its Cluster without bound. Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence, Sized
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Final

from controlplane.apis.cluster_v1alpha1 import ClusterConditionType

#: The most resources a Cluster's ``apiEnablements`` lists, over all its group versions. A
#: cluster with every common operator installed serves some 1,000; each entry is some 50 bytes.
MAX_API_RESOURCES: Final = 5000


class APIEnablementsReason(StrEnum):
    """Reasons of the ``CompleteAPIEnablements`` condition (Karmada's)."""

    COMPLETE = "Complete"
    PARTIAL = "Partial"
    EMPTY = "Empty"


@dataclass(frozen=True, slots=True)
class Collected:
    """What a discovery pass found: the wire list and why it may be incomplete."""

    enablements: list[dict[str, Any]]
    failed: bool = False
    """Some group version did not answer (client-go's ``ErrGroupDiscoveryFailed``)."""
    truncated: int = 0
    """Left out past :data:`MAX_API_RESOURCES`: the resources of the group versions read (one for
    a group version without any), and one for each group version a collector did not read."""

    @property
    def complete(self) -> bool:
        return bool(self.enablements) and not self.failed and not self.truncated


def _listed(value: Any) -> list[Any]:
    """A discovery field that should be a list; anything else (a hostile or broken answer) is none."""
    return value if isinstance(value, list) else []


def listed_resources(document: Mapping[str, Any]) -> dict[str, str]:
    """The resources (name to kind) an ``APIResourceList`` names, subresources (``pods/status``,
    ``deployments/scale``) and items that are not objects left out."""
    out: dict[str, str] = {}
    for resource in _listed(document.get("resources")):
        if not isinstance(resource, Mapping):
            continue
        name, kind = resource.get("name"), resource.get("kind")
        if isinstance(name, str) and name and "/" not in name:
            out[name] = kind if isinstance(kind, str) else ""
    return out


def weight(resources: Sized) -> int:
    """What a group version counts against :data:`MAX_API_RESOURCES`: its resources, and one when
    it has none (so that group versions without resources are bounded too)."""
    return max(1, len(resources))


def api_enablements(
    documents: Iterable[Any],
    *,
    failed: bool = False,
    limit: int = MAX_API_RESOURCES,
    unread: int = 0,
    carried: Iterable[Any] = (),
) -> Collected:
    """The sorted, bounded ``apiEnablements`` of ``documents`` (``APIResourceList`` bodies; items
    that are not objects are skipped). ``unread`` group versions a collector did not ask for count
    as left out; ``carried`` are earlier entries of group versions that did not answer this time,
    listed again (the list is then partial: ``failed``)."""
    by_version: dict[str, dict[str, str]] = {}
    for document in documents:
        if not isinstance(document, Mapping):
            continue
        group_version = document.get("groupVersion")
        if isinstance(group_version, str) and group_version:
            by_version.setdefault(group_version, {}).update(listed_resources(document))
    for earlier in carried:
        if isinstance(earlier, Mapping):
            group_version = earlier.get("groupVersion")
            if isinstance(group_version, str) and group_version and group_version not in by_version:
                by_version[group_version] = listed_resources(earlier)
                failed = True
    out: list[dict[str, Any]] = []
    listed, truncated, stopped = 0, unread, False
    for group_version in sorted(by_version):
        resources = by_version[group_version]
        if stopped or listed + weight(resources) > limit:
            stopped = True
            truncated += weight(resources)
            continue
        listed += weight(resources)
        entry: dict[str, Any] = {"groupVersion": group_version}
        if resources:
            entry["resources"] = [{"name": name, "kind": resources[name]} for name in sorted(resources)]
        out.append(entry)
    return Collected(out, failed=failed, truncated=truncated)


def enablements_condition(
    collected: Collected, *, now: str, previous: Sequence[Mapping[str, Any]] = ()
) -> dict[str, Any]:
    """The ``CompleteAPIEnablements`` condition of ``collected``, in Karmada's words; its
    ``lastTransitionTime`` is kept from ``previous`` while its status does not change."""
    count = len(collected.enablements)
    if not count:
        status, reason, message = (
            "False",
            APIEnablementsReason.EMPTY,
            "collected empty APIEnablements from the cluster",
        )
    elif collected.failed or collected.truncated:
        status, reason = "False", APIEnablementsReason.PARTIAL
        message = f"might collect partial APIEnablements({count}) from the cluster"
        if collected.truncated:
            message += f": the cluster serves more than {MAX_API_RESOURCES} resources; the list stops there"
    else:
        status, reason, message = (
            "True",
            APIEnablementsReason.COMPLETE,
            "collected complete APIEnablements from the cluster",
        )
    kind = str(ClusterConditionType.COMPLETE_API_ENABLEMENTS)
    transition = next(
        (
            str(old.get("lastTransitionTime") or now)
            for old in previous
            if old.get("type") == kind and old.get("status") == status
        ),
        now,
    )
    return {
        "type": kind,
        "status": status,
        "reason": str(reason),
        "message": message,
        "lastTransitionTime": transition,
    }


def served_kinds(status: Mapping[str, Any]) -> frozenset[tuple[str, str]] | None:
    """``(groupVersion, kind)`` of every resource a Cluster status lists; None when it lists none
    (its agent has not reported them: an older agent, or a Cluster not reported yet)."""
    enablements = status.get("apiEnablements")
    if not isinstance(enablements, list):
        return None
    return frozenset(
        (str(entry.get("groupVersion") or ""), str(resource.get("kind") or ""))
        for entry in enablements
        if isinstance(entry, Mapping)
        for resource in entry.get("resources") or ()
        if isinstance(resource, Mapping)
    )


def lists_api(status: Mapping[str, Any], api_version: str, kind: str) -> bool | None:
    """Karmada's ``helper.IsAPIEnabled`` of one kind, straight from a Cluster status (no set built:
    for a caller that asks once per Cluster event); None when the status lists no APIs."""
    enablements = status.get("apiEnablements")
    if not isinstance(enablements, list):
        return None
    return any(
        isinstance(entry, Mapping)
        and entry.get("groupVersion") == api_version
        and any(isinstance(r, Mapping) and r.get("kind") == kind for r in entry.get("resources") or ())
        for entry in enablements
    )
