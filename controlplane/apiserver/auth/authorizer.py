"""What a token's role alone allows: the credential authorizer.

On the hub it decides for agent and join credentials, which it confines to their own
cluster as kube's Node authorizer confines a kubelet; RBAC decides for everyone else
(:mod:`controlplane.apiserver.auth.rbac.authorizing` chains the two). The admin and viewer
rules below are what those roles meant before RBAC; the hub now grants them by bindings.

In: :class:`RequestAttributes` (the authenticated user plus verb, API group, resource,
subresource, namespace, name, or a non-resource path). Out: a :class:`Decision`; a
denial carries kube's sentence naming who may not do what, and then which right is missing,
shown to the user in the 403 ``Status``.

The rights, least privilege first:

- **admin**: everything.
- **viewer**: get, list, watch on every resource except Secrets and the hub's own
  credentials (``auth.gpufed.io``); the public paths below and ``/metrics``.
- **agent** of cluster C (``UserInfo.cluster``): read and watch the Works in its
  execution namespace ``gpufed-es-C`` and update their ``status``; get, create and
  update its own Cluster ``C`` and its ``status``; get, create and update its Lease
  ``gpufed-cluster-lease/C``; open its proxy tunnel (``get clusters/tunnel`` named C); get, list
  and watch ResourceInterpreterCustomizations (cluster-scoped, no secrets: the agent runs their
  member-side hooks, as Karmada's agent does); read the public paths. Nothing else.
- **bootstrap**: create a ``clusterjoins`` (the token exchange) and read the public paths.
  Nothing else: as kube's bootstrap tokens, which RBAC's defaults let read no more than
  discovery and public info.

The public paths are what the default RBAC policy gives every authenticated user
(:data:`~controlplane.apiserver.auth.rbac.policy.DISCOVERY_URLS` and the CA and dashboard of
:data:`~controlplane.apiserver.auth.rbac.policy.GPUFED_PUBLIC_URLS`), matched as RBAC matches
them: ``get`` only, ``/healthz`` but not its single checks (``/healthz/etcd``), which are
``system:monitoring``'s. So these credentials get the same non-resource rights with this
authorizer alone as in the hub's chain.

Request attributes follow Kubernetes: resource verbs are get, list, watch, create,
update, patch, delete, deletecollection; non-resource verbs are the lowercase HTTP
method (get, head, post…). For a ``create`` the API server sets ``name`` from the
object's ``metadata.name``, otherwise an agent's create of its Cluster or Lease is
denied (the authorizer cannot see the body).

Pure logic: no I/O.
"""

from __future__ import annotations

from typing import Final

from controlplane.apis.constants import (
    AUTH_GROUP,
    CLUSTER_GROUP,
    COORDINATION_GROUP,
    JOIN_PATH,
    LEASE_NAMESPACE,
    VERSION,
    WORK_GROUP,
    execution_namespace,
)
from controlplane.apiserver.auth.rbac.policy import (
    DISCOVERY_URLS,
    GPUFED_PUBLIC_URLS,
    PUBLIC_INFO_URLS,
    VIEWER_URLS,
)
from controlplane.apiserver.auth.rbac.rules import PolicyRule, rules_allow
from controlplane.apiserver.identity import Decision, RequestAttributes, Role, forbidden_message

AUTH_VERSION: Final = VERSION

CLUSTERJOINS: Final = "clusterjoins"
TOKENS: Final = "tokens"

READ_VERBS: Final = frozenset({"get", "list", "watch"})
_AGENT_WRITE_VERBS: Final = frozenset({"get", "create", "update", "patch"})
_STATUS_VERBS: Final = frozenset({"get", "update", "patch"})
_CUSTOMIZATIONS_GROUP: Final = "config.karmada.io"
_CUSTOMIZATIONS: Final = "resourceinterpretercustomizations"
#: The default policy's non-resource rules for every authenticated user, and for viewers.
_PUBLIC: Final = (PolicyRule(verbs=("get",), non_resource_urls=(*DISCOVERY_URLS, *PUBLIC_INFO_URLS, *GPUFED_PUBLIC_URLS)),)
_VIEWER_NON_RESOURCE: Final = (*_PUBLIC, PolicyRule(verbs=("get",), non_resource_urls=VIEWER_URLS))
_PUBLIC_HINT: Final = (
    "read what every user may: discovery, OpenAPI, /version, /healthz, /livez and /readyz (not their single "
    "checks), the hub's CA and the dashboard"
)

_ALLOW: Final = Decision(allowed=True)


class RoleAuthorizer:
    """An ``Authorizer`` with a fixed rule set per :class:`Role`."""

    def authorize(self, attributes: RequestAttributes) -> Decision:
        role = attributes.user.role
        if role is Role.ADMIN:
            return _ALLOW
        if role is Role.VIEWER:
            return _authorize_viewer(attributes)
        if role is Role.AGENT:
            return _authorize_agent(attributes)
        if role is Role.BOOTSTRAP:
            return _authorize_bootstrap(attributes)
        return _deny(attributes, f"the role {role!r} has no rights")


def _authorize_viewer(attributes: RequestAttributes) -> Decision:
    if attributes.non_resource_path is not None:
        if rules_allow(_VIEWER_NON_RESOURCE, attributes):
            return _ALLOW
        return _deny(attributes, "viewers may only read discovery, health, version, /metrics and the dashboard")
    if attributes.verb not in READ_VERBS:
        return _deny(attributes, "viewers have read-only access (get, list, watch)")
    if attributes.api_group == "" and attributes.resource == "secrets":
        return _deny(attributes, "viewers may not read Secrets")
    if attributes.api_group == AUTH_GROUP:
        return _deny(attributes, "viewers may not read the hub's credentials")
    return _ALLOW


def _authorize_agent(attributes: RequestAttributes) -> Decision:
    cluster = attributes.user.cluster
    if not cluster:
        return _deny(attributes, "this agent credential is not scoped to a cluster")
    if attributes.non_resource_path is not None:
        if rules_allow(_PUBLIC, attributes):
            return _ALLOW
        return _deny(attributes, f"agents may only {_PUBLIC_HINT}")

    group, resource, sub, verb = attributes.api_group, attributes.resource, attributes.subresource, attributes.verb
    if group == WORK_GROUP and resource == "works":
        own = execution_namespace(cluster)
        if sub == "" and verb in READ_VERBS:
            if attributes.namespace == own:
                return _ALLOW
            return _deny(attributes, f"agents may only read the Works of their own cluster ({own})")
        if sub == "status" and verb in _STATUS_VERBS:
            if attributes.namespace == own:
                return _ALLOW
            return _deny(attributes, f"agents may only update the status of the Works of their own cluster ({own})")
        return _deny(attributes, f"agents may only read the Works in {own} and update their status")

    if group == CLUSTER_GROUP and resource == "clusters" and sub == "tunnel":
        # The proxy tunnel (controlplane.apiserver.proxy): an agent opens its own cluster's.
        if verb == "get" and attributes.name == cluster:
            return _ALLOW
        return _deny(attributes, f"agents may only open their own cluster's proxy tunnel ({cluster})")

    if group == CLUSTER_GROUP and resource == "clusters":
        allowed_verbs = _AGENT_WRITE_VERBS if sub == "" else _STATUS_VERBS
        if sub not in ("", "status") or verb not in allowed_verbs:
            return _deny(attributes, f"agents may only get, create and update their own Cluster ({cluster}) and its status")
        if attributes.name == cluster:
            return _ALLOW
        if attributes.name is None:
            return _deny(attributes, f"the request does not name a Cluster; agents may only write their own ({cluster})")
        return _deny(attributes, f"agents may only write their own Cluster ({cluster})")

    if group == _CUSTOMIZATIONS_GROUP and resource == _CUSTOMIZATIONS:
        if sub == "" and verb in READ_VERBS:
            return _ALLOW
        return _deny(attributes, "agents may only read ResourceInterpreterCustomizations")

    if group == COORDINATION_GROUP and resource == "leases":
        own_lease = f"{LEASE_NAMESPACE}/{cluster}"
        if (
            sub == ""
            and verb in _AGENT_WRITE_VERBS
            and attributes.namespace == LEASE_NAMESPACE
            and attributes.name == cluster
        ):
            return _ALLOW
        return _deny(attributes, f"agents may only get, create and update their own Lease ({own_lease})")

    return _deny(
        attributes, "agents may only access their own Cluster, Lease and Works, and read interpreter customizations"
    )


def _authorize_bootstrap(attributes: RequestAttributes) -> Decision:
    path = attributes.non_resource_path
    if path is not None:
        if rules_allow(_PUBLIC, attributes):
            return _ALLOW
        if attributes.verb in ("post", "create") and path.rstrip("/") == JOIN_PATH:
            return _ALLOW
    elif (
        attributes.api_group == AUTH_GROUP
        and attributes.resource == CLUSTERJOINS
        and attributes.subresource == ""
        and attributes.verb == "create"
    ):
        return _ALLOW
    return _deny(
        attributes,
        f'a bootstrap token may only join a cluster (create {CLUSTERJOINS} in API group "{AUTH_GROUP}") and '
        f"{_PUBLIC_HINT}",
    )


def _deny(attributes: RequestAttributes, hint: str) -> Decision:
    """A denial in kube's words (``forbidden: User "x" cannot get path "/metrics"``), followed by
    the missing right, as kube appends an authorizer's reason."""
    return Decision(allowed=False, reason=f"{forbidden_message(attributes)}: {hint}")
