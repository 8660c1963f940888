"""The kube-compatible HTTP API of the hub (and of simulated member clusters).

``create_app(object_store, registry, authenticator=..., authorizer=...)`` returns an
aiohttp application serving: health (``/healthz``, ``/livez``, ``/readyz`` in kube's format; :mod:`.health`;
their checks' results on ``/metrics/slis``, :mod:`.healthslis`),
``/version`` (these four also without credentials, as ``system:anonymous``, by default), discovery (``/api``, ``/api/v1``, ``/apis``, ``/apis/<g>[/<v>]``),
OpenAPI (``/openapi/v3``, one v3 document per group-version, and ``/openapi/v2`` as JSON
or protobuf: :mod:`controlplane.apiserver.openapi`), every resource path, and the create-only
resources given to it (:mod:`.computed`: their ``POST``, kube's 405 for any other method,
their discovery entries). Given a
:class:`DynamicRegistry` (the hub's), it also runs a CRD controller
(:mod:`controlplane.apiserver.crd`) that serves the CustomResourceDefinitions in the store,
synced before the first request is answered.

Two middlewares wrap every request, outermost first: one parses the request
(:func:`routing.parse_request`), turns any error into a Kubernetes ``Status``
(unexpected exceptions become a generic 500 and a server-side traceback) and writes the
access log line at DEBUG; one authenticates the bearer token, applies kube's
impersonation headers (``Impersonate-User``/``Impersonate-Group``, for ``kubectl --as``,
when the caller may ``impersonate``) and asks the authorizer about the request's
:class:`RequestAttributes` (401/403 Status, kube's message). An authenticator that
can answer from memory (:class:`CachedAuthenticator`, e.g. the hub's token store) is
asked that way first, so a cached token costs no await and no timer. A resource's answer is
written in YAML for a client that prefers it, and a client that accepts none of kube's media
types gets 406 before the handler runs (:mod:`.negotiation`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from datetime import datetime
from typing import Protocol, runtime_checkable

import orjson
import yaml
from aiohttp import hdrs, web
from aiohttp.typedefs import Middleware

from controlplane.apis.apiextensions.crd import GROUP as CRD_GROUP
from controlplane.apis.apiextensions.crd import VERSION as CRD_VERSION
from controlplane.apis.bookmarks import BOOKMARK_BEFORE_TIMEOUT, BOOKMARK_PERIOD
from controlplane.apis.kube.selectors import SelectorError, pinned_name
from controlplane.apiserver import errors, negotiation
from controlplane.apiserver.admission import (
    AdmissionPlugin,
    ValidateWrite,
    WebhookCalls,
    create_authorized,
    write_validation,
)
from controlplane.apiserver.anonymous import ANONYMOUS_PATHS, AnonymousPaths
from controlplane.apiserver.audit import (
    AUTHENTICATED_AS,
    AUTHORIZATION,
    PANIC,
    REQUEST_ATTRIBUTES,
    Auditor,
    audit_id_header,
)
from controlplane.apiserver.clientcertificates import (
    CertificateRejected,
    ClientCertificates,
    peer_certificate,
)
from controlplane.apiserver.computed import ComputedEndpoint
from controlplane.apiserver.crd.controller import CrdController
from controlplane.apiserver.crd.converted import ConvertedHandlers, WebhookConversions
from controlplane.apiserver.crd.registry import DynamicRegistry
from controlplane.apiserver.crd.types import CRD_KIND
from controlplane.apiserver.crd.views import publish as publish_crd_views
from controlplane.apiserver.endpoints import Endpoints
from controlplane.apiserver.flowcontrol import (
    ConfigurationWatch,
    FlowControlConfig,
    FlowController,
    FlowControlMetrics,
    add_flow_headers,
)
from controlplane.apiserver.flowcontrol.debugging import debug_routes
from controlplane.apiserver.flowcontrol.maxinflight import MaxInFlight, MaxInFlightConfig
from controlplane.apiserver.handlers import ResourceHandlers, json_response
from controlplane.apiserver.healthslis import HealthcheckSLIs
from controlplane.apiserver.identity import (
    ANONYMOUS_USER,
    Authenticator,
    Authorizer,
    RequestAttributes,
    ReviewingAuthorizer,
    UserInfo,
    forbidden_message,
)
from controlplane.apiserver.impersonation import (
    GROUP_HEADER,
    UID_HEADER,
    USER_HEADER,
    ImpersonationDenied,
    ImpersonationInvalid,
    asks_impersonation,
    extra_of_headers,
    impersonate,
)
from controlplane.apiserver.longrunning import (
    long_running,
    long_running_not_watch_or_health,
    long_running_or_health,
)
from controlplane.apiserver.objects import ObjectStore, utc_now
from controlplane.apiserver.requestclientcert import peer_intermediates
from controlplane.apiserver.requestdeadline import DEFAULT_REQUEST_TIMEOUT, body_deadline_middleware
from controlplane.apiserver.requestoptions import create_options_checked
from controlplane.apiserver.requeststate import REQUEST_INFO, UNSTRUCTURED, WARNINGS, add_warning_headers
from controlplane.apiserver.resources import Registry
from controlplane.apiserver.routing import RequestInfo, authorized_namespace, is_upgrade, parse_request
from controlplane.apiserver.watchcache import DEFAULT_WATCH_CACHE, WatchCache, WatchCacheConfig
from controlplane.apiserver.watching import WatchLimits
from controlplane.apiserver.webhooks import WebhookAdmission
from controlplane.apiserver.webhooks.calling import WebhookClient
from controlplane.storage import interface as storage
from controlplane.storage.ledger import acting_as

logger = logging.getLogger(__name__)
access_logger = logging.getLogger(__name__ + ".access")

OBJECT_STORE = web.AppKey("object_store", ObjectStore)
REGISTRY = web.AppKey("registry", Registry)
WATCH_STOP = web.AppKey("watch_stop", asyncio.Event)
USER = web.RequestKey("user", UserInfo)

#: kube-apiserver's request body limit.
MAX_BODY_BYTES = 3 * 1024 * 1024
AUTH_TIMEOUT_SECONDS = 10.0

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def _http_exception_status(exc: web.HTTPException) -> errors.ApiError:
    if exc.status == 404:
        return errors.NotFound("the server could not find the requested resource")
    if exc.status == 405:
        return errors.MethodNotAllowed("the server does not allow this method on the requested resource")
    if exc.status == 413:
        return errors.RequestEntityTooLarge(
            f"the request body is too large: the limit is {MAX_BODY_BYTES} bytes"
        )
    error = errors.ApiError(exc.reason or "request failed")
    error.code = exc.status
    return error


@runtime_checkable
class CachedAuthenticator(Authenticator, Protocol):
    """An authenticator that can often answer without I/O."""

    def authenticate_cached(self, token: str) -> tuple[bool, UserInfo | None]:
        """``(True, user or None)`` when answered from memory, ``(False, None)`` when only
        ``authenticate`` can tell."""
        ...


def _negotiated(request: web.Request, response: web.StreamResponse) -> web.StreamResponse:
    """A resource's answer (object, list or Status) in YAML when the client prefers it, as kube's
    serializers write it, and indented JSON for ``?pretty=true`` or a curl, Wget or browser
    client (kube's ``isPrettyPrint``); compact JSON otherwise. Watches and streamed lists stay
    as they are."""
    info = request.get(REQUEST_INFO)
    if info is None or not info.is_resource or info.verb == "watch" or type(response) is not web.Response:
        return response
    if response.content_type != negotiation.JSON or not isinstance(response.body, bytes):
        return response
    try:
        media = negotiation.response_media(request.headers.get("Accept"), protobuf=UNSTRUCTURED not in request)
    except errors.NotAcceptable:
        return response
    if media == negotiation.YAML:
        body = yaml.safe_dump(orjson.loads(response.body), sort_keys=True, allow_unicode=True, width=float("inf")).encode()
    elif negotiation.pretty(request.query.get("pretty"), request.headers.get("User-Agent")):
        body = orjson.dumps(orjson.loads(response.body), option=orjson.OPT_INDENT_2)
    else:
        return response
    headers = {k: v for k, v in response.headers.items() if k.lower() not in ("content-type", "content-length")}
    return web.Response(body=body, status=response.status, headers={**headers, "Content-Type": media})


@web.middleware
async def accept_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    """A resource request whose client accepts none of kube's media types is 406, before its
    handler runs (after authentication and authorization, as in kube)."""
    info = request.get(REQUEST_INFO)
    if info is not None and info.is_resource and info.verb != "watch":
        negotiation.response_media(request.headers.get("Accept"))
    return await handler(request)


def _error_response(exc: errors.ApiError, warnings: list[str] | None = None) -> web.Response:
    """The Status of ``exc``, with the request's ``warnings``; a 429 or 503 that says when to retry
    also says so in ``Retry-After``, as kube-apiserver does."""
    response = json_response(exc.to_status(), status=exc.code, warnings=warnings)
    if exc.retry_after_seconds is not None and exc.code in (429, 503):
        response.headers["Retry-After"] = str(exc.retry_after_seconds)
    return response


@web.middleware
async def status_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Parse the request; every failure becomes a Status; one access log line per request."""
    started = time.perf_counter()
    code = 500
    try:
        request[REQUEST_INFO] = parse_request(
            request.method, request.path, request.query, upgrade=is_upgrade(request.headers)
        )
        response = await handler(request)
        code = response.status
        return _negotiated(request, response)
    except (errors.ApiError, SelectorError) as exc:
        # A query's selector is parsed by the pure parser, whose error is kube's 400 here.
        api_error = errors.bad_selector(exc) if isinstance(exc, SelectorError) else exc
        code = api_error.code
        return _negotiated(request, _error_response(api_error, request.get(WARNINGS)))
    except (storage.Unavailable, storage.NoSpace) as exc:
        # Reached from outside the object layer (e.g. a token lookup); same answer as there.
        logger.debug("store refused %s %s: %s", request.method, request.path, exc)
        api_error = errors.from_storage_error(exc, plural="", group="")
        code = api_error.code
        return _error_response(api_error)
    except web.HTTPException as exc:
        if exc.status < 400:
            code = exc.status
            raise
        api_error = _http_exception_status(exc)
        code = api_error.code
        return json_response(api_error.to_status(), status=api_error.code)
    except asyncio.CancelledError:
        code = 499
        raise
    except ConnectionError as exc:
        # The client left (e.g. a watch's client disconnected): nothing to answer, nothing wrong here.
        code = 499
        logger.debug("client went away during %s %s: %s", request.method, request.path, exc)
        raise
    except Exception as exc:
        logger.exception("unhandled error serving %s %s", request.method, request.path)
        request[PANIC] = exc  # the audit log's Panic stage
        error = errors.InternalError("an internal error occurred; the server log has the details")
        return json_response(error.to_status(), status=500)
    finally:
        if access_logger.isEnabledFor(logging.DEBUG):
            user = request.get(USER)
            access_logger.debug(
                "%s %s %d user=%s %.1fms",
                request.method, request.path, code, user.name if user else "-",
                (time.perf_counter() - started) * 1000,
            )


def _bearer_token(header: str | None) -> str | None:
    if not header:
        return None
    scheme, _, token = header.partition(" ")
    token = token.strip()
    return token if scheme.lower() == "bearer" and token else None


def _impersonated(actor: UserInfo, request: web.Request, authorizer: Authorizer) -> UserInfo:
    """The user named by the Impersonate-* headers, if ``actor`` may act as it (kube's 403 otherwise)."""
    groups = tuple(g for value in request.headers.getall(GROUP_HEADER, []) if (g := value.strip()))
    try:
        return impersonate(actor, user=request.headers.get(USER_HEADER, "").strip(), groups=groups,
                           uid=request.headers.get(UID_HEADER, "").strip(),
                           extra=extra_of_headers(request.headers.items()), authorizer=authorizer)
    except ImpersonationInvalid as exc:
        raise errors.BadRequest(str(exc)) from None
    except ImpersonationDenied as exc:
        attrs = exc.attributes
        raise errors.Forbidden(
            exc.reason or forbidden_message(attrs),
            target=errors.Target(name=attrs.name or "", group=attrs.api_group, kind=attrs.resource),
        ) from None


def auth_middleware(
    authenticator: Authenticator, authorizer: Authorizer | None,
    audit: Auditor | None = None, client_certificates: ClientCertificates | None = None,
    anonymous_paths: frozenset[str] = ANONYMOUS_PATHS,
) -> Middleware:
    cached = authenticator.authenticate_cached if isinstance(authenticator, CachedAuthenticator) else None
    anonymous = AnonymousPaths(anonymous_paths)
    # What the audit log records as the decision's reason: kube's authorizers' (``RBAC: allowed by ...``).
    reviewing = authorizer.review if audit is not None and isinstance(authorizer, ReviewingAuthorizer) else None

    @web.middleware
    async def authenticate(request: web.Request, handler: Handler) -> web.StreamResponse:
        token = _bearer_token(request.headers.get("Authorization"))
        user = None
        rejected: CertificateRejected | None = None
        # As kube's union of authenticators: a client certificate comes first, one that does not
        # verify is an error that a bearer token may still overcome, and never anonymous.
        connection = request.transport.get_extra_info("ssl_object") if request.transport else None
        der = peer_certificate(connection)
        if der is not None and client_certificates is not None:
            try:
                user = client_certificates.user(der, peer_intermediates(connection))
            except CertificateRejected as exc:
                rejected = exc
        if user is None and token is not None:
            answered, user = cached(token) if cached is not None else (False, None)
            if not answered:
                try:
                    async with asyncio.timeout(AUTH_TIMEOUT_SECONDS):
                        user = await authenticator.authenticate(token)
                except TimeoutError:
                    raise errors.ServiceUnavailable(
                        f"the bearer token could not be checked within {AUTH_TIMEOUT_SECONDS:g}s "
                        "(the object store is slow or unavailable); retry in a few seconds",
                        retry_after_seconds=1,
                    ) from None
        if user is None and rejected is not None:
            errors_seen = [str(rejected), *(["invalid bearer token"] if token is not None else [])]
            logger.error('"Unable to authenticate the request" err="[%s]"', ", ".join(errors_seen))
            raise errors.Unauthorized("Unauthorized")  # kube's words: the reason is in the server's log only
        if user is None and token is None and anonymous.match(request.path):
            user = ANONYMOUS_USER  # the authorizer decides: RBAC's system:public-info-viewer allows it
        if user is None:
            raise errors.Unauthorized(
                "Unauthorized: this server needs a valid bearer token (Authorization: Bearer <token>) or a client "
                "certificate its client CA signed, with a Common Name; check the credentials in your kubeconfig"
            )
        if authorizer is not None and asks_impersonation(request.headers):
            request[AUTHENTICATED_AS] = user
            user = _impersonated(user, request, authorizer)
        request[USER] = user
        info: RequestInfo = request[REQUEST_INFO]
        name = info.name
        if name is None and info.verb in ("list", "watch"):
            # kube authorizes a list or watch of one object (``fieldSelector=metadata.name=x``,
            # as an informer of one object asks) as naming it, so that ``resourceNames`` apply.
            name = pinned_name(request.query.get("fieldSelector"))
        attrs = RequestAttributes(
            user=user,
            verb=info.verb or request.method.lower(),
            api_group=info.group,
            resource=info.resource,
            subresource=info.subresource,
            namespace=authorized_namespace(info),
            name=name,
            non_resource_path=None if info.is_resource else request.path,
        )
        request[REQUEST_ATTRIBUTES] = attrs
        if audit is not None:
            await audit.request_received(request)  # kube audits after authentication, before authorization
        if authorizer is not None:
            audited = reviewing(attrs) if reviewing is not None else None
            # A denial's message is the authorizer's own (a review's reason is kube's authorizer's).
            decision = audited if audited is not None and audited.allowed else authorizer.authorize(attrs)
            request[AUTHORIZATION] = audited if audited is not None else decision  # the audit log's annotations
            if not decision.allowed:
                target = errors.Target(name=name or "", group=info.group, kind=info.resource)
                raise errors.Forbidden(decision.reason or forbidden_message(attrs), target=target)
        with acting_as(user.role.value):  # the write ledger counts this request's writes as the role's
            return await handler(request)

    return authenticate


async def _method_not_allowed(_request: web.Request) -> web.StreamResponse:
    """Any method but ``POST`` on a create-only resource (but ``GET`` on a read-only one): kube's
    answer (go-restful's 405, no route for the other verbs)."""
    raise errors.MethodNotAllowed("the server does not allow this method on the requested resource")


def _computed_routes(endpoints: Iterable[ComputedEndpoint]) -> list[web.RouteDef]:
    routes = []
    for endpoint in endpoints:
        path, verbs, subresource = endpoint.resource.path, endpoint.resource.verbs, endpoint.resource.subresource
        if not verbs:
            continue  # listed only: kube installs no route for a storage without verbs
        if "create" in verbs:
            routes.append(web.post(path, create_options_checked(endpoint.handler)))
        if "list" in verbs or ("get" in verbs and subresource):
            routes.append(web.get(path, endpoint.handler, allow_head=False))
        routes.append(web.route(hdrs.METH_ANY, path, _method_not_allowed))
        if endpoint.resource.namespaced and "list" in verbs and not subresource:
            # The list across every namespace (``/apis/metrics.k8s.io/v1beta1/pods``), as kube routes it.
            every = endpoint.resource.path.replace("/namespaces/{namespace}", "")
            routes += [web.get(every, endpoint.handler, allow_head=False), web.route(hdrs.METH_ANY, every, _method_not_allowed)]
        if "get" in verbs and not subresource:
            item = f"{path}/{{name}}"
            routes += [web.get(item, endpoint.handler, allow_head=False), web.route(hdrs.METH_ANY, item, _method_not_allowed)]
    return routes


def create_app(
    object_store: ObjectStore,
    registry: Registry,
    *,
    authenticator: Authenticator | None = None,
    authorizer: Authorizer | None = None,
    admission: Iterable[AdmissionPlugin] = (),
    extra_routes: Iterable[web.AbstractRouteDef] = (),
    computed: Iterable[ComputedEndpoint] = (),
    anonymous_paths: Iterable[str] = ANONYMOUS_PATHS,
    outer_middlewares: Iterable[Middleware] = (),
    inner_middlewares: Iterable[Middleware] = (),
    bookmark_interval: float = BOOKMARK_PERIOD,
    bookmark_before_timeout: float = BOOKMARK_BEFORE_TIMEOUT,
    watch_timeout_seconds: float = 1800.0,
    watch_limits: WatchLimits | None = None,
    clock: Callable[[], datetime] = utc_now,
    max_requests_inflight: int = 0,
    flow_control: FlowControlConfig | MaxInFlightConfig | None = None,
    flow_control_metrics: FlowControlMetrics | None = None,
    watch_cache: WatchCacheConfig | WatchCache | None = DEFAULT_WATCH_CACHE,
    warm: Iterable[tuple[str, str]] = (),
    webhooks: WebhookAdmission | None = None,
    audit: Auditor | None = None,
    client_certificates: ClientCertificates | None = None,
    request_timeout: float = DEFAULT_REQUEST_TIMEOUT,
) -> web.Application:
    """The API server application over ``object_store`` serving ``registry``.

    With an ``authenticator`` every request is authenticated, whatever its path (a bearer token or
    a client certificate; without either, ``anonymous_paths`` (a trailing ``*`` a prefix) are asked as ``system:anonymous``,
    any other is 401), and the ``authorizer`` (if any) decides each request; the
    ``admission`` plugins then check each write's final object for its user. Open
    watches end when the application shuts down; the store is the caller's to close.
    ``computed`` are resources answered by handlers of their own and never stored, listed in
    discovery (the access reviews and ``serviceaccounts/token``, which only take a ``POST``;
    ComponentStatus and Kueue's pending workloads, read-only).
    ``outer_middlewares`` wrap everything else (e.g. the hub's request-latency metrics);
    ``inner_middlewares`` see requests already authenticated, authorized and admitted by flow
    control (the hub's API aggregation).
    ``max_requests_inflight`` requests at once (0: no limit; watches and health checks not
    counted) are shared by priority levels (API Priority and Fairness, ``flow_control``
    configures it in full, or kube's max-in-flight filter instead); beyond a level's seats and
    queues a request is answered 429.
    ``watch_limits`` bound what one watch holds for a client that does not read. A watch that asked
    for bookmarks gets one every ``bookmark_interval`` seconds and one ``bookmark_before_timeout``
    seconds before its ``timeoutSeconds`` ends it (kube's one minute and 2 s).
    ``watch_cache`` configures the watch cache (None: none, every read goes to the store), or is
    one the caller built over ``object_store`` to share with in-process watchers (the app closes it);
    ``warm`` names the kinds (group, plural) it caches from the start.
    ``webhooks`` calls the configured admission webhooks for the users' writes (the app keeps its
    configurations from a watch while it runs, and closes it). ``audit`` records each request in the
    audit log as its policy says. ``client_certificates`` verifies the certificates clients offer
    (none are taken without it). A body not all arrived ``request_timeout`` seconds after its request
    is kube's 504 (:mod:`.requestdeadline`).
    """
    stop = asyncio.Event()
    plugins = tuple(admission)
    wanted = frozenset(warm)

    def validation(request: web.Request) -> ValidateWrite | None:
        checks, attrs = write_validation(plugins, request.get(USER)), request.get(REQUEST_ATTRIBUTES)
        if authorizer is None or attrs is None or request.method not in ("PUT", "PATCH"):
            return checks
        return create_authorized(checks, authorizer, attrs)  # an update or apply that creates: kube asks for create

    def webhook_calls(request: web.Request, warnings: list[str]) -> WebhookCalls | None:
        return None if webhooks is None else webhooks.calls(request.get(USER), warnings)

    cache = watch_cache if isinstance(watch_cache, WatchCache) or watch_cache is None else WatchCache(
        object_store, watch_cache
    )
    resources = ResourceHandlers(
        object_store, stop=stop, bookmark_interval=bookmark_interval,
        bookmark_before_timeout=bookmark_before_timeout,
        watch_timeout_seconds=watch_timeout_seconds, clock=clock, validation=validation,
        watch_limits=watch_limits, watch_cache=cache, webhooks=webhook_calls,
    )
    # The conversion webhooks of CRDs share the admission webhooks' client (one session, one TLS cache).
    conversion_client = webhooks.client if webhooks is not None else WebhookClient(object_store, cache)
    conversions = WebhookConversions(conversion_client, registry, webhooks.metrics if webhooks is not None else None)
    resources.converted = ConvertedHandlers(resources, conversions).handle
    # managedFields entries of a CRD's other versions are compared in theirs, converted by its webhook.
    object_store.versions.webhooks = conversions.to_version
    if webhooks is not None:  # admission sees a CRD's versions converted by its conversion webhook
        webhooks.converter = conversions.between
    computed = tuple(computed)
    endpoints = Endpoints(object_store, registry, resources, [endpoint.resource for endpoint in computed])
    middlewares: list[Middleware] = [
        *outer_middlewares,
        *([audit.middleware] if audit is not None else []),  # outside the error handling: it sees every answer
        status_middleware,
        body_deadline_middleware(request_timeout, long_running),
    ]
    if authenticator is not None:
        middlewares.append(auth_middleware(
            authenticator, authorizer, audit, client_certificates, frozenset(anonymous_paths)
        ))
    if flow_control is None and max_requests_inflight > 0:
        flow_control = FlowControlConfig(total_concurrency=max_requests_inflight)
    flow_config = None
    flow_debug: list[web.RouteDef] = []
    if isinstance(flow_control, MaxInFlightConfig):
        middlewares.append(MaxInFlight(flow_control).middleware(user_key=USER, not_counted=long_running_or_health))
    elif flow_control is not None and flow_control.total_concurrency > 0:
        # After authentication: a request's level and flow depend on who sends it.
        controller = FlowController(
            flow_control, metrics=flow_control_metrics, object_count=None if cache is None else cache.object_count,
        )
        middlewares.append(controller.middleware(user_key=USER, not_counted=long_running_not_watch_or_health))
        flow_config = ConfigurationWatch(object_store, controller)
        flow_debug = debug_routes(controller, user_key=USER)
    middlewares += [*inner_middlewares, accept_middleware]
    app = web.Application(middlewares=middlewares, client_max_size=MAX_BODY_BYTES)
    app.on_response_prepare.append(add_flow_headers)
    app.on_response_prepare.append(add_warning_headers)
    app.on_response_prepare.append(audit.on_response_prepare if audit is not None else audit_id_header)
    app[OBJECT_STORE] = object_store
    app[REGISTRY] = registry
    app[WATCH_STOP] = stop

    async def lifecycle(_app: web.Application) -> AsyncIterator[None]:
        await object_store.bootstrap()
        crd_task = None
        if isinstance(registry, DynamicRegistry):
            crd_type = registry.require(f"{CRD_GROUP}/{CRD_VERSION}", CRD_KIND)
            await publish_crd_views(object_store, crd_type, registry.static)
            # This replica serves the CRDs in the store from before it answers its first request.
            crds = CrdController(object_store, registry, crd_type)
            crd_task = asyncio.create_task(crds.run(stop), name="crd-controller")
            await crds.wait_synced()
        if cache is not None:
            cache.warm(rt for rt in registry if (rt.group, rt.plural) in wanted)
        if audit is not None:
            audit.log.start()
        flow_task = None
        if flow_config is not None:
            # This replica limits its requests by the stored FlowSchemas from its first request.
            flow_task = asyncio.create_task(flow_config.run(stop), name="flowcontrol-configuration")
            await flow_config.wait_synced()
        webhook_task = None
        if webhooks is not None:
            # This replica calls the webhooks configured before it answers its first write.
            webhook_task = asyncio.create_task(webhooks.run(stop), name="webhook-configurations")
            await webhooks.wait_synced()
        yield
        stop.set()
        if webhooks is not None and webhook_task is not None:
            webhook_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await webhook_task
            await webhooks.close()
        if cache is not None:
            await cache.close()
        if audit is not None:
            await audit.log.close()
        if webhooks is None:
            await conversion_client.close()
        for task in (flow_task, crd_task):
            if task is None:
                continue
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def on_shutdown(_app: web.Application) -> None:
        # Runs before the server waits for open requests: let watches end now.
        stop.set()

    app.cleanup_ctx.append(lifecycle)
    app.on_shutdown.append(on_shutdown)
    slis = HealthcheckSLIs()
    app.router.add_routes([*endpoints.health(stop, slis).routes(), *slis.routes()])
    app.router.add_get("/version", endpoints.version)
    app.router.add_get("/version/", endpoints.version)  # as kube-apiserver does (kr8s asks for it)
    # Both with and without the slash, as kube-apiserver serves them (the kubernetes Python
    # client's CoreApi and ApisApi ask for /api/ and /apis/).
    for path, handler in (("/api", endpoints.api), ("/api/", endpoints.api), ("/apis", endpoints.apis), ("/apis/", endpoints.apis)):
        app.router.add_get(path, handler)
    app.router.add_routes(endpoints.openapi.routes())
    # Extra and create-only routes first: some live under /apis/ (the join and token endpoints,
    # the access reviews) and must win over the generic resource routes.
    app.router.add_routes([*extra_routes, *flow_debug])
    app.router.add_routes(_computed_routes(computed))
    app.router.add_route("*", "/api/{tail:.+}", endpoints.resource_path)
    app.router.add_route("*", "/apis/{tail:.+}", endpoints.resource_path)
    return app
