"""kube's max-in-flight filter, what limits requests when API Priority and Fairness is off
(``--enable-priority-and-fairness=false``): at most ``--max-requests-inflight`` read-only requests
(``get``, ``list``, ``watch``; 0: no limit) and ``--max-mutating-requests-inflight`` others at once;
beyond them a request is answered 429 at once, with no queue and no priority levels. Members of
``system:masters`` are never limited, as in kube; long-running requests are not counted.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Final

from aiohttp import web
from aiohttp.typedefs import Middleware

from controlplane.apiserver import errors
from controlplane.apiserver.identity import SYSTEM_MASTERS, UserInfo
from controlplane.apiserver.requeststate import REQUEST_INFO

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]

_READ_ONLY_VERBS: Final = frozenset({"get", "list", "watch"})
RETRY_AFTER_SECONDS: Final = 1


@dataclass(frozen=True, slots=True)
class MaxInFlightConfig:
    #: Read-only and mutating requests at once (0: no limit of that kind).
    read_only: int
    mutating: int


class MaxInFlight:
    def __init__(self, config: MaxInFlightConfig) -> None:
        self.config = config
        self.read_only = 0
        self.mutating = 0

    def middleware(
        self, *, user_key: web.RequestKey[UserInfo], not_counted: Callable[[web.Request], bool]
    ) -> Middleware:
        @web.middleware
        async def max_in_flight(request: web.Request, handler: Handler) -> web.StreamResponse:
            user = request.get(user_key)
            if not_counted(request) or (user is not None and SYSTEM_MASTERS in user.groups):
                return await handler(request)
            info = request.get(REQUEST_INFO)
            mutating = (info.verb if info is not None else request.method.lower()) not in _READ_ONLY_VERBS
            limit = self.config.mutating if mutating else self.config.read_only
            if limit <= 0:
                return await handler(request)
            if (self.mutating if mutating else self.read_only) >= limit:
                raise errors.TooManyRequests(
                    "Too many requests, please try again later.", retry_after_seconds=RETRY_AFTER_SECONDS
                )
            self._count(mutating, 1)
            try:
                return await handler(request)
            finally:
                self._count(mutating, -1)

        return max_in_flight

    def _count(self, mutating: bool, step: int) -> None:
        if mutating:
            self.mutating += step
        else:
            self.read_only += step
