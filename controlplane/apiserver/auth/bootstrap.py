"""The hub's credential endpoints: cluster join (token exchange), token management, CA.

A new member agent arrives with a bootstrap token and the hub's CA hash (the line
``gpufed token create --print-join-command`` prints). It fetches the CA from
:data:`CA_PATH` (without credentials, as ``system:anonymous``; checked against the hash), then posts
``{"clusterName": "x"}`` to :data:`JOIN_PATH` with the bootstrap token. The hub issues
an agent token scoped to cluster ``x``, marks a one-time bootstrap token used, and
answers with a ``ClusterJoin`` object holding the new token, which the agent keeps in
its state dir and uses from then on.

A cluster name that has already joined (its Cluster exists, or an agent credential
for it does) can only be joined again with a bootstrap token scoped to that name
(``gpufed token create --cluster NAME``): an admin's explicit re-join, for an agent that
lost its state dir or a reinstall. Any other bootstrap token gets 409 Conflict saying
so — otherwise anyone holding a join token could take over an existing member's name,
its Works and their Secrets. A re-join issues a new agent credential and revokes the
cluster's previous ones: one cluster, one live credential. Two first joins of one new
name racing each other both get the 409 (each sees the other's credential before it
spends its bootstrap token), never two credentials.

The agent token is created *before* the bootstrap token is consumed, and deleted again
if consumption fails, so a failure never burns a bootstrap token without handing out
its credential, and never leaves a usable credential nobody received.

Admins manage tokens at :data:`TOKENS_PATH` (create, list, get, revoke); the secret
is returned once, in the create response.

In: a :class:`TokenStore`. Out: aiohttp route definitions (:func:`join_routes`,
:func:`token_routes`, :func:`ca_routes`) whose errors are Kubernetes ``Status`` JSON,
and ``gpufed token create --print-join-command``. Each handler authenticates its caller itself, so it stays
safe even if mounted outside the API server's authentication middleware.
"""

from __future__ import annotations

import datetime as dt
import functools
import logging
from collections.abc import Awaitable, Callable
from typing import Any, Final

from aiohttp import web

from controlplane.apis.constants import (
    AUTH_GROUP,
    CA_PATH,
    EXECUTION_NAMESPACE_PREFIX,
    JOIN_PATH,
    TOKENS_PATH,
)
from controlplane.apis.meta import DNS1123_LABEL_MAX_LENGTH, validate_dns1123_label
from controlplane.apis.timestamps import format_time
from controlplane.apiserver import errors, protobuf
from controlplane.apiserver.app import USER
from controlplane.apiserver.auth.authorizer import (
    AUTH_VERSION,
    CLUSTERJOINS,
    TOKENS,
)
from controlplane.apiserver.auth.tokens import (
    TokenError,
    TokenInfo,
    TokenNotFound,
    TokenRejected,
    TokenRejectedReason,
    TokenStore,
    bearer_token,
)
from controlplane.apiserver.body_refusals import body_media
from controlplane.apiserver.decoding import decode_body_sync
from controlplane.apiserver.identity import Authorizer, RequestAttributes, Role, UserInfo
from controlplane.storage.interface import StorageError

log = logging.getLogger(__name__)

API_VERSION: Final = f"{AUTH_GROUP}/{AUTH_VERSION}"
#: A cluster name must leave room for the ``gpufed-es-`` prefix in a 63-character namespace.
CLUSTER_NAME_MAX_LENGTH: Final = DNS1123_LABEL_MAX_LENGTH - len(EXECUTION_NAMESPACE_PREFIX)
DEFAULT_BOOTSTRAP_TTL: Final = dt.timedelta(hours=1)
_MAX_BODY_BYTES: Final = 64 * 1024
_NO_STORE: Final = {"Cache-Control": "no-store"}

_Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def join_routes(
    tokens: TokenStore, *, cluster_exists: Callable[[str], Awaitable[bool]] | None = None
) -> list[web.RouteDef]:
    """``POST`` :data:`JOIN_PATH`: trade a bootstrap token for an agent token.

    ``cluster_exists`` tells whether a Cluster object of that name is on the hub (with
    the cluster's agent credentials, what makes a name taken).
    """

    async def taken(cluster: str, *, other_than: str | None = None) -> bool:
        if any(info.id != other_than for info in await tokens.cluster_agents(cluster)):
            return True
        return cluster_exists is not None and await cluster_exists(cluster)

    async def create_cluster_join(request: web.Request) -> web.StreamResponse:
        token = bearer_token(request.headers)
        if token is None:
            raise errors.Unauthorized("a bootstrap token is required (Authorization: Bearer <token>)")
        user = await _authenticate(tokens, token)
        if user.role is not Role.BOOTSTRAP:
            raise errors.Forbidden(
                f'{user.role} "{user.name}" cannot create resource "{CLUSTERJOINS}" in API group '
                f'"{AUTH_GROUP}": only a bootstrap token may join a cluster; an admin can issue an '
                f"agent token directly with POST {TOKENS_PATH}",
                target=errors.Target(group=AUTH_GROUP, kind=CLUSTERJOINS),
            )
        body = await read_json_body(request)
        cluster = _cluster_name(body)
        if user.cluster is not None and user.cluster != cluster:
            raise errors.Forbidden(
                f'bootstrap token "{user.token_id}" may only join cluster "{user.cluster}", not "{cluster}"',
                target=errors.Target(name=cluster, group=AUTH_GROUP, kind=CLUSTERJOINS),
            )

        rejoin = user.cluster == cluster
        if not rejoin and await taken(cluster):
            raise _name_taken(cluster)

        issued = await tokens.create(role=Role.AGENT, name=f"agent:{cluster}", cluster=cluster)
        try:
            if not rejoin and await taken(cluster, other_than=issued.id):
                raise _name_taken(cluster)  # another first join of this name got here too
            await tokens.consume_bootstrap(token, cluster=cluster)
        except BaseException as exc:
            await _discard(tokens, issued.id)
            if isinstance(exc, TokenRejected):
                raise _rejection_to_api_error(exc) from exc
            raise
        try:
            replaced = await tokens.revoke_cluster_agents(cluster, keep=issued.id)
        except StorageError:
            replaced = []
            log.warning("could not revoke the previous agent tokens", extra={"cluster": cluster}, exc_info=True)
        log.info(
            "cluster joined",
            extra={
                "cluster": cluster,
                "bootstrap_token_id": user.token_id,
                "agent_token_id": issued.id,
                "revoked_token_ids": replaced,
            },
        )
        now = format_time(issued.info.created_at)
        document = {
            "apiVersion": API_VERSION,
            "kind": "ClusterJoin",
            "metadata": {"name": cluster, "creationTimestamp": now},
            "clusterName": cluster,
            "token": issued.token,
            "tokenId": issued.id,
        }
        return web.json_response(document, status=201, headers=_NO_STORE)

    return [web.post(JOIN_PATH, _with_status_errors(create_cluster_join))]


def token_routes(tokens: TokenStore, *, authorizer: Authorizer | None = None) -> list[web.RouteDef]:
    """Admin-only token management under :data:`TOKENS_PATH`: with an ``authorizer``, whoever
    RBAC lets manage ``tokens.auth.gpufed.io``; without one, admin tokens.

    ``POST`` body: ``{"role": "bootstrap", "name": "...", "cluster": "...",
    "ttlSeconds": 3600, "oneTime": true, "groups": [...]}`` (or the same fields under
    ``spec``; ``groups`` for ``"role": "user"`` tokens only); bootstrap
    tokens default to one-time and a 1 h ttl, other roles to no expiry. A ``Token``
    object has ``spec`` (role, name, cluster, oneTime, expires) and ``status`` (used,
    usedAt, usedFor); the create response alone adds the secret as top-level ``token``.
    """

    async def create_token(request: web.Request) -> web.StreamResponse:
        await _require_admin(tokens, request, verb="create", authorizer=authorizer)
        body = await read_json_body(request)
        role, name, cluster, ttl, one_time, groups = _token_request(body)
        try:
            issued = await tokens.create(
                role=role, name=name, cluster=cluster, ttl=ttl, one_time=one_time, groups=groups
            )
        except ValueError as exc:
            raise errors.invalid(
                kind="Token",
                group=AUTH_GROUP,
                name="",
                causes=[errors.Cause(errors.CauseType.FIELD_VALUE_INVALID, str(exc))],
            ) from exc
        document = _token_document(issued.info)
        document["token"] = issued.token
        return web.json_response(document, status=201, headers=_NO_STORE)

    async def list_tokens(request: web.Request) -> web.StreamResponse:
        await _require_admin(tokens, request, verb="list", authorizer=authorizer)
        items = [_token_document(info) for info in await tokens.list()]
        document = {"apiVersion": API_VERSION, "kind": "TokenList", "metadata": {}, "items": items}
        return web.json_response(document, headers=_NO_STORE)

    async def get_token(request: web.Request) -> web.StreamResponse:
        await _require_admin(tokens, request, verb="get", authorizer=authorizer)
        token_id = request.match_info["token_id"]
        try:
            info = await tokens.get(token_id)
        except TokenNotFound as exc:
            raise errors.not_found(plural=TOKENS, group=AUTH_GROUP, name=token_id) from exc
        return web.json_response(_token_document(info), headers=_NO_STORE)

    async def delete_token(request: web.Request) -> web.StreamResponse:
        await _require_admin(tokens, request, verb="delete", authorizer=authorizer)
        token_id = request.match_info["token_id"]
        try:
            await tokens.revoke(token_id)
        except TokenNotFound as exc:
            raise errors.not_found(plural=TOKENS, group=AUTH_GROUP, name=token_id) from exc
        document = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Success",
            "details": {"name": token_id, "group": AUTH_GROUP, "kind": TOKENS},
        }
        return web.json_response(document)

    item_path = TOKENS_PATH + "/{token_id}"
    return [
        web.post(TOKENS_PATH, _with_status_errors(create_token)),
        web.get(TOKENS_PATH, _with_status_errors(list_tokens), allow_head=False),
        web.get(item_path, _with_status_errors(get_token), allow_head=False),
        web.delete(item_path, _with_status_errors(delete_token)),
    ]


def ca_routes(*, ca_pem: bytes) -> list[web.RouteDef]:
    """``GET`` :data:`CA_PATH`: the hub's CA certificate, public like kubeadm's cluster-info.

    It holds no secret: the API server asks a request without credentials here as ``system:anonymous``
    (whatever ``--anonymous-auth``: an agent cannot send its token before it trusts the hub), which the
    default RBAC lets read it (``gpufed:public-info-viewer``); credentials that fail are 401 as anywhere.
    """

    async def get_ca(_: web.Request) -> web.StreamResponse:
        return web.Response(body=ca_pem, content_type="application/x-pem-file")

    return [web.get(CA_PATH, get_ca)]


def _with_status_errors(handler: _Handler) -> _Handler:
    """Answer ApiErrors and storage errors as Kubernetes ``Status`` JSON."""

    @functools.wraps(handler)
    async def wrapped(request: web.Request) -> web.StreamResponse:
        try:
            return await handler(request)
        except errors.ApiError as exc:
            return _status_response(exc)
        except StorageError as exc:
            return _status_response(errors.from_storage_error(exc, plural=TOKENS, group=AUTH_GROUP))

    return wrapped


def _status_response(exc: errors.ApiError) -> web.Response:
    headers = {}
    if exc.retry_after_seconds is not None:
        headers["Retry-After"] = str(exc.retry_after_seconds)
    return web.json_response(exc.to_status(), status=exc.code, headers=headers)


async def _authenticate(tokens: TokenStore, token: str) -> UserInfo:
    user = await tokens.authenticate(token)
    if user is None:
        raise errors.Unauthorized("the bearer token is invalid, expired, revoked or already used")
    return user


async def _require_admin(
    tokens: TokenStore, request: web.Request, *, verb: str, authorizer: Authorizer | None
) -> UserInfo:
    token = bearer_token(request.headers)
    if token is None:
        raise errors.Unauthorized("a bearer token is required (Authorization: Bearer <token>)")
    # Behind the API server's middleware the caller may be impersonating someone: act as them.
    user = request.get(USER) or await _authenticate(tokens, token)
    if authorizer is not None:
        name = request.match_info.get("token_id")
        attributes = RequestAttributes(user=user, verb=verb, api_group=AUTH_GROUP, resource=TOKENS, name=name)
        allowed = authorizer.authorize(attributes).allowed
    else:
        allowed = user.role is Role.ADMIN
    if not allowed:
        raise errors.Forbidden(
            f'{user.role} "{user.cluster or user.name}" cannot {verb} resource "{TOKENS}" in API group '
            f'"{AUTH_GROUP}" at the cluster scope: only admins may manage tokens',
            target=errors.Target(group=AUTH_GROUP, kind=TOKENS),
        )
    return user


async def read_object_body(request: web.Request) -> dict[str, Any]:
    """The object in the body of a computed create (reviews, token requests): JSON or YAML, or
    protobuf as kubectl's and client-go's typed clients send it; a media type kube does not decode
    is its 415, as for any create."""
    media = body_media(request.headers.get("Content-Type"))
    if media == protobuf.MEDIA_TYPE:
        return protobuf.decode_object(await request.read())
    return await read_json_body(request, media=media or "application/json")


async def read_json_body(request: web.Request, *, media: str = "application/json") -> dict[str, Any]:
    raw = await request.content.read(_MAX_BODY_BYTES + 1)
    if len(raw) > _MAX_BODY_BYTES:
        raise errors.RequestEntityTooLarge(f"the request body is larger than {_MAX_BODY_BYTES} bytes")
    body = decode_body_sync(raw if raw.strip() else b"{}", media=media)
    if not isinstance(body, dict):
        raise errors.BadRequest("the request body must be a JSON object")
    return body


def _cluster_name(body: dict[str, Any]) -> str:
    value = body.get("clusterName")
    field = "clusterName"
    if value is None or value == "":
        cause = errors.Cause(errors.CauseType.FIELD_VALUE_REQUIRED, "Required value", field)
        raise errors.invalid(kind="ClusterJoin", group=AUTH_GROUP, name="", causes=[cause])
    if not isinstance(value, str):
        cause = errors.Cause(errors.CauseType.FIELD_VALUE_INVALID, "must be a string", field)
        raise errors.invalid(kind="ClusterJoin", group=AUTH_GROUP, name="", causes=[cause])
    problems = validate_dns1123_label(value)
    if len(value) > CLUSTER_NAME_MAX_LENGTH:
        problems.insert(
            0,
            f"must be no more than {CLUSTER_NAME_MAX_LENGTH} characters, so that its execution "
            f"namespace {EXECUTION_NAMESPACE_PREFIX}<name> is a valid namespace name",
        )
    if problems:
        causes = [
            errors.Cause(errors.CauseType.FIELD_VALUE_INVALID, f"Invalid value: {value!r}: {problem}", field)
            for problem in problems
        ]
        raise errors.invalid(kind="ClusterJoin", group=AUTH_GROUP, name=value, causes=causes)
    return value


def _token_request(
    body: dict[str, Any],
) -> tuple[Role, str, str | None, dt.timedelta | None, bool, tuple[str, ...]]:
    causes: list[errors.Cause] = []
    spec = body.get("spec")
    if isinstance(spec, dict):
        body = {**body, **spec}

    def problem(field: str, message: str, kind: errors.CauseType = errors.CauseType.FIELD_VALUE_INVALID) -> None:
        causes.append(errors.Cause(kind, message, field))

    role: Role | None = None
    raw_role = body.get("role")
    if raw_role is None:
        problem("role", "Required value", errors.CauseType.FIELD_VALUE_REQUIRED)
    elif raw_role not in tuple(Role):
        supported = ", ".join(f'"{r}"' for r in Role)
        problem("role", f"Unsupported value: {raw_role!r}: supported values: {supported}",
                errors.CauseType.FIELD_VALUE_NOT_SUPPORTED)
    else:
        role = Role(raw_role)
    name = body.get("name", str(role) if role else "")
    if not isinstance(name, str) or not name:
        problem("name", "must be a non-empty string")
    cluster = body.get("cluster")
    if cluster is not None and (not isinstance(cluster, str) or validate_dns1123_label(cluster)):
        problem("cluster", "must be a cluster name (a lowercase RFC 1123 label)")
    ttl: dt.timedelta | None = DEFAULT_BOOTSTRAP_TTL if role is Role.BOOTSTRAP else None
    ttl_seconds = body.get("ttlSeconds")
    if ttl_seconds is not None:
        if isinstance(ttl_seconds, bool) or not isinstance(ttl_seconds, int) or ttl_seconds <= 0:
            problem("ttlSeconds", "must be a positive whole number of seconds")
        else:
            ttl = dt.timedelta(seconds=ttl_seconds)
    one_time = body.get("oneTime", role is Role.BOOTSTRAP)
    if not isinstance(one_time, bool):
        problem("oneTime", "must be true or false")
    groups = body.get("groups", [])
    if not isinstance(groups, list) or not all(isinstance(g, str) and g for g in groups):
        problem("groups", "must be a list of non-empty group names")
        groups = []
    if causes or role is None:
        raise errors.invalid(kind="Token", group=AUTH_GROUP, name="", causes=causes)
    return role, name, cluster, ttl, one_time, tuple(groups)


def _token_document(info: TokenInfo) -> dict[str, Any]:
    spec: dict[str, Any] = {"role": str(info.role), "name": info.name, "oneTime": info.one_time}
    if info.cluster is not None:
        spec["cluster"] = info.cluster
    if info.groups:
        spec["groups"] = list(info.groups)
    if info.expires_at is not None:
        spec["expires"] = format_time(info.expires_at)
    status: dict[str, Any] = {"used": info.used_at is not None}
    if info.used_at is not None:
        status["usedAt"] = format_time(info.used_at)
    if info.used_for is not None:
        status["usedFor"] = info.used_for
    return {
        "apiVersion": API_VERSION,
        "kind": "Token",
        "metadata": {"name": info.id, "creationTimestamp": format_time(info.created_at)},
        "spec": spec,
        "status": status,
    }


async def _discard(tokens: TokenStore, token_id: str) -> None:
    """Delete a credential that was never handed out; it is unusable by anyone anyway."""
    try:
        await tokens.revoke(token_id)
    except (TokenError, StorageError):
        log.warning("could not delete an unused agent token", extra={"token_id": token_id}, exc_info=True)


def _name_taken(cluster: str) -> errors.Conflict:
    return errors.Conflict(
        f'cluster "{cluster}" has already joined the hub: this bootstrap token may only join a new '
        f"cluster. To join it again (its agent lost its state dir, or a reinstall), an admin creates "
        f"a token for it: gpufed token create --cluster {cluster} --print-join-command (the new agent "
        f"credential replaces the old one); otherwise pick another --cluster-name",
        target=errors.Target(name=cluster, group=AUTH_GROUP, kind=CLUSTERJOINS),
    )


def _rejection_to_api_error(exc: TokenRejected) -> errors.ApiError:
    if exc.reason in (TokenRejectedReason.NOT_BOOTSTRAP, TokenRejectedReason.WRONG_CLUSTER):
        return errors.Forbidden(f"cannot join: {exc}")
    return errors.Unauthorized(f"cannot join: {exc}")
