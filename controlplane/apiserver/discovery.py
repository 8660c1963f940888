"""Discovery documents: how kubectl and client libraries learn what the server serves.

``/version``, ``/api`` (APIVersions), ``/api/v1`` and ``/apis/<g>/<v>``
(APIResourceList), ``/apis`` (APIGroupList) and ``/apis/<g>`` (APIGroup), all built
from a :class:`Registry`. kubectl first asks ``/apis`` for aggregated discovery; the
plain ``APIGroupList`` with ``Content-Type: application/json`` is accepted instead.
Pure: in a registry, out JSON-ready dicts.
"""

from __future__ import annotations

import base64
import hashlib
from typing import Any

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
    digest = hashlib.sha256(f"{rt.api_version}/{rt.kind}".encode()).digest()
    return base64.b64encode(digest[:8]).decode()


def api_resource_list(registry: Registry, group: str, version: str) -> dict[str, Any] | None:
    types = registry.in_group_version(group, version)
    if not types:
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
        "resources": resources,
    }


def _group(registry: Registry, group: str, versions: list[str]) -> dict[str, Any]:
    entries = [{"groupVersion": f"{group}/{v}", "version": v} for v in versions]
    return {"name": group, "versions": entries, "preferredVersion": entries[0]}


def api_group_list(registry: Registry) -> dict[str, Any]:
    groups = [
        _group(registry, group, versions)
        for group, versions in registry.group_versions().items()
        if group  # the core group is served under /api
    ]
    return {"kind": "APIGroupList", "apiVersion": "v1", "groups": groups}


def api_group(registry: Registry, group: str) -> dict[str, Any] | None:
    versions = registry.group_versions().get(group)
    if not group or not versions:
        return None
    return {"kind": "APIGroup", "apiVersion": "v1", **_group(registry, group, versions)}
