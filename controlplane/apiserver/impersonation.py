"""User impersonation: ``Impersonate-User``, ``Impersonate-Group``, ``Impersonate-Uid`` and
``Impersonate-Extra-<key>``, as kube-apiserver.

``kubectl --as alice --as-group team-a --as-uid 42`` sends these headers; the request then runs
as that user, if the caller may ``impersonate`` the user (``users``, or ``serviceaccounts`` in its
namespace for ``system:serviceaccount:<ns>:<name>``) and each group (``groups``), in the core API
group, and the uid (``uids``) and each extra value (``userextras/<key>``, named by the value) in
``authentication.k8s.io``, as kube's impersonation filter checks. A non-anonymous impersonated
user is in ``system:authenticated`` unless a ``system:(un)authenticated`` group was asked for; a
service account asked for without groups is in ``system:serviceaccounts`` and
``system:serviceaccounts:<ns>``.

In: the authenticated user, the requested user, groups, uid and extras, and an ``Authorizer``.
Out: the impersonated :class:`UserInfo`, or :class:`ImpersonationDenied` naming the check that
failed (the API server answers kube's 403). Pure: no I/O. The headers' names and the escaping of
an extra's key are :mod:`controlplane.apis.impersonation`'s.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Final

from controlplane.apis.impersonation import (
    EXTRA_HEADER_PREFIX,
    GROUP_HEADER,
    UID_HEADER,
    USER_HEADER,
    extra_of_headers,
)
from controlplane.apiserver.identity import (
    ANONYMOUS,
    AUTHENTICATED,
    UNAUTHENTICATED,
    Authorizer,
    RequestAttributes,
    Role,
    UserInfo,
    service_account_groups,
    service_account_of,
    user_extra,
)

__all__ = [
    "GROUP_HEADER", "UID_HEADER", "USER_HEADER", "ImpersonationDenied", "ImpersonationInvalid", "asks_impersonation",
    "extra_of_headers", "impersonate",
]

_EXTRA_PREFIX_LOWER: Final = EXTRA_HEADER_PREFIX.lower()
_HEADERS_LOWER: Final = frozenset(h.lower() for h in (USER_HEADER, GROUP_HEADER, UID_HEADER))
AUTHENTICATION_GROUP: Final = "authentication.k8s.io"


class ImpersonationDenied(Exception):
    """A check the acting user fails; ``reason``: the authorizer's 403 message for it, when it
    gave one (kube's ``forbiddenMessage: <reason>``, a binding to a missing role's among them)."""

    def __init__(self, attributes: RequestAttributes, reason: str = "") -> None:
        super().__init__(f"cannot impersonate {attributes.resource} {attributes.name}")
        self.attributes = attributes
        self.reason = reason


class ImpersonationInvalid(Exception):
    """Groups asked for without a user (kube answers 400)."""


def impersonate(
    actor: UserInfo, *, user: str | None, groups: tuple[str, ...], authorizer: Authorizer, uid: str = "",
    extra: Mapping[str, list[str]] | None = None,
) -> UserInfo:
    """The user ``actor`` acts as; raise :class:`ImpersonationDenied` or :class:`ImpersonationInvalid`."""
    extra = extra or {}
    if not user:
        asked = [
            *(_reference("Group", group) for group in groups),
            *(_reference("UserExtra", value, field_path=key) for key, values in extra.items() for value in values),
            *(_reference("UID", uid) for _ in [uid] if uid),
        ]
        raise ImpersonationInvalid(f"requested [{' '.join(asked)}] without impersonating a user")
    checks = [
        _user_check(actor, user), *(_check(actor, "groups", group) for group in groups),
        *(_check(actor, "uids", uid, group=AUTHENTICATION_GROUP) for _ in [uid] if uid),
        *(_check(actor, "userextras", value, group=AUTHENTICATION_GROUP, subresource=key)
          for key, values in extra.items() for value in values),
    ]
    for check in checks:
        decision = authorizer.authorize(check)
        if not decision.allowed:
            raise ImpersonationDenied(check, decision.reason)
    all_groups = list(groups)
    if (account := service_account_of(user)) is not None and not groups:
        all_groups += service_account_groups(account[0])
    if user != ANONYMOUS and not {AUTHENTICATED, UNAUTHENTICATED} & set(all_groups):
        all_groups.append(AUTHENTICATED)
    return UserInfo(name=user, role=Role.USER, user_groups=tuple(dict.fromkeys(all_groups)), uid=uid,
                    extra=user_extra(extra))


def _reference(kind: str, name: str, *, field_path: str = "") -> str:
    """Go's ``%v`` of the ``ObjectReference`` kube's filter builds for one thing asked for (its kind,
    namespace, name, uid, apiVersion, resourceVersion and fieldPath; an extra's key is its fieldPath)."""
    api_version = "" if kind == "Group" else f"{AUTHENTICATION_GROUP}/v1"
    return "{" + " ".join((kind, "", name, "", api_version, "", field_path)) + "}"


def asks_impersonation(headers: Iterable[str]) -> bool:
    """Whether a request's header names ask to act as another user."""
    return any(
        (lowered := name.lower()) in _HEADERS_LOWER or lowered.startswith(_EXTRA_PREFIX_LOWER) for name in headers
    )


def _check(
    actor: UserInfo, resource: str, name: str, namespace: str | None = None, *, group: str = "", subresource: str = ""
) -> RequestAttributes:
    return RequestAttributes(
        user=actor, verb="impersonate", api_group=group, resource=resource, subresource=subresource,
        namespace=namespace, name=name,
    )


def _user_check(actor: UserInfo, user: str) -> RequestAttributes:
    account = service_account_of(user)
    if account is not None and all(account):
        return _check(actor, "serviceaccounts", account[1], account[0])
    return _check(actor, "users", user)
