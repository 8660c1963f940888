"""The hooks of ResourceInterpreterCustomizations that need the member object, run at the agent.

Karmada runs ``retention``, ``statusReflection`` and ``healthInterpretation`` where the member
object is: the agent of a pull-mode cluster watches the customizations on the control plane. So
does this one (read-only: customizations are cluster-scoped and hold no secrets), and
:class:`MemberInterpreters` holds the merged customizations in force (one per target and hook,
as the hub merges them) and runs their scripts in the same sandbox as the hub:

- :meth:`MemberInterpreters.retain` — before an update of an existing member object, the body
  to apply is ``Retain(desired, observed)`` (fields the member owns kept);
- :meth:`MemberInterpreters.interpret` — the Work's manifest status of a member object:
  ``ReflectStatus(observed)`` as its ``status`` and ``InterpretHealth(observed)`` as its
  ``health``, with ``interpretedBy`` naming the customization of each hook that ran (one that
  failed too: its fallback stands), so the hub neither reflects twice nor judges the health again.

A script that fails (runtime error, instruction or memory budget spent, a result of the wrong
shape) never raises: the status falls back to the whole status and the health to the agent's
own rules; a failed retention leaves the member object as it is (the manifest is not applied:
applying the desired object over it would drop what the member owns). Each failure becomes an
``Interpreted=False`` condition of the manifest status, with reason ``<Hook>Failed`` (e.g.
``StatusReflectionFailed``), which the hub turns into a condition and an Event on the
customization and the binding. A retention failure is remembered until that object's next
apply, so status passes between applies keep reporting it. Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from controlplane.apis import constants as c
from controlplane.apis.work_v1alpha1 import Health
from controlplane.interpreter.customization_validation import merge
from controlplane.interpreter.customized import CustomizedInterpreter, ScriptFailure, failure_reason
from controlplane.interpreter.registry import group_of

__all__ = [
    "CUSTOMIZATIONS_PATH",
    "INTERPRETED",
    "Interpretation",
    "MemberInterpreters",
    "failure_condition",
]

#: The hub collection the agent watches.
CUSTOMIZATIONS_PATH = "/apis/config.karmada.io/v1alpha1/resourceinterpretercustomizations"
#: The manifest status condition that says a customization's script failed at the agent.
INTERPRETED = "Interpreted"
#: The hooks that run at the agent, on the member object.
MEMBER_HOOKS = ("retention", "statusReflection", "healthInterpretation")
_STATUS_HOOKS = ("statusReflection", "healthInterpretation")
#: Metadata the member sets, dropped from a retained body (an apply must not carry them).
_SERVER_SET_METADATA = ("resourceVersion", "uid", "creationTimestamp", "managedFields", "generation", "selfLink")

ObjectKey = tuple[str, str, str, str]


def failure_condition(failures: Iterable[ScriptFailure], generations: Mapping[str, int]) -> dict[str, Any] | None:
    """The manifest status' ``Interpreted=False`` condition for the failures (None: none failed),
    its ``observedGeneration`` the failing customization's generation (so the hub can tell a
    report about a script since replaced). No timestamp: a status pass that finds the same
    failure writes nothing."""
    failures = list(failures)
    if not failures:
        return None
    first = failures[0]
    message = "; ".join(dict.fromkeys(f.describe() for f in failures))
    condition: dict[str, Any] = {
        "type": INTERPRETED, "status": "False", "reason": failure_reason(first.hook), "message": message,
    }
    if first.customization in generations:
        condition["observedGeneration"] = generations[first.customization]
    return condition


@dataclass(frozen=True, slots=True)
class Interpretation:
    """A member object's status and health as its customization interprets them."""

    status: Mapping[str, Any] | None
    health: Health | None
    #: hook → customization, for each status hook that ran.
    interpreted_by: dict[str, str] = field(default_factory=dict)
    failures: list[ScriptFailure] = field(default_factory=list)
    #: The manifest status condition the failures make (:func:`failure_condition`).
    condition: dict[str, Any] | None = None


def _object_key(obj: Mapping[str, Any]) -> ObjectKey:
    meta = obj.get("metadata") or {}
    return (
        group_of(str(obj.get("apiVersion") or "")),
        str(obj.get("kind") or ""),
        str(meta.get("namespace") or ""),
        str(meta.get("name") or ""),
    )


class MemberInterpreters:
    """The customizations in force at this agent, by target (API group and kind)."""

    def __init__(self) -> None:
        self._by_kind: dict[tuple[str, str], CustomizedInterpreter] = {}
        self._failures: list[ScriptFailure] = []
        self._generations: dict[str, int] = {}
        #: Member objects whose last retention failed, with the failure.
        self._retention_failures: dict[ObjectKey, ScriptFailure] = {}

    def update(self, customizations: Iterable[Mapping[str, Any]]) -> set[tuple[str, str]]:
        """Put the given ResourceInterpreterCustomization objects in force (all of them: the
        hub's collection as listed and watched). Returns the targets (API group, kind) whose
        ``retention`` script came, went or changed: their objects are due to be applied again."""
        before = self._retention_scripts()
        customizations = list(customizations)
        merged, _refused = merge(customizations)
        self._generations = {
            str(obj["metadata"].get("name")): int(obj["metadata"].get("generation") or 0)
            for obj in customizations
            if isinstance(obj.get("metadata"), Mapping)
        }
        self._by_kind = {
            (group_of(custom.api_version), custom.kind): CustomizedInterpreter(custom, None, self._failures.append)
            for custom in merged
            if any(hook in custom.scripts for hook in MEMBER_HOOKS)
        }
        self._retention_failures.clear()
        after = self._retention_scripts()
        return {target for target in before.keys() | after.keys() if before.get(target) != after.get(target)}

    def _retention_scripts(self) -> dict[tuple[str, str], str]:
        return {
            target: interpreter.custom.scripts["retention"]
            for target, interpreter in self._by_kind.items()
            if "retention" in interpreter.custom.scripts
        }

    def _for(self, api_version: str, kind: str, hooks: Iterable[str]) -> CustomizedInterpreter | None:
        found = self._by_kind.get((group_of(api_version), kind))
        return found if found is not None and any(found.has(hook) for hook in hooks) else None

    def interprets_status(self, api_version: str, kind: str) -> bool:
        """Whether the kind's manifest status comes from a customization (which needs the whole
        member object, not a watch cache's trimmed copy)."""
        return self._for(api_version, kind, _STATUS_HOOKS) is not None

    def _drain(self) -> list[ScriptFailure]:
        failures, self._failures[:] = list(self._failures), []
        return failures

    def retain(self, desired: dict[str, Any], observed: Mapping[str, Any]) -> tuple[dict[str, Any], ScriptFailure | None]:
        """The body to apply over the existing member object ``observed``: ``desired`` as the
        kind's ``retention`` keeps it (unchanged without one), or ``desired`` and the failure."""
        key = _object_key(desired)
        custom = self._for(str(desired.get("apiVersion") or ""), str(desired.get("kind") or ""), ("retention",))
        if custom is None:
            self._retention_failures.pop(key, None)
            return desired, None
        self._drain()
        retained = custom.retain(desired, dict(observed))
        failures = self._drain()
        if failures:
            self._retention_failures[key] = failures[0]
            return desired, failures[0]
        self._retention_failures.pop(key, None)
        return _apply_body(retained, desired), None

    def interpret(self, observed: Mapping[str, Any]) -> Interpretation | None:
        """The member object's status and health by its customization (None: no customization
        interprets its kind); the remembered retention failure of the object comes along."""
        retention = self._retention_failures.get(_object_key(observed))
        custom = self._for(str(observed.get("apiVersion") or ""), str(observed.get("kind") or ""), _STATUS_HOOKS)
        if custom is None:
            if retention is None:
                return None
            return Interpretation(None, None, failures=[retention], condition=failure_condition([retention], self._generations))
        self._drain()
        obj = dict(observed)
        status = custom.reflect_object(obj) if custom.has("statusReflection") else None
        health = custom.health_of(obj) if custom.has("healthInterpretation") else None
        failures = ([retention] if retention is not None else []) + self._drain()
        interpreted_by = {hook: custom.custom.owner(hook) for hook in _STATUS_HOOKS if custom.has(hook)}
        # A hook that failed is listed too: its fallback stands, the hub does not run it again.
        return Interpretation(
            status=status, health=health, interpreted_by=interpreted_by, failures=failures,
            condition=failure_condition(failures, self._generations),
        )


def _apply_body(retained: Mapping[str, Any], desired: Mapping[str, Any]) -> dict[str, Any]:
    """A retention result as an apply body: identity and ownership labels as desired, no status,
    no metadata the member sets."""
    body = {k: v for k, v in retained.items() if k != "status"}
    desired_meta = desired.get("metadata") or {}
    meta = {k: v for k, v in (retained.get("metadata") or {}).items() if k not in _SERVER_SET_METADATA}
    for key in ("name", "namespace"):
        if key in desired_meta:
            meta[key] = desired_meta[key]
    labels = dict(meta.get("labels") or {})
    for key in (c.LABEL_MANAGED_BY, c.LABEL_WORK_NAMESPACE, c.LABEL_WORK_NAME):
        if key in (desired_meta.get("labels") or {}):
            labels[key] = desired_meta["labels"][key]
    meta["labels"] = labels
    body["metadata"] = meta
    body["apiVersion"], body["kind"] = desired.get("apiVersion"), desired.get("kind")
    return body
