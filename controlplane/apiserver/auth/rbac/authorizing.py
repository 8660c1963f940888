"""The hub's authorizer chain, as kube-apiserver's ``--authorization-mode=Node,RBAC``.

A request is allowed when any of these allows it, in order:

1. the privileged group ``system:masters`` (kube's superuser short-cut);
2. for an agent's or a join token's credential, the credential authorizer
   (:class:`~controlplane.apiserver.auth.authorizer.RoleAuthorizer`): an agent may touch
   only its own Cluster, Lease and Works, as kube's Node authorizer confines a kubelet to
   its own node — no RBAC binding can express "its own" without one role per cluster;
3. RBAC: the rules bound to the user, its groups or its service account
   (:class:`~controlplane.apiserver.auth.rbac.index.RbacIndex`).

A denial of an agent or join credential keeps the credential authorizer's reason (kube's message,
then which right is missing); a viewer token's adds, after kube's message, that viewer tokens only read;
every other denial carries no reason, so the API server answers with kube's message (``deployments.apps is forbidden: User "alice" cannot create resource
"deployments" in API group "apps" in the namespace "team-b"``), unless a binding of the user names a
role that does not exist: kube's RBAC authorizer then gives that as its reason, after the message
(``...: RBAC: clusterrole.rbac.authorization.k8s.io "gone" not found``).

:meth:`HubAuthorizer.review` decides the same with the reason kube's authorizers give an access review
(SubjectAccessReview's ``status.reason``, which ``kubectl auth can-i`` prints after ``no - ``): ``RBAC:
allowed by RoleBinding "team-a-edit/team-a" of ClusterRole "edit" to Group "team-a"`` for what RBAC
allows, nothing for ``system:masters``, the resolution errors alone for an RBAC denial (nothing for a
plain one, a viewer token's included: its rights are its group's binding), and for an agent's or join
credential the missing right alone, as kube's Node authorizer gives its reason without the 403's
sentence. Pure: no I/O.
"""

from __future__ import annotations

from typing import Final

from controlplane.apiserver.auth.authorizer import RoleAuthorizer
from controlplane.apiserver.auth.rbac.index import RbacIndex
from controlplane.apiserver.identity import (
    SYSTEM_MASTERS,
    Decision,
    RequestAttributes,
    Role,
    forbidden_message,
)

_ALLOW: Final = Decision(allowed=True)
_DENY: Final = Decision(allowed=False)
#: Credentials the credential authorizer confines (RBAC may still grant them more).
_CONFINED: Final = frozenset({Role.AGENT, Role.BOOTSTRAP})
_VIEWER_HINT: Final = "a viewer token may only read (its group gpufed:viewers is bound to the view ClusterRole)"
#: A viewer's request through the cluster proxy (kube's view role has no ``*/proxy`` either).
_VIEWER_PROXY_HINT: Final = (
    "a viewer token may not use the cluster proxy, which reads what the member allows, Secrets included "
    "(an admin may grant clusters/proxy with a ClusterRoleBinding)"
)


class HubAuthorizer:
    """The ``Authorizer`` of the hub: see the module docstring."""

    def __init__(self, index: RbacIndex, *, credentials: RoleAuthorizer | None = None) -> None:
        self.index = index
        self._credentials = credentials or RoleAuthorizer()

    def authorize(self, attributes: RequestAttributes) -> Decision:
        return self._decide(attributes, review=False)

    def review(self, attributes: RequestAttributes) -> Decision:
        """The decision of :meth:`authorize`, with the reason an access review shows (module docstring)."""
        return self._decide(attributes, review=True)

    def _decide(self, attributes: RequestAttributes, *, review: bool) -> Decision:
        user = attributes.user
        if SYSTEM_MASTERS in user.groups:
            return _ALLOW
        confined = None
        if user.role in _CONFINED:
            confined = self._credentials.authorize(attributes)
            if confined.allowed:
                return _ALLOW
        if review:
            allowed_by = self.index.allowed_by(attributes)
            if allowed_by is not None:
                return Decision(allowed=True, reason=f"RBAC: allowed by {allowed_by}")
        elif self.index.allows(attributes):
            return _ALLOW
        if confined is not None:
            if review:  # the credential authorizer's reason alone, as kube's Node authorizer gives its own
                return Decision(allowed=False, reason=confined.reason.removeprefix(f"{forbidden_message(attributes)}: "))
            return confined
        if user.role is Role.VIEWER and not review:  # a review of a viewer's is RBAC's, below
            proxy = attributes.resource == "clusters" and attributes.subresource == "proxy"
            hint = _VIEWER_PROXY_HINT if proxy else _VIEWER_HINT
            return Decision(allowed=False, reason=f"{forbidden_message(attributes)}: {hint}")
        resolution = self.index.resolution_error(user, attributes.namespace)
        if not resolution:
            return _DENY
        reason = f"RBAC: {resolution}"
        return Decision(allowed=False, reason=reason if review else f"{forbidden_message(attributes)}: {reason}")
