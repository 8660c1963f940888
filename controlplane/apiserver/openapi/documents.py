"""The rendered OpenAPI documents of one registry, built once on first use and served by hash.

``/openapi/v3`` lists one document per group-version with its content hash
(``serverRelativeURL: /openapi/v3/apis/apps/v1?hash=...``); ``/openapi/v2`` is one document
as JSON or, for kubectl, gnostic protobuf. Each rendered body carries a strong ETag (its
hash) and its gzip form, both computed once. Nothing is rendered until a client asks:
loading kube's definitions and rendering every document costs a fraction of a second once
per server, and most servers (simulated members in tests) are never asked.
"""

from __future__ import annotations

import gzip
import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson

from controlplane.apiserver.computed import ComputedResource, served_group_versions
from controlplane.apiserver.crd.registry import DynamicRegistry
from controlplane.apiserver.openapi.catalog import SchemaCatalog
from controlplane.apiserver.openapi.gnostic import encode_document
from controlplane.apiserver.openapi.upstream import UpstreamDefinitions, shared_definitions
from controlplane.apiserver.openapi.v2 import swagger_document
from controlplane.apiserver.openapi.v3 import document_path, group_version_document
from controlplane.apiserver.resources import Registry


@dataclass(slots=True)
class Rendered:
    """One document's body, its ETag (kube's: an upper-case SHA-512 prefix) and gzip form."""

    body: bytes
    etag: str = field(init=False)
    _gzipped: bytes | None = field(default=None, init=False)

    def __post_init__(self) -> None:
        self.etag = hashlib.sha512(self.body).hexdigest()[:128].upper()

    def gzipped(self) -> bytes:
        if self._gzipped is None:
            self._gzipped = gzip.compress(self.body, compresslevel=6, mtime=0)
        return self._gzipped


@dataclass(slots=True)
class _Built:
    v3: dict[str, Rendered]
    index: Rendered
    v2_json: Rendered
    swagger: dict[str, Any]
    v2_protobuf: Rendered | None = None


def _generation(registry: Registry) -> int:
    """Changes whenever what ``registry`` serves changes (CustomResourceDefinitions)."""
    return registry.generation if isinstance(registry, DynamicRegistry) else 0


class OpenApiDocuments:
    """The documents of ``registry``; ``load_upstream`` reads kube's definitions (once)."""

    def __init__(
        self,
        registry: Registry,
        *,
        computed: Sequence[ComputedResource] = (),
        load_upstream: Callable[[], UpstreamDefinitions] = shared_definitions,
    ) -> None:
        self._registry = registry
        self._computed = tuple(computed)
        self._load_upstream = load_upstream
        self._built: _Built | None = None
        #: The registry's generation the documents were rendered for (a CRD change renders anew).
        self._generation = _generation(registry)

    @property
    def built(self) -> bool:
        return self._built is not None and self._generation == _generation(self._registry)

    def build(self) -> None:
        """Render every document now (the first request does it otherwise)."""
        self._build()

    def _build(self) -> _Built:
        if self._built is None or self._generation != _generation(self._registry):
            self._generation = _generation(self._registry)
            catalog = SchemaCatalog(self._registry, self._load_upstream())
            v3: dict[str, Rendered] = {}
            for group, versions in served_group_versions(self._registry, self._computed).items():
                for version in versions:
                    document = group_version_document(self._registry, catalog, group, version, self._computed)
                    if document is not None:
                        v3[document_path(group, version)] = Rendered(orjson.dumps(document))
            index = {
                "paths": {
                    key: {"serverRelativeURL": f"/openapi/v3/{key}?hash={rendered.etag}"}
                    for key, rendered in v3.items()
                }
            }
            swagger = swagger_document(self._registry, catalog, self._computed)
            self._built = _Built(
                v3=v3, index=Rendered(orjson.dumps(index)), v2_json=Rendered(orjson.dumps(swagger)), swagger=swagger
            )
        return self._built

    def index(self) -> dict[str, Any]:
        """``/openapi/v3``: each group-version's document with its hash."""
        return orjson.loads(self.index_rendered().body)  # type: ignore[no-any-return]

    def index_rendered(self) -> Rendered:
        return self._build().index

    def document(self, key: str) -> Rendered | None:
        """``/openapi/v3/<key>`` (``apis/apps/v1``, ``api/v1``)."""
        return self._build().v3.get(key.strip("/"))

    def swagger(self, *, protobuf: bool) -> Rendered:
        """``/openapi/v2`` as JSON or as gnostic protobuf."""
        built = self._build()
        if not protobuf:
            return built.v2_json
        if built.v2_protobuf is None:
            built.v2_protobuf = Rendered(encode_document(built.swagger))
        return built.v2_protobuf
