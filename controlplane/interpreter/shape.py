"""Is a stored workload shaped so that the interpreters can read it?

Why: the hub may hold objects no validation checked (written before the API validated
built-in kinds, restored from a backup, written straight to etcd): a Deployment whose
``spec.template`` is ``true``, a ConfigMap whose ``data`` holds a list. The interpreters read
such fields as mappings and lists; fed a wrong type they would raise, and a controller that
retries would loop on it forever. Controllers ask :func:`malformed` first and turn a
malformed object into a condition and an Event on it -- a value, not an exception.

In: a workload as stored (a JSON-compatible dict). Out: ``None`` when every field the hub
reads has the JSON type Kubernetes gives it, else :class:`InvalidObject` naming the first
field that does not (``spec.template.spec.containers[0].resources``) and what it should be.
Only the shape the hub relies on is checked (objects, arrays, strings, integers of the
fields the interpreters read); everything else is the member cluster's API to validate.
``metadata.managedFields`` (the writers' field sets, often as large as the rest of the object)
is not walked: nothing the hub interprets reads it. Controllers ask on every reconcile, so the
walk builds a field's path only for the field it reports. Pure.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["InvalidObject", "malformed"]

_OBJECT, _ARRAY, _STRING, _INTEGER = "object", "array", "string", "integer"

#: Field name -> the JSON type Kubernetes gives it, wherever it appears in a workload (the
#: field names interpreters, selectors and dependency discovery read).
_FIELD_TYPES: Mapping[str, str] = {
    "metadata": _OBJECT,
    "labels": _OBJECT,
    "annotations": _OBJECT,
    "spec": _OBJECT,
    "template": _OBJECT,
    "selector": _OBJECT,
    "matchLabels": _OBJECT,
    "containers": _ARRAY,
    "initContainers": _ARRAY,
    "ephemeralContainers": _ARRAY,
    "resources": _OBJECT,
    "requests": _OBJECT,
    "limits": _OBJECT,
    "env": _ARRAY,
    "envFrom": _ARRAY,
    "volumes": _ARRAY,
    "volumeMounts": _ARRAY,
    "imagePullSecrets": _ARRAY,
    "nodeSelector": _OBJECT,
    "tolerations": _ARRAY,
    "affinity": _OBJECT,
    "configMap": _OBJECT,
    "secret": _OBJECT,
    "projected": _OBJECT,
    "sources": _ARRAY,
    "valueFrom": _OBJECT,
    "configMapRef": _OBJECT,
    "secretRef": _OBJECT,
    "configMapKeyRef": _OBJECT,
    "secretKeyRef": _OBJECT,
    "persistentVolumeClaim": _OBJECT,
    "serviceAccountName": _STRING,
    "replicas": _INTEGER,
    "parallelism": _INTEGER,
    "completions": _INTEGER,
}
#: Top-level fields of ConfigMaps and Secrets: string values by key.
_STRING_MAPS = frozenset({"data", "binaryData", "stringData"})
#: Maps whose keys are user data (labels, resource names...): their values are not field names.
_OPAQUE_MAPS = frozenset({"labels", "annotations", "matchLabels", "nodeSelector", "requests", "limits"})
#: Subtrees no interpreter reads whose field names clash with those above: a DRA claim's
#: ``devices`` (its ``requests`` are a list of device requests, not resource amounts). What the hub
#: reads of them (:mod:`controlplane.apis.dra`) reads any shape.
_UNREAD_SUBTREES = frozenset({"devices"})
#: Of those, the maps whose values are strings.
_STRING_VALUED = frozenset({"labels", "annotations", "matchLabels", "nodeSelector"})
#: Arrays whose items are objects.
_ARRAYS_OF_OBJECTS = frozenset({
    "containers", "initContainers", "ephemeralContainers", "env", "envFrom", "volumes", "volumeMounts",
    "imagePullSecrets", "tolerations", "sources",
})
#: Past this depth nothing the hub reads lives; a deeper object is not walked.
_MAX_DEPTH = 24


@dataclass(frozen=True, slots=True)
class InvalidObject:
    """The first field of an object whose JSON type is not the one Kubernetes gives it."""

    path: str
    expected: str
    found: str
    #: Said instead of "must be <expected>, got <found>" when set.
    detail: str = ""
    #: The whole message after the path when set (a kube validation message: ``Required value``).
    body: str = ""

    def at(self, path: str) -> InvalidObject:
        """The same finding at ``path``."""
        return dataclasses.replace(self, path=path)

    @property
    def message(self) -> str:
        if self.body:
            return f"{self.path}: {self.body}"
        if self.detail:
            return f"{self.path}: Invalid value: {self.detail}"
        return f"{self.path}: Invalid value: must be {_article(self.expected)}, got {_article(self.found)}"


def _article(json_type: str) -> str:
    return f"an {json_type}" if json_type[0] in "aeiou" else f"a {json_type}"


def _json_type(value: Any) -> str:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return _INTEGER
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return _STRING
    if isinstance(value, Mapping):
        return _OBJECT
    if isinstance(value, list):
        return _ARRAY
    return "null" if value is None else type(value).__name__


def _fits(value: Any, expected: str) -> bool:
    if value is None:
        return True  # absent and null read the same everywhere the hub reads
    found = _json_type(value)
    if expected == _INTEGER:
        return found == _INTEGER or (found == _STRING and value.isdigit())
    return found == expected


def malformed(obj: Any) -> InvalidObject | None:
    """The first field of ``obj`` whose type the hub cannot read, or None (see the module doc)."""
    if not isinstance(obj, Mapping):
        return InvalidObject(path="<object>", expected=_OBJECT, found=_json_type(obj))
    for key in _STRING_MAPS:
        values = obj.get(key)
        if values is None:
            continue
        if not isinstance(values, Mapping):
            return InvalidObject(path=key, expected=_OBJECT, found=_json_type(values))
        for name, value in values.items():
            if not isinstance(value, str):
                return InvalidObject(path=f"{key}.{name}", expected=_STRING, found=_json_type(value))
    found = _walk(obj, 0)
    return None if found is None else found.at(_root_path(found.path))


#: Fields of ``metadata`` the walk skips: bookkeeping no interpreter reads, as large as the
#: object itself (``managedFields``: a field set per writer).
_UNREAD_METADATA = frozenset({"managedFields"})


def _root_path(path: str) -> str:
    return path[1:] if path.startswith(".") else path


def _walk(value: Any, depth: int) -> InvalidObject | None:
    """The first malformed field below ``value``, its path relative to ``value`` (``.spec.replicas``,
    ``[0].name``): the path is built only for the field found, on the way back up."""
    if depth > _MAX_DEPTH:
        return None
    if isinstance(value, Mapping):
        top = depth == 0
        for key, child in value.items():
            name = key if isinstance(key, str) else str(key)
            expected = _FIELD_TYPES.get(name)
            if expected is not None and not _fits(child, expected):
                return InvalidObject(path=f".{name}", expected=expected, found=_json_type(child))
            if name in _STRING_VALUED and isinstance(child, Mapping):
                for item_name, item in child.items():
                    if not isinstance(item, str):
                        return InvalidObject(path=f".{name}.{item_name}", expected=_STRING, found=_json_type(item))
            if name in _ARRAYS_OF_OBJECTS and isinstance(child, list):
                for index, item in enumerate(child):
                    if not isinstance(item, Mapping):
                        return InvalidObject(path=f".{name}[{index}]", expected=_OBJECT, found=_json_type(item))
            if name in _OPAQUE_MAPS or name in _UNREAD_SUBTREES or (top and name in _STRING_MAPS):
                continue
            if top and name == "metadata" and isinstance(child, Mapping):
                found = _walk({k: v for k, v in child.items() if k not in _UNREAD_METADATA}, depth + 1)
            elif isinstance(child, Mapping | list):
                found = _walk(child, depth + 1)
            else:
                continue
            if found is not None:
                return found.at(f".{name}{found.path}")
    elif isinstance(value, list):
        for index, item in enumerate(value):
            if isinstance(item, Mapping | list):
                found = _walk(item, depth + 1)
                if found is not None:
                    return found.at(f"[{index}]{found.path}")
    return None
