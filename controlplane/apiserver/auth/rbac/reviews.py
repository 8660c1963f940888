"""Access reviews: ``kubectl auth can-i`` (``--list``, ``--as``) and ``kubectl auth whoami``.

Served as kube-apiserver serves them, create-only and never stored:

- ``authorization.k8s.io/v1`` ``SelfSubjectAccessReview`` (may *I* do this?),
  ``SelfSubjectRulesReview`` (what may I do in a namespace?), ``SubjectAccessReview`` (may
  this user or these groups do this? — for admins) and ``LocalSubjectAccessReview`` (the
  same, in one namespace);
- ``authentication.k8s.io/v1`` ``SelfSubjectReview`` (who am I?) and ``TokenReview`` (whose is
  this token? — for a service that takes hub tokens from its own callers, as kube's webhook
  authenticators and ``kube-rbac-proxy`` do; kube's ``system:auth-delegator`` role grants it).

Each is declared here as a create-only resource (:mod:`controlplane.apiserver.computed`) with
its handler, so discovery lists it as kube does (verb ``create``; ``kubectl api-resources``,
``kubectl create -f review.yaml``) and any other method is kube's 405.

The answer comes from the hub's own authorizer, so it is exactly what a real request would
meet. Invalid specs get kube's 422 with one cause per field. The API server has already
authenticated the caller (and applied any impersonation) and authorized the ``create``.
"""

from __future__ import annotations

import datetime as dt
from typing import Any, Final

from aiohttp import web

from controlplane.apis.timestamps import format_time
from controlplane.apiserver import errors
from controlplane.apiserver.app import USER
from controlplane.apiserver.auth.bootstrap import read_object_body
from controlplane.apiserver.auth.rbac.authorizing import HubAuthorizer
from controlplane.apiserver.auth.rbac.rules import PolicyRule
from controlplane.apiserver.computed import ComputedEndpoint, ComputedResource
from controlplane.apiserver.handlers import json_response
from controlplane.apiserver.identity import (
    RequestAttributes,
    Role,
    TokenReviewer,
    UserInfo,
    user_extra,
    user_info_document,
)

AUTHORIZATION_GROUP: Final = "authorization.k8s.io"
AUTHENTICATION_GROUP: Final = "authentication.k8s.io"

SELF_SUBJECT_ACCESS_REVIEWS: Final = ComputedResource(
    AUTHORIZATION_GROUP, "v1", "selfsubjectaccessreviews", "SelfSubjectAccessReview", namespaced=False
)
SELF_SUBJECT_RULES_REVIEWS: Final = ComputedResource(
    AUTHORIZATION_GROUP, "v1", "selfsubjectrulesreviews", "SelfSubjectRulesReview", namespaced=False
)
SUBJECT_ACCESS_REVIEWS: Final = ComputedResource(
    AUTHORIZATION_GROUP, "v1", "subjectaccessreviews", "SubjectAccessReview", namespaced=False
)
LOCAL_SUBJECT_ACCESS_REVIEWS: Final = ComputedResource(
    AUTHORIZATION_GROUP, "v1", "localsubjectaccessreviews", "LocalSubjectAccessReview", namespaced=True
)
SELF_SUBJECT_REVIEWS: Final = ComputedResource(
    AUTHENTICATION_GROUP, "v1", "selfsubjectreviews", "SelfSubjectReview", namespaced=False
)
TOKEN_REVIEWS: Final = ComputedResource(AUTHENTICATION_GROUP, "v1", "tokenreviews", "TokenReview", namespaced=False)
#: Every review kind this module serves (TokenReview only given an authenticator).
REVIEW_RESOURCES: Final = (
    SELF_SUBJECT_ACCESS_REVIEWS, SELF_SUBJECT_RULES_REVIEWS, SUBJECT_ACCESS_REVIEWS, LOCAL_SUBJECT_ACCESS_REVIEWS,
    SELF_SUBJECT_REVIEWS, TOKEN_REVIEWS,
)


def _invalid(kind: str, group: str, field: str, value: Any, detail: str) -> errors.ApiError:
    shown = f'"{value}"' if isinstance(value, str) else ("null" if value is None else str(value))
    cause = errors.Cause(errors.CauseType.FIELD_VALUE_INVALID, f"Invalid value: {shown}: {detail}", field)
    return errors.invalid(kind=kind, group=group, name="", causes=[cause])


def _review_attributes(user: UserInfo, spec: dict[str, Any], kind: str) -> RequestAttributes:
    resource, non_resource = spec.get("resourceAttributes"), spec.get("nonResourceAttributes")
    if resource is not None and non_resource is not None:
        raise _invalid(kind, AUTHORIZATION_GROUP, "spec.nonResourceAttributes", "...",
                       "cannot be specified in combination with resourceAttributes")
    if isinstance(non_resource, dict):
        return RequestAttributes(
            user=user, verb=str(non_resource.get("verb", "")), api_group="", resource="",
            non_resource_path=str(non_resource.get("path", "")),
        )
    if not isinstance(resource, dict):
        raise _invalid(kind, AUTHORIZATION_GROUP, "spec.resourceAttributes", None,
                       "exactly one of nonResourceAttributes or resourceAttributes must be specified")
    return RequestAttributes(
        user=user,
        verb=str(resource.get("verb", "")),
        api_group=str(resource.get("group", "")),
        resource=str(resource.get("resource", "")),
        subresource=str(resource.get("subresource", "")),
        namespace=str(resource.get("namespace") or "") or None,
        name=str(resource.get("name") or "") or None,
    )


def _spec(body: dict[str, Any], kind: str, group: str) -> dict[str, Any]:
    spec = body.get("spec")
    if not isinstance(spec, dict):
        raise _invalid(kind, group, "spec", None, "must be an object")
    return spec


def _response(kind: str, group: str, spec: dict[str, Any], status: dict[str, Any], *,
              namespace: str | None = None) -> web.Response:
    metadata: dict[str, Any] = {"creationTimestamp": None}
    if namespace:
        metadata["namespace"] = namespace
    document = {"kind": kind, "apiVersion": f"{group}/v1", "metadata": metadata, "spec": spec, "status": status}
    return json_response(document, status=201)


def _rule_review(rules: list[PolicyRule]) -> dict[str, Any]:
    resource_rules, non_resource_rules = [], []
    for rule in rules:
        if rule.non_resource_urls:
            non_resource_rules.append({"verbs": list(rule.verbs), "nonResourceURLs": list(rule.non_resource_urls)})
        else:
            entry: dict[str, Any] = {"verbs": list(rule.verbs), "apiGroups": list(rule.api_groups),
                                     "resources": list(rule.resources)}
            if rule.resource_names:
                entry["resourceNames"] = list(rule.resource_names)
            resource_rules.append(entry)
    return {"resourceRules": resource_rules, "nonResourceRules": non_resource_rules}


def review_endpoints(authorizer: HubAuthorizer, reviewer: TokenReviewer | None = None) -> list[ComputedEndpoint]:
    """The review kinds and their handlers (TokenReview with a ``reviewer``), for
    ``create_app(computed=...)``."""

    def decide(attributes: RequestAttributes) -> dict[str, Any]:
        decision = authorizer.review(attributes)
        status: dict[str, Any] = {"allowed": decision.allowed}
        if decision.reason:
            status["reason"] = decision.reason
        return status

    async def self_subject_access_review(request: web.Request) -> web.StreamResponse:
        kind = "SelfSubjectAccessReview"
        body = await read_object_body(request)
        spec = _spec(body, kind, AUTHORIZATION_GROUP)
        status = decide(_review_attributes(request[USER], spec, kind))
        return _response(kind, AUTHORIZATION_GROUP, spec, status)

    def subject(spec: dict[str, Any], kind: str) -> UserInfo:
        name = spec.get("user") if isinstance(spec.get("user"), str) else ""
        groups = tuple(g for g in spec.get("groups") or [] if isinstance(g, str))
        if not name and not groups:
            raise _invalid(kind, AUTHORIZATION_GROUP, "spec.user", "", "at least one of user or group must be specified")
        extra = spec["extra"] if isinstance(spec.get("extra"), dict) else {}
        return UserInfo(
            name=name or "", role=Role.USER, user_groups=groups, uid=str(spec.get("uid") or ""),
            extra=user_extra({str(k): [str(v) for v in vs] for k, vs in extra.items() if isinstance(vs, list)}),
        )

    async def subject_access_review(request: web.Request) -> web.StreamResponse:
        kind = "SubjectAccessReview"
        body = await read_object_body(request)
        spec = _spec(body, kind, AUTHORIZATION_GROUP)
        status = decide(_review_attributes(subject(spec, kind), spec, kind))
        return _response(kind, AUTHORIZATION_GROUP, spec, status)

    async def local_subject_access_review(request: web.Request) -> web.StreamResponse:
        kind = "LocalSubjectAccessReview"
        namespace = request.match_info["namespace"]
        body = await read_object_body(request)
        spec = _spec(body, kind, AUTHORIZATION_GROUP)
        attributes = spec.get("resourceAttributes")
        if not isinstance(attributes, dict) or (attributes.get("namespace") or "") != namespace:
            raise _invalid(kind, AUTHORIZATION_GROUP, "spec.resourceAttributes.namespace",
                           (attributes or {}).get("namespace", "") if isinstance(attributes, dict) else "",
                           "must match metadata.namespace")
        status = decide(_review_attributes(subject(spec, kind), spec, kind))
        return _response(kind, AUTHORIZATION_GROUP, spec, status, namespace=namespace)

    async def self_subject_rules_review(request: web.Request) -> web.StreamResponse:
        kind = "SelfSubjectRulesReview"
        body = await read_object_body(request)
        spec = _spec(body, kind, AUTHORIZATION_GROUP)
        user: UserInfo = request[USER]
        namespace = spec.get("namespace") if isinstance(spec.get("namespace"), str) else ""
        if not namespace:  # kube's: the review is of one namespace (``kubectl auth can-i --list`` sends its own)
            raise errors.BadRequest("no namespace on request")
        rules = list(authorizer.index.rules_for(user, namespace))
        status: dict[str, Any] = {**_rule_review(rules), "incomplete": False}
        if user.role in (Role.AGENT, Role.BOOTSTRAP):
            # The credential authorizer's rights (its own cluster) are not rules to list.
            status["incomplete"] = True
        resolution = authorizer.index.resolution_error(user, namespace)
        if resolution:
            status["evaluationError"] = resolution
        return _response(kind, AUTHORIZATION_GROUP, {}, status)  # kube answers without the spec

    async def self_subject_review(request: web.Request) -> web.StreamResponse:
        user: UserInfo = request[USER]
        await read_object_body(request)
        info = user_info_document(user)
        document = {
            "kind": "SelfSubjectReview",
            "apiVersion": f"{AUTHENTICATION_GROUP}/v1",
            "metadata": {"creationTimestamp": format_time(dt.datetime.now(dt.UTC))},
            "status": {"userInfo": info},
        }
        return json_response(document, status=201)

    async def token_review(request: web.Request) -> web.StreamResponse:
        assert reviewer is not None
        body = await read_object_body(request)
        spec: dict[str, Any] = body["spec"] if isinstance(body.get("spec"), dict) else {}
        token = spec.get("token")
        if not isinstance(token, str) or not token:
            raise errors.BadRequest("token is required for TokenReview in authentication")
        # As kube's: the token must be for one of the review's audiences (the API's when none).
        audiences = [a for a in spec.get("audiences") or [] if isinstance(a, str)] or list(reviewer.api_audiences)
        reviewed = await reviewer.review(token, audiences)
        status: dict[str, Any]
        if isinstance(reviewed, str):
            status = {"authenticated": False, "error": reviewed}
        else:
            user, accepted = reviewed
            status = {
                "authenticated": True,
                "user": user_info_document(user),
                "audiences": accepted,
            }
        document = {
            "kind": "TokenReview",
            "apiVersion": f"{AUTHENTICATION_GROUP}/v1",
            "metadata": {"creationTimestamp": format_time(dt.datetime.now(dt.UTC))},
            "spec": spec,
            "status": status,
        }
        response = json_response(document, status=201)
        response.headers["Cache-Control"] = "no-store"
        return response

    endpoints = [
        ComputedEndpoint(SELF_SUBJECT_ACCESS_REVIEWS, self_subject_access_review),
        ComputedEndpoint(SELF_SUBJECT_RULES_REVIEWS, self_subject_rules_review),
        ComputedEndpoint(SUBJECT_ACCESS_REVIEWS, subject_access_review),
        ComputedEndpoint(LOCAL_SUBJECT_ACCESS_REVIEWS, local_subject_access_review),
        ComputedEndpoint(SELF_SUBJECT_REVIEWS, self_subject_review),
    ]
    if reviewer is not None:
        endpoints.append(ComputedEndpoint(TOKEN_REVIEWS, token_review))
    return endpoints
