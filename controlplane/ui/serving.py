"""Serves the hub's dashboard at ``/ui``: a few static files, no build step.

In: the files in ``controlplane/ui/static`` (HTML, CSS and vanilla JavaScript, read once when
the routes are made). Out: aiohttp routes for ``/ui``, ``/ui/`` and ``/ui/<file>``, and
:func:`ui_anonymous_paths`, the exact paths a browser asks without credentials.

The static files hold no data and no secret. They are authenticated as every other path (a token
or certificate that fails is 401), and a request without credentials (a browser opening the page)
is ``system:anonymous``, which the default RBAC policy lets read them (``gpufed:public-info-viewer``);
with ``--anonymous-auth=false`` they need credentials too. The page asks for a bearer
token (kept in the browser's ``sessionStorage``) and calls the hub's JSON APIs with it, so
every number it shows passes the same authentication and authorization as ``kubectl``. Files
are served from memory with an ETag (``If-None-Match`` answers 304), compressed when the
browser accepts it, and with a Content-Security-Policy that allows only the hub's own
scripts, styles and API.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from importlib import resources

from aiohttp import web

from controlplane.apis.constants import UI_PATH

_STATIC_PACKAGE = "controlplane.ui"
_STATIC_DIR = "static"
_INDEX = "index.html"
_CONTENT_TYPES = {
    ".html": "text/html",
    ".css": "text/css",
    ".js": "text/javascript",
    ".svg": "image/svg+xml",
}
_SECURITY_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        "connect-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
    "Cache-Control": "no-cache",
}


@dataclass(frozen=True, slots=True)
class StaticFile:
    body: bytes
    content_type: str
    etag: str


def load_static_files() -> dict[str, StaticFile]:
    """Every file of the dashboard, by name."""
    out: dict[str, StaticFile] = {}
    folder = resources.files(_STATIC_PACKAGE).joinpath(_STATIC_DIR)
    for entry in folder.iterdir():
        name = entry.name
        suffix = name[name.rfind(".") :] if "." in name else ""
        if not entry.is_file() or suffix not in _CONTENT_TYPES:
            continue
        body = entry.read_bytes()
        out[name] = StaticFile(body, _CONTENT_TYPES[suffix], f'"{hashlib.sha256(body).hexdigest()[:32]}"')
    if _INDEX not in out:
        raise FileNotFoundError(f"the dashboard's {_INDEX} is missing from {_STATIC_PACKAGE}/{_STATIC_DIR}")
    return out


def _respond(request: web.Request, file: StaticFile) -> web.StreamResponse:
    if request.headers.get("If-None-Match") == file.etag:
        response = web.Response(status=304, headers={"ETag": file.etag, **_SECURITY_HEADERS})
        return response
    response = web.Response(
        body=file.body, headers={"Content-Type": f"{file.content_type}; charset=utf-8", "ETag": file.etag}
    )
    response.headers.update(_SECURITY_HEADERS)
    response.enable_compression()
    return response


def ui_anonymous_paths(files: dict[str, StaticFile] | None = None) -> list[str]:
    """The dashboard's paths, which a request without credentials may ask as ``system:anonymous``."""
    names = files if files is not None else load_static_files()
    return [UI_PATH, f"{UI_PATH}/", *(f"{UI_PATH}/{name}" for name in sorted(names))]


def ui_routes() -> list[web.RouteDef]:
    """GET routes for the dashboard's page and assets."""
    files = load_static_files()

    async def index(request: web.Request) -> web.StreamResponse:
        return _respond(request, files[_INDEX])

    async def asset(request: web.Request) -> web.StreamResponse:
        file = files.get(request.match_info["name"])
        if file is None:
            raise web.HTTPNotFound()
        return _respond(request, file)

    return [
        web.get(UI_PATH, index),
        web.get(f"{UI_PATH}/", index),
        web.get(UI_PATH + "/{name}", asset),
    ]


__all__ = ["UI_PATH", "StaticFile", "load_static_files", "ui_anonymous_paths", "ui_routes"]
