"""The APIs the member serves, for its Cluster's ``status.apiEnablements``.

Gathered as client-go's ``ServerGroupsAndResources`` gathers them (Karmada's cluster status
controller calls it): ``/api`` and ``/apis`` name every group version (all versions of a group,
not only the preferred one), then each version's ``APIResourceList`` is read. A version that
does not answer makes the list partial (Karmada's ``ErrGroupDiscoveryFailed``) and keeps its
earlier entry, not a failure of the whole pass; ``/api`` or ``/apis`` failing fails the pass (as
client-go's ``ServerGroups``) and the earlier list is kept whole. A list that reaches
:data:`~controlplane.apis.apienablements.MAX_API_RESOURCES` (a group version without resources
counting one) stops there, so a member serving 100,000 resources costs neither a request per group version
past the bound nor a report without bound. In: the member's transport. Out: a
:class:`~controlplane.apis.apienablements.Collected`, which the capacity report carries (the
agent asks again every ``api_enablements_interval`` and after a Work with a CRD is applied, and
reports at once when the list changed).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping, Sequence
from typing import Any

from controlplane.apis.apienablements import (
    MAX_API_RESOURCES,
    Collected,
    api_enablements,
    listed_resources,
    weight,
)
from member_agent.kubeapi import ApiError, KubeTransport

logger = logging.getLogger(__name__)

#: Group versions asked at once.
CONCURRENCY = 8


def group_versions(core: Any, groups: Any) -> list[str]:
    """Every group version an ``APIVersions`` (``/api``) and an ``APIGroupList`` (``/apis``) name,
    sorted; items of the wrong shape (a hostile or broken answer) are skipped."""
    out = {v for v in _field(core, "versions") if isinstance(v, str) and v}
    for group in _field(groups, "groups"):
        for version in _field(group, "versions"):
            group_version = version.get("groupVersion") if isinstance(version, Mapping) else None
            if isinstance(group_version, str) and group_version:
                out.add(group_version)
    return sorted(out)


def _field(document: Any, name: str) -> list[Any]:
    value = document.get(name) if isinstance(document, Mapping) else None
    return value if isinstance(value, list) else []


def _discovery_path(group_version: str) -> str:
    return f"/apis/{group_version}" if "/" in group_version else f"/api/{group_version}"


async def collect(
    member: KubeTransport, *, previous: Sequence[Any] = (), limit: int = MAX_API_RESOURCES
) -> Collected | None:
    """The member's ``apiEnablements`` now (see the module docstring); None when ``/api`` or
    ``/apis`` failed or no group version answered (the caller keeps the list it has, as Karmada
    keeps a Cluster's status while its member is not healthy). A group version that does not
    answer keeps its entry of ``previous`` (the list is then partial)."""
    try:
        core = await member.get("/api")
        groups = await member.get("/apis")
    except ApiError as exc:
        logger.info("member discovery failed: %s", exc)
        return None
    versions = group_versions(core, groups)
    documents: list[dict[str, Any]] = []
    unanswered: set[str] = set()
    listed = read = 0
    while read < len(versions) and listed <= limit:  # past the bound the rest is left out: not asked
        chunk = versions[read : read + CONCURRENCY]
        read += len(chunk)
        async with asyncio.TaskGroup() as group:
            tasks = [group.create_task(_document(member, gv)) for gv in chunk]
        for group_version, task in zip(chunk, tasks, strict=True):
            document = task.result()
            if document is None:
                unanswered.add(group_version)
                listed += 1  # counted as one without resources is: no member makes the pass unbounded
                continue
            documents.append(document)
            listed += weight(listed_resources(document))
    if not documents:
        return None
    return api_enablements(
        documents,
        failed=bool(unanswered),
        limit=limit,
        unread=len(versions) - read,
        carried=[e for e in previous if isinstance(e, Mapping) and e.get("groupVersion") in unanswered],
    )


async def _document(member: KubeTransport, group_version: str) -> dict[str, Any] | None:
    try:
        document = await member.get(_discovery_path(group_version))
    except ApiError as exc:
        logger.info("member discovery of %s failed: %s", group_version, exc)
        return None
    if not isinstance(document, Mapping):
        logger.info("member discovery of %s answered no APIResourceList", group_version)
        return None
    return {"groupVersion": group_version, "resources": _field(document, "resources")}
