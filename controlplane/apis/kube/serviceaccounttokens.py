"""ServiceAccount token Secrets: kube's long-lived, Secret-held service account tokens.

A Secret of type ``kubernetes.io/service-account-token`` names its ServiceAccount in the
``kubernetes.io/service-account.name`` annotation (validation requires it) and, once filled, that
account's uid in ``kubernetes.io/service-account.uid``. kube-controller-manager's token controller
fills ``data.token``, ``data["ca.crt"]`` and ``data.namespace``; kube-apiserver accepts the token
while the Secret still holds it. This module reads such a Secret into a :class:`TokenSecret` view
and says what the controller has to fill (``secretUpdateNeeded``) and when the day of last use is
due on its ``kubernetes.io/legacy-token-last-used`` label, as kube does.

Pure: object dicts in, views and base64 values out.
"""

from __future__ import annotations

import base64
import datetime as dt
from dataclasses import dataclass
from typing import Any, Final

from controlplane.apis.kube.field import mapping
from controlplane.apis.kube.gobase64 import CorruptInput, std_decode

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
