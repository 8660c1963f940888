"""Each request's ``audit.k8s.io/v1`` Events, as kube-apiserver's audit filter writes them.

The policy decides a request's level from who asked what (:mod:`.policy`, evaluated on the
attributes authorization saw). At ``Metadata`` an event has the request's URI, verb, user (and the
impersonated one), source IPs, user agent, the object's reference and the response's status
(kube's Status fields for a failure); ``Request`` adds the object the request sent; and
``RequestResponse`` the object answered. Stages: ``RequestReceived`` once the request is
authenticated (:meth:`Auditor.request_received`, called by authentication: the level depends on the
user; a request refused before has it written with its answer), ``ResponseComplete`` when it is
answered, ``ResponseStarted`` when a long-running request (a watch, a proxied stream) starts its
answer, which then completes when it ends, and ``Panic`` instead of ``ResponseComplete`` when its
handler failed unexpectedly (:data:`PANIC`; the client gets a 500 Status). With a backend in
``blocking-strict`` mode, a request whose ``RequestReceived`` event cannot be recorded fails, as
kube's (``500``, ``failed to store audit event``, counted in
``apiserver_audit_requests_rejected_total``). Every response carries the ``Audit-Id`` header (the
client's own ``Audit-ID`` when it sends one). Annotations: the authorization decision
(``authorization.k8s.io/decision`` and ``reason``), and what admission adds during the request
(:func:`annotate`: the policies' audit annotations and ``Audit`` failures).

In: the request, its response, the policy. Out: events to the audit backends (:mod:`.union`).
"""

from __future__ import annotations

import base64
import contextvars
import datetime as dt
import uuid
from collections.abc import Callable
from typing import Any, Final

import orjson
from aiohttp import web
from aiohttp.typedefs import Handler

from controlplane.apis.timestamps import format_micro_time
from controlplane.apiserver import errors
from controlplane.apiserver.audit.policy import AuditPolicy, Decision, Level, Stage
from controlplane.apiserver.audit.union import AuditBackends
from controlplane.apiserver.clientcertificates import peer_certificate
from controlplane.apiserver.identity import Decision as AuthorizationDecision
from controlplane.apiserver.identity import RequestAttributes, Role, UserInfo, user_info_document
from controlplane.apiserver.requeststate import REQUEST_INFO

#: What authorization saw (set by the authentication middleware), and who authenticated when
#: that differs from the user the request acts as (impersonation).
REQUEST_ATTRIBUTES = web.RequestKey("audit_attributes", RequestAttributes)
AUTHENTICATED_AS = web.RequestKey("audit_authenticated_as", UserInfo)
#: The authorization decision's annotations.
AUTHORIZATION = web.RequestKey("audit_authorization", AuthorizationDecision)
_STATE = web.RequestKey("audit_state", dict)
#: The exception a handler failed with unexpectedly (set by the error handling): kube's ``Panic`` stage.
PANIC = web.RequestKey("audit_panic", BaseException)

_ANNOTATIONS: contextvars.ContextVar[dict[str, str] | None] = contextvars.ContextVar("audit_annotations", default=None)
_WRITE_VERBS: Final = frozenset({"create", "update", "patch"})
_NOBODY: Final = UserInfo(name="", role=Role.USER)


def annotate(key: str, value: str) -> None:
    """Add an annotation to the audit events of the request being served (no request: nothing)."""
    annotations = _ANNOTATIONS.get()
    if annotations is not None:
        annotations.setdefault(key, value)


#: kube's annotation of the ``Audit`` failures of ValidatingAdmissionPolicies: a JSON list.
VALIDATION_FAILURE: Final = "validation.policy.admission.k8s.io/validation_failure"


def add_validation_failure(failure: dict[str, Any]) -> None:
    """Add a policy's ``Audit`` failure to :data:`VALIDATION_FAILURE` of the request being served."""
    annotations = _ANNOTATIONS.get()
    if annotations is not None:
        failures = orjson.loads(annotations.get(VALIDATION_FAILURE, "[]"))
        annotations[VALIDATION_FAILURE] = orjson.dumps([*failures, failure]).decode()


async def audit_id_header(request: web.Request, response: web.StreamResponse) -> None:
    """kube's ``Audit-Id`` response header without an audit log (kube's audit-init filter sets it
    on every response): the client's ``Audit-ID``, else a new one."""
    response.headers.setdefault("Audit-Id", request.headers.get("Audit-ID") or str(uuid.uuid4()))


class Auditor:
    """The audit filter: :attr:`middleware` (outside the error handling, so that it sees every
    answer) and :meth:`on_response_prepare` (the ``Audit-Id`` header, ``ResponseStarted``)."""

    def __init__(self, policy: AuditPolicy, log: AuditBackends, *, clock: Callable[[], dt.datetime] | None = None) -> None:
        self.policy = policy
        self.log = log
        self._clock = clock or (lambda: dt.datetime.now(dt.UTC))

    @web.middleware
    async def middleware(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        state: dict[str, Any] = {
            "id": request.headers.get("Audit-ID") or str(uuid.uuid4()), "received": self._clock(), "recorded": False,
        }
        request[_STATE] = state
        annotations: dict[str, str] = {}
        token = _ANNOTATIONS.set(annotations)
        try:
            response = await handler(request)
        except web.HTTPException as exc:
            await self._record(request, exc.status, None, annotations)
            raise
        finally:
            _ANNOTATIONS.reset(token)
        await self._record(request, response.status, response, annotations)
        return response

    async def request_received(self, request: web.Request) -> None:
        """Record ``RequestReceived`` now that the request's user is known (kube's audit filter runs
        after authentication, before authorization); :class:`errors.InternalError` when a
        ``blocking-strict`` backend could not record it."""
        decision = self._decide(request)
        if decision.level is Level.NONE or not decision.records(Stage.REQUEST_RECEIVED):
            return
        if not await self._received(request, decision):
            self.log.metrics.rejected.inc()
            request[_STATE]["rejected"] = True  # kube records nothing more of it
            raise errors.InternalError(f'Internal Server Error: "{request.rel_url}": failed to store audit event')

    async def _received(self, request: web.Request, decision: Decision) -> bool:
        """Record ``RequestReceived`` once; False when a ``blocking-strict`` backend could not."""
        state = request[_STATE]
        if state["recorded"]:
            return True
        state["recorded"] = True
        return await self.log.process(self._event(request, decision, Stage.REQUEST_RECEIVED, None, None, {}))

    async def on_response_prepare(self, request: web.Request, response: web.StreamResponse) -> None:
        state = request.get(_STATE)
        if state is None:
            return
        response.headers["Audit-Id"] = state["id"]
        if type(response) is web.Response:
            return
        # A streamed answer (a watch, a proxied stream) starts now: kube's ResponseStarted.
        decision = self._decide(request)
        if decision.level is Level.NONE:
            return
        if decision.records(Stage.REQUEST_RECEIVED):
            await self._received(request, decision)  # the answer stands whatever the backends say
        if decision.records(Stage.RESPONSE_STARTED):
            await self.log.process(self._event(request, decision, Stage.RESPONSE_STARTED, response.status, None, {}))

    def _decide(self, request: web.Request) -> Decision:
        attrs = _attributes(request)
        return Decision(Level.NONE) if attrs is None else self.policy.decide(attrs)

    async def _record(
        self, request: web.Request, code: int, response: web.StreamResponse | None, annotations: dict[str, str]
    ) -> None:
        decision = self._decide(request)
        if decision.level is Level.NONE or request[_STATE].get("rejected"):
            return
        if code == 401 and REQUEST_ATTRIBUTES not in request:
            # kube's failed-authentication audit: one ResponseStarted event naming what was tried.
            if decision.records(Stage.RESPONSE_STARTED):
                event = self._event(request, decision, Stage.RESPONSE_STARTED, None, None, {})
                event["responseStatus"] = {"metadata": {}, "message": _attempted_authentication(request), "code": 401}
                await self.log.process(event)
            return
        if decision.records(Stage.REQUEST_RECEIVED):
            await self._received(request, decision)  # the answer stands whatever the backends say
        stage = Stage.PANIC if PANIC in request else Stage.RESPONSE_COMPLETE
        if decision.records(stage):
            sent = await self._request_object(request, code)
            await self.log.process(self._event(request, decision, stage, code, response, annotations, sent))

    async def _request_object(self, request: web.Request, code: int) -> dict[str, Any] | None:
        attrs = request.get(REQUEST_ATTRIBUTES)
        if attrs is None or attrs.verb not in _WRITE_VERBS or code in (401, 403, 413) or not request.body_exists:
            return None
        if "json" not in request.content_type and "yaml" not in request.content_type:
            return None
        try:
            sent = orjson.loads(await request.read())
        except (orjson.JSONDecodeError, ValueError):
            return None  # an apply in YAML, or a body the handler refused
        return sent if isinstance(sent, dict) else {"items": sent} if isinstance(sent, list) else None

    def _event(
        self, request: web.Request, decision: Decision, stage: Stage, code: int | None,
        response: web.StreamResponse | None, annotations: dict[str, str], sent: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        state = request[_STATE]
        attrs = _attributes(request)
        user = attrs.user if attrs is not None and REQUEST_ATTRIBUTES in request else None
        actor = request.get(AUTHENTICATED_AS)
        event: dict[str, Any] = {
            "kind": "Event", "apiVersion": "audit.k8s.io/v1", "level": str(decision.level),
            "auditID": state["id"], "stage": str(stage), "requestURI": str(request.rel_url),
            "verb": attrs.verb if attrs is not None else request.method.lower(),
            "user": user_info_document(actor or user) if user is not None else {},
        }
        if actor is not None and user is not None:
            event["impersonatedUser"] = user_info_document(user)
        event["sourceIPs"] = _source_ips(request)
        if user_agent := request.headers.get("User-Agent"):
            event["userAgent"] = user_agent
        if attrs is not None and attrs.non_resource_path is None:
            event["objectRef"] = _object_ref(request, attrs, sent)
        if stage is Stage.PANIC:
            event["responseStatus"] = {"metadata": {}, "status": "Failure", "message": _panic_message(request[PANIC]),
                                       "reason": "InternalError", "code": 500}
        elif code is not None:
            event["responseStatus"] = _response_status(code, response)
        if sent is not None and decision.level in (Level.REQUEST, Level.REQUEST_RESPONSE):
            event["requestObject"] = _without_managed_fields(sent) if decision.omit_managed_fields else sent
        if (stage is Stage.RESPONSE_COMPLETE and decision.level is Level.REQUEST_RESPONSE
                and (answered := _json_body(response)) is not None):
            event["responseObject"] = _without_managed_fields(answered) if decision.omit_managed_fields else answered
        event["requestReceivedTimestamp"] = format_micro_time(state["received"])
        event["stageTimestamp"] = format_micro_time(self._clock() if stage is not Stage.REQUEST_RECEIVED else state["received"])
        merged = {**_authorization_annotations(request.get(AUTHORIZATION)), **annotations}
        if merged and stage is not Stage.REQUEST_RECEIVED:
            event["annotations"] = merged
        return event


def _attempted_authentication(request: web.Request) -> str:
    """kube's message of a failed authentication's event: the credentials the request carried."""
    methods = []
    authorization = request.headers.get("Authorization", "").strip()
    if _basic_credentials(authorization):
        methods.append("basic")
    parts = authorization.split(" ")
    if len(parts) > 1 and parts[0].lower() == "bearer":
        methods.append("bearer")
    if request.query.get("access_token", "").strip():
        methods.append("access_token")
    if request.transport is not None and peer_certificate(request.transport.get_extra_info("ssl_object")):
        methods.append("x509")
    if methods:
        return f"Authentication failed, attempted: {', '.join(methods)}"
    return "Authentication failed, no credentials provided"


def _basic_credentials(authorization: str) -> bool:
    """Go's ``Request.BasicAuth``: ``Basic`` and base64 of ``user:password``."""
    if authorization[:6].lower() != "basic ":
        return False
    try:
        return b":" in base64.b64decode(authorization[6:], validate=True)
    except ValueError:
        return False


def _panic_message(exc: BaseException) -> str:
    """kube's message of a ``Panic`` event."""
    return f"APIServer panic'd: {type(exc).__name__}: {exc}" if str(exc) else f"APIServer panic'd: {type(exc).__name__}"


def _authorization_annotations(decision: AuthorizationDecision | None) -> dict[str, str]:
    """kube's ``authorization.k8s.io/decision`` (and ``reason``) annotations of the request's decision."""
    if decision is None:
        return {}
    # kube records the reason even when its authorizers gave none (system:masters; a plain refusal).
    return {
        "authorization.k8s.io/decision": "allow" if decision.allowed else "forbid",
        "authorization.k8s.io/reason": decision.reason,
    }


def _attributes(request: web.Request) -> RequestAttributes | None:
    """What authorization saw; for a request that did not get there (not authenticated), what it
    asked of nobody; None before the request was parsed."""
    attrs: RequestAttributes | None = request.get(REQUEST_ATTRIBUTES)
    if attrs is not None:
        return attrs
    info = request.get(REQUEST_INFO)
    if info is None:
        return None
    return RequestAttributes(
        user=_NOBODY, verb=info.verb or request.method.lower(), api_group=info.group, resource=info.resource,
        subresource=info.subresource, namespace=info.namespace, name=info.name,
        non_resource_path=None if info.is_resource else request.path,
    )


def _object_ref(request: web.Request, attrs: RequestAttributes, sent: dict[str, Any] | None) -> dict[str, Any]:
    info = request.get(REQUEST_INFO)
    meta = (sent or {}).get("metadata") if isinstance((sent or {}).get("metadata"), dict) else {}
    assert meta is not None
    ref: dict[str, Any] = {"resource": attrs.resource}
    namespace = attrs.namespace or meta.get("namespace")
    name = attrs.name or meta.get("name")
    for key, value in (("namespace", namespace), ("name", name), ("uid", meta.get("uid")),
                       ("apiGroup", attrs.api_group), ("apiVersion", info.version if info is not None else ""),
                       ("resourceVersion", meta.get("resourceVersion")), ("subresource", attrs.subresource)):
        if value:
            ref[key] = value
    return ref


def _source_ips(request: web.Request) -> list[str]:
    """kube's ``SourceIPs``: the ``X-Forwarded-For`` chain, ``X-Real-Ip``, then the peer address,
    each once (the headers are the client's word, as kube notes)."""
    ips = [ip.strip() for ip in request.headers.get("X-Forwarded-For", "").split(",") if ip.strip()]
    for ip in (request.headers.get("X-Real-Ip", "").strip(), request.remote or ""):
        if ip and ip not in ips:
            ips.append(ip)
    return ips


def _json_body(response: web.StreamResponse | None) -> Any:
    if type(response) is not web.Response or not isinstance(response.body, bytes) or "json" not in response.content_type:
        return None
    try:
        return orjson.loads(response.body)
    except orjson.JSONDecodeError:
        return None


def _response_status(code: int, response: web.StreamResponse | None) -> dict[str, Any]:
    """kube's ``responseStatus``: the code, and a failure's Status fields."""
    if code >= 400:
        status = _json_body(response)
        if isinstance(status, dict) and status.get("kind") == "Status":
            return {"metadata": {}, **{k: status[k] for k in ("status", "message", "reason", "details") if k in status},
                    "code": code}
    return {"metadata": {}, "code": code}


def _without_managed_fields(obj: Any) -> Any:
    if not isinstance(obj, dict):
        return obj
    out = dict(obj)
    if isinstance(out.get("metadata"), dict) and "managedFields" in out["metadata"]:
        out["metadata"] = {k: v for k, v in out["metadata"].items() if k != "managedFields"}
    if isinstance(out.get("items"), list):
        out["items"] = [_without_managed_fields(item) for item in out["items"]]
    return out
