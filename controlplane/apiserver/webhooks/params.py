"""The params of a ValidatingAdmissionPolicy binding, read from the store for one write as kube's
policy dispatcher collects them (``generic/policy_dispatcher.go``).

In: the policy (its ``paramKind``), the binding (its ``paramRef``: a name or a label selector, a
namespace, ``parameterNotFoundAction``) and the write. Out: the param objects to evaluate the policy
with once each — ``[None]`` when the policy has no ``paramKind`` or the binding no ``paramRef``, none
when nothing is found and the binding allows that — or :class:`ConfigurationError` with kube's words
(the policy's ``failurePolicy`` then decides). With a watch cache, params are read from memory, as
kube reads them from an informer (a change applies to the writes after the hub's watch has it); the
store is read only when memory has none (a param written an instant ago is found). A selector reads
at most :data:`MAX_PARAMS` objects (the first ones in name order).
"""

from __future__ import annotations

from typing import Any

from controlplane.apiserver import errors
from controlplane.apiserver.admission import WebhookRequest
from controlplane.apiserver.kinds.cells import format_label_selector
from controlplane.apiserver.objects import ObjectStore
from controlplane.apiserver.watchcache import WatchCache
from controlplane.apiserver.webhooks.policies import Binding, Policy

#: The most objects a ``paramRef.selector`` reads (one page of the kind's list).
MAX_PARAMS = 500


class ConfigurationError(Exception):
    """The binding's params cannot be collected (kube's ``failed to configure binding: ...``)."""


async def params_of(
    objects: ObjectStore, policy: Policy, binding: Binding, request: WebhookRequest, cache: WatchCache | None = None
) -> list[Any]:
    ref = binding.param_ref
    if policy.param_kind is None or ref is None:
        return [None]
    api_version, kind = policy.param_kind
    rt = objects.registry.for_kind(api_version, kind)
    if rt is None:
        group, _, version = api_version.rpartition("/")
        raise ConfigurationError(f"paramKind kind `{group}/{version}, Kind={kind}` not known")
    namespace = None
    if rt.namespaced:
        namespace = str(ref.get("namespace") or "") or request.namespace
        if not namespace:
            raise ConfigurationError("cannot use namespaced paramRef in policy binding that matches cluster-scoped resources")
    elif ref.get("namespace"):
        raise ConfigurationError("paramRef.namespace must not be provided for a cluster-scoped `paramKind`")
    if ref.get("name"):
        try:
            reads = objects if cache is None else cache
            found = [await reads.get(rt, namespace=namespace, name=str(ref["name"]))]
        except errors.NotFound:
            found = []
    else:
        formatted = format_label_selector(ref.get("selector"))
        selector = None if formatted == "<none>" else formatted
        found = [] if cache is None else (
            await cache.list(rt, namespace=namespace, label_selector=selector, resource_version="0")
        ).items[:MAX_PARAMS]
        if not found:
            found = (await objects.list(rt, namespace=namespace, limit=MAX_PARAMS, label_selector=selector)).items
    if not found and ref.get("parameterNotFoundAction") != "Allow":
        raise ConfigurationError("no params found for policy binding with `Deny` parameterNotFoundAction")
    return found
