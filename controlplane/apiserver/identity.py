"""Who is calling and what they ask to do: the types shared by authentication,
authorization and the request handlers.

Authentication turns a bearer token into a :class:`UserInfo`; authorization decides
whether that user may perform a :class:`RequestAttributes`. The handlers only see these
types, so the token machinery can change without touching them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Final, Protocol, runtime_checkable


class Role(StrEnum):
    ADMIN = "admin"
    VIEWER = "viewer"
    #: A member agent: scoped to one cluster (``UserInfo.cluster``).
    AGENT = "agent"
    #: A one-time join token: may only exchange itself for an agent credential.
    BOOTSTRAP = "bootstrap"
    #: A user with the groups it was issued with: RBAC alone decides what it may do.
    USER = "user"


#: The default audience of the hub's tokens: kubeadm's issuer, the default ``--service-account-issuer``,
#: which kube-apiserver's API audiences default to (what a TokenRequest issues for, a TokenReview accepts).
HUB_AUDIENCE: Final = "https://kubernetes.default.svc.cluster.local"

#: Kubernetes' well-known groups, and gpufed's groups of its token roles.
SYSTEM_MASTERS: Final = "system:masters"
AUTHENTICATED: Final = "system:authenticated"
UNAUTHENTICATED: Final = "system:unauthenticated"
#: The user kube's anonymous authenticator makes of a request without credentials.
ANONYMOUS: Final = "system:anonymous"
VIEWERS: Final = "gpufed:viewers"
AGENTS: Final = "system:gpufed:agents"
BOOTSTRAPPERS: Final = "system:bootstrappers"

#: kube's user extras of a service account token (``ServiceAccountInfo.UserInfo``): the Pod and the
#: Node it is bound to, and its credential id (``JTI=<jti>``).
EXTRA_POD_NAME: Final = "authentication.kubernetes.io/pod-name"
EXTRA_POD_UID: Final = "authentication.kubernetes.io/pod-uid"
EXTRA_NODE_NAME: Final = "authentication.kubernetes.io/node-name"
EXTRA_NODE_UID: Final = "authentication.kubernetes.io/node-uid"
EXTRA_CREDENTIAL_ID: Final = "authentication.kubernetes.io/credential-id"

#: How kube names a service account as a user (``serviceaccount.MakeUsername``).
SERVICE_ACCOUNT_PREFIX: Final = "system:serviceaccount:"


def service_account_user(namespace: str, name: str) -> str:
    """The user name of service account ``namespace/name``."""
    return f"{SERVICE_ACCOUNT_PREFIX}{namespace}:{name}"


def service_account_groups(namespace: str) -> tuple[str, ...]:
    """The groups every service account of ``namespace`` is in."""
    return ("system:serviceaccounts", f"system:serviceaccounts:{namespace}")


def service_account_of(user: str) -> tuple[str, str] | None:
    """``(namespace, name)`` of a service account's user name; None for any other user."""
    if not user.startswith(SERVICE_ACCOUNT_PREFIX):
        return None
    namespace, _, name = user[len(SERVICE_ACCOUNT_PREFIX):].partition(":")
    return namespace, name


#: The groups of a token of each role: admin tokens are kube's superusers (``system:masters``),
#: viewer tokens are bound to ``view``; agent and join tokens are confined by the credential
#: authorizer and get what RBAC binds to their group.
ROLE_GROUPS: Final[dict[Role, tuple[str, ...]]] = {
    Role.ADMIN: (SYSTEM_MASTERS, AUTHENTICATED),
    Role.VIEWER: (VIEWERS, AUTHENTICATED),
    Role.AGENT: (AGENTS, AUTHENTICATED),
    Role.BOOTSTRAP: (BOOTSTRAPPERS, AUTHENTICATED),
    Role.USER: (AUTHENTICATED,),
}


@dataclass(frozen=True, slots=True)
class UserInfo:
    name: str
    role: Role
    #: For Role.AGENT: the cluster this credential belongs to.
    cluster: str | None = None
    #: The stored token's id (never the secret), for audit logs.
    token_id: str | None = None
    #: For Role.USER: all the user's groups, exactly (``system:authenticated`` included when
    #: authenticated). Other roles have fixed groups (:data:`ROLE_GROUPS`).
    user_groups: tuple[str, ...] = ()
    #: kube's ``user.Info`` UID: a service account's uid for its tokens, or an impersonated one.
    uid: str = ""
    #: kube's ``user.Info`` extra, as ``(key, values)`` pairs in key order (see :func:`user_extra`).
    extra: tuple[tuple[str, tuple[str, ...]], ...] = ()

    @property
    def groups(self) -> tuple[str, ...]:
        """The groups RBAC subjects of kind Group match."""
        if self.role is Role.USER:
            return self.user_groups
        return ROLE_GROUPS[self.role]


def user_extra(values: Mapping[str, list[str] | tuple[str, ...]]) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """``values`` as :attr:`UserInfo.extra` holds them: keys in order, keys without values left out."""
    return tuple((key, tuple(values[key])) for key in sorted(values) if values[key])


def user_info_document(user: UserInfo) -> dict[str, Any]:
    """``user`` as kube's ``authentication.k8s.io/v1`` UserInfo (``uid`` and ``extra`` omitted when
    empty): what SelfSubjectReview, TokenReview and AdmissionReview answer."""
    document: dict[str, Any] = {"username": user.name}
    if user.uid:
        document["uid"] = user.uid
    document["groups"] = list(user.groups)
    if user.extra:
        document["extra"] = {key: list(values) for key, values in user.extra}
    return document


#: A request without credentials, as kube's anonymous authenticator names it.
ANONYMOUS_USER: Final = UserInfo(ANONYMOUS, Role.USER, user_groups=(UNAUTHENTICATED,))


@dataclass(frozen=True, slots=True)
class RequestAttributes:
    user: UserInfo
    #: get, list, watch, create, update, patch, delete, deletecollection
    verb: str
    api_group: str
    resource: str
    subresource: str = ""
    namespace: str | None = None
    name: str | None = None
    #: True for non-resource URLs (/version, /apis, /openapi, /readyz, /metrics, /ui).
    non_resource_path: str | None = None


@dataclass(frozen=True, slots=True)
class Decision:
    allowed: bool
    #: For a denial, a sentence naming who may not do what, shown to the user.
    reason: str = ""


class Authenticator(Protocol):
    async def authenticate(self, token: str) -> UserInfo | None:
        """The user a bearer token belongs to, or None when it is unknown/expired."""
        ...


class TokenReviewer(Protocol):
    #: kube's API audiences: a TokenReview's audiences when it names none.
    api_audiences: list[str]

    async def review(self, token: str, audiences: list[str]) -> tuple[UserInfo, list[str]] | str:
        """A TokenReview's answer: the user and the token's audiences among ``audiences``, or why
        the token is not accepted for them."""
        ...


class Authorizer(Protocol):
    def authorize(self, attributes: RequestAttributes) -> Decision: ...


@runtime_checkable
class ReviewingAuthorizer(Authorizer, Protocol):
    def review(self, attributes: RequestAttributes) -> Decision:
        """The decision with the reason kube's authorizers give, which an access review and the
        audit log's ``authorization.k8s.io/reason`` show (``RBAC: allowed by ...``)."""
        ...


def forbidden_message(attrs: RequestAttributes) -> str:
    """kube-apiserver's 403 message: who may not do what, where (``deployments.apps is forbidden:
    User "alice" cannot create resource "deployments" in API group "apps" in the namespace "b"``)."""
    if attrs.non_resource_path is not None:
        return f'forbidden: User "{attrs.user.name}" cannot {attrs.verb} path "{attrs.non_resource_path}"'
    resource = attrs.resource + (f"/{attrs.subresource}" if attrs.subresource else "")
    qualified = f"{attrs.resource}.{attrs.api_group}" if attrs.api_group else attrs.resource
    subject = f'{qualified} "{attrs.name}"' if attrs.name else qualified
    where = f' in the namespace "{attrs.namespace}"' if attrs.namespace else " at the cluster scope"
    return (
        f'{subject} is forbidden: User "{attrs.user.name}" cannot {attrs.verb} resource "{resource}" '
        f'in API group "{attrs.api_group}"{where}'
    )
