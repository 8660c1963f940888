"""The errors an :class:`~controlplane.objectclient.ObjectClient` raises: the API server's
error tree itself (the same classes, so ``except errors.NotFound`` catches what the object
layer raises), without its HTTP translation."""

from controlplane.apiserver.errors import (
    AlreadyExists,
    ApiError,
    BadRequest,
    Cause,
    CauseType,
    Conflict,
    Forbidden,
    Gone,
    InternalError,
    Invalid,
    NotFound,
    ServiceUnavailable,
    StatusReason,
    Target,
    Timeout,
    TooManyRequests,
    conflict_modified,
)

__all__ = [
    "AlreadyExists",
    "ApiError",
    "BadRequest",
    "Cause",
    "CauseType",
    "Conflict",
    "Forbidden",
    "Gone",
    "InternalError",
    "Invalid",
    "NotFound",
    "ServiceUnavailable",
    "StatusReason",
    "Target",
    "Timeout",
    "TooManyRequests",
    "conflict_modified",
]
