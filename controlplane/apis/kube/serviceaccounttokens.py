"""ServiceAccount token Secrets: kube's long-lived, Secret-held service account tokens.

A Secret of type ``kubernetes.io/service-account-token`` names its ServiceAccount in the
``kubernetes.io/service-account.name`` annotation (validation requires it) and, once filled, that
account's uid in ``kubernetes.io/service-account.uid``. kube-controller-manager's token controller
fills ``data.token``, ``data["ca.crt"]`` and ``data.namespace``; kube-apiserver accepts the token
while the Secret still holds it. This module reads such a Secret into a :class:`TokenSecret` view
and says what the controller has to fill (``secretUpdateNeeded``), when the day of last use is
due on its ``kubernetes.io/legacy-token-last-used`` label, and what kube's legacy token cleaner
does with it (:func:`cleanup_step`), as kube does.

Pure: object dicts in, views and base64 values out.
"""

from __future__ import annotations

import base64
import datetime as dt
import re
from collections.abc import Container
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Final

from controlplane.apis.kube.field import mapping
from controlplane.apis.kube.gobase64 import CorruptInput, std_decode
from controlplane.apis.timestamps import parse_time_or_none

SECRET_TYPE: Final = "kubernetes.io/service-account-token"
ACCOUNT_NAME_ANNOTATION: Final = "kubernetes.io/service-account.name"
ACCOUNT_UID_ANNOTATION: Final = "kubernetes.io/service-account.uid"
TOKEN_KEY: Final = "token"
CA_KEY: Final = "ca.crt"
NAMESPACE_KEY: Final = "namespace"
#: kube's legacy token cleaner marks a token it will delete; the authenticator refuses it from then on.
INVALID_SINCE_LABEL: Final = "kubernetes.io/legacy-token-invalid-since"
#: kube-apiserver's mark of the day (``YYYY-MM-DD``, UTC) a Secret's token was last used.
LAST_USED_LABEL: Final = "kubernetes.io/legacy-token-last-used"
#: kube-apiserver's record (``kube-system``) of the day it began labelling used tokens; its ``since`` key.
TRACKING_CONFIG_MAP: Final = "kube-apiserver-legacy-service-account-token-tracking"
TRACKING_SINCE_KEY: Final = "since"
#: ``--legacy-service-account-token-clean-up-period``'s default (kube's 8760h).
DEFAULT_CLEAN_UP_PERIOD: Final = dt.timedelta(days=365)
_DAY = re.compile(r"\d{4}-\d{2}-\d{2}")
#: A ``data.token`` longer than this (base64) is no token the hub issued: read as none, never decoded
#: (the view is built on every authentication with the token, and a Secret may hold up to 1 MiB).
MAX_TOKEN_TEXT: Final = 1024


def _decoded(value: Any) -> bytes:
    if not isinstance(value, str):
        return b""
    try:
        return std_decode(value)
    except CorruptInput:
        return b""


@dataclass(frozen=True, slots=True)
class TokenSecret:
    """What the token controller and the authenticator read of a service account token Secret."""

    namespace: str
    name: str
    uid: str
    #: The ServiceAccount's name (the annotation) and uid ("" until the controller sets it).
    account: str
    account_uid: str
    #: ``data.token`` decoded ("" when absent, or longer than :data:`MAX_TOKEN_TEXT`).
    token: str
    deleting: bool
    invalidated: bool
    #: The :data:`LAST_USED_LABEL` ("" when none).
    last_used: str = ""

    def belongs_to(self, account: str, account_uid: str) -> bool:
        """kube's ``IsServiceAccountToken``: the name must match, the uid too when the Secret has one."""
        return self.account == account and (not self.account_uid or self.account_uid == account_uid)


def is_token_secret(obj: dict[str, Any]) -> bool:
    return obj.get("type") == SECRET_TYPE


def token_secret(obj: dict[str, Any] | None) -> TokenSecret | None:
    """The view of a service account token Secret; None for any other object, or one naming no account."""
    if obj is None or not is_token_secret(obj):
        return None
    meta = mapping(obj.get("metadata"))
    annotations = mapping(meta.get("annotations"))
    account = annotations.get(ACCOUNT_NAME_ANNOTATION)
    if not isinstance(account, str) or not account:
        return None
    account_uid = annotations.get(ACCOUNT_UID_ANNOTATION)
    token = mapping(obj.get("data")).get(TOKEN_KEY)
    labels = mapping(meta.get("labels"))
    last_used = labels.get(LAST_USED_LABEL)
    return TokenSecret(
        namespace=str(meta.get("namespace") or ""),
        name=str(meta.get("name") or ""),
        uid=str(meta.get("uid") or ""),
        account=account,
        account_uid=account_uid if isinstance(account_uid, str) else "",
        token=_decoded(token).decode("utf-8", "replace") if isinstance(token, str) and len(token) <= MAX_TOKEN_TEXT else "",
        deleting=bool(meta.get("deletionTimestamp")),
        invalidated=INVALID_SINCE_LABEL in labels,
        last_used=last_used if isinstance(last_used, str) else "",
    )


@dataclass(frozen=True, slots=True)
class NeededData:
    """kube's ``secretUpdateNeeded``: which of the three keys the controller must (re)write."""

    ca: bool
    namespace: bool
    token: bool

    def __bool__(self) -> bool:
        return self.ca or self.namespace or self.token


def needed_data(obj: dict[str, Any], *, ca_pem: bytes) -> NeededData:
    """What a token Secret lacks: the CA bundle when it differs, the namespace or the token when empty."""
    data = mapping(obj.get("data"))
    return NeededData(
        ca=bool(ca_pem) and _decoded(data.get(CA_KEY)) != ca_pem,
        namespace=not _decoded(data.get(NAMESPACE_KEY)),
        token=not _decoded(data.get(TOKEN_KEY)),
    )


def last_used_due(held: TokenSecret, *, now: dt.datetime) -> str | None:
    """The day to mark ``held`` as used on (``now``'s UTC date), or None when it is marked with that
    day or the next already (kube allows for a clock a little ahead)."""
    today = now.astimezone(dt.UTC).date()
    if held.last_used in (today.isoformat(), (today + dt.timedelta(days=1)).isoformat()):
        return None
    return today.isoformat()


def encoded(value: bytes) -> str:
    """A ``data`` value as the API carries it (standard, padded base64)."""
    return base64.b64encode(value).decode("ascii")


def parse_day(text: Any) -> dt.date | None:
    """A ``YYYY-MM-DD`` label or data value as Go's ``time.Parse("2006-01-02", ...)`` reads it; None
    when it is not one."""
    if not isinstance(text, str) or not _DAY.fullmatch(text):
        return None
    try:
        return dt.date.fromisoformat(text)
    except ValueError:
        return None


def tracked_since(since: Any) -> dt.datetime | None:
    """kube's ``latestPossibleTrackedSinceTime``: 00:00 UTC the day after the tracking record's
    ``since`` date (None when it has none that reads as a date)."""
    day = parse_day(since)
    return None if day is None else dt.datetime.combine(day + dt.timedelta(days=1), dt.time(), dt.UTC)


class Cleanup(StrEnum):
    """What kube's legacy token cleaner does with one token Secret."""

    KEEP = "keep"
    MARK_INVALID = "mark-invalid"
    DELETE = "delete"


def cleanup_step(
    secret: dict[str, Any], account: dict[str, Any] | None, *, mounted: Container[str], now: dt.datetime,
    period: dt.timedelta,
) -> Cleanup:
    """kube's ``evaluateSATokens`` for one Secret, ``account`` being its ServiceAccount as cached (None
    when absent or of another uid than the Secret names) and ``mounted`` the Secret names the Pods of
    its namespace use. A token Secret older than ``period``, not being deleted, unused for ``period``
    (its last-used day before ``now - period``; no label: unused since tracking began), listed in its
    account's ``secrets`` (auto-generated) and mounted by no Pod is marked invalid, or deleted once
    marked for ``period``. A malformed last-used day keeps it; a malformed invalid-since one is
    marked again."""
    if not is_token_secret(secret):
        return Cleanup.KEEP
    meta = mapping(secret.get("metadata"))
    cutoff = now - period
    created_at = parse_time_or_none(meta.get("creationTimestamp"), naive_as_utc=True)
    if created_at is None:
        return Cleanup.KEEP
    if created_at >= cutoff or meta.get("deletionTimestamp"):
        return Cleanup.KEEP
    labels = mapping(meta.get("labels"))
    preserved_from = cutoff.astimezone(dt.UTC).date().isoformat()
    if LAST_USED_LABEL in labels:
        last_used = labels[LAST_USED_LABEL]
        if parse_day(last_used) is None or last_used >= preserved_from:
            return Cleanup.KEEP
    name = str(meta.get("name") or "")
    references = account.get("secrets") if account is not None else None
    if not isinstance(references, list) or not any(isinstance(r, dict) and r.get("name") == name for r in references):
        return Cleanup.KEEP  # not known to be auto-generated
    if name in mounted:
        return Cleanup.KEEP
    invalid_since = labels.get(INVALID_SINCE_LABEL)
    if parse_day(invalid_since) is None:
        return Cleanup.MARK_INVALID
    return Cleanup.KEEP if str(invalid_since) >= preserved_from else Cleanup.DELETE
