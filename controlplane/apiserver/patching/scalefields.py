"""Field ownership through the scale subresource, as kube-apiserver's ``ScaleHandler`` keeps it.

A Scale has no managedFields of its own: kube shows the field managers of its parent object
(a Deployment, a custom resource with a scale subresource) to the write of the Scale, and
writes what that write leaves back into the parent. :func:`to_subresource` gives the Scale's
entries: every parent entry that owns the parent's replicas field, owning ``spec.replicas``
instead. :func:`to_parent` merges the Scale's entries, after the write, back into the parent's:
an entry the write took the replicas from loses the parent's replicas field (and goes when it
owned nothing else); a manager new to the replicas (an apply through ``/scale``) gets an entry
owning the parent's replicas field at the parent's version, without a time (kube takes the
times from the parent's entries, where the new manager has none); an entry the write left
alone stays as it was. Entries at a version the kind is not served at are dropped, as kube drops
them.

In: the raw managedFields lists and ``replicas_paths``, the parent's replicas field by served
apiVersion (None for a version without a scale subresource). Out: new lists; inputs unchanged.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from controlplane.apiserver.patching.fieldpaths import (
    FieldsError,
    Path,
    decode_fields,
    encode_fields,
    field_element,
)

#: ``spec.replicas`` of an autoscaling/v1 Scale.
SCALE_REPLICAS: Path = (field_element("spec"), field_element("replicas"))

ReplicasPaths = Mapping[str, Path | None]


def replicas_path(dotted: str) -> Path:
    """A kind's replicas field (``spec.replicas``) as a field path."""
    return tuple(field_element(part) for part in dotted.split("."))


def to_subresource(parent_entries: Any, replicas_paths: ReplicasPaths) -> list[dict[str, Any]]:
    """The managedFields a write of the Scale sees: the parent's entries that own its replicas."""
    out = []
    for entry, fields in _decoded(parent_entries):
        path = replicas_paths.get(str(entry.get("apiVersion") or ""))
        if path is not None and path in fields:
            out.append({**entry, "fieldsV1": encode_fields({SCALE_REPLICAS})})
    return out


def to_parent(
    parent_entries: Any, scale_entries: Any, replicas_paths: ReplicasPaths, *, api_version: str
) -> list[dict[str, Any]]:
    """The parent's managedFields after a write of its Scale left ``scale_entries``; ``api_version``:
    the parent's, at which a new manager of the replicas is recorded."""
    by_manager = {_identity(entry): (entry, fields) for entry, fields in _decoded(scale_entries)}
    parent_times = {_identity(entry): entry.get("time") for entry, _ in _decoded(parent_entries)}
    out: dict[tuple[str, str, str, str], dict[str, Any]] = {}
    for entry, fields in _decoded(parent_entries):
        version = str(entry.get("apiVersion") or "")
        if version not in replicas_paths:
            continue
        path, identity = replicas_paths[version], _identity(entry)
        if path is None or path not in fields:
            out[identity] = entry
        elif identity in by_manager:
            out[identity] = entry
            del by_manager[identity]
        elif rest := fields - {path}:
            out[identity] = {**entry, "fieldsV1": encode_fields(rest)}
    own_path = replicas_paths.get(api_version)
    for identity, (entry, fields) in by_manager.items():
        if SCALE_REPLICAS not in fields or own_path is None:
            continue
        moved: dict[str, Any] = {key: entry[key] for key in ("manager", "operation") if key in entry}
        moved["apiVersion"] = api_version
        if parent_times.get(identity) is not None:
            moved["time"] = parent_times[identity]
        moved["fieldsType"] = "FieldsV1"
        moved["fieldsV1"] = encode_fields({own_path})
        if entry.get("subresource"):
            moved["subresource"] = entry["subresource"]
        out[identity] = moved
    # kube's order: operation, then time (none first), manager, version, subresource.
    return sorted(
        out.values(),
        key=lambda e: (
            str(e.get("operation") or ""), str(e.get("time") or ""), str(e.get("manager") or ""),
            str(e.get("apiVersion") or ""), str(e.get("subresource") or ""),
        ),
    )


def _identity(entry: Mapping[str, Any]) -> tuple[str, str, str, str]:
    """kube's manager identifier: an applier's leaves its version out."""
    operation = str(entry.get("operation") or "")
    version = "" if operation == "Apply" else str(entry.get("apiVersion") or "")
    return (str(entry.get("manager") or ""), operation, str(entry.get("subresource") or ""), version)


def _decoded(entries: Any) -> list[tuple[dict[str, Any], set[Path]]]:
    """The readable entries of a managedFields list with their field sets (kube refuses an
    unreadable list; the hub never stores one, and the writes that read it drop such entries)."""
    out = []
    for entry in entries if isinstance(entries, list) else []:
        if not isinstance(entry, dict):
            continue
        try:
            out.append((entry, decode_fields(entry.get("fieldsV1", {}))))
        except FieldsError:
            continue
    return out
