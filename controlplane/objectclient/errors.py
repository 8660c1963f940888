"""The errors an :class:`~controlplane.objectclient.ObjectClient` raises: the API server's
error tree itself (the same classes, so ``except errors.NotFound`` catches what the object
layer raises), without its HTTP translation; and the store errors the object layer lets
through unchanged (:class:`StorageError`, a watch's compacted revision :class:`StoreGone`,
an unreachable store :class:`StoreUnavailable`), so consumers never import the storage layer."""

from controlplane.apiserver.errors import (
    AlreadyExists,
    ApiError,
    BadRequest,
    Cause,
    CauseType,
    Conflict,
    Forbidden,
    Gone,
    InconsistentContinue,
    InternalError,
    Invalid,
    NotFound,
    RejectedRequest,
    ServerError,
    ServiceUnavailable,
    StatusReason,
    StorageSpaceExceeded,
    Target,
    Timeout,
    TooManyRequests,
    WebhookDenied,
    conflict_modified,
    invalid,
)
from controlplane.storage.interface import Gone as StoreGone
from controlplane.storage.interface import StorageError
from controlplane.storage.interface import Unavailable as StoreUnavailable

__all__ = [
    "AlreadyExists",
    "ApiError",
    "BadRequest",
    "Cause",
    "CauseType",
    "Conflict",
    "Forbidden",
    "Gone",
    "InconsistentContinue",
    "InternalError",
    "Invalid",
    "NotFound",
    "RejectedRequest",
    "ServerError",
    "ServiceUnavailable",
    "StatusReason",
    "StorageError",
    "StorageSpaceExceeded",
    "StoreGone",
    "StoreUnavailable",
    "Target",
    "Timeout",
    "TooManyRequests",
    "WebhookDenied",
    "conflict_modified",
    "invalid",
]
