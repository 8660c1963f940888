"""Authentication and authorization for the hub: bearer tokens, RBAC, cluster join.

``TokenStore`` turns a bearer token into a ``UserInfo`` (the ``Authenticator``); the
hub's ``Authorizer`` (``rbac.authorizing.HubAuthorizer``) decides what that user may do with
Kubernetes RBAC, and ``RoleAuthorizer`` confines agent and join credentials; ``join_routes``,
``token_routes`` and ``ca_routes`` serve the credential endpoints. The API server wires
them in through the Protocols in ``controlplane.apiserver.identity``.
"""

from controlplane.apis.constants import AUTH_GROUP, CA_PATH, JOIN_PATH, TOKENS_PATH
from controlplane.apiserver.auth.authorizer import RoleAuthorizer
from controlplane.apiserver.auth.bootstrap import ca_routes, join_routes, token_routes
from controlplane.apiserver.auth.tokens import (
    IssuedToken,
    TokenError,
    TokenInfo,
    TokenNotFound,
    TokenRejected,
    TokenRejectedReason,
    TokenStore,
    bearer_token,
)

__all__ = [
    "AUTH_GROUP",
    "CA_PATH",
    "JOIN_PATH",
    "TOKENS_PATH",
    "IssuedToken",
    "RoleAuthorizer",
    "TokenError",
    "TokenInfo",
    "TokenNotFound",
    "TokenRejected",
    "TokenRejectedReason",
    "TokenStore",
    "bearer_token",
    "ca_routes",
    "join_routes",
    "token_routes",
]
