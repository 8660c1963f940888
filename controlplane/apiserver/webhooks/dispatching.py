"""Admission webhooks and ValidatingAdmissionPolicies: the configured ones, kept in memory from a
watch, called (run) for users' writes.

In: the ValidatingWebhookConfigurations and MutatingWebhookConfigurations in the store (listed, then
watched: no store read per write), and each write a user's request makes (create, update, patch,
delete, and the status and scale subresources where a rule names them). Out, per request, a
:class:`~controlplane.apiserver.admission.WebhookCalls` for the object layer, or None when no
webhook is configured — then a write costs nothing more than before.

As kube-apiserver's dispatchers (``validating/dispatcher.go``, ``mutating/dispatcher.go``): the
mutating webhooks are called one at a time, configurations in name order and each one's webhooks
in order, each seeing the object the ones before patched (``patchType: JSONPatch``, its copies
bounded to 3 MiB as kube bounds every JSON patch it applies); the matching
validating webhooks are called all at once, and the first refusal is the answer. A failed call
(unreachable, timed out, an invalid answer) refuses the write with kube's ``Internal error
occurred: failed calling webhook "x": ...`` under ``failurePolicy: Fail`` and is logged and
ignored under ``Ignore``. A dry run calls only webhooks declaring ``sideEffects`` None or
NoneOnDryRun (kube's 400 otherwise). A mutating webhook with ``reinvocationPolicy: IfNeeded`` is
called once more, after the others, when a later webhook changed the object (kube also reinvokes
for its in-tree mutating plugins' changes; the hub has none after the webhooks). A webhook's
``matchConditions`` decide, after its rules and selectors, whether it is called.

The bound ValidatingAdmissionPolicies run just before the validating webhooks (kube's plugin
order): policies and bindings are compiled once per change (:mod:`.policies`) and run per write by
:mod:`.enforcing`. The Namespace a selector or policy reads comes from the watch cache's memory when
the hub has one (the store when memory has none yet), once per request.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
import uuid
from typing import Any

import orjson

from controlplane.apis.apiextensions import cel
from controlplane.apis.kube import field
from controlplane.apis.kube.jsonpatches import CopiedTooMuch, JsonPatchFailed, json_patched
from controlplane.apiserver import errors
from controlplane.apiserver.admission import WebhookRequest
from controlplane.apiserver.identity import Authorizer, RequestAttributes, ReviewingAuthorizer, Role, UserInfo
from controlplane.apiserver.objects import ObjectStore
from controlplane.apiserver.objects.following import follow_kind
from controlplane.apiserver.resources import ResourceType
from controlplane.apiserver.watchcache import WatchCache
from controlplane.apiserver.webhooks import equivalence, matching, policies, review
from controlplane.apiserver.webhooks.calling import CallFailed, WebhookClient
from controlplane.apiserver.webhooks.enforcing import run_policies
from controlplane.apiserver.webhooks.expressions import (
    authorizer_functions,
    authorizer_variable,
    conditions_match,
)
from controlplane.apiserver.webhooks.matching import Selection, Webhook
from controlplane.apiserver.webhooks.metrics import (
    APISERVER_INTERNAL_ERROR,
    CALLING_WEBHOOK_ERROR,
    NO_ERROR,
    AdmissionMetrics,
)

logger = logging.getLogger(__name__)

_GROUP = "admissionregistration.k8s.io/v1"
_KINDS = {
    "validating": "ValidatingWebhookConfiguration",
    "mutating": "MutatingWebhookConfiguration",
    "policies": "ValidatingAdmissionPolicy",
    "bindings": "ValidatingAdmissionPolicyBinding",
}


class WebhookAdmission:
    """The webhook configurations of one hub replica, and the calls of each request's writes."""

    def __init__(
        self, objects: ObjectStore, authorizer: Authorizer | None = None, metrics: AdmissionMetrics | None = None,
        cache: WatchCache | None = None,
    ) -> None:
        self._objects = objects
        #: Where Namespaces, params and webhook Services are read from memory (None: from the store).
        self.cache = cache
        #: kube's admission webhook and policy metrics (:mod:`.metrics`).
        self.metrics = metrics if metrics is not None else AdmissionMetrics()
        #: Answers the CEL ``authorizer`` of policies and match conditions (None: every check denied).
        self.authorizer = authorizer
        self.client = WebhookClient(objects, cache)
        #: Converts a write's objects to the version a webhook or policy sees them in; the hub sets
        #: one that converts a CRD's versions through its conversion webhook.
        self.converter: equivalence.Converter = equivalence.converted
        self._types = {which: objects.registry.require(_GROUP, kind) for which, kind in _KINDS.items()}
        self._namespace_type = objects.registry.require("v1", "Namespace")
        self._configurations: dict[str, dict[str, dict[str, Any]]] = {which: {} for which in _KINDS}
        self.validating: tuple[Webhook, ...] = ()
        self.mutating: tuple[Webhook, ...] = ()
        #: Each binding with its policy (bindings in name order), compiled once per change.
        self.bound: tuple[tuple[policies.Policy, policies.Binding], ...] = ()
        self._compiled: dict[str, tuple[str, policies.Policy]] = {}
        self._synced = {which: asyncio.Event() for which in _KINDS}

    @property
    def objects(self) -> ObjectStore:
        return self._objects

    def calls(self, user: UserInfo | None, warnings: list[str]) -> RequestWebhooks | None:
        """The webhooks and policies of one request by ``user`` (None: none is configured, or no user)."""
        if user is None or not (self.validating or self.mutating or self.bound):
            return None
        return RequestWebhooks(self, user, warnings)

    async def namespace(self, name: str) -> dict[str, Any]:
        """Namespace ``name`` (kube's 404 when there is none): from memory, else from the store (one
        created an instant ago), as kube's namespace matcher reads its lister, then GETs."""
        reads = self._objects if self.cache is None else self.cache
        return await reads.get(self._namespace_type, name=name)

    async def wait_synced(self) -> None:
        for event in self._synced.values():
            await event.wait()

    async def run(self, stop: asyncio.Event) -> None:
        """Keep both kinds' configurations from a list and a watch of each, until ``stop``."""
        async with asyncio.TaskGroup() as group:
            for which in _KINDS:
                group.create_task(self._keep(which, stop))

    async def close(self) -> None:
        await self.client.close()

    async def _keep(self, which: str, stop: asyncio.Event) -> None:
        await follow_kind(
            self._objects, self._types[which], self._configurations[which],
            changed=lambda: self._rebuild(which), synced=self._synced[which], stop=stop,
        )

    def _rebuild(self, which: str) -> None:
        if which in ("policies", "bindings"):
            self._rebuild_policies()
            return
        configurations = self._configurations[which]
        hooks = tuple(hook for name in sorted(configurations) for hook in matching.webhooks_of(configurations[name]))
        if which == "validating":
            self.validating = hooks
        else:
            self.mutating = hooks


    def _rebuild_policies(self) -> None:
        compiled: dict[str, tuple[str, policies.Policy]] = {}
        for name, obj in self._configurations["policies"].items():
            version = str(obj["metadata"].get("resourceVersion") or "")
            known = self._compiled.get(name)
            if known is not None and known[0] == version:
                compiled[name] = known
                continue
            try:
                compiled[name] = (version, policies.policy_of(obj))
            except Exception:  # refused by its validation when written: a policy stored before cannot run
                logger.exception("ValidatingAdmissionPolicy %s does not compile; it is not enforced", name)
        self._compiled = compiled
        bindings = self._configurations["bindings"]
        bound = []
        for name in sorted(bindings):
            binding = policies.binding_of(bindings[name])
            if binding.policy in compiled:  # as kube: a binding of a missing policy does nothing
                bound.append((compiled[binding.policy][1], binding))
        self.bound = tuple(bound)


class RequestWebhooks:
    """The webhooks called for one request's writes (a :class:`~controlplane.apiserver.admission.WebhookCalls`)."""

    def __init__(
        self, admission: WebhookAdmission, user: UserInfo, warnings: list[str], *, through: ResourceType | None = None
    ) -> None:
        self._admission = admission
        self._user = user
        self._warnings = warnings
        #: The type the request was made through, when the object layer writes another (:meth:`made_through`).
        self._through = through
        self._namespaces: dict[str, dict[str, Any]] = {}
        self._functions: dict[str, Any] | None = None
        #: The last writes seen as another type (a conversion through a CRD's webhook is a call).
        self._seen: list[tuple[WebhookRequest, ResourceType, WebhookRequest]] = []

    async def as_type(self, request: WebhookRequest, rt: ResourceType) -> WebhookRequest:
        """``request`` as a webhook or policy matching it through ``rt`` sees it (converted once per write and type)."""
        for made, target, seen in self._seen:
            if made is request and target is rt:
                return seen
        seen = await equivalence.as_type(request, rt, self._admission.converter)
        self._seen = [*self._seen[-7:], (request, rt, seen)]
        return seen

    def made_through(self, rt: ResourceType) -> RequestWebhooks:
        """These calls for writes the object layer makes in the storage version of a request made
        through ``rt``: the webhooks and policies see each write in ``rt``'s version, converted by the
        admission's converter, as kube's admission sees a write in its request's version; what the
        mutating webhooks patch is converted back."""
        return RequestWebhooks(self._admission, self._user, self._warnings, through=rt)

    async def _as_made(self, request: WebhookRequest, *, policies_too: bool = False) -> WebhookRequest:
        """``request`` (of the type the object layer writes) as made, in the request's version. Its
        objects are converted only when a webhook (or, with ``policies_too``, a policy) names the
        write by its rules: a write nothing may see costs no conversion."""
        through = self._through
        if through is None or through is request.resource:
            return request
        named = dataclasses.replace(request, resource=through)
        registry = self._admission.objects.registry
        hooks = self._admission.mutating if not policies_too else self._admission.validating
        wanted = any(matching.matched_type(hook, named, registry) is not None for hook in hooks) or (
            policies_too and any(policies.matched_resource(p.match, named, registry) is not None for p, _ in self._admission.bound)
        )
        if not wanted:
            return named  # no webhook or policy reads its objects
        made = await equivalence.as_type(request, through, self._admission.converter, requested=False)
        # A webhook naming the version written sees the object as written, not converted back.
        self._seen = [*self._seen[-7:], (made, request.resource, dataclasses.replace(request, requested=through))]
        return made

    @property
    def admission(self) -> WebhookAdmission:
        return self._admission

    @property
    def warnings(self) -> list[str]:
        """The request's warnings (its ``Warning`` headers), which admission adds to."""
        return self._warnings

    async def mutate(self, request: WebhookRequest) -> dict[str, Any] | None:
        made = request
        request = await self._as_made(request)
        obj = await self._mutated(request)
        if obj is None or made is request or request.subresource == "scale":
            return obj
        [back] = await self._admission.converter([obj], request.resource, made.resource)
        return back

    async def _mutated(self, request: WebhookRequest) -> dict[str, Any] | None:
        hooks = await self._matching(self._admission.mutating, request)
        obj: dict[str, Any] | None = None
        last_change = -1
        for index, (hook, rt) in enumerate(hooks):
            patched = await self._mutate_once(hook, rt, request if obj is None else _with_object(request, obj))
            if patched is not None:
                obj, last_change = patched, index
        # kube's reinvocation: a webhook asking for it is called once more when a later one changed the object.
        for index, (hook, rt) in enumerate(hooks):
            if hook.reinvocation_policy == "IfNeeded" and index < last_change:
                assert obj is not None
                obj = await self._mutate_once(hook, rt, _with_object(request, obj)) or obj
        return obj

    async def _mutate_once(self, hook: Webhook, rt: ResourceType, request: WebhookRequest) -> dict[str, Any] | None:
        """The object as ``hook`` (seeing the write as one of ``rt``) changed it, in the request's
        version; None when it changed nothing (or its call failed open)."""
        sent = await self.as_type(request, rt)
        verdict = await self._call(hook, sent, mutating=True)
        if verdict is None:
            return None
        if not verdict.allowed:
            raise review.denial(hook.name, verdict.status)
        if not verdict.patch:
            return None
        if request.obj is None:  # a delete: there is nothing to patch
            raise errors.InternalError(
                f'Internal error occurred: admission webhook "{hook.name}" attempted to modify the object, '
                "which is not supported for this operation"
            )
        assert sent.obj is not None
        patched = _patched(hook, sent.obj, verdict.patch)
        if sent is not request and request.subresource != "scale":  # kube converts the patched object back
            [patched] = await self._admission.converter([patched], rt, request.resource)
        return None if patched == request.obj else patched

    async def validate(self, request: WebhookRequest) -> None:
        request = await self._as_made(request, policies_too=True)
        # kube's order: the ValidatingAdmissionPolicy plugin, then the validating webhooks.
        if self._admission.bound and matching.called(request):
            await run_policies(self, request)
        hooks = await self._matching(self._admission.validating, request)
        if not hooks:
            return
        sent = [await self.as_type(request, rt) for _, rt in hooks]
        results = await asyncio.gather(
            *(self._call(hook, one, mutating=False) for (hook, _), one in zip(hooks, sent, strict=True)),
            return_exceptions=True,
        )
        for (hook, _), result in zip(hooks, results, strict=True):
            if isinstance(result, BaseException):
                raise result
            if result is not None and not result.allowed:
                raise review.denial(hook.name, result.status)

    async def _matching(self, hooks: tuple[Webhook, ...], request: WebhookRequest) -> list[tuple[Webhook, ResourceType]]:
        """The webhooks ``request`` calls, each with the type it sees the write as (:func:`.matching.matched_type`)."""
        if not hooks or not matching.called(request):
            return []
        out = []
        contexts: dict[int, Any] = {}
        registry = self._admission.objects.registry
        for hook in hooks:
            rt = matching.matched_type(hook, request, registry)
            if rt is None or not await self.selects(hook, request):
                continue
            if hook.match_conditions:
                # kube evaluates the conditions with the object in the version the webhook sees.
                if id(rt) not in contexts:
                    seen = await self.as_type(request, rt)
                    contexts[id(rt)] = cel.activation(self.cel_variables(seen), self.functions)
                matches, error = conditions_match(hook.match_conditions, contexts[id(rt)], fails_open=hook.fails_open)
                if error is not None:
                    logger.warning("Failed evaluating match conditions, failing closed %s: %s", hook.name, error)
                    raise review.forbidden(request, error)
                if not matches:
                    continue
            out.append((hook, rt))
        if request.dry_run:
            for hook, _ in out:
                if hook.side_effects not in ("None", "NoneOnDryRun"):
                    raise errors.BadRequest(f'admission webhook "{hook.name}" does not support dry run')
        return out

    async def selects(self, selection: Selection, request: WebhookRequest) -> bool:
        """Whether the object and namespace selectors of a webhook or policy select ``request``."""
        if not matching.object_matches(selection, request):
            return False
        labels = None
        if matching.needs_namespace_labels(selection, request):
            labels = field.mapping(field.mapping((await self.namespace_of(request.namespace))["metadata"]).get("labels"))
        return matching.namespace_matches(selection, request, labels)

    async def namespace_of(self, namespace: str | None) -> dict[str, Any]:
        assert namespace
        if namespace not in self._namespaces:
            self._namespaces[namespace] = await self._admission.namespace(namespace)
        return self._namespaces[namespace]

    def cel_variables(self, request: WebhookRequest) -> dict[str, Any]:
        """``object``, ``oldObject``, ``request`` and ``authorizer``, as kube's admission CEL has them."""
        target = {"group": request.resource.group, "resource": request.resource.plural,
                  "subresource": request.subresource or "", "namespace": request.namespace or "", "name": request.name}
        return {
            "object": request.obj, "oldObject": request.old,
            "request": review.request_variable(request, user=self._user), "authorizer": authorizer_variable(target),
        }

    @property
    def functions(self) -> dict[str, Any]:
        """The ``authorizer`` library, checking as this request's user (made on first use)."""
        if self._functions is None:
            self._functions = authorizer_functions(self._authorize)
        return self._functions

    def _authorize(self, target: dict[str, Any], verb: str) -> tuple[bool, str]:
        authorizer = self._admission.authorizer
        if authorizer is None:
            return False, "no authorizer"
        user = self._user
        account = target.get("serviceAccount")
        if isinstance(account, list) and len(account) == 2:
            namespace, name = (str(part) for part in account)
            user = UserInfo(f"system:serviceaccount:{namespace}:{name}", Role.USER, user_groups=(
                "system:serviceaccounts", f"system:serviceaccounts:{namespace}", "system:authenticated"))
        path = target.get("path")
        # ``reason()`` is kube's authorizers' (``RBAC: allowed by ...``), as an access review's.
        decide = authorizer.review if isinstance(authorizer, ReviewingAuthorizer) else authorizer.authorize
        decision = decide(RequestAttributes(
            user, verb, api_group=str(target.get("group") or ""), resource=str(target.get("resource") or ""),
            subresource=str(target.get("subresource") or ""), namespace=str(target.get("namespace") or "") or None,
            name=str(target.get("name") or "") or None, non_resource_path=str(path) if path else None,
        ))
        return decision.allowed, decision.reason

    async def _call(self, hook: Webhook, request: WebhookRequest, *, mutating: bool) -> review.Verdict | None:
        """The webhook's verdict; None when its call failed and its failure policy ignores that.
        Each call is observed as kube's dispatchers do (:mod:`.metrics`)."""
        step, operation = ("admit" if mutating else "validating"), str(request.operation)
        started = time.monotonic()
        try:
            verdict = await self._post(hook, request, mutating=mutating)
        except CallFailed as exc:
            reason = f'failed calling webhook "{hook.name}": {exc}'
            metrics = self._admission.metrics
            metrics.observe_webhook(hook.name, step, operation, time.monotonic() - started,
                                    code=exc.code, rejected=not hook.fails_open)
            if hook.fails_open:
                metrics.observe_fail_open(hook.name, step)
                logger.warning("Failed calling webhook, failing open %s: %s", hook.name, reason)
                return None
            metrics.observe_rejection(hook.name, step, operation, CALLING_WEBHOOK_ERROR, exc.code)
            logger.warning("Failed calling webhook, failing closed %s: %s", hook.name, reason)
            raise errors.InternalError(
                f"Internal error occurred: {reason}", causes=[errors.Cause("", reason)]
            ) from None
        except Exception:
            self._admission.metrics.observe_rejection(hook.name, step, operation, APISERVER_INTERNAL_ERROR, 0)
            self._admission.metrics.observe_webhook(hook.name, step, operation, time.monotonic() - started,
                                                    code=0, rejected=True)
            raise
        code = 200
        if not verdict.allowed:
            code = review.denial(hook.name, verdict.status).code
            self._admission.metrics.observe_rejection(hook.name, step, operation, NO_ERROR, code)
        self._admission.metrics.observe_webhook(hook.name, step, operation, time.monotonic() - started,
                                                code=code, rejected=not verdict.allowed)
        self._warnings.extend(verdict.warnings)
        return verdict

    async def _post(self, hook: Webhook, request: WebhookRequest, *, mutating: bool) -> review.Verdict:
        uid = str(uuid.uuid4())
        version = review.review_version(hook.review_versions)
        body = orjson.dumps(review.review_request(request, user=self._user, uid=uid, version=version))
        try:
            raw = await self._admission.client.post(hook, body)
        except CallFailed as exc:
            raise CallFailed(f"failed to call webhook: {exc}", exc.code) from None
        try:
            return review.verdict(raw, uid=uid, version=version, mutating=mutating)
        except review.InvalidResponse as exc:
            raise CallFailed(f"received invalid webhook response: {exc}", 0) from None


def _with_object(request: WebhookRequest, obj: dict[str, Any]) -> WebhookRequest:
    return dataclasses.replace(request, obj=obj)


def _patched(hook: Webhook, obj: dict[str, Any], patch: list[Any]) -> dict[str, Any]:
    """``obj`` with a mutating webhook's JSON patch applied (kube: a patch that does not apply is an
    internal error, whatever the failure policy). Its ``copy`` operations may add 3 MiB at most, as
    kube's dispatcher applies it with the JSON patch bound of the whole server: past it, that
    library's words in kube's internal error (:mod:`controlplane.apis.kube.jsonpatches`)."""
    try:
        patched = json_patched(obj, patch)
    except CopiedTooMuch as exc:
        raise errors.InternalError(f"Internal error occurred: {exc}", causes=[errors.Cause("", str(exc))]) from None
    except JsonPatchFailed as exc:
        raise errors.InternalError(f"Internal error occurred: {exc}") from None
    if not isinstance(patched, dict):
        raise errors.InternalError(f'Internal error occurred: admission webhook "{hook.name}" patched the object into a non-object')
    return patched
