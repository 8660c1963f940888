"""The APIs the member serves, for its Cluster's ``status.apiEnablements``.

Gathered as client-go's ``ServerGroupsAndResources`` gathers them (Karmada's cluster status
controller calls it): ``/api`` and ``/apis`` name every group version (all versions of a group,
not only the preferred one), then each version's ``APIResourceList`` is read. A version that
does not answer makes the list partial (Karmada's ``ErrGroupDiscoveryFailed``), not a failure
of the whole pass; a list that reaches :data:`~controlplane.apis.apienablements.MAX_API_RESOURCES`
stops there, so a member serving 100,000 resources costs neither a request per group version
past the bound nor a report without bound. In: the member's transport. Out: a
:class:`~controlplane.apis.apienablements.Collected`, which the capacity report carries (the
agent asks again every ``api_enablements_interval`` and after a Work with a CRD is applied, and
reports at once when the list changed).
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from controlplane.apis.apienablements import MAX_API_RESOURCES, Collected, api_enablements
from member_agent.kubeapi import ApiError, KubeTransport

logger = logging.getLogger(__name__)

#: Group versions asked at once.
CONCURRENCY = 8


def group_versions(core: dict[str, Any] | None, groups: dict[str, Any] | None) -> list[str]:
    """Every group version an ``APIVersions`` (``/api``) and an ``APIGroupList`` (``/apis``) name, sorted."""
    out = {str(v) for v in (core or {}).get("versions") or () if v}
    for group in (groups or {}).get("groups") or ():
        for version in group.get("versions") or ():
            group_version = str(version.get("groupVersion") or "")
            if group_version:
                out.add(group_version)
    return sorted(out)


def _discovery_path(group_version: str) -> str:
    return f"/apis/{group_version}" if "/" in group_version else f"/api/{group_version}"


async def collect(member: KubeTransport, *, limit: int = MAX_API_RESOURCES) -> Collected:
    """The member's ``apiEnablements`` now (see the module docstring)."""
    failed = False
    try:
        core: dict[str, Any] | None = await member.get("/api")
    except ApiError as exc:
        logger.info("member discovery of /api failed: %s", exc)
        core, failed = None, True
    try:
        groups: dict[str, Any] | None = await member.get("/apis")
    except ApiError as exc:
        logger.info("member discovery of /apis failed: %s", exc)
        groups, failed = None, True
    versions = group_versions(core, groups)
    documents: list[dict[str, Any]] = []
    listed = 0
    for start in range(0, len(versions), CONCURRENCY):
        chunk = versions[start : start + CONCURRENCY]
        async with asyncio.TaskGroup() as group:
            tasks = [group.create_task(_document(member, gv)) for gv in chunk]
        for task in tasks:
            document = task.result()
            if document is None:
                failed = True
                continue
            documents.append(document)
            listed += len(document.get("resources") or ())
        if listed > limit:  # the rest would be left out anyway: do not ask for it
            break
    return api_enablements(documents, failed=failed, limit=limit)


async def _document(member: KubeTransport, group_version: str) -> dict[str, Any] | None:
    try:
        document = await member.get(_discovery_path(group_version))
    except ApiError as exc:
        logger.info("member discovery of %s failed: %s", group_version, exc)
        return None
    return {"groupVersion": group_version, "resources": document.get("resources") or []}
