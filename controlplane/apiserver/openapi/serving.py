"""The OpenAPI endpoints over HTTP, with kube's caching headers.

``GET /openapi/v3`` (the index), ``GET /openapi/v3/<apis/group/version>[?hash=H]`` and
``GET /openapi/v2`` (JSON, or gnostic protobuf when the ``Accept`` header asks for it). As
kube-apiserver does: every document has a strong ``ETag`` and answers ``If-None-Match`` with
304; a v3 document asked for by its current hash is ``Cache-Control: public, immutable``, and
by a stale hash is redirected (301) to the current one; bodies are gzip-compressed for
clients that accept it (kubectl's Go transport does). The documents are rendered once, in a
worker thread, on the first request, so the server's event loop never stalls on them.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from email.utils import formatdate

from aiohttp import web

from controlplane.apiserver import errors
from controlplane.apiserver.computed import ComputedResource
from controlplane.apiserver.openapi.documents import OpenApiDocuments, Rendered
from controlplane.apiserver.openapi.gnostic import ACCEPTED_MEDIA_TYPES as PROTOBUF_ACCEPTS
from controlplane.apiserver.openapi.gnostic import MEDIA_TYPE as PROTOBUF_MEDIA_TYPE
from controlplane.apiserver.resources import Registry

JSON = "application/json"
_YEAR_SECONDS = 365 * 24 * 3600


def serve(request: web.Request, rendered: Rendered, content_type: str, *, immutable: bool = False) -> web.Response:
    etag = f'"{rendered.etag}"'
    headers = {"ETag": etag, "Vary": "Accept, Accept-Encoding", "Content-Type": content_type}
    if immutable:
        headers["Cache-Control"] = "public, immutable"
        headers["Expires"] = formatdate(time.time() + _YEAR_SECONDS, usegmt=True)
    else:
        headers["Cache-Control"] = "no-cache, private"
    if etag in {tag.strip() for tag in request.headers.get("If-None-Match", "").split(",")}:
        return web.Response(status=304, headers={k: v for k, v in headers.items() if k != "Content-Type"})
    if "gzip" in request.headers.get("Accept-Encoding", ""):
        headers["Content-Encoding"] = "gzip"
        return web.Response(body=rendered.gzipped(), headers=headers)
    return web.Response(body=rendered.body, headers=headers)


def serve_v3_document(request: web.Request, key: str, rendered: Rendered) -> web.Response:
    """``/openapi/v3/<key>``: immutable when asked by its current hash, redirected (301) to it
    when asked by another."""
    asked = request.query.get("hash")
    if asked and asked != rendered.etag:
        location = f"/openapi/v3/{key.strip('/')}?hash={rendered.etag}"
        return web.Response(status=301, headers={"Location": location, "Cache-Control": "no-cache, private"})
    return serve(request, rendered, JSON, immutable=bool(asked))


class OpenApiEndpoints:
    """The handlers of one server; ``documents`` defaults to the registry's."""

    def __init__(
        self,
        registry: Registry,
        *,
        computed: Sequence[ComputedResource] = (),
        documents: OpenApiDocuments | None = None,
    ) -> None:
        self._documents = documents or OpenApiDocuments(registry, computed=computed)
        self._lock = asyncio.Lock()

    async def _ready(self) -> OpenApiDocuments:
        if not self._documents.built:
            async with self._lock:
                if not self._documents.built:
                    await asyncio.to_thread(self._documents.build)
        return self._documents

    async def index(self, request: web.Request) -> web.StreamResponse:
        documents = await self._ready()
        return serve(request, documents.index_rendered(), JSON)

    async def v3_document(self, request: web.Request) -> web.StreamResponse:
        documents = await self._ready()
        key = request.match_info["tail"]
        rendered = documents.document(key)
        if rendered is None:
            raise errors.NotFound("the server could not find the requested resource")
        return serve_v3_document(request, key, rendered)

    async def v2(self, request: web.Request) -> web.StreamResponse:
        documents = await self._ready()
        accept = request.headers.get("Accept", "")
        if any(media in accept for media in PROTOBUF_ACCEPTS):
            return serve(request, documents.swagger(protobuf=True), PROTOBUF_MEDIA_TYPE)
        return serve(request, documents.swagger(protobuf=False), JSON)

    def routes(self) -> list[web.RouteDef]:
        return [
            web.get("/openapi/v3", self.index),
            web.get("/openapi/v3/{tail:.+}", self.v3_document),
            web.get("/openapi/v2", self.v2),
        ]
