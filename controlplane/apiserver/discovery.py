"""Discovery documents: how kubectl and client libraries learn what the server serves.

``/version``, ``/api`` (APIVersions), ``/api/v1`` and ``/apis/<g>/<v>``
(APIResourceList), ``/apis`` (APIGroupList) and ``/apis/<g>`` (APIGroup), all built
from a :class:`Registry` of stored kinds and the create-only resources served beside them
(:class:`CreateOnlyResource`: the access reviews, ``serviceaccounts/token``…), listed as kube
lists them: verbs ``create`` alone, no storage version hash, a subresource right after its
parent's entries. kubectl first asks ``/apis`` for aggregated discovery; the plain
``APIGroupList`` with ``Content-Type: application/json`` is accepted instead, and kubectl then
reads each group-version's ``APIResourceList``.
Pure: in a registry and the create-only resources, out JSON-ready dicts.
"""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Sequence
from typing import Any

from controlplane.apiserver.createonly import CREATE_ONLY_VERBS, CreateOnlyResource
from controlplane.apiserver.resources import ALL_VERBS, STATUS_VERBS, Registry, ResourceType

#: The Kubernetes API level this server speaks (kubectl warns on larger skews).
KUBE_MAJOR = "1"
KUBE_MINOR = "32"


def version_info(*, git_version: str = "v1.32.0-gpufed") -> dict[str, str]:
    return {
        "major": KUBE_MAJOR,
        "minor": KUBE_MINOR,
        "gitVersion": git_version,
        "gitCommit": "",
        "gitTreeState": "clean",
        "buildDate": "1970-01-01T00:00:00Z",
        "goVersion": "python3.11",
        "compiler": "cpython",
        "platform": "linux/amd64",
    }


def api_versions() -> dict[str, Any]:
    return {
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": ""}],
    }


def _storage_version_hash(rt: ResourceType) -> str:
    # Of the version stored, as kube's: the same for every version of one stored object.
    digest = hashlib.sha256(f"{rt.storage_api_version}/{rt.kind}".encode()).digest()
    return base64.b64encode(digest[:8]).decode()


def _create_only_entry(resource: CreateOnlyResource) -> dict[str, Any]:
    entry: dict[str, Any] = {"name": resource.name, "singularName": resource.singular, "namespaced": resource.namespaced}
    if resource.kind_group is not None:
        entry["group"] = resource.kind_group
    if resource.kind_version is not None:
        entry["version"] = resource.kind_version
    return {**entry, "kind": resource.kind, "verbs": list(CREATE_ONLY_VERBS)}


def _with_create_only(resources: list[dict[str, Any]], create_only: Sequence[CreateOnlyResource]) -> list[dict[str, Any]]:
    """``resources`` with the create-only ones: a subresource after its parent's entries, the
    others after the stored kinds, in kube's (alphabetical) order."""
    out = list(resources)
    for resource in sorted(create_only, key=lambda r: r.name):
        if resource.subresource:
            parent = [i for i, entry in enumerate(out) if entry["name"].partition("/")[0] == resource.plural]
            if parent:
                out.insert(parent[-1] + 1, _create_only_entry(resource))
                continue
        out.append(_create_only_entry(resource))
    return out


def api_resource_list(
    registry: Registry, group: str, version: str, create_only: Sequence[CreateOnlyResource] = ()
) -> dict[str, Any] | None:
    types = registry.in_group_version(group, version)
    served = [r for r in create_only if (r.group, r.version) == (group, version)]
    if not types and not served:
        return None
    resources: list[dict[str, Any]] = []
    for rt in types:
        entry: dict[str, Any] = {
            "name": rt.plural,
            "singularName": rt.singular,
            "namespaced": rt.namespaced,
            "kind": rt.kind,
            "verbs": list(ALL_VERBS),
            "storageVersionHash": _storage_version_hash(rt),
        }
        if rt.short_names:
            entry["shortNames"] = list(rt.short_names)
        if rt.categories:
            entry["categories"] = list(rt.categories)
        resources.append(entry)
        if rt.has_status:
            resources.append(
                {
                    "name": f"{rt.plural}/status",
                    "singularName": "",
                    "namespaced": rt.namespaced,
                    "kind": rt.kind,
                    "verbs": list(STATUS_VERBS),
                }
            )
        if rt.scale is not None:
            resources.append(
                {
                    "name": f"{rt.plural}/scale",
                    "singularName": "",
                    "namespaced": rt.namespaced,
                    "group": "autoscaling",
                    "version": "v1",
                    "kind": "Scale",
                    "verbs": list(STATUS_VERBS),
                }
            )
    return {
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": f"{group}/{version}" if group else version,
        "resources": _with_create_only(resources, served),
    }


def _group(group: str, versions: list[str]) -> dict[str, Any]:
    entries = [{"groupVersion": f"{group}/{v}", "version": v} for v in versions]
    return {"name": group, "versions": entries, "preferredVersion": entries[0]}


def _group_versions(registry: Registry, create_only: Sequence[CreateOnlyResource]) -> dict[str, list[str]]:
    """group -> its versions: the registry's, then those only create-only resources are served in."""
    out = {group: list(versions) for group, versions in registry.group_versions().items()}
    for resource in create_only:
        versions = out.setdefault(resource.group, [])
        if resource.version not in versions:
            versions.append(resource.version)
    return out


def api_group_list(registry: Registry, create_only: Sequence[CreateOnlyResource] = ()) -> dict[str, Any]:
    groups = [
        _group(group, versions)
        for group, versions in _group_versions(registry, create_only).items()
        if group  # the core group is served under /api
    ]
    return {"kind": "APIGroupList", "apiVersion": "v1", "groups": groups}


def api_group(registry: Registry, group: str, create_only: Sequence[CreateOnlyResource] = ()) -> dict[str, Any] | None:
    versions = _group_versions(registry, create_only).get(group)
    if not group or not versions:
        return None
    return {"kind": "APIGroup", "apiVersion": "v1", **_group(group, versions)}
