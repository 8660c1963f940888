"""Puts ResourceInterpreterCustomizations in force and reports their failing scripts.

Watches ``config.karmada.io/v1alpha1`` ResourceInterpreterCustomizations. On any change it
merges them (:func:`~controlplane.interpreter.customization_validation.merge`: one per target
and hook, the oldest wins), installs one :class:`CustomizedInterpreter` per target in the
interpreter registry, removes the ones no longer customized, and requeues the workloads and
bindings of the kinds whose interpretation changed (``on_kind_changed``) so that replicas,
requirements, rendered manifests and status follow at once.

A script that fails while another controller runs it (runtime error, instruction or memory
budget spent, a result of the wrong shape) falls back to the default interpretation there;
its :class:`ScriptFailure` comes here and becomes the customization's ``Ready=False``
condition (reason ``ScriptFailed``), the binding's ``Interpreted=False`` condition and a Warning
Event on the customization and on the binding of the object it failed on — once per distinct
failure, so a script failing on every reconcile does not flood. A change of the customization
clears its failures and removes the bindings' conditions it caused.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from controlplane.apis.events import EventType
from controlplane.apis.views import BindingView, ObjectView
from controlplane.controllers.context import CONFLICT_RETRY_SECONDS, ControllerContext
from controlplane.controllers.events import EventReason, record_event
from controlplane.controllers.reconciling import KeyedController
from controlplane.controllers.workloads import find_condition, with_condition
from controlplane.interpreter.customization_validation import merge
from controlplane.interpreter.customized import Customization, CustomizedInterpreter, ScriptFailure
from controlplane.interpreter.registry import builtin_interpreter_for, set_customized
from controlplane.objectclient import WatchEventType, errors

log = logging.getLogger(__name__)

RIC_API_VERSION = "config.karmada.io/v1alpha1"
RIC_KIND = "ResourceInterpreterCustomization"
READY = "Ready"
#: The binding condition that says a customization's script failed on its object.
INTERPRETED = "Interpreted"
#: The key that re-merges every customization (object names are never empty).
ALL = ""

KindChanged = Callable[[str, str], Awaitable[None]]


class CustomizationsController(KeyedController[str]):
    """Keeps the interpreter registry in step with the stored customizations."""

    name = "interpreter-customizations"

    def __init__(self, ctx: ControllerContext, on_kind_changed: KindChanged | None = None) -> None:
        super().__init__(ctx, workers=1)
        self.rt = ctx.watch_kind(RIC_API_VERSION, RIC_KIND, self._on_customization)
        ctx.bindings.add_handler(self._on_binding)
        self._on_kind_changed = on_kind_changed
        self._installed: dict[tuple[str, str], Customization] = {}
        self._refused: dict[str, dict[str, str]] = {}
        #: Customization name → (hook, failure message, object) reported and not yet written.
        self._failures: dict[str, dict[tuple[str, str, str], ScriptFailure]] = {}
        #: (customization, hook, message, object) whose Event on the customization / binding was written.
        self._reported: set[tuple[str, str, str, str]] = set()
        self._binding_reported: set[tuple[str, str, str, str]] = set()
        #: Customization name → the bindings whose ``Interpreted=False`` condition names it.
        self._marked: dict[str, set[tuple[str, str]]] = {}
        self._to_clear: dict[str, set[tuple[str, str]]] = {}
        #: Customization name → binding → the message of a condition still to write.
        self._unmarked: dict[str, dict[tuple[str, str], str]] = {}
        self._pending: set[asyncio.Task[None]] = set()

    async def _on_customization(self, event: WatchEventType, obj: dict[str, Any], old: dict[str, Any] | None) -> None:
        view = ObjectView(obj)
        if event is WatchEventType.MODIFIED and old is not None and ObjectView(old).generation == view.generation:
            return  # a status write (ours)
        name = str(view.metadata.get("name"))
        self._failures.pop(name, None)
        self._reported = {r for r in self._reported if r[0] != name}
        self._binding_reported = {r for r in self._binding_reported if r[0] != name}
        self._to_clear.setdefault(name, set()).update(self._marked.pop(name, set()))
        self._unmarked.pop(name, None)
        await self.loop.add(ALL)
        await self.loop.add(name)

    async def _on_binding(self, event: WatchEventType, obj: dict[str, Any], old: dict[str, Any] | None) -> None:
        """A binding made after a script failed on its workload: its Event and condition are due."""
        if event is not WatchEventType.ADDED or not self._failures:
            return
        resource = BindingView(obj).resource
        bound = (resource.get("namespace") or "", resource.get("name"), resource.get("kind"))
        for name, failures in list(self._failures.items()):
            if any(_object_key(failure.obj) == bound for failure in failures.values()):
                await self.loop.add(name)

    def _failed(self, failure: ScriptFailure) -> None:
        """Called (synchronously) by whichever controller ran the failing script."""
        meta = ObjectView(failure.obj).metadata
        where = f"{meta.get('namespace') or ''}/{meta.get('name') or ''}"
        key = (failure.hook, failure.message, where)
        known = self._failures.setdefault(failure.customization, {})
        if key in known and (failure.customization, *key) in self._binding_reported:
            return
        if key not in known:
            log.warning("%s (on %s %s)", failure.describe(), failure.obj.get("kind"), where)
        known[key] = failure
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return  # run outside the event loop: reported with the next failure or change
        task = loop.create_task(self.loop.add(failure.customization))
        self._pending.add(task)
        task.add_done_callback(self._pending.discard)

    async def reconcile(self, key: str) -> float | None:
        if self.rt is None:
            return None
        if key == ALL:
            await self.install()
            return None
        clearing = self._to_clear.pop(key, set())
        uncleared = {k for k in sorted(clearing) if not await self._set_binding_condition(k, None)}
        if uncleared:
            self._to_clear.setdefault(key, set()).update(uncleared)
        obj = self.ctx.cached(self.rt, None, key)
        if obj is None:
            self._failures.pop(key, None)
            return CONFLICT_RETRY_SECONDS if uncleared else None
        current = Customization.from_object(obj).scripts
        failures = self._failures.get(key, {})
        for failure_key, failure in list(failures.items()):
            if current.get(failure.hook) != failure.script:
                del failures[failure_key]  # reported by a script since replaced
                continue
            await self._report(obj, failure)
        await self._write_condition(obj)
        marked = await self._mark_bindings(key)
        return None if marked and not uncleared else CONFLICT_RETRY_SECONDS

    async def install(self) -> None:
        """Merge the cached customizations and install what changed in the interpreter registry."""
        assert self.rt is not None
        merged, self._refused = merge(self.ctx.informer(self.rt).items())
        wanted = {(c.api_version, c.kind): c for c in merged}
        changed: list[tuple[str, str]] = []
        for target in set(self._installed) | set(wanted):
            custom = wanted.get(target)
            if custom == self._installed.get(target):
                continue
            api_version, kind = target
            if custom is None:
                set_customized(api_version, kind, None)
                self._installed.pop(target, None)
            else:
                base = builtin_interpreter_for(api_version, kind)
                set_customized(api_version, kind, CustomizedInterpreter(custom, base, self._failed))
                self._installed[target] = custom
            changed.append(target)
        for name in self._refused:
            await self.loop.add(name)
        if self._on_kind_changed is not None:
            for api_version, kind in changed:
                await self._on_kind_changed(api_version, kind)

    async def _report(self, obj: dict[str, Any], failure: ScriptFailure) -> None:
        meta = ObjectView(failure.obj).metadata
        where = f"{meta.get('namespace') or ''}/{meta.get('name') or ''}"
        seen = (failure.customization, failure.hook, failure.message, where)
        message = f"{failure.describe()} on {failure.obj.get('kind')} {where.strip('/')}"
        if seen not in self._reported:
            self._reported.add(seen)
            await record_event(self.ctx, obj, type=EventType.WARNING, reason=EventReason.SCRIPT_FAILED, message=message)
        if seen in self._binding_reported:
            return
        # The binding may not exist yet (the script failed while it was being made): its Event
        # comes when it does (:meth:`_on_binding`), or with the next failure.
        binding = self.ctx.binding_for(meta.get("namespace"), str(meta.get("name")), str(failure.obj.get("kind")))
        if binding is not None:
            self._binding_reported.add(seen)
            await record_event(
                self.ctx, binding, type=EventType.WARNING, reason=EventReason.SCRIPT_FAILED, message=message
            )
            binding_key = (str(binding["metadata"].get("namespace") or ""), str(binding["metadata"]["name"]))
            self._marked.setdefault(failure.customization, set()).add(binding_key)
            self._unmarked.setdefault(failure.customization, {})[binding_key] = message

    async def _mark_bindings(self, name: str) -> bool:
        """Write the ``Interpreted=False`` conditions not written yet; False if one lost a race."""
        pending = self._unmarked.get(name, {})
        for binding_key, message in sorted(pending.items()):
            condition = {"type": INTERPRETED, "status": "False", "reason": "ScriptFailed", "message": message}
            if await self._set_binding_condition(binding_key, condition):
                del pending[binding_key]
        return not pending

    async def _set_binding_condition(self, key: tuple[str, str], condition: dict[str, str] | None) -> bool:
        """Set (or with None remove) the binding's ``Interpreted`` condition; False on a lost race."""
        binding = await self.ctx.get(self.ctx.binding_rt, key[0], key[1])  # fresh: the cache may lag our last write
        if binding is None:
            return True
        status = copy.deepcopy(binding.get("status") or {})
        conditions = status.get("conditions") or []
        if condition is None:
            status["conditions"] = [c for c in conditions if c.get("type") != INTERPRETED]
        else:
            status["conditions"] = with_condition(conditions, condition, now=self.ctx.now_text())
        if status == BindingView(binding).status:
            return True
        try:
            await self.ctx.objects.update_status(self.ctx.binding_rt, {**binding, "status": status})
        except (errors.Conflict, errors.NotFound):
            return False
        return True

    def _condition(self, name: str) -> dict[str, str]:
        refused = self._refused.get(name)
        if refused:
            shown = "; ".join(f"{hook} is already set by {other}" for hook, other in sorted(refused.items()))
            return {
                "type": READY, "status": "False", "reason": "Conflict",
                "message": f"one customization per target and hook: {shown}; remove the hook from one of them",
            }
        failures = list(self._failures.get(name, {}).values())
        if failures:
            last = failures[-1]
            meta = ObjectView(last.obj).metadata
            return {
                "type": READY, "status": "False", "reason": "ScriptFailed",
                "message": f"{last.describe()} on {last.obj.get('kind')} {meta.get('namespace') or ''}/"
                f"{meta.get('name') or ''}; the default interpretation is used until the script is fixed",
            }
        return {"type": READY, "status": "True", "reason": "Loaded", "message": "the scripts are in force"}

    async def _write_condition(self, obj: dict[str, Any]) -> None:
        assert self.rt is not None
        name = str(obj["metadata"]["name"])
        # The copy the hub last saw, not the informer's: this controller's own last status write
        # may not have reached the informer yet, and a write made from before it would only lose.
        latest = await self.ctx.latest_seen(self.rt, None, name)
        if latest is None:
            return
        obj = latest
        wanted = self._condition(name)
        status = copy.deepcopy(obj.get("status") or {})
        current = find_condition(status.get("conditions"), READY)
        if current is not None and all(current.get(k) == v for k, v in wanted.items()):
            return
        if current is None or current.get("status") != wanted["status"]:
            wanted = {**wanted, "lastTransitionTime": self.ctx.now_text()}
        else:
            wanted = {**wanted, "lastTransitionTime": str(current.get("lastTransitionTime") or self.ctx.now_text())}
        others = [c for c in status.get("conditions") or () if c.get("type") != READY]
        status["conditions"] = [*others, wanted]
        # A Conflict (written meanwhile by someone else) goes to the reconcile loop, which
        # queues the customization again: its status-only events do not (_on_customization).
        with contextlib.suppress(errors.NotFound):
            await self.ctx.objects.update_status(self.rt, {**copy.deepcopy(obj), "status": status})

    def forget(self) -> None:
        """Remove what this controller installed (the manager stops)."""
        for api_version, kind in self._installed:
            set_customized(api_version, kind, None)
        self._installed.clear()


def _object_key(obj: dict[str, Any]) -> tuple[Any, Any, Any]:
    """(namespace, name, kind) of an object, as a binding's ``spec.resource`` names it."""
    meta = ObjectView(obj).metadata
    return (meta.get("namespace") or "", meta.get("name"), obj.get("kind"))
