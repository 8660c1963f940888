"""What the controllers need of the resource interpreter webhooks, and Karmada's precedence.

:class:`InterpreterWebhookCaller` is what the hub's
:class:`~controlplane.apiserver.webhooks.interpreting.InterpreterWebhooks` offers the controllers
(through their context); :class:`InterpreterWebhookFailed` is a failed call, in Karmada's words.
:func:`webhook_interprets` applies Karmada's precedence: a Lua customization of the same operation
wins, then the webhook, then the built-in interpreter.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from controlplane.interpreter.registry import customizes
from controlplane.interpreter.webhook_context import InterpreterHook

__all__ = ["InterpreterWebhookCaller", "InterpreterWebhookFailed", "webhook_interprets"]

#: The Lua script that answers each webhook operation (a customization with it wins).
_LUA_HOOKS = {
    "InterpretReplica": "replicaResource", "ReviseReplica": "replicaRevision", "AggregateStatus": "statusAggregation",
    "InterpretDependency": "dependencyInterpretation", "Retain": "retention", "InterpretStatus": "statusReflection",
    "InterpretHealth": "healthInterpretation",
}


class InterpreterWebhookFailed(Exception):
    """A webhook could not interpret: Karmada's message (``Internal error occurred: failed calling
    webhook "CONFIGURATION/WEBHOOK": …``)."""


class InterpreterWebhookCaller(Protocol):
    def hook_for(self, api_version: str, kind: str, operation: str) -> InterpreterHook | None: ...

    async def interpret(
        self, operation: str, obj: dict[str, Any], *, observed: dict[str, Any] | None = None,
        desired_replicas: int = 0, aggregated_status: list[dict[str, Any]] | None = None,
    ) -> dict[str, Any] | None: ...

    def follow(self, listener: Callable[[tuple[InterpreterHook, ...]], None]) -> Callable[[], None]:
        """Hear of the webhooks that went or came (returns the call that stops it)."""
        ...


def webhook_interprets(webhooks: InterpreterWebhookCaller | None, obj: dict[str, Any], operation: str) -> bool:
    """Whether a webhook answers ``operation`` on ``obj`` (no Lua customization of it wins)."""
    if webhooks is None:
        return False
    api_version, kind = str(obj.get("apiVersion") or ""), str(obj.get("kind") or "")
    script = _LUA_HOOKS.get(operation)
    if script is not None and customizes(api_version, kind, script):
        return False
    return webhooks.hook_for(api_version, kind, operation) is not None
