"""The extension servers' OpenAPI in the hub's ``/openapi/v2`` and ``/openapi/v3``.

As kube-aggregator's openapi and openapiv3 controllers: each aggregated APIService's
``/openapi/v2`` and ``/openapi/v3/apis/<group>/<version>`` are fetched with its discovery (on a
change and every 30 s, :mod:`.registrations`), through the front proxy, bounded in time and size;
one that fails keeps its last good spec, one never fetched is left out, and only Available
APIServices are served. ``/openapi/v2`` is the hub's document merged with each spec as kube's
``MergeSpecsIgnorePathConflictRenamingDefinitionsAndParameters``: a path the hub (or a server
before) has is the hub's; a definition or parameter of the same name but other content is renamed
``<name>_v2`` (``_v3`` ...) with the references to it. ``/openapi/v3`` lists
``apis/<group>/<version>`` of each with its hash, and the document is the server's. The merged
documents are rendered once per change (hub's ETag, specs' generation) and served with kube's
ETags, ``304`` and hashes, as the hub's own.

In: the hub's rendered answers, :class:`AggregatedSpecs`. Out: the merged documents.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import orjson

from controlplane.apiserver.openapi.documents import Rendered
from controlplane.apiserver.openapi.gnostic import encode_document
from controlplane.apiserver.openapi.upstream import DEFINITIONS_PREFIX

PARAMETERS_PREFIX = "#/parameters/"


@dataclass(slots=True)
class AggregatedSpecs:
    """The last good OpenAPI documents of each aggregated APIService, by its name."""

    v2: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: ``apis/<group>/<version>`` -> (the APIService's name, the rendered v3 document).
    v3: dict[str, tuple[str, Rendered]] = field(default_factory=dict)
    generation: int = 0
    _merged: dict[tuple[str, int, tuple[str, ...]], tuple[Rendered, dict[str, Any]]] = field(default_factory=dict)
    _protobuf: dict[tuple[str, int, tuple[str, ...]], Rendered] = field(default_factory=dict)

    def set_v2(self, name: str, spec: dict[str, Any]) -> None:
        if self.v2.get(name) != spec:
            self.v2[name] = spec
            self.generation += 1

    def set_v3(self, name: str, key: str, body: bytes) -> None:
        known = self.v3.get(key)
        if known is None or known[1].body != body:
            self.v3[key] = (name, Rendered(body))
            self.generation += 1

    def forget(self, name: str) -> None:
        dropped = self.v2.pop(name, None) is not None
        for key in [k for k, (owner, _) in self.v3.items() if owner == name]:
            del self.v3[key]
            dropped = True
        if dropped:
            self.generation += 1

    def served_v2(self, served: Iterable[str]) -> tuple[str, ...]:
        """Those of the ``served`` APIServices with a v2 spec."""
        return tuple(name for name in served if name in self.v2)

    def merged_v2(self, hub_etag: str, hub_body: bytes, names: tuple[str, ...], *, protobuf: bool) -> Rendered:
        """The hub's ``/openapi/v2`` (its ETag, its JSON) merged with the specs of the APIServices
        ``names``, rendered once per change."""
        key = (hub_etag, self.generation, names)
        if key not in self._merged:
            self._merged.clear()
            self._protobuf.clear()
            document = merge_specs(orjson.loads(hub_body), [self.v2[name] for name in names])
            self._merged[key] = (Rendered(orjson.dumps(document)), document)
        rendered, document = self._merged[key]
        if not protobuf:
            return rendered
        if key not in self._protobuf:
            self._protobuf[key] = Rendered(encode_document(document))
        return self._protobuf[key]

    def index(self, hub_index: dict[str, Any], served: Iterable[str]) -> Rendered:
        """The hub's ``/openapi/v3`` index with each served APIService's documents."""
        wanted = set(served)
        paths = dict(hub_index.get("paths") or {})
        for key, (name, rendered) in sorted(self.v3.items()):
            if name in wanted and key not in paths:
                paths[key] = {"serverRelativeURL": f"/openapi/v3/{key}?hash={rendered.etag}"}
        return Rendered(orjson.dumps({**hub_index, "paths": paths}))


def _rewrite_refs(node: Any, renames: dict[str, str]) -> Any:
    if isinstance(node, dict):
        out = {k: _rewrite_refs(v, renames) for k, v in node.items()}
        ref = out.get("$ref")
        if isinstance(ref, str) and ref in renames:
            out["$ref"] = renames[ref]
        return out
    if isinstance(node, list):
        return [_rewrite_refs(v, renames) for v in node]
    return node


def _renames(have: dict[str, Any], theirs: dict[str, Any], prefix: str) -> dict[str, str]:
    """``theirs``' names that ``have`` holds with other content, and the name each takes."""
    out: dict[str, str] = {}
    for name, value in theirs.items():
        if name in have and have[name] != value:
            n = 2
            while f"{name}_v{n}" in have or f"{name}_v{n}" in theirs:
                n += 1
            out[prefix + name] = f"{prefix}{name}_v{n}"
    return out


def merge_specs(hub: dict[str, Any], specs: list[dict[str, Any]]) -> dict[str, Any]:
    """kube's ``MergeSpecsIgnorePathConflictRenamingDefinitionsAndParameters`` of ``specs`` into
    ``hub`` (which is not changed)."""
    out = copy.copy(hub)
    out["paths"] = dict(hub.get("paths") or {})
    out["definitions"] = dict(hub.get("definitions") or {})
    parameters = dict(hub.get("parameters") or {})
    for spec in specs:
        definitions = spec.get("definitions") or {}
        theirs_parameters = spec.get("parameters") or {}
        if not isinstance(definitions, dict) or not isinstance(theirs_parameters, dict):
            continue
        paths = {p: item for p, item in (spec.get("paths") or {}).items() if p not in out["paths"]}
        renames = {**_renames(out["definitions"], definitions, DEFINITIONS_PREFIX),
                   **_renames(parameters, theirs_parameters, PARAMETERS_PREFIX)}
        if renames:
            paths = _rewrite_refs(paths, renames)
            definitions = _rewrite_refs(definitions, renames)
            theirs_parameters = _rewrite_refs(theirs_parameters, renames)
        for name, schema in definitions.items():
            target = renames.get(DEFINITIONS_PREFIX + name, DEFINITIONS_PREFIX + name).removeprefix(DEFINITIONS_PREFIX)
            out["definitions"].setdefault(target, schema)
        for name, parameter in theirs_parameters.items():
            target = renames.get(PARAMETERS_PREFIX + name, PARAMETERS_PREFIX + name).removeprefix(PARAMETERS_PREFIX)
            parameters.setdefault(target, parameter)
        out["paths"].update(paths)
    if parameters:
        out["parameters"] = parameters
    out["paths"] = dict(sorted(out["paths"].items()))
    return out
