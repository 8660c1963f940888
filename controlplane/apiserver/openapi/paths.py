"""The operations of each served kind, as kube-apiserver lists them in its OpenAPI documents.

Per kind: list/create (and deletecollection, where the kind serves it) on the collection, get/replace/patch/delete on an
object, get/replace/patch on ``/status`` where served, and the all-namespaces list of a
namespaced kind. kubectl relies on two details (checked against kubectl 1.32):

* it decides that the server validates fields itself (and sends ``fieldValidation=Strict``
  instead of validating client-side) when the kind's ``patch`` operation carries
  ``x-kubernetes-group-version-kind`` and a ``fieldValidation`` query parameter;
* it sends strategic merge patches only to kinds whose ``patch`` operation accepts
  ``application/strategic-merge-patch+json`` (built-in kinds), JSON merge patches otherwise.

A create-only resource (an access review, a ServiceAccount's ``token``) has the one ``post``
of kube's, whose ``x-kubernetes-group-version-kind`` is its kind's (a TokenRequest's group for
``serviceaccounts/{name}/token``). A computed subresource that is only read (Kueue's
``clusterqueues/{name}/pendingworkloads``) has the one ``get``, named after its parent's kind.

The operations are plain values here; :mod:`.v3` and :mod:`.v2` render them in each dialect.
Pure.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING

from controlplane.apiserver.computed import ComputedResource
from controlplane.apiserver.openapi.upstream import DELETE_OPTIONS, PATCH, STATUS
from controlplane.apiserver.resources import ResourceType

if TYPE_CHECKING:
    from controlplane.apiserver.openapi.catalog import SchemaCatalog

#: Query parameters: name -> (type, description).
PARAMETERS: dict[str, tuple[str, str]] = {
    "dryRun": ("string", "When present (All), the request is processed but not persisted."),
    "fieldManager": ("string", "The name of the actor making the change."),
    "fieldValidation": ("string", "How the server treats unknown or duplicate fields: Ignore, Warn (default) or Strict."),
    "force": ("boolean", "Force an apply over conflicting fields."),
    "labelSelector": ("string", "A selector to restrict the list of returned objects by their labels."),
    "fieldSelector": ("string", "A selector to restrict the list of returned objects by their fields."),
    "continue": ("string", "The continue token of a previous page."),
    "resourceVersion": ("string", "The revision to list at or watch from."),
    "resourceVersionMatch": ("string", "How resourceVersion applies to a list: Exact or NotOlderThan."),
    "limit": ("integer", "The maximum number of items."),
    "offset": ("integer", "The position of the first item, from 0."),
    "watch": ("boolean", "Watch for changes."),
    "allowWatchBookmarks": ("boolean", "Request BOOKMARK events."),
    "timeoutSeconds": ("integer", "Timeout of a watch."),
}
_LIST = ("labelSelector", "fieldSelector", "continue", "resourceVersion", "resourceVersionMatch", "limit",
         "watch", "allowWatchBookmarks", "timeoutSeconds")
_WRITE = ("dryRun", "fieldManager", "fieldValidation")
PATCH_TYPES = ("application/json-patch+json", "application/merge-patch+json", "application/apply-patch+yaml")
STRATEGIC_MERGE_PATCH = "application/strategic-merge-patch+json"


@dataclass(frozen=True, slots=True)
class Operation:
    method: str
    operation_id: str
    action: str
    group: str
    version: str
    kind: str
    query: tuple[str, ...] = ()
    #: The request body's definition (None: no body).
    body: str | None = None
    #: The patch content types a ``patch`` operation accepts.
    consumes: tuple[str, ...] = ()
    #: The 200 response's definition (None: any object).
    response: str | None = None
    created: bool = False


@dataclass(frozen=True, slots=True)
class PathItem:
    path: str
    #: Path parameters: "namespace", "name".
    parameters: tuple[str, ...]
    operations: tuple[Operation, ...]


def _object_operations(rt: ResourceType, schema: str, *, status: bool, part: str = "status") -> list[Operation]:
    suffix = part.title() if status else ""
    op = partial(_operation, rt, f"{rt.kind}{suffix}")
    patch_types = (*PATCH_TYPES, STRATEGIC_MERGE_PATCH) if rt.strategic_merge else PATCH_TYPES
    out = [
        op("get", "read", "get", response=schema),
        op("put", "replace", "put", query=_WRITE, body=schema, response=schema, created=True),
        op("patch", "patch", "patch", query=(*_WRITE, "force"), body=PATCH, consumes=patch_types,
           response=schema, created=True),
    ]
    if not status:
        out.append(op("delete", "delete", "delete", query=("dryRun",), body=DELETE_OPTIONS, response=STATUS))
    return out


def _operation(
    rt: ResourceType,
    name: str,
    method: str,
    verb: str,
    action: str,
    *,
    query: tuple[str, ...] = (),
    body: str | None = None,
    consumes: tuple[str, ...] = (),
    response: str | None = None,
    created: bool = False,
) -> Operation:
    return Operation(method, f"{verb}{name}", action, rt.group, rt.version, rt.kind, query, body, consumes,
                     response, created)


def kind_paths(rt: ResourceType, schema: str) -> list[PathItem]:
    """The path items of one kind whose definition is ``schema``."""
    base = f"/apis/{rt.group}/{rt.version}" if rt.group else f"/api/{rt.version}"
    scope = f"{base}/namespaces/{{namespace}}/{rt.plural}" if rt.namespaced else f"{base}/{rt.plural}"
    scope_params: tuple[str, ...] = ("namespace",) if rt.namespaced else ()
    op = partial(_operation, rt, rt.kind)
    collection = [
        op("get", "list", "list", query=_LIST),
        op("post", "create", "post", query=_WRITE, body=schema, response=schema, created=True),
    ]
    if "deletecollection" in rt.verbs:
        collection.append(op("delete", "deletecollection", "deletecollection",
                             query=("dryRun", "labelSelector", "fieldSelector"), response=STATUS))
    items = [
        PathItem(scope, scope_params, tuple(collection)),
        PathItem(f"{scope}/{{name}}", (*scope_params, "name"), tuple(_object_operations(rt, schema, status=False))),
    ]
    for part in rt.status_subresources:
        items.append(
            PathItem(f"{scope}/{{name}}/{part}", (*scope_params, "name"),
                     tuple(_object_operations(rt, schema, status=True, part=part)))
        )
    if rt.finalize is not None:  # kube's namespace finalize: replace only
        finalize = _operation(rt, f"{rt.kind}Finalize", "put", "replace", "put", query=_WRITE, body=schema,
                              response=schema, created=True)
        items.append(PathItem(f"{scope}/{{name}}/finalize", (*scope_params, "name"), (finalize,)))
    if rt.namespaced:
        all_namespaces = _operation(rt, f"{rt.kind}ForAllNamespaces", "get", "list", "list", query=_LIST)
        items.append(PathItem(f"{base}/{rt.plural}", (), (all_namespaces,)))
    return items


def computed_paths(resource: ComputedResource, schema: str, list_schema: str | None = None) -> list[PathItem]:
    """The path item of a create-only resource, or of a read-only subresource, whose kind's
    definition is ``schema``; of a read-only resource, its list (``list_schema``) and get paths."""
    group, version = resource.kind_group_version
    if "list" in resource.verbs and not resource.subresource:
        return _read_only_paths(resource, schema, list_schema)
    if "create" in resource.verbs:
        operation = Operation("post", f"create{resource.kind}", "post", group, version, resource.kind, query=_WRITE,
                              body=schema, response=schema, created=True)
    else:
        name = f"{resource.parent_kind or resource.kind}{resource.subresource.title()}"
        operation = Operation("get", f"read{name}", "get", group, version, resource.kind, query=resource.query,
                              response=schema)
    parameters = (*(("namespace",) if resource.namespaced else ()), *(("name",) if resource.subresource else ()))
    return [PathItem(resource.path, parameters, (operation,))]


def _read_only_paths(resource: ComputedResource, schema: str, list_schema: str | None) -> list[PathItem]:
    """kube's list and read operations of a resource that is only read (``PodMetrics``)."""
    group, version = resource.kind_group_version
    scope: tuple[str, ...] = ("namespace",) if resource.namespaced else ()

    def read(operation_id: str, action: str, response: str | None, query: tuple[str, ...]) -> Operation:
        return Operation("get", operation_id, action, group, version, resource.kind, query=query, response=response)

    items = [
        PathItem(resource.path, scope, (read(f"list{resource.kind}", "list", list_schema, _LIST),)),
        PathItem(f"{resource.path}/{{name}}", (*scope, "name"),
                 (read(f"read{resource.kind}", "get", schema, ()),)),
    ]
    if resource.namespaced:
        every = resource.path.replace("/namespaces/{namespace}", "")
        items.append(PathItem(every, (), (read(f"list{resource.kind}ForAllNamespaces", "list", list_schema, _LIST),)))
    return items


def has_paths(resource: ComputedResource) -> bool:
    """Whether a computed resource has a path in the documents: a create-only one, a listed one,
    or a subresource that is read (a resource listed without verbs has none)."""
    return "create" in resource.verbs or "list" in resource.verbs or (
        bool(resource.subresource) and "get" in resource.verbs
    )


def all_paths(
    catalog: SchemaCatalog, types: Iterable[ResourceType], computed: Iterable[ComputedResource]
) -> list[PathItem]:
    """The path items of ``types`` and of the ``computed`` resources with a known kind."""
    items = [item for rt in types for item in kind_paths(rt, catalog.kind(rt).name)]
    for resource in computed:
        schema = catalog.computed(resource)
        if schema is not None and has_paths(resource):
            items += computed_paths(resource, schema, catalog.computed_list(resource))
    return items
