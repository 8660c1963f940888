"""Discovery documents: how kubectl and client libraries learn what the server serves.

``/version``, ``/api`` (APIVersions), ``/api/v1`` and ``/apis/<g>/<v>``
(APIResourceList), ``/apis`` (APIGroupList) and ``/apis/<g>`` (APIGroup), all built
from a :class:`Registry` of stored kinds and the create-only resources served beside them
(:class:`ComputedResource`: the access reviews, ``serviceaccounts/token``…), listed as kube
lists them: verbs ``create`` alone, no storage version hash; a group-version's resources by path
(a subresource after its resource) and the groups by their APIServices' priority, as kube orders
them. kubectl first asks ``/apis`` for aggregated discovery; the plain
``APIGroupList`` with ``Content-Type: application/json`` is accepted instead, and kubectl then
reads each group-version's ``APIResourceList``.
Pure: in a registry and the create-only resources, out JSON-ready dicts.
"""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Sequence
from typing import Any

from controlplane.apis.kube.apiregistration import CRD_PRIORITY, KUBE_PRIORITIES
from controlplane.apiserver.computed import ComputedResource, served_group_versions
from controlplane.apiserver.resources import STATUS_VERBS, Registry, ResourceType

#: The Kubernetes API level this server speaks (kubectl warns on larger skews).
KUBE_MAJOR = "1"
KUBE_MINOR = "32"


#: The version ``/version`` reports.
GIT_VERSION = "v1.32.0-gpufed"


def openapi_version() -> str:
    """The ``info.version`` of the OpenAPI documents: the server's version up to its first ``-``,
    as kube's generic API server sets it."""
    return GIT_VERSION.split("-")[0]


def version_info(*, git_version: str = GIT_VERSION) -> dict[str, str]:
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


def _computed_entry(resource: ComputedResource) -> dict[str, Any]:
    entry: dict[str, Any] = {"name": resource.name, "singularName": resource.singular, "namespaced": resource.namespaced}
    if resource.kind_group is not None:
        entry["group"] = resource.kind_group
    if resource.kind_version is not None:
        entry["version"] = resource.kind_version
    entry = {**entry, "kind": resource.kind, "verbs": list(resource.verbs)}
    if resource.short_names:
        entry["shortNames"] = list(resource.short_names)
    return entry


def _with_computed(resources: list[dict[str, Any]], computed: Sequence[ComputedResource]) -> list[dict[str, Any]]:
    """``resources`` with the create-only ones: a subresource after its parent's entries, the
    others after the stored kinds, in kube's (alphabetical) order."""
    out = list(resources)
    for resource in sorted(computed, key=lambda r: r.name):
        if resource.subresource:
            parent = [i for i, entry in enumerate(out) if entry["name"].partition("/")[0] == resource.plural]
            if parent:
                out.insert(parent[-1] + 1, _computed_entry(resource))
                continue
        out.append(_computed_entry(resource))
    return out


def api_resource_list(
    registry: Registry, group: str, version: str, computed: Sequence[ComputedResource] = ()
) -> dict[str, Any] | None:
    types = registry.in_group_version(group, version)
    served = [r for r in computed if (r.group, r.version) == (group, version)]
    if not types and not served:
        return None
    resources: list[dict[str, Any]] = []
    for rt in types:
        entry: dict[str, Any] = {
            "name": rt.plural,
            "singularName": rt.singular,
            "namespaced": rt.namespaced,
            "kind": rt.kind,
            "verbs": list(rt.verbs),
            "storageVersionHash": _storage_version_hash(rt),
        }
        if rt.short_names:
            entry["shortNames"] = list(rt.short_names)
        if rt.categories:
            entry["categories"] = list(rt.categories)
        resources.append(entry)
        for part in rt.status_subresources:
            resources.append(
                {
                    "name": f"{rt.plural}/{part}",
                    "singularName": "",
                    "namespaced": rt.namespaced,
                    "kind": rt.kind,
                    "verbs": list(STATUS_VERBS),
                }
            )
        if rt.finalize is not None:
            resources.append(
                {
                    "name": f"{rt.plural}/finalize",
                    "singularName": "",
                    "namespaced": rt.namespaced,
                    "kind": rt.kind,
                    "verbs": ["update"],
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
        # kube lists a group-version's resources by path, each subresource after its resource
        # (the API installer sorts them; the CRD handler sorts a group's custom resources).
        "resources": sorted(_with_computed(resources, served), key=lambda entry: entry["name"]),
    }


def _group_priority(group: str, versions: Sequence[str]) -> int:
    return max((KUBE_PRIORITIES.get((group, v), CRD_PRIORITY)[0] for v in versions), default=CRD_PRIORITY[0])


def groups_in_order(registry: Registry, computed: Sequence[ComputedResource] = ()) -> list[tuple[str, list[str]]]:
    """The served groups and their versions in kube's discovery order: by the priority of the
    group's APIServices (kube-apiserver's ``apiVersionPriorities``; a group kube serves through
    CustomResourceDefinitions has theirs, 1000), the higher first, then by name. kubectl reads
    the groups in this order: ``kubectl get all`` lists pods, services, then apps' kinds,
    autoscaling's, batch's."""
    served = served_group_versions(registry, computed)
    return sorted(served.items(), key=lambda item: (-_group_priority(*item), item[0]))


def _group(group: str, versions: list[str]) -> dict[str, Any]:
    entries = [{"groupVersion": f"{group}/{v}", "version": v} for v in versions]
    return {"name": group, "versions": entries, "preferredVersion": entries[0]}


def api_group_list(registry: Registry, computed: Sequence[ComputedResource] = ()) -> dict[str, Any]:
    groups = [
        _group(group, versions)
        for group, versions in groups_in_order(registry, computed)
        if group  # the core group is served under /api
    ]
    return {"kind": "APIGroupList", "apiVersion": "v1", "groups": groups}


def api_group(registry: Registry, group: str, computed: Sequence[ComputedResource] = ()) -> dict[str, Any] | None:
    versions = served_group_versions(registry, computed).get(group)
    if not group or not versions:
        return None
    return {"kind": "APIGroup", "apiVersion": "v1", **_group(group, versions)}


#: The media type of aggregated discovery (kube's ``APIGroupDiscoveryList``), by version.
AGGREGATED_GROUP = "apidiscovery.k8s.io"
AGGREGATED_VERSIONS = ("v2", "v2beta1")


def aggregated_content_type(version: str) -> str:
    return f"application/json;g={AGGREGATED_GROUP};v={version};as=APIGroupDiscoveryList"


def wanted_aggregated_version(accept: str | None) -> str | None:
    """The ``apidiscovery.k8s.io`` version of the first aggregated media type ``accept`` lists that
    the hub serves, before any plain JSON (kubectl lists v2, v2beta1, then ``application/json``);
    None: the plain documents."""
    for entry in (accept or "").split(","):
        media, *params = (part.strip() for part in entry.split(";"))
        values = dict(param.partition("=")[::2] for param in params)
        if media.lower() not in ("application/json", "*/*", "application/*"):
            continue
        if values.get("g") == AGGREGATED_GROUP and values.get("as") == "APIGroupDiscoveryList":
            if values.get("v") in AGGREGATED_VERSIONS:
                return values["v"]
            continue
        return None
    return None


def _gvk(group: str, version: str, kind: str) -> dict[str, str]:
    return {"group": group, "version": version, "kind": kind}


def aggregated_resources(listed: dict[str, Any], group: str, version: str) -> list[dict[str, Any]]:
    """An APIResourceList's entries as aggregated discovery's: each subresource under its resource."""
    out: list[dict[str, Any]] = []
    by_name: dict[str, dict[str, Any]] = {}
    for entry in listed["resources"]:
        kind = _gvk(entry.get("group", group), entry.get("version", version), entry["kind"])
        parent, _, sub = entry["name"].partition("/")
        if sub:
            owner = by_name.get(parent)
            if owner is not None:
                owner.setdefault("subresources", []).append(
                    {"subresource": sub, "responseKind": kind, "verbs": list(entry["verbs"])}
                )
            continue
        resource: dict[str, Any] = {
            "resource": entry["name"],
            "responseKind": kind,
            "scope": "Namespaced" if entry["namespaced"] else "Cluster",
            "singularResource": entry["singularName"],
            "verbs": list(entry["verbs"]),
        }
        for key in ("shortNames", "categories"):
            if entry.get(key):
                resource[key] = list(entry[key])
        by_name[entry["name"]] = resource
        out.append(resource)
    return out


def aggregated(
    registry: Registry, computed: Sequence[ComputedResource] = (), *, core: bool, version: str = "v2"
) -> dict[str, Any]:
    """Aggregated discovery: ``/api``'s (``core``: the core group) or ``/apis``' groups, each with
    its versions (the preferred first) and their resources, as kube-apiserver answers kubectl."""
    items: list[dict[str, Any]] = []
    for group, versions in groups_in_order(registry, computed):
        if bool(group) == core:
            continue
        entries = []
        for served in versions:
            listed = api_resource_list(registry, group, served, computed)
            if listed is not None:
                entries.append({
                    "version": served,
                    "resources": aggregated_resources(listed, group, served),
                    "freshness": "Current",
                })
        metadata: dict[str, Any] = {"name": group} if group else {}
        items.append({"metadata": {**metadata, "creationTimestamp": None}, "versions": entries})
    return {
        "kind": "APIGroupDiscoveryList",
        "apiVersion": f"{AGGREGATED_GROUP}/{version}",
        "metadata": {},
        "items": items,
    }
