"""Karmada's resource interpreter webhooks, called as Karmada's webhook interpreter calls them.

:class:`InterpreterWebhooks` keeps the ResourceInterpreterWebhookConfigurations from one list and
watch (:func:`~controlplane.apiserver.objects.following.follow_kind`) and, for an operation on an
object, calls the first webhook whose rules match
(:func:`~controlplane.interpreter.webhook_context.first_hook`) with the admission webhooks'
client (:class:`~.calling.WebhookClient`: the ``caBundle``, a ``service``'s endpoints, the
webhook's timeout, an answer read up to 3 MiB). The request and the reading of the answer are
:mod:`controlplane.interpreter.webhook_context`'s. A failed call is never retried here: it is
:class:`InterpreterWebhookFailed` with Karmada's words, for the caller to report where Karmada
does (an Event on the workload, :mod:`controlplane.controllers.webhookinterpreting`) and to try
again with its backoff. The controllers see it as a
:class:`~controlplane.interpreter.webhook_calls.InterpreterWebhookCaller` (the hub hands it to them);
a listener given to :meth:`InterpreterWebhooks.follow` hears of each change of the webhooks, with
the webhooks that went or came (an edited configuration's webhooks both, old and new), so the
controllers requeue the objects their rules match.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable
from typing import Any

import orjson

from controlplane.apiserver.objects import ObjectStore
from controlplane.apiserver.objects.following import follow_kind
from controlplane.apiserver.watchcache import WatchCache
from controlplane.apiserver.webhooks.calling import CallFailed, WebhookClient
from controlplane.interpreter.webhook_calls import InterpreterWebhookFailed
from controlplane.interpreter.webhook_context import (
    HookFailed,
    InterpreterHook,
    first_hook,
    hooks_of,
    interpreter_context,
    verify_response,
)

__all__ = ["InterpreterWebhookFailed", "InterpreterWebhooks"]

_GROUP_VERSION = "config.karmada.io/v1alpha1"
_KIND = "ResourceInterpreterWebhookConfiguration"


class InterpreterWebhooks:
    """The interpreter webhooks of one hub replica."""

    def __init__(self, objects: ObjectStore, cache: WatchCache | None = None, client: WebhookClient | None = None) -> None:
        self._objects = objects
        self._type = objects.registry.require(_GROUP_VERSION, _KIND)
        self._configurations: dict[str, dict[str, Any]] = {}
        self._own_client = client is None
        self.client = client if client is not None else WebhookClient(objects, cache)
        self.hooks: tuple[InterpreterHook, ...] = ()
        self._synced = asyncio.Event()
        self._listeners: list[Callable[[tuple[InterpreterHook, ...]], None]] = []

    async def run(self, stop: asyncio.Event) -> None:
        """Keep the configurations from a list and a watch, until ``stop``."""
        await follow_kind(
            self._objects, self._type, self._configurations, changed=self._rebuild, synced=self._synced, stop=stop
        )

    async def wait_synced(self) -> None:
        await self._synced.wait()

    async def close(self) -> None:
        if self._own_client:
            await self.client.close()

    def follow(self, listener: Callable[[tuple[InterpreterHook, ...]], None]) -> Callable[[], None]:
        """Call ``listener`` with the webhooks that went or came at each change; returns the call
        that stops it."""
        self._listeners.append(listener)
        return lambda: self._listeners.remove(listener) if listener in self._listeners else None

    def _rebuild(self) -> None:
        old, self.hooks = self.hooks, tuple(hooks_of(self._configurations.values()))
        changed = (*(h for h in old if h not in self.hooks), *(h for h in self.hooks if h not in old))
        for listener in list(self._listeners) if changed else ():
            listener(changed)

    def hook_for(self, api_version: str, kind: str, operation: str) -> InterpreterHook | None:
        """The webhook that interprets ``operation`` on the kind, if any."""
        return first_hook(self.hooks, api_version, kind, operation)

    async def interpret(
        self, operation: str, obj: dict[str, Any], *, observed: dict[str, Any] | None = None,
        desired_replicas: int = 0, aggregated_status: list[dict[str, Any]] | None = None,
    ) -> dict[str, Any] | None:
        """The webhook's verified ``response`` for ``operation`` on ``obj``; None when no webhook
        interprets it. :class:`InterpreterWebhookFailed` when the call or its answer fails."""
        if not self._synced.is_set():
            raise InterpreterWebhookFailed("not yet ready to handle request")
        hook = self.hook_for(str(obj.get("apiVersion") or ""), str(obj.get("kind") or ""), operation)
        if hook is None:
            return None
        uid = str(uuid.uuid4())
        try:
            body = orjson.dumps(
                interpreter_context(
                    hook, uid, operation, obj, observed=observed, desired_replicas=desired_replicas,
                    aggregated_status=aggregated_status,
                )
            )
            try:
                raw = await self.client.post(hook, body)
            except CallFailed as exc:
                raise HookFailed(f"failed to call webhook: {exc}") from None
            return verify_response(raw, uid, operation)
        except HookFailed as exc:
            raise InterpreterWebhookFailed(exc.internal_error(hook)) from None
