"""What the middleware chain keeps on a request for the handlers and filters after it.

In: nothing but aiohttp's request mapping. Out: the keys (the request's parsed
:class:`RequestInfo`, the warnings its answer carries, whether it is a custom resource's, what
its watch calls once started), the small readers of them that handlers, flow control, audit
and metrics share, and the hook that writes the warnings as ``Warning`` headers.
"""

from __future__ import annotations

from collections.abc import Callable

from aiohttp import web

from controlplane.apiserver.routing import RequestInfo

REQUEST_INFO = web.RequestKey("request_info", RequestInfo)
#: The warnings a request's write gathered, sent as ``Warning`` headers with its answer, an error
#: included (kube writes the warnings its handlers recorded whatever the outcome).
WARNINGS = web.RequestKey("warnings", list[str])
#: Set for a custom resource's request: served in JSON and YAML, never protobuf (as kube's CRDs).
UNSTRUCTURED = web.RequestKey("unstructured", bool)
#: What a watch calls once it has started, its initial events sent (kube's ``WatchInitialized``):
#: flow control sets it, and gives the watch's seats back to its level then.
WATCH_STARTED: web.RequestKey[Callable[[], None]] = web.RequestKey("watch_started")


def watch_started(request: web.Request) -> None:
    """Tell flow control a watch has started (its initial events sent, or handed to another server)."""
    started = request.get(WATCH_STARTED)
    if started is not None:
        started()


def request_warnings(request: web.Request) -> list[str]:
    """The request's warnings (:data:`WARNINGS`), kept on the request for its error answer too."""
    warnings = request.get(WARNINGS)
    if warnings is None:
        warnings = request[WARNINGS] = []
    return warnings


def warning_header(text: str) -> str:
    """A ``Warning`` header's value as kube writes one: code 299, no agent, the text quoted."""
    escaped = text.replace("\\", "\\\\").replace('"', '\\"')
    return f'299 - "{escaped}"'


async def add_warning_headers(request: web.Request, response: web.StreamResponse) -> None:
    """``on_response_prepare``: the request's warnings its answer does not carry yet (a read's, a
    watch's: kube writes whatever the request recorded, a CRD version's deprecation among them),
    each once, after those it carries."""
    warnings = request.get(WARNINGS)
    if not warnings:
        return
    present = set(response.headers.getall("Warning", ()))
    for text in warnings:
        header = warning_header(text)
        if header not in present:
            response.headers.add("Warning", header)
            present.add(header)
