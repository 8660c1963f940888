"""The errors of the agent's API clients: one class per Kubernetes ``Status`` the agent tells apart.

In: an HTTP status code and a response body (a Kubernetes ``Status``). Out: an :class:`ApiError`
subclass with the ``Status`` message preserved; :func:`is_retryable` says which failures are
worth retrying.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import aiohttp


class ApiError(Exception):
    """A non-2xx answer (or a transport failure when ``code`` is 0)."""

    def __init__(
        self, code: int, reason: str, message: str, *, status: Mapping[str, Any] | None = None
    ) -> None:
        super().__init__(f"{code} {reason}: {message}")
        self.code = code
        self.reason = reason
        self.message = message
        self.status = dict(status or {})


class NotFound(ApiError):
    pass


class AlreadyExists(ApiError):
    pass


class Conflict(ApiError):
    pass


class Gone(ApiError):
    pass


class Unauthorized(ApiError):
    pass


class Forbidden(ApiError):
    pass


class Unavailable(ApiError):
    """Transport failures, timeouts, 429 and 5xx: worth retrying."""


def error_from_status(code: int, body: bytes) -> ApiError:
    status: dict[str, Any] = {}
    try:
        parsed = json.loads(body) if body else {}
        if isinstance(parsed, dict):
            status = parsed
    except ValueError:
        pass
    reason = str(status.get("reason") or "")
    message = str(status.get("message") or body[:500].decode("utf-8", errors="replace"))
    if code == 404:
        return NotFound(code, reason or "NotFound", message, status=status)
    if code == 409:
        cls: type[ApiError] = AlreadyExists if reason == "AlreadyExists" else Conflict
        return cls(code, reason or "Conflict", message, status=status)
    if code == 410:
        return Gone(code, reason or "Gone", message, status=status)
    if code == 401:
        return Unauthorized(code, reason or "Unauthorized", message, status=status)
    if code == 403:
        return Forbidden(code, reason or "Forbidden", message, status=status)
    if code == 429 or code >= 500:
        return Unavailable(code, reason or "ServiceUnavailable", message, status=status)
    return ApiError(code, reason or "BadRequest", message, status=status)


def is_retryable(exc: BaseException) -> bool:
    return isinstance(exc, Unavailable | Conflict | TimeoutError | aiohttp.ClientError | OSError)
