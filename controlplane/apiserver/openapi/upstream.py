"""Kube's own schemas: the definitions of every built-in kind, read from the package's data file.

``kubernetes-definitions.json.gz`` (made by :mod:`.regenerate` from ``kubernetes-validate``)
holds every definition of one Kubernetes release in the OpenAPI v2 dialect kube serves:
descriptions, ``x-kubernetes-group-version-kind``, patch strategies and merge keys, list
types. :class:`UpstreamDefinitions` looks a kind up by group, version and kind, so any
served built-in kind gets its upstream schema without naming it anywhere, and collects the
definitions a set of schemas refers to (each OpenAPI v3 document carries its own).

In: the data file. Out: read-only dicts (callers copy before changing them).
"""

from __future__ import annotations

import functools
import gzip
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

import orjson

DATA_FILE = Path(__file__).with_name("kubernetes-definitions.json.gz")
DEFINITIONS_PREFIX = "#/definitions/"

OBJECT_META = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"
LIST_META = "io.k8s.apimachinery.pkg.apis.meta.v1.ListMeta"
STATUS = "io.k8s.apimachinery.pkg.apis.meta.v1.Status"
DELETE_OPTIONS = "io.k8s.apimachinery.pkg.apis.meta.v1.DeleteOptions"
PATCH = "io.k8s.apimachinery.pkg.apis.meta.v1.Patch"
POD_TEMPLATE_SPEC = "io.k8s.api.core.v1.PodTemplateSpec"
INT_OR_STRING = "io.k8s.apimachinery.pkg.util.intstr.IntOrString"
QUANTITY = "io.k8s.apimachinery.pkg.api.resource.Quantity"
TIME = "io.k8s.apimachinery.pkg.apis.meta.v1.Time"
MICRO_TIME = "io.k8s.apimachinery.pkg.apis.meta.v1.MicroTime"


#: Keys whose values are data, never schemas: a rewrite copies them as they are.
_DATA_KEYS = frozenset({"enum", "default", "example", "x-kubernetes-group-version-kind"})


def rewrite_schema(node: Any, *, ref: Callable[[str], str], finish: Callable[[dict[str, Any]], Any]) -> Any:
    """A copy of a schema tree in another dialect: every ``$ref`` through ``ref``, and every
    schema object, once its parts are rewritten, through ``finish`` (which may change it in
    place and returns what stands for it). Property names, enums, defaults, examples and
    group-version-kinds are data: copied as they are."""

    def walk(node: Any) -> Any:
        if isinstance(node, list):
            return [walk(item) for item in node]
        if not isinstance(node, dict):
            return node
        out: dict[str, Any] = {}
        for key, value in node.items():
            if key == "$ref" and isinstance(value, str):
                out[key] = ref(value)
            elif key == "properties" and isinstance(value, dict):
                out[key] = {name: walk(sub) for name, sub in value.items()}
            elif key in _DATA_KEYS:
                out[key] = value
            else:
                out[key] = walk(value)
        return finish(out)

    return walk(node)


def refs_in(node: Any) -> Iterator[str]:
    """The definition names a schema refers to (``#/definitions/<name>``), depth first."""
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "$ref" and isinstance(value, str) and value.startswith(DEFINITIONS_PREFIX):
                yield value[len(DEFINITIONS_PREFIX):]
            elif isinstance(value, (dict, list)):
                yield from refs_in(value)
    elif isinstance(node, list):
        for item in node:
            yield from refs_in(item)


def reachable(schemas: Iterable[Any], definitions: Mapping[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """The ``definitions`` the given schemas refer to, directly or through one another."""
    out: dict[str, dict[str, Any]] = {}
    pending = [name for schema in schemas for name in refs_in(schema)]
    while pending:
        name = pending.pop()
        if name in out or name not in definitions:
            continue
        out[name] = definitions[name]
        pending.extend(refs_in(out[name]))
    return out


class UpstreamDefinitions:
    """One Kubernetes release's definitions, indexed by group-version-kind."""

    def __init__(self, release: str, definitions: Mapping[str, dict[str, Any]]) -> None:
        self.release = release
        self.definitions = definitions
        self._by_gvk: dict[tuple[str, str, str], str] = {}
        for name, schema in definitions.items():
            for gvk in schema.get("x-kubernetes-group-version-kind") or ():
                key = (gvk.get("group", ""), gvk.get("version", ""), gvk.get("kind", ""))
                # DeleteOptions, WatchEvent and friends list every group; a kind's own
                # definition lists one: prefer the narrower one.
                current = self._by_gvk.get(key)
                if current is None or len(definitions[current]["x-kubernetes-group-version-kind"]) > 1:
                    self._by_gvk[key] = name

    @classmethod
    def load(cls, path: Path = DATA_FILE) -> UpstreamDefinitions:
        data = orjson.loads(gzip.decompress(path.read_bytes()))
        return cls(data["release"], data["definitions"])

    def for_kind(self, group: str, version: str, kind: str) -> str | None:
        """The definition name of a built-in kind (``io.k8s.api.apps.v1.Deployment``), if kube has it."""
        return self._by_gvk.get((group, version, kind))

    def closure(self, schemas: Iterable[Any]) -> dict[str, dict[str, Any]]:
        """Every upstream definition the given schemas refer to, directly or through others."""
        return reachable(schemas, self.definitions)


@functools.cache
def shared_definitions() -> UpstreamDefinitions:
    """kube's definitions, read once per process (the OpenAPI documents and the built-in kinds'
    decoding, :mod:`.known_fields`, read the same)."""
    return UpstreamDefinitions.load()
