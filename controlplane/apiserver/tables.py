"""``meta.k8s.io`` Table responses: what ``kubectl get`` prints.

kubectl asks for ``Accept: application/json;as=Table;v=v1;g=meta.k8s.io,...``; when a
request prefers that, the handlers answer with :func:`table` built from the resource
type's columns (NAME first, then the type's columns — or, for Events as in kube, NAME last
and wide only; priority-1 columns appear with ``-o wide``). Rows carry the object as ``PartialObjectMetadata`` (``includeObject=
Metadata``, the default), the whole object (``Object``) or nothing (``None``). The Table (and its
rows' PartialObjectMetadata) is of the version the Accept asks, ``v1`` or ``v1beta1``, as kube's
``asTable`` answers. Pure.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from enum import StrEnum
from typing import Any, Final

from controlplane.apiserver.errors import BadRequest
from controlplane.apiserver.negotiation import CONVERSION_GROUP, TABLE, Conversion, conversion_asked
from controlplane.apiserver.resources import AGE, CellGetter, ResourceType, TableColumn, path


def table_content_type(version: str) -> str:
    """The Content-Type of a Table of ``meta.k8s.io/<version>``."""
    return f"application/json;as=Table;v={version};g={CONVERSION_GROUP}"

NAME_COLUMN: dict[str, Any] = {
    "name": "Name",
    "type": "string",
    "format": "name",
    "description": "Name must be unique within a namespace. Is required when creating resources, although some "
    "resources may allow a client to request the generation of an appropriate name automatically.",
    "priority": 0,
}


class IncludeObject(StrEnum):
    NONE = "None"
    METADATA = "Metadata"
    OBJECT = "Object"

    @classmethod
    def parse(cls, value: str | None) -> IncludeObject:
        if not value:
            return cls.METADATA
        for member in cls:
            if member.value == value:
                return member
        raise BadRequest(f'includeObject: Unsupported value: "{value}": supported values: "None", "Metadata", "Object"')


def wants_table(accept: str | None, *, protobuf: bool = True) -> Conversion | None:
    """The meta.k8s.io Table (its version) the Accept clause kube's negotiation picks asks for;
    None when it asks for none. ``protobuf=False`` for a resource not served in protobuf."""
    conversion = conversion_asked(accept, protobuf=protobuf)
    return conversion if conversion is not None and conversion.kind == TABLE else None


def column_definitions(rt: ResourceType) -> list[dict[str, Any]]:
    columns = [column.definition() for column in rt.columns]
    if rt.name_first:
        return [NAME_COLUMN, *columns]
    return [*columns, {**NAME_COLUMN, "priority": 1}]


def row(
    rt: ResourceType, obj: dict[str, Any], *, include: IncludeObject, now: datetime, version: str = "v1"
) -> dict[str, Any]:
    return _row(
        rt.columns, obj, include=include, now=now, name_first=rt.name_first, version=version, name_cell=rt.name_cell
    )


def _row(
    columns: Sequence[TableColumn], obj: dict[str, Any], *, include: IncludeObject, now: datetime, name_first: bool,
    version: str, name_cell: CellGetter | None = None,
) -> dict[str, Any]:
    name = obj.get("metadata", {}).get("name", "") if name_cell is None else name_cell(obj, now)
    cells: list[Any] = [name] if name_first else []
    for column in columns:
        try:
            cells.append(column.getter(obj, now))
        except (KeyError, TypeError, ValueError, AttributeError):
            # A malformed object prints an empty cell rather than failing the listing.
            cells.append("")
    if not name_first:
        cells.append(name)
    out: dict[str, Any] = {"cells": cells}
    if include is IncludeObject.METADATA:
        out["object"] = {
            "kind": "PartialObjectMetadata",
            "apiVersion": f"{CONVERSION_GROUP}/{version}",
            "metadata": obj.get("metadata", {}),
        }
    elif include is IncludeObject.OBJECT:
        out["object"] = obj
    return out


def table(
    rt: ResourceType,
    objects: list[dict[str, Any]],
    *,
    include: IncludeObject,
    now: datetime,
    resource_version: str = "",
    continue_token: str = "",
    remaining_item_count: int | None = None,
    with_definitions: bool = True,
    version: str = "v1",
) -> dict[str, Any]:
    metadata: dict[str, Any] = {}
    if resource_version:
        metadata["resourceVersion"] = resource_version
    if continue_token:
        metadata["continue"] = continue_token
    if remaining_item_count is not None:
        metadata["remainingItemCount"] = remaining_item_count
    return {
        "kind": "Table",
        "apiVersion": f"{CONVERSION_GROUP}/{version}",
        "metadata": metadata,
        "columnDefinitions": column_definitions(rt) if with_definitions else [],
        "rows": [row(rt, obj, include=include, now=now, version=version) for obj in objects],
    }


#: kube's printer for an autoscaling Scale: what ``kubectl get <kind> <name> --subresource=scale`` shows.
SCALE_COLUMNS: Final = (
    TableColumn("Desired", path("spec.replicas", default=0), type="integer",
                description="replicas is the desired number of instances for the scaled object."),
    TableColumn("Available", path("status.replicas", default=0), type="integer",
                description="replicas is the actual number of observed instances of the scaled object."),
    AGE,
)


def scale_table(
    scale: dict[str, Any], *, include: IncludeObject, now: datetime, version: str = "v1"
) -> dict[str, Any]:
    """One Scale as kube's Table: NAME, DESIRED, AVAILABLE, AGE."""
    return {
        "kind": "Table",
        "apiVersion": f"{CONVERSION_GROUP}/{version}",
        "metadata": {},
        "columnDefinitions": [{**NAME_COLUMN, "format": ""}, *(column.definition() for column in SCALE_COLUMNS)],
        "rows": [_row(SCALE_COLUMNS, scale, include=include, now=now, name_first=True, version=version)],
    }
