"""The API server's one error tree, and how each error becomes a Kubernetes ``Status``.

Everything below the HTTP layer (the object layer, validation, patching) raises an
:class:`ApiError` subclass; storage errors are translated once, in
:func:`from_storage_error`, and the pure selector parser's once, in :func:`bad_selector`.
The HTTP layer turns any ``ApiError`` into the JSON ``Status`` object kubectl and the
client libraries expect (``to_status``); in-process callers (controllers) catch the same
classes.

Messages follow kube-apiserver's wording where clients or people match on it, e.g.
``deployments.apps "x" not found``.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from controlplane.apis.kube.field import FieldError, aggregate
from controlplane.apis.kube.selectors import SelectorError
from controlplane.apis.meta import CauseType as CauseType  # the causes of the Status errors below
from controlplane.storage import interface as storage

logger = logging.getLogger(__name__)


class StatusReason(StrEnum):
    """``Status.reason`` values (metav1.StatusReason)."""

    BAD_REQUEST = "BadRequest"
    UNAUTHORIZED = "Unauthorized"
    FORBIDDEN = "Forbidden"
    NOT_FOUND = "NotFound"
    ALREADY_EXISTS = "AlreadyExists"
    CONFLICT = "Conflict"
    GONE = "Gone"
    EXPIRED = "Expired"
    INVALID = "Invalid"
    METHOD_NOT_ALLOWED = "MethodNotAllowed"
    NOT_ACCEPTABLE = "NotAcceptable"
    UNSUPPORTED_MEDIA_TYPE = "UnsupportedMediaType"
    REQUEST_ENTITY_TOO_LARGE = "RequestEntityTooLarge"
    TOO_MANY_REQUESTS = "TooManyRequests"
    INTERNAL_ERROR = "InternalError"
    SERVICE_UNAVAILABLE = "ServiceUnavailable"
    TIMEOUT = "Timeout"
    #: metav1.StatusReasonUnknown: no reason given (left out of the Status).
    UNKNOWN = ""


@dataclass(frozen=True, slots=True)
class Cause:
    reason: str
    message: str
    field: str = ""

    def to_dict(self) -> dict[str, str]:
        out = {"reason": str(self.reason), "message": self.message} if self.reason else {"message": self.message}
        if self.field:
            out["field"] = self.field
        return out


@dataclass(frozen=True, slots=True)
class Target:
    """What an error is about: ``kind`` is the plural resource for most errors
    (``deployments``) and the Kind for Invalid (``Deployment``), as kube does."""

    name: str = ""
    group: str = ""
    kind: str = ""


class ApiError(Exception):
    """An error with a Kubernetes ``Status`` representation."""

    code: int = 500
    reason: StatusReason = StatusReason.INTERNAL_ERROR
    #: Whether the Status always carries ``details``, ``{}`` when nothing fills it: kube's
    #: constructors for these reasons (``NewNotFound``, ``NewMethodNotSupported``,
    #: ``NewTimeoutError``, ``NewGenericServerResponse`` ...) always set a ``StatusDetails``, which
    #: is serialised even when all its fields are empty; ``NewBadRequest`` and a few others set none.
    always_details: bool = False

    def __init__(
        self,
        message: str,
        *,
        target: Target | None = None,
        causes: list[Cause] | None = None,
        retry_after_seconds: int | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.target = target
        self.causes = causes or []
        self.retry_after_seconds = retry_after_seconds

    def to_status(self) -> dict[str, Any]:
        details: dict[str, Any] = {}
        if self.target is not None:
            if self.target.name:
                details["name"] = self.target.name
            if self.target.group:
                details["group"] = self.target.group
            if self.target.kind:
                details["kind"] = self.target.kind
        if self.causes:
            details["causes"] = [cause.to_dict() for cause in self.causes]
        if self.retry_after_seconds is not None:
            details["retryAfterSeconds"] = self.retry_after_seconds
        status: dict[str, Any] = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": str(self.reason),
            "code": self.code,
        }
        if not self.reason:
            del status["reason"]
        if details or self.always_details:
            status["details"] = details
        return status


class BadRequest(ApiError):
    code = 400
    reason = StatusReason.BAD_REQUEST


class WebhookDenied(ApiError):
    """A write an admission webhook refused, as kube-apiserver answers it (``webhookerrors.ToStatusErr``):
    ``admission webhook "<webhook>" denied the request: <message>`` (its reason when it gave no
    message, ``without explanation`` when neither), the webhook's code (400 at the least), and its
    reason and details as it gave them (none when it gave none)."""

    code = 400

    def __init__(
        self, webhook: str, message: str | None, *, code: int = 400, reason: str | None = None,
        details: dict[str, Any] | None = None,
    ) -> None:
        denied = f'admission webhook "{webhook}" denied the request'
        explained = message or reason
        super().__init__(f"{denied}: {explained}" if explained else f"{denied} without explanation")
        self.code = max(code, 400)
        self.webhook_reason = reason
        self.webhook_details = details

    def to_status(self) -> dict[str, Any]:
        status = super().to_status()
        del status["reason"]
        if self.webhook_reason:
            status["reason"] = self.webhook_reason
        if self.webhook_details:
            status["details"] = self.webhook_details
        return status


class Unauthorized(ApiError):
    code = 401
    reason = StatusReason.UNAUTHORIZED


class Forbidden(ApiError):
    code = 403
    reason = StatusReason.FORBIDDEN
    always_details = True


class NotFound(ApiError):
    code = 404
    reason = StatusReason.NOT_FOUND
    always_details = True


class MethodNotAllowed(ApiError):
    code = 405
    reason = StatusReason.METHOD_NOT_ALLOWED
    always_details = True


class NotAcceptable(ApiError):
    code = 406
    reason = StatusReason.NOT_ACCEPTABLE


class AlreadyExists(ApiError):
    code = 409
    reason = StatusReason.ALREADY_EXISTS
    always_details = True


class Conflict(ApiError):
    code = 409
    reason = StatusReason.CONFLICT
    always_details = True


class Gone(ApiError):
    """An expired resourceVersion or continue token (kube answers 410 ``Expired``)."""

    code = 410
    reason = StatusReason.EXPIRED


class InconsistentContinue(Gone):
    """kube's 410 for a continue token whose revision is compacted away: the Status carries, in
    ``metadata.continue``, a token that resumes the same list after the same key at the latest
    revision (its items may then mix two moments; kube's message says so)."""

    def __init__(self, continue_token: str) -> None:
        super().__init__(
            "The provided continue parameter is too old to display a consistent list result. You can start a "
            "new list without the continue parameter, or use the continue token in this response to retrieve "
            "the remainder of the results. Continuing with the provided token results in an inconsistent list "
            "- objects that were created, modified, or deleted between the time the first chunk was returned "
            "and now may show up in the list."
        )
        self.continue_token = continue_token

    def to_status(self) -> dict[str, Any]:
        return {**super().to_status(), "metadata": {"continue": self.continue_token}}


class UnsupportedMediaType(ApiError):
    code = 415
    reason = StatusReason.UNSUPPORTED_MEDIA_TYPE


class RequestEntityTooLarge(ApiError):
    code = 413
    reason = StatusReason.REQUEST_ENTITY_TOO_LARGE


class TooManyRequests(ApiError):
    code = 429
    reason = StatusReason.TOO_MANY_REQUESTS


class Invalid(ApiError):
    code = 422
    reason = StatusReason.INVALID
    always_details = True


class RejectedRequest(Invalid):
    """kube's 422 that names no reason (``NewGenericServerResponse``): what it answers a JSON
    patch that does not apply (a failed ``test``, a path that is missing). kube's details are
    empty; here ``detail`` (the failing operation, in the JSON patch library's words) is their one
    cause, at ``patch``, so that kubectl prints what to fix after kube's message."""

    def __init__(self, detail: str = "") -> None:
        super().__init__("the server rejected our request due to an error in our request")
        self.detail = detail

    def to_status(self) -> dict[str, Any]:
        details = {"causes": [{"message": self.detail, "field": "patch"}]} if self.detail else {}
        return {**super().to_status(), "details": details}


class InternalError(ApiError):
    code = 500
    reason = StatusReason.INTERNAL_ERROR


class StorageSpaceExceeded(ApiError):
    """etcd's NOSPACE answer to a write, as kube-apiserver returns it: a 500 Status whose message
    is etcd's error and that has no reason (kubectl prints ``Error from server: etcdserver: mvcc:
    database space exceeded``)."""

    code = 500
    reason = StatusReason.UNKNOWN


class ServerError(ApiError):
    """An error kube's registry returns as a plain Go error, which its handlers answer as a 500
    Status with the error's text and no reason (a custom resource's scale field of the wrong type)."""

    code = 500
    reason = StatusReason.UNKNOWN


class Timeout(ApiError):
    code = 504
    reason = StatusReason.TIMEOUT
    always_details = True


class ServiceUnavailable(ApiError):
    code = 503
    reason = StatusReason.SERVICE_UNAVAILABLE


def qualified_resource(plural: str, group: str) -> str:
    """``deployments.apps`` / ``pods``: how kube names a resource in messages."""
    return f"{plural}.{group}" if group else plural


def qualified_kind(kind: str, group: str) -> str:
    """``Deployment.apps`` / ``Pod``: how kube names a kind in Invalid messages."""
    return f"{kind}.{group}" if group else kind


def not_found(*, plural: str, group: str, name: str) -> NotFound:
    return NotFound(
        f'{qualified_resource(plural, group)} "{name}" not found',
        target=Target(name=name, group=group, kind=plural),
    )


def already_exists(*, plural: str, group: str, name: str) -> AlreadyExists:
    return AlreadyExists(
        f'{qualified_resource(plural, group)} "{name}" already exists',
        target=Target(name=name, group=group, kind=plural),
    )


def conflict_modified(*, plural: str, group: str, name: str) -> Conflict:
    return Conflict(
        f'Operation cannot be fulfilled on {qualified_resource(plural, group)} "{name}": '
        "the object has been modified; please apply your changes to the latest version and try again",
        target=Target(name=name, group=group, kind=plural),
    )


def invalid(*, kind: str, group: str, name: str, causes: list[Cause]) -> Invalid:
    """kube's aggregate message: one cause bare, several in brackets."""
    parts = [f"{cause.field}: {cause.message}" if cause.field else cause.message for cause in causes]
    joined = aggregate(parts)
    return Invalid(
        f'{qualified_kind(kind, group)} "{name}" is invalid: {joined}',
        target=Target(name=name, group=group, kind=kind),
        causes=causes,
    )


def invalid_options(kind: str, found: list[FieldError]) -> Invalid:
    """kube's 422 for the options of a request (``CreateOptions``, ``PatchOptions``,
    ``DeleteOptions`` ...) that fail its checks: every error a cause, the options unnamed."""
    return invalid(kind=kind, group="meta.k8s.io", name="", causes=[Cause(str(e.type), e.message, e.field) for e in found])


def unknown_body_format(accepted: list[str]) -> UnsupportedMediaType:
    """kube's 415 for a body of a media type the request's decoders do not take (its
    ``NegotiateInputSerializer``), naming those they do."""
    return UnsupportedMediaType(
        f"the body of the request was in an unknown format - accepted media types include: {', '.join(accepted)}"
    )


def bad_selector(exc: SelectorError) -> BadRequest:
    """A label or field selector that does not parse (or selects on a field its kind does not
    offer): kube's 400 in the parser's words."""
    return BadRequest(exc.message)


def expired_resource_version(requested: int, compacted: int) -> Gone:
    return Gone(f"too old resource version: {requested} ({compacted})")


#: What kube's store answers a list at a revision it has compacted (etcd3's ``interpretListError``).
EXPIRED_LIST = "The resourceVersion for the provided list is too old."


def too_large_resource_version(requested: int, current: int) -> Timeout:
    """kube's ``storage.NewTooLargeResourceVersionError``: a 504 Timeout that clients retry."""
    return Timeout(
        f"Timeout: Too large resource version: {requested}, current: {current}",
        causes=[Cause(CauseType.RESOURCE_VERSION_TOO_LARGE, "Too large resource version")],
        retry_after_seconds=1,
    )


def from_storage_error(
    exc: storage.StorageError, *, plural: str, group: str, name: str = ""
) -> ApiError:
    """The one mapping from the storage error tree to API errors."""
    if isinstance(exc, storage.NotFound):
        return not_found(plural=plural, group=group, name=name)
    if isinstance(exc, storage.AlreadyExists):
        return already_exists(plural=plural, group=group, name=name)
    if isinstance(exc, storage.Conflict):
        return conflict_modified(plural=plural, group=group, name=name)
    if isinstance(exc, storage.Gone):
        return Gone(
            f"too old resource version: the store has compacted history up to revision "
            f"{exc.compacted_revision}; list again to get a current resourceVersion"
        )
    if isinstance(exc, storage.Fenced):
        return ServiceUnavailable(
            "this hub replica lost its controller leadership while writing, so the write was not made; "
            "the new leader will redo it",
            retry_after_seconds=1,
        )
    if isinstance(exc, storage.FutureRevision):
        return too_large_resource_version(exc.revision, exc.current_revision)
    if isinstance(exc, storage.TooLarge):
        return RequestEntityTooLarge(
            f"{qualified_resource(plural, group)} \"{name}\" is too large to store: the object store (etcd) "
            "refused it as larger than its request limit (--max-request-bytes); make the object smaller, "
            "e.g. move large data out of it",
            target=Target(name=name, group=group, kind=plural),
        )
    if isinstance(exc, storage.NoSpace):
        # kube-apiserver passes etcd's error through as a Status without a reason (ErrorToAPIStatus).
        return StorageSpaceExceeded(str(exc))
    # The store's own message names its endpoint; it goes to the server log, not to clients
    # (at debug: the store logs one warning when etcd goes away and one when it is back).
    if isinstance(exc, storage.Unavailable):
        logger.debug("the object store is unavailable: %s", exc)
        return ServiceUnavailable(
            "the object store (etcd) is unavailable, so the request could not be completed. Retry in a "
            "few seconds; if it persists, check that etcd is running and reachable from the hub",
            retry_after_seconds=1,
        )
    logger.error("the object store failed a request on %s: %s", qualified_resource(plural, group), exc)
    return InternalError("the object store failed the request; the server log has the details")
