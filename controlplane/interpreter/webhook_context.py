"""What is sent to and read from a resource interpreter webhook, as Karmada's webhook interpreter does it.

- :func:`hooks_of` reads the ResourceInterpreterWebhookConfigurations into :class:`InterpreterHook`
  values (their ``timeoutSeconds`` defaulted to :data:`DEFAULT_TIMEOUT_SECONDS`);
- :func:`first_hook` picks the webhook an operation on a kind calls: of those whose rules match
  (``*`` matches any operation, group, version or kind), the first by ``<configuration>/<webhook>``;
- :func:`interpreter_context` is the ``config.karmada.io/v1alpha1`` ResourceInterpreterContext
  request;
- :func:`verify_response` reads the answer (uid echoed, ``successful`` or a status, the field the
  operation needs) and :func:`apply_patch` applies its JSONPatch as Karmada does, with
  evanphx/json-patch v5 (where a missing key is not there to replace, copy or move), its ``copy``
  operations adding 3 MiB at most (as kube-apiserver bounds every JSON patch:
  :mod:`controlplane.apis.kube.jsonpatches`, where Karmada sets no bound); both raise
  :class:`HookFailed` with Karmada's words, which :meth:`HookFailed.internal_error` wraps as
  Karmada reports a failed call (``Internal error occurred: failed calling webhook "..."``);
- :func:`dependencies_of`, :func:`raw_status_of` and :func:`healthy_of` read the answers of
  ``InterpretDependency``, ``InterpretStatus`` and ``InterpretHealth`` (:class:`HookFailed` too).

Pure: the call itself is the caller's (it posts :func:`interpreter_context` and gives the bytes
here, read up to :data:`MAX_RESPONSE_BYTES`).
"""

from __future__ import annotations

import base64
import binascii
import copy
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from controlplane.apis.kube.jsonpatches import JsonPatchFailed, json_patched
from controlplane.apis.untyped import Obj
from controlplane.interpreter.dependencies import Dependency, sorted_dependencies

__all__ = [
    "CONTEXT_API_VERSION",
    "DEFAULT_TIMEOUT_SECONDS",
    "MAX_RESPONSE_BYTES",
    "HookFailed",
    "InterpreterHook",
    "apply_patch",
    "dependencies_of",
    "first_hook",
    "healthy_of",
    "hooks_of",
    "interpreter_context",
    "raw_status_of",
    "verify_response",
]

CONTEXT_API_VERSION: Final = "config.karmada.io/v1alpha1"
#: A webhook without ``timeoutSeconds`` is waited for this long (Karmada's default).
DEFAULT_TIMEOUT_SECONDS: Final = 10
#: The largest answer read from a webhook (bytes); a larger one is a failed call.
MAX_RESPONSE_BYTES: Final = 3 * 1024 * 1024


class HookFailed(Exception):
    """A webhook call failed or its answer is unusable: Karmada's reason, without the webhook."""

    def internal_error(self, hook: InterpreterHook) -> str:
        """The error as Karmada reports it on the binding or Work."""
        return f'Internal error occurred: failed calling webhook "{hook.uid}": {self}'


@dataclass(frozen=True, slots=True)
class InterpreterHook:
    """One ``webhooks[i]`` of a ResourceInterpreterWebhookConfiguration (an endpoint the admission
    webhooks' client can call: ``url``/``service``, ``ca_bundle``, ``timeout_seconds``).
    ``resource_version``: the configuration's (not compared: an edit that leaves the webhook as it
    was does not change it), which keys what is kept of its answers."""

    configuration: str
    name: str
    url: str | None = None
    service: Mapping[str, Any] | None = None
    ca_bundle: str | None = None
    timeout_seconds: int = DEFAULT_TIMEOUT_SECONDS
    rules: tuple[Mapping[str, Any], ...] = ()
    context_versions: tuple[str, ...] = ()
    resource_version: str = field(default="", compare=False)

    @property
    def uid(self) -> str:
        """How Karmada names the webhook: ``<configuration>/<webhook>``."""
        return f"{self.configuration}/{self.name}"

    def matches(self, api_version: str, kind: str, operation: str | None = None) -> bool:
        """Whether a rule matches ``operation`` on the kind (None: any operation)."""
        group, _, version = api_version.rpartition("/")
        return any(
            (operation is None or _has(rule.get("operations"), operation)) and _has(rule.get("apiGroups"), group)
            and _has(rule.get("apiVersions"), version) and _has(rule.get("kinds"), kind)
            for rule in self.rules
        )


def _has(values: Any, value: str) -> bool:
    return isinstance(values, list) and ("*" in values or value in values)


def hooks_of(configurations: Iterable[Mapping[str, Any]]) -> list[InterpreterHook]:
    """The webhooks of the configurations, sorted by :attr:`InterpreterHook.uid`."""
    hooks = []
    for config in configurations:
        name = str((config.get("metadata") or {}).get("name") or "")
        resource_version = str((config.get("metadata") or {}).get("resourceVersion") or "")
        for hook in config.get("webhooks") or []:
            if not isinstance(hook, Mapping):
                continue
            client = hook.get("clientConfig") or {}
            timeout = hook.get("timeoutSeconds")
            hooks.append(
                InterpreterHook(
                    configuration=name,
                    name=str(hook.get("name") or ""),
                    url=client.get("url"),
                    service=client.get("service"),
                    ca_bundle=client.get("caBundle") or None,
                    timeout_seconds=timeout if isinstance(timeout, int) and timeout > 0 else DEFAULT_TIMEOUT_SECONDS,
                    rules=tuple(r for r in hook.get("rules") or [] if isinstance(r, Mapping)),
                    context_versions=tuple(str(v) for v in hook.get("interpreterContextVersions") or []),
                    resource_version=resource_version,
                )
            )
    return sorted(hooks, key=lambda h: h.uid)


def first_hook(hooks: Iterable[InterpreterHook], api_version: str, kind: str, operation: str) -> InterpreterHook | None:
    """The webhook that interprets ``operation`` on the kind (``hooks`` sorted as :func:`hooks_of` gives them)."""
    return next((h for h in hooks if h.matches(api_version, kind, operation)), None)


def interpreter_context(
    hook: InterpreterHook, uid: str, operation: str, obj: Mapping[str, Any], *,
    observed: Mapping[str, Any] | None = None, desired_replicas: int = 0,
    aggregated_status: list[Obj] | None = None,
) -> Obj:
    """The ResourceInterpreterContext request for ``operation`` on ``obj``."""
    if "v1alpha1" not in hook.context_versions:
        raise HookFailed(
            "could not create ResourceInterpreterContext objects: "
            "webhook does not accept known ResourceInterpreterContext versions (v1alpha1)"
        )
    group, _, version = str(obj.get("apiVersion") or "").rpartition("/")
    metadata = obj.get("metadata") or {}
    request: Obj = {
        "uid": uid,
        "kind": {"group": group, "version": version, "kind": str(obj.get("kind") or "")},
        "name": str(metadata.get("name") or ""),
        "namespace": str(metadata.get("namespace") or ""),
        "operation": operation,
        "object": copy.deepcopy(dict(obj)),
        "desiredReplicas": desired_replicas,
    }
    if observed is not None:
        request["observedObject"] = copy.deepcopy(dict(observed))
    if aggregated_status:
        request["aggregatedStatus"] = copy.deepcopy(aggregated_status)
    return {"apiVersion": CONTEXT_API_VERSION, "kind": "ResourceInterpreterContext", "request": request}


def verify_response(raw: bytes, uid: str, operation: str) -> Obj:
    """The answer's ``response`` checked for ``operation``; :class:`HookFailed` when unusable."""
    if len(raw) > MAX_RESPONSE_BYTES:
        raise HookFailed(f"failed to call webhook: the response is larger than {MAX_RESPONSE_BYTES} bytes")
    try:
        answer = json.loads(raw)
    except ValueError as exc:
        raise HookFailed(f"failed to call webhook: {exc}") from None
    response = answer.get("response") if isinstance(answer, dict) else None
    invalid = "reveived invalid webhook response: "  # Karmada's spelling
    if not isinstance(response, dict):
        raise HookFailed(invalid + "webhook response was absent")
    if response.get("uid") != uid:
        raise HookFailed(invalid + f"expected response.uid {json.dumps(uid)}, got {json.dumps(response.get('uid') or '')}")
    if response.get("successful") is not True:
        status = response.get("status")
        if not isinstance(status, dict):
            raise HookFailed(invalid + "webhook require response.status when response.successful is false")
        raise HookFailed(
            f"webhook call failed, get status code: {status.get('code') or 0}, msg: {status.get('message') or ''}"
        )
    needed = {
        "InterpretReplica": ("replicas", "webhook returned nil response.replicas"),
        "InterpretStatus": ("rawStatus", "webhook returned nill response.rawStatus"),
        "InterpretHealth": ("healthy", "webhook returned nil response.healthy"),
    }.get(operation)
    if needed is not None and response.get(needed[0]) is None:
        raise HookFailed(invalid + needed[1])
    if operation == "InterpretReplica" and (isinstance(response["replicas"], bool) or not isinstance(response["replicas"], int)):
        raise HookFailed(invalid + f"response.replicas must be an integer, not {json.dumps(response['replicas'])}")
    if operation in ("ReviseReplica", "Retain", "AggregateStatus"):
        patch, patch_type = response.get("patch"), response.get("patchType")
        if patch or patch_type is not None:
            if patch_type is None:
                raise HookFailed(invalid + "webhook returned nil response.patchType")
            if not patch:
                raise HookFailed(invalid + "webhook returned empty response.patch")
            if patch_type != "JSONPatch":
                raise HookFailed(invalid + f"webhook returned invalid response.patchType of {json.dumps(patch_type)}")
    if operation == "InterpretDependency":
        for i, dep in enumerate(response.get("dependencies") or []):
            if not isinstance(dep, dict) or not dep.get("apiVersion") or not dep.get("kind"):
                raise HookFailed(invalid + f"dependencies[{i}]: apiVersion and kind are required")
    return response


def apply_patch(obj: Mapping[str, Any], response: Mapping[str, Any]) -> Obj:
    """``obj`` with the response's JSONPatch applied (unchanged without a patch)."""
    encoded = response.get("patch")
    if not encoded:
        return copy.deepcopy(dict(obj))
    try:
        operations = json.loads(base64.b64decode(str(encoded), validate=True))
    except (binascii.Error, ValueError) as exc:
        raise HookFailed(f"the response.patch is not a base64 JSON patch: {exc}") from None
    if not isinstance(operations, list):
        raise HookFailed("json: cannot unmarshal object into Go value of type jsonpatch.Patch")
    try:
        # Applied as Karmada applies it, with the library's v5; bounded as kube-apiserver bounds
        # a JSON patch's copies (Karmada applies it unbounded).
        patched = json_patched(dict(obj), operations, v5=True)
    except JsonPatchFailed as exc:  # CopiedTooMuch among them
        raise HookFailed(str(exc)) from None
    if not isinstance(patched, dict):
        raise HookFailed("the patched object is not an object")
    return patched


def dependencies_of(response: Mapping[str, Any], namespace: str) -> list[Dependency]:
    """The answer's ``dependencies``, named objects of the workload's ``namespace`` (an entry
    without a namespace is in it); :class:`HookFailed` for one that is not, or has no name."""
    found = []
    for i, dep in enumerate(response.get("dependencies") or []):
        where = str(dep.get("namespace") or namespace)
        if where != namespace:
            raise HookFailed(
                f"dependencies[{i}]: namespace {json.dumps(where)} is not the workload's namespace "
                f"{json.dumps(namespace)}: dependencies follow a workload in its own namespace"
            )
        if not dep.get("name"):
            raise HookFailed(f"dependencies[{i}]: name is required (a labelSelector is not supported)")
        found.append(Dependency(kind=str(dep["kind"]), name=str(dep["name"]), api_version=str(dep["apiVersion"])))
    return sorted_dependencies(found)


def raw_status_of(response: Mapping[str, Any]) -> Obj:
    """The answer's ``rawStatus``: what the hub takes of the member object's status."""
    raw = response.get("rawStatus")
    if not isinstance(raw, dict):
        raise HookFailed(f"response.rawStatus must be an object, not {json.dumps(raw)}")
    return raw


def healthy_of(response: Mapping[str, Any]) -> bool:
    """The answer's ``healthy``."""
    healthy = response.get("healthy")
    if not isinstance(healthy, bool):
        raise HookFailed(f"response.healthy must be a boolean, not {json.dumps(healthy)}")
    return healthy
