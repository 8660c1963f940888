"""The CustomResourceDefinitions of the kinds the hub serves built in, made from its registry
and written at startup (:mod:`controlplane.apis.apiextensions.builtin`).

One CRD per kind of the groups :data:`~controlplane.apis.apiextensions.builtin.GROUPS`: its
names, scope, short names and categories, every version served (the stored one ``storage:
true``), each with the ``status``/``scale`` subresources, printer columns and the CRD schema the
hub checks the kind by (an open schema where it has none), and the status of an established
CRD. They are stored objects, so lists, watches, selectors and paging serve them as any CRD;
:func:`publish` writes them straight into storage (every replica at its start; a replica that
loses a race to another leaves the other's), creating those missing and rewriting those that
differ from what this hub's registry makes, keeping their uid and creationTimestamp; a CRD of the
kind a user applied is kept as written (:func:`to_publish`).
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterable
from typing import Any

from controlplane.apis.apiextensions import builtin
from controlplane.apis.apiextensions.cel import compile_error
from controlplane.apis.apiextensions.crd import GROUP as CRD_GROUP
from controlplane.apis.apiextensions.crd import VERSION as CRD_VERSION
from controlplane.apis.apiextensions.crd import validate_crd
from controlplane.apiserver import codec
from controlplane.apiserver.crd.types import CRD_KIND
from controlplane.apiserver.objects import ObjectStore
from controlplane.apiserver.resources import AGE, ResourceType, column_json_path
from controlplane.storage import interface as storage

logger = logging.getLogger(__name__)

#: (group, plural, versions) of a kind with a CRD schema → whether kube takes its schemas in a CRD.
_SCHEMAS_TAKEN: dict[tuple[str, str, tuple[str, ...]], bool] = {}


def _storage_version(types: list[ResourceType]) -> str:
    for rt in types:
        if rt.conversion is None:
            return rt.version
    return types[0].conversion.storage_version if types[0].conversion is not None else types[0].version


def _version(rt: ResourceType, *, storage: bool, open_schema: bool) -> dict[str, Any]:
    version: dict[str, Any] = {"name": rt.version, "served": True, "storage": storage}
    schema = (
        dict(rt.crd_schema()) if rt.crd_schema is not None and not open_schema else dict(builtin.OPEN_SCHEMA)
    )
    if isinstance(schema.get("properties"), dict) and "metadata" in schema["properties"]:
        # As controller-gen writes it: the metadata is kube's own, which a CRD may not restrict.
        schema["properties"] = {**schema["properties"], "metadata": {"type": "object"}}
    version["schema"] = {"openAPIV3Schema": schema}
    subresources: dict[str, Any] = {}
    if rt.has_status:
        subresources["status"] = {}
    if rt.scale is not None:
        scale = {
            "specReplicasPath": f".{rt.scale.spec_replicas}",
            "statusReplicasPath": f".{rt.scale.status_replicas}",
        }
        if rt.scale.label_selector:
            scale["labelSelectorPath"] = f".{rt.scale.label_selector}"
        subresources["scale"] = scale
    if subresources:
        version["subresources"] = subresources
    columns = []
    for column in rt.columns:
        if column is AGE:  # as the upstream CRDs declare it
            columns.append({"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"})
            continue
        json_path = column_json_path(column)
        if json_path is None:
            continue  # a column computed in code (a count, several fields) has no JSONPath
        optional: dict[str, Any] = {
            "format": column.format,
            "description": column.description,
            "priority": column.priority,
        }
        columns.append(
            {
                "name": column.name,
                "type": column.type,
                "jsonPath": json_path,
                **{key: value for key, value in optional.items() if value},
            }
        )
    if columns:
        version["additionalPrinterColumns"] = columns
    return version


def view_crds(types: Iterable[ResourceType]) -> list[dict[str, Any]]:
    """The CRD (without server-set metadata and status) of each kind of ``types`` in
    :data:`builtin.GROUPS`, by name."""
    kinds: dict[tuple[str, str], list[ResourceType]] = {}
    for rt in types:
        if rt.group in builtin.GROUPS and rt.custom is None:
            kinds.setdefault((rt.group, rt.plural), []).append(rt)
    crds = []
    for (group, plural), versions in sorted(kinds.items()):
        first = versions[0]
        stored = _storage_version(versions)
        names: dict[str, Any] = {
            "plural": plural,
            "singular": first.singular,
            "kind": first.kind,
            "listKind": f"{first.kind}List",
        }
        if first.short_names:
            names["shortNames"] = list(first.short_names)
        if first.categories:
            names["categories"] = list(first.categories)
        crd = _crd(group, plural, names, versions, stored, open_schema=False)
        if any(rt.crd_schema is not None for rt in versions):
            key = (group, plural, tuple(rt.version for rt in versions))
            if key not in _SCHEMAS_TAKEN:  # validated once per process: the schemas do not change
                _SCHEMAS_TAKEN[key] = not validate_crd(crd, compile_rule=compile_error)
            if not _SCHEMAS_TAKEN[key]:
                # The hub's schema of the kind is not one kube takes from a CRD (a list-map key it
                # neither requires nor defaults): the open schema instead.
                crd = _crd(group, plural, names, versions, stored, open_schema=True)
        crds.append(crd)
    return crds


def _crd(
    group: str,
    plural: str,
    names: dict[str, Any],
    versions: list[ResourceType],
    stored: str,
    *,
    open_schema: bool,
) -> dict[str, Any]:
    return {
        "apiVersion": f"{CRD_GROUP}/{CRD_VERSION}",
        "kind": CRD_KIND,
        "metadata": {
            "name": f"{plural}.{group}",
            "labels": {builtin.LABEL: "true"},
            "annotations": {builtin.GENERATED: "true"},
        },
        "spec": {
            "group": group,
            "names": names,
            "scope": "Namespaced" if versions[0].namespaced else "Cluster",
            "versions": [
                _version(rt, storage=rt.version == stored, open_schema=open_schema) for rt in versions
            ],
            "conversion": {"strategy": "None"},
        },
    }


def to_publish(view: dict[str, Any], stored: dict[str, Any] | None, *, now: str) -> dict[str, Any] | None:
    """What to store for ``view`` over ``stored`` (None: nothing, it is already so). A CRD of the
    kind a user applied (over the published one, or before the hub published one: refused its
    names then, serving nothing) is kept as written, with the published one's label and status."""
    if stored is not None and builtin.is_view(stored) and not builtin.is_generated(stored):
        return None  # the user's CRD of the kind, applied over the published one
    if stored is not None and not builtin.is_view(stored) and builtin.defines_same_kind(stored, view):
        meta = dict(stored["metadata"])
        meta["labels"] = {**(meta.get("labels") or {}), builtin.LABEL: "true"}
        return {**stored, "metadata": meta, "status": builtin.view_status(stored.get("spec") or {}, now=now)}
    if (
        stored is not None
        and stored.get("spec") == view["spec"]
        and all(stored["metadata"].get(key) == view["metadata"][key] for key in ("labels", "annotations"))
    ):
        return None
    old_meta = (stored or {}).get("metadata") or {}
    generation = int(old_meta.get("generation") or 0)
    if stored is None or stored.get("spec") != view["spec"]:
        generation += 1
    meta = {
        **view["metadata"],
        "uid": old_meta.get("uid") or str(uuid.uuid4()),
        "creationTimestamp": old_meta.get("creationTimestamp") or now,
        "generation": generation,
    }
    return {**view, "metadata": meta, "status": builtin.view_status(view["spec"], now=now)}


async def publish(objects: ObjectStore, crd_type: ResourceType, types: Iterable[ResourceType]) -> None:
    """Store the CRD of every kind of ``types`` the hub serves built in (see the module)."""
    store = objects.store
    for view in view_crds(types):
        key = crd_type.key(namespace=None, name=view["metadata"]["name"])
        try:
            kv: storage.KeyValue | None = await store.get(key)
        except storage.NotFound:
            kv = None
        stored = codec.decode(kv) if kv is not None else None
        wanted = to_publish(view, stored, now=objects.now())
        if wanted is None:
            continue
        value = codec.encode(wanted, crd_type.api_version)
        try:
            if kv is None:
                await store.create(key, value)
            else:
                # A CRD of that name applied before the hub published it never served a kind
                # (its names were taken): its objects are the built-in kind's; it is kept, marked.
                await store.update(key, value, expected_revision=kv.mod_revision)
        except (storage.AlreadyExists, storage.Conflict):
            continue  # another replica wrote it first
        logger.info(
            "published CustomResourceDefinition %s for a kind served built in", view["metadata"]["name"]
        )
