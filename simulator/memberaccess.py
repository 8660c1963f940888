"""A simulated member's RBAC for impersonated requests (opt-in per cluster in the fleet file).

A real member limits what the hub's users do through the cluster proxy with its own RBAC,
seeing each request as the impersonated hub user (``Impersonate-User``, ``Impersonate-Group``,
and ``Impersonate-Uid`` and ``Impersonate-Extra-*``, which pass: no rule names them). A fleet
entry's ``impersonatedAccess`` rules stand in for that RBAC: an impersonated request passes only if
a rule names its user or one of its groups (``system:authenticated`` included, as kube's
impersonation adds it) and allows its
verb, resource (``pods``, ``pods/exec``, ``*``) and namespace (``*`` for any, and for
cluster-wide requests); otherwise it is answered 403 as kube words it. Discovery (``/api``,
``/apis``, ``/version``) passes, as kube's ``system:discovery`` role does. Requests without
impersonation (the agent's own, a member admin's) are not limited; a cluster without the field
lets impersonated users do anything.
"""

from __future__ import annotations

from collections.abc import Sequence

from aiohttp import web
from aiohttp.typedefs import Handler, Middleware

from controlplane.apiserver import errors
from controlplane.apiserver.identity import ANONYMOUS, AUTHENTICATED
from controlplane.apiserver.routing import RequestInfo, is_upgrade, parse_request
from simulator.profile import AccessRule


def allows(rule: AccessRule, subjects: set[str], info: RequestInfo) -> bool:
    resource = f"{info.resource}/{info.subresource}" if info.subresource else info.resource
    return (
        bool(subjects.intersection(rule.subjects))
        and ("*" in rule.verbs or info.verb in rule.verbs)
        and ("*" in rule.resources or resource in rule.resources)
        and ("*" in rule.namespaces or (info.namespace is not None and info.namespace in rule.namespaces))
    )


def refusal(user: str, info: RequestInfo, cluster: str) -> str:
    resource = f"{info.resource}/{info.subresource}" if info.subresource else info.resource
    what = f'{info.resource} "{info.name}"' if info.name else info.resource
    where = f' in the namespace "{info.namespace}"' if info.namespace else " at the cluster scope"
    return (
        f'{what} is forbidden: User "{user}" cannot {info.verb} resource "{resource}" in API group '
        f'"{info.group}"{where} (member cluster {cluster}\'s access rules for impersonated users)'
    )


def access_middleware(rules: Sequence[AccessRule], cluster: str) -> Middleware:
    @web.middleware
    async def check(request: web.Request, handler: Handler) -> web.StreamResponse:
        user = request.headers.get("Impersonate-User")
        if user is None:
            return await handler(request)
        info = parse_request(request.method, request.path, request.query, upgrade=is_upgrade(request.headers))
        # As kube's impersonation: a user other than the anonymous one is also system:authenticated.
        subjects = {user, *request.headers.getall("Impersonate-Group", []),
                    *([AUTHENTICATED] if user != ANONYMOUS else [])}
        if info.is_resource and not any(allows(rule, subjects, info) for rule in rules):
            status = errors.Forbidden(refusal(user, info, cluster)).to_status()
            return web.json_response(status, status=403)
        return await handler(request)

    return check
