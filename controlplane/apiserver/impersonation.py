"""User impersonation: ``Impersonate-User`` and ``Impersonate-Group``, as kube-apiserver.

``kubectl --as alice --as-group team-a`` sends these headers; the request then runs as that
user, if the caller may ``impersonate`` the user (``users``, or ``serviceaccounts`` in its
namespace for ``system:serviceaccount:<ns>:<name>``) and each group (``groups``), all in the
core API group, as kube's impersonation filter checks. A non-anonymous impersonated user is
in ``system:authenticated`` unless a ``system:(un)authenticated`` group was asked for; a
service account also in ``system:serviceaccounts`` and ``system:serviceaccounts:<ns>``.

In: the authenticated user, the requested user and groups, and an ``Authorizer``. Out: the
impersonated :class:`UserInfo`, or :class:`ImpersonationDenied` naming the check that
failed (the API server answers kube's 403). Pure: no I/O.
"""

from __future__ import annotations

from typing import Final

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
)

USER_HEADER: Final = "Impersonate-User"
GROUP_HEADER: Final = "Impersonate-Group"


class ImpersonationDenied(Exception):
    def __init__(self, attributes: RequestAttributes) -> None:
        super().__init__(f"cannot impersonate {attributes.resource} {attributes.name}")
        self.attributes = attributes


class ImpersonationInvalid(Exception):
    """Groups asked for without a user (kube answers 400)."""


def impersonate(
    actor: UserInfo, *, user: str | None, groups: tuple[str, ...], authorizer: Authorizer
) -> UserInfo:
    """The user ``actor`` acts as; raise :class:`ImpersonationDenied` or :class:`ImpersonationInvalid`."""
    if not user:
        raise ImpersonationInvalid(f"requested {list(groups)} without impersonating a user")
    checks = [_user_check(actor, user), *(_check(actor, "groups", group) for group in groups)]
    for check in checks:
        if not authorizer.authorize(check).allowed:
            raise ImpersonationDenied(check)
    all_groups = list(groups)
    if (account := service_account_of(user)) is not None:
        all_groups += service_account_groups(account[0])
    if user != ANONYMOUS and not {AUTHENTICATED, UNAUTHENTICATED} & set(all_groups):
        all_groups.append(AUTHENTICATED)
    return UserInfo(name=user, role=Role.USER, user_groups=tuple(dict.fromkeys(all_groups)))


def _check(actor: UserInfo, resource: str, name: str, namespace: str | None = None) -> RequestAttributes:
    return RequestAttributes(
        user=actor, verb="impersonate", api_group="", resource=resource, namespace=namespace, name=name
    )


def _user_check(actor: UserInfo, user: str) -> RequestAttributes:
    account = service_account_of(user)
    if account is not None and all(account):
        return _check(actor, "serviceaccounts", account[1], account[0])
    return _check(actor, "users", user)
