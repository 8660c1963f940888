"""A kind's interpreter as a ResourceInterpreterCustomization's Lua scripts make it.

:class:`Customization` is the parsed ``config.karmada.io/v1alpha1`` object: its target and one
Lua script per hook. :class:`CustomizedInterpreter` implements :class:`KindInterpreter` with
those scripts, each hook falling back to the built-in interpreter of the kind (or, for a kind
the hub has none for, Karmada's default: no replicas, the object unchanged, health Unknown):

- ``replicaResource`` (``GetReplicas``) → replicas and per-replica requirements;
- ``componentResource`` (``GetComponents``) → the roles of a multi-template kind;
- ``replicaRevision`` (``ReviseReplica``) → one cluster's share;
- ``statusReflection`` (``ReflectStatus``) → what the hub takes of each member's status;
- ``statusAggregation`` (``AggregateStatus``) → the hub object's status from the members';
- ``healthInterpretation`` (``InterpretHealth``) → a member copy's health;
- ``dependencyInterpretation`` (``GetDependencies``) → the objects ``propagateDeps`` sends along;
- ``retention`` (``Retain``) → :meth:`CustomizedInterpreter.retain`.

``retention``, ``statusReflection`` and ``healthInterpretation`` need the member object: the
agents run them (:meth:`~CustomizedInterpreter.retain`, :meth:`~CustomizedInterpreter.reflect_object`,
:meth:`~CustomizedInterpreter.health_of`); the hub runs the last two on ``{apiVersion, kind,
status}`` only for an agent that reported the whole status (:meth:`~CustomizedInterpreter.reflect`,
:meth:`~CustomizedInterpreter.health`).

A script that fails (runtime error, too slow, too much memory, a result of the wrong shape)
never raises to the caller: the hook falls back and the failure goes to ``on_failure`` with the
object it was run on, for the customizations controller to report.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from controlplane.apis.untyped import Obj
from controlplane.apis.work_v1alpha1 import Health
from controlplane.interpreter.base import Component, FinishedPhase, KindInterpreter, MemberStatuses
from controlplane.interpreter.dependencies import CORE_API_VERSION, Dependency, sorted_dependencies
from controlplane.interpreter.kubelib import KUBE_LIBRARY, requirements_from_karmada
from controlplane.interpreter.luavm import LuaScriptError, call_function
from controlplane.interpreter.requirements import ReplicaRequirements

__all__ = [
    "HOOK_FUNCTIONS",
    "Customization",
    "CustomizedInterpreter",
    "ScriptFailure",
    "failure_reason",
    "hook_of_reason",
]

#: Karmada's hook names and the Lua function each script must define.
HOOK_FUNCTIONS: Mapping[str, str] = {
    "retention": "Retain",
    "replicaResource": "GetReplicas",
    "componentResource": "GetComponents",
    "replicaRevision": "ReviseReplica",
    "statusReflection": "ReflectStatus",
    "statusAggregation": "AggregateStatus",
    "healthInterpretation": "InterpretHealth",
    "dependencyInterpretation": "GetDependencies",
}


@dataclass(frozen=True, slots=True)
class Customization:
    """One ResourceInterpreterCustomization (or the hooks of several for one target): its name,
    target, scripts by hook and, when merged, the customization each hook came from."""

    name: str
    api_version: str
    kind: str
    scripts: Mapping[str, str] = field(default_factory=dict)
    owners: Mapping[str, str] = field(default_factory=dict)

    def owner(self, hook: str) -> str:
        """The customization the hook's script belongs to."""
        return self.owners.get(hook, self.name)

    @classmethod
    def from_object(cls, obj: Mapping[str, Any]) -> Customization:
        spec = obj.get("spec") or {}
        target = spec.get("target") or {}
        scripts: dict[str, str] = {}
        for hook, body in (spec.get("customizations") or {}).items():
            script = (body or {}).get("luaScript") if isinstance(body, Mapping) else None
            if hook in HOOK_FUNCTIONS and isinstance(script, str) and script.strip():
                scripts[hook] = script
        return cls(
            name=str((obj.get("metadata") or {}).get("name") or ""),
            api_version=str(target.get("apiVersion") or ""),
            kind=str(target.get("kind") or ""),
            scripts=scripts,
        )


@dataclass(frozen=True, slots=True)
class ScriptFailure:
    """A hook's script failed on an object: what the customization and the binding report."""

    customization: str
    hook: str
    message: str
    obj: Obj
    #: The script that failed (a report may arrive after the customization changed).
    script: str = ""

    def describe(self) -> str:
        return f"{self.hook} script of ResourceInterpreterCustomization {self.customization} failed: {self.message}"


OnFailure = Callable[[ScriptFailure], None]


def failure_reason(hook: str) -> str:
    """The condition reason that says the hook's script failed (``StatusReflectionFailed``)."""
    return hook[0].upper() + hook[1:] + "Failed"


def hook_of_reason(reason: str) -> str | None:
    """The hook whose failure a condition reason names (:func:`failure_reason`), if any."""
    return next((hook for hook in HOOK_FUNCTIONS if failure_reason(hook) == reason), None)


_T = TypeVar("_T")


class _Unusable(ValueError):
    """A script returned a value of the wrong shape."""


def _as_int(value: Any, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
        raise _Unusable(f"{what} must be a non-negative number, not {value!r}")
    return int(value)


def _as_object_of(what: str) -> Callable[[Any], Obj]:
    """Reads the result of the script function ``what`` as the object it must return."""

    def read(value: Any) -> Obj:
        if not isinstance(value, dict):
            raise _Unusable(f"{what} must return the object (a table), not {value!r}")
        return value

    return read


def _list_of(value: Any, refusal: str) -> list[Any]:
    """Reads the result of a script function as the list it must return (nil: none); anything
    else is refused as ``refusal`` says."""
    if value is None:
        return []
    if not isinstance(value, list):
        raise _Unusable(f"{refusal}, not {value!r}")
    return value


class CustomizedInterpreter:
    """:class:`KindInterpreter` whose hooks run the customization's scripts."""

    def __init__(
        self,
        custom: Customization,
        base: KindInterpreter | None,
        on_failure: OnFailure | None = None,
    ) -> None:
        self.custom = custom
        self.base = base
        self.group = custom.api_version.rsplit("/", 1)[0] if "/" in custom.api_version else ""
        self.kind = custom.kind
        self._on_failure = on_failure

    def rebased(self, base: KindInterpreter | None) -> CustomizedInterpreter:
        """The same scripts falling back to ``base`` (the kind's interpretation changed)."""
        return CustomizedInterpreter(self.custom, base, self._on_failure)

    def has(self, hook: str) -> bool:
        return hook in self.custom.scripts

    @property
    def replicated(self) -> bool:
        """Whether the kind has replicas to divide (a built-in interpreter or a replica hook)."""
        return self.base is not None or self.has("replicaResource") or self.has("componentResource")

    def _run(self, hook: str, obj: Obj, args: tuple[Any, ...], results: int = 1) -> list[Any] | None:
        """The hook's results, or None (reported) when the script fails."""
        try:
            return call_function(
                self.custom.scripts[hook], HOOK_FUNCTIONS[hook], args, KUBE_LIBRARY, results=results
            )
        except LuaScriptError as exc:
            self._report(hook, str(exc), obj)
            return None

    def _read(
        self, hook: str, obj: Obj, args: tuple[Any, ...], read: Callable[[Any], _T], unusable: tuple[type[Exception], ...]
    ) -> _T | None:
        """``hook``'s script on ``args``, its result read by ``read``; None when the kind has no such
        hook, or its script failed or gave what ``read`` refuses with ``unusable`` (reported)."""
        if not self.has(hook):
            return None
        out = self._run(hook, obj, args)
        if out is None:
            return None
        try:
            return read(out[0])
        except unusable as exc:
            self._report(hook, str(exc), obj)
            return None

    def _report(self, hook: str, message: str, obj: Obj) -> None:
        if self._on_failure is not None:
            failure = ScriptFailure(self.custom.owner(hook), hook, message, obj, self.custom.scripts.get(hook, ""))
            self._on_failure(failure)

    def _replica_resource(self, obj: Obj) -> tuple[int, ReplicaRequirements] | None:
        out = self._run("replicaResource", obj, (obj,), results=2)
        if out is None:
            return None
        try:
            return _as_int(out[0] if out[0] is not None else 0, "GetReplicas' replica"), requirements_from_karmada(
                out[1]
            )
        except ValueError as exc:
            self._report("replicaResource", str(exc), obj)
            return None

    def replicas(self, obj: Obj) -> int:
        if self.has("componentResource"):
            components = self.components(obj)
            if components:
                return sum(c.replicas for c in components)
        if self.has("replicaResource"):
            got = self._replica_resource(obj)
            if got is not None:
                return got[0]
        return self.base.replicas(obj) if self.base is not None else 0

    def replica_requirements(self, obj: Obj) -> ReplicaRequirements:
        if self.has("replicaResource"):
            got = self._replica_resource(obj)
            if got is not None:
                return got[1]
        return self.base.replica_requirements(obj) if self.base is not None else ReplicaRequirements()

    def components(self, obj: Obj) -> list[Component]:
        got = self._read("componentResource", obj, (obj,), self._components, (ValueError, KeyError, TypeError))
        if got is not None:
            return got
        return self.base.components(obj) if self.base is not None else []

    @staticmethod
    def _components(value: Any) -> list[Component]:
        return [
            Component(
                name=str(item["name"]),
                replicas=_as_int(item.get("replicas") or 0, f"component {item['name']} replicas"),
                requirements=requirements_from_karmada(item.get("replicaRequirements")),
            )
            for item in _list_of(value, "GetComponents must return a list of components")
        ]

    def with_replicas(self, obj: Obj, replicas: int) -> Obj:
        got = self._read("replicaRevision", obj, (obj, replicas), _as_object_of("ReviseReplica"), (_Unusable,))
        if got is not None:
            return got
        return self.base.with_replicas(obj, replicas) if self.base is not None else copy.deepcopy(obj)

    def is_gang(self, obj: Obj) -> bool:
        return self.base.is_gang(obj) if self.base is not None else False

    def _synthetic(self, status: Mapping[str, Any]) -> Obj:
        """The member object as the hub knows it from an agent that reports only its status."""
        return {"apiVersion": self.custom.api_version, "kind": self.kind, "status": dict(status)}

    def reflect(self, status: Mapping[str, Any] | None) -> Mapping[str, Any] | None:
        """What the hub takes of one member's ``.status`` (``statusReflection``; all of it by
        default), for an agent that reported the whole status (:meth:`reflect_object` runs at
        agents that reflect, on the whole member object)."""
        if status is None or not self.has("statusReflection"):
            return status
        return self.reflect_object(self._synthetic(status))

    def reflect_object(self, observed: Obj) -> Mapping[str, Any] | None:
        """``statusReflection`` on a member object; its whole ``.status`` by default."""
        status = observed.get("status")
        if not self.has("statusReflection"):
            return status if isinstance(status, Mapping) else None
        out = self._run("statusReflection", observed, (observed,))
        if out is None:
            return status if isinstance(status, Mapping) else None
        if out[0] is not None and not isinstance(out[0], dict):
            self._report("statusReflection", f"ReflectStatus must return a table, not {out[0]!r}", observed)
            return status if isinstance(status, Mapping) else None
        return out[0]

    def aggregate_status(
        self,
        obj: Obj,
        member_statuses: MemberStatuses,
        *,
        reflected: Collection[str] = (),
        healths: Mapping[str, str] | None = None,
    ) -> Obj:
        """The hub object's status from the members'. The statuses of the ``reflected`` clusters
        were reflected at their agents (the others are reflected here); ``healths`` are the
        members' healths as their agents judged them (the others are judged here)."""
        reflected_statuses = [
            (name, status if name in reflected else self.reflect(status)) for name, status in member_statuses
        ]
        if self.has("statusAggregation"):
            items = []
            for name, status in reflected_statuses:
                item: Obj = {"clusterName": name, "applied": status is not None}
                if status is not None:
                    item["status"] = dict(status)
                    item["health"] = (healths or {}).get(name) or str(self.health(status))
                items.append(item)
            out = self._run("statusAggregation", obj, (obj, items))
            if out is not None:
                if isinstance(out[0], dict):
                    status_out = out[0].get("status")
                    return dict(status_out) if isinstance(status_out, dict) else {}
                self._report("statusAggregation", f"AggregateStatus must return the object, not {out[0]!r}", obj)
        if self.base is not None:
            return self.base.aggregate_status(obj, reflected_statuses)
        return dict(obj.get("status") or {})

    def health(self, status: Mapping[str, Any] | None) -> Health:
        """A member copy's health from its status alone (an agent that does not interpret)."""
        if self.has("healthInterpretation") and status is not None:
            return self.health_of(self._synthetic(status))
        return self.base.health(status) if self.base is not None else Health.UNKNOWN

    def health_of(self, observed: Obj) -> Health:
        """``healthInterpretation`` on a member object; the built-in rule on it (or Unknown) by default."""
        if self.has("healthInterpretation"):
            out = self._run("healthInterpretation", observed, (observed,))
            if out is not None:
                if isinstance(out[0], bool):
                    return Health.HEALTHY if out[0] else Health.UNHEALTHY
                self._report("healthInterpretation", f"InterpretHealth must return a boolean, not {out[0]!r}", observed)
        return self.base.health_of(observed) if self.base is not None else Health.UNKNOWN

    def report_member_failure(self, hook: str, message: str, obj: Obj) -> None:
        """A hook's script failed at a member's agent, on the member copy of ``obj``."""
        if hook in HOOK_FUNCTIONS:
            self._report(hook, message, obj)

    def finished(self, status: Mapping[str, Any] | None) -> FinishedPhase | None:
        return self.base.finished(status) if self.base is not None else None

    def between_runs(self, status: Mapping[str, Any] | None) -> bool:
        return self.base.between_runs(status) if self.base is not None else False

    def with_gpu_request(self, obj: Obj, resources: Mapping[str, int | str]) -> Obj:
        return self.base.with_gpu_request(obj, resources) if self.base is not None else copy.deepcopy(obj)

    def dependencies(self, obj: Obj) -> list[Dependency]:
        got = self._read("dependencyInterpretation", obj, (obj,), self._dependencies, (_Unusable, KeyError, TypeError))
        if got is not None:
            return got
        return self.base.dependencies(obj) if self.base is not None else []

    @staticmethod
    def _dependencies(value: Any) -> list[Dependency]:
        found = {
            Dependency(
                kind=str(item["kind"]),
                name=str(item["name"]),
                api_version=str(item.get("apiVersion") or CORE_API_VERSION),
            )
            for item in _list_of(value, "GetDependencies must return a list")
        }
        return sorted_dependencies(found)

    def retain(self, desired: Obj, observed: Obj) -> Obj:
        """``desired`` with the fields ``retention`` keeps from the member's ``observed`` copy."""
        got = self._read("retention", desired, (desired, observed), _as_object_of("Retain"), (_Unusable,))
        return got if got is not None else copy.deepcopy(desired)
