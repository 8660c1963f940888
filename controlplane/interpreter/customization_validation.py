"""Validation of a ResourceInterpreterCustomization, as Karmada checks it.

:func:`validate_customization` is the schema's part (422 field errors): ``spec.target.apiVersion``
and ``spec.target.kind`` are required, every ``spec.customizations.<hook>.luaScript`` is a known
hook with a script of at most 64 KiB. :func:`customization_denial` is karmada-webhook's
(``pkg/webhook/resourceinterpretercustomization``), answered as a webhook's denial (403): no
other customization of the same target sets the same hook (``conflicting with
InterpreterOperation(InterpretReplica) of existing ResourceInterpreterCustomization(other)``),
then every script loads in the sandbox (``InterpreterOperation(InterpretReplica) Lua script error:
...``), the hooks taken in Karmada's order. Unlike Karmada, which only compiles a script, the hub
also needs it to define the hook's function (``GetReplicas`` for ``replicaResource``…). In: the
object (and the others stored). Out: field errors, or the denial. :func:`merge` decides between
customizations stored anyway (e.g. by two writes at once) over all of them. Pure.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from controlplane.apis.kube import field
from controlplane.apis.kube.field import FieldError
from controlplane.interpreter.customized import HOOK_FUNCTIONS, Customization
from controlplane.interpreter.kubelib import KUBE_LIBRARY
from controlplane.interpreter.luavm import LuaScriptError, check_script

__all__ = ["MAX_SCRIPT_BYTES", "WEBHOOK", "customization_denial", "merge", "validate_customization"]

#: Longest accepted script (bytes); Karmada's scripts are a few kB.
MAX_SCRIPT_BYTES = 64 * 1024
#: karmada-webhook's webhook of the kind.
WEBHOOK = "resourceinterpretercustomization.karmada.io"
#: Each hook's InterpreterOperation, in the order Karmada's webhook checks them.
_OPERATIONS: Mapping[str, str] = {
    "retention": "Retain",
    "replicaResource": "InterpretReplica",
    "componentResource": "InterpretComponent",
    "replicaRevision": "ReviseReplica",
    "statusReflection": "InterpretStatus",
    "statusAggregation": "AggregateStatus",
    "healthInterpretation": "InterpretHealth",
    "dependencyInterpretation": "InterpretDependency",
}


def validate_customization(obj: dict[str, Any], _old: dict[str, Any] | None = None) -> list[FieldError]:
    """The field errors of a ResourceInterpreterCustomization (none: valid)."""
    spec = field.mapping(obj.get("spec"))
    errors: list[FieldError] = []
    target = field.mapping(spec.get("target"))
    for key in ("apiVersion", "kind"):
        value = target.get(key)
        if not isinstance(value, str) or not value:
            errors.append(field.required(f"spec.target.{key}", f"the {key} of the kind to interpret"))
    customizations = spec.get("customizations")
    if not isinstance(customizations, dict):
        errors.append(field.required("spec.customizations", "at least one hook with a luaScript"))
        return errors
    for hook, body in customizations.items():
        where = f"spec.customizations.{hook}"
        if hook not in HOOK_FUNCTIONS:
            errors.append(field.not_supported(where, hook, sorted(HOOK_FUNCTIONS)))
            continue
        script = field.mapping(body).get("luaScript")
        if not isinstance(script, str) or not script.strip():
            errors.append(field.required(f"{where}.luaScript", f"a Lua script defining {HOOK_FUNCTIONS[hook]}"))
            continue
        if len(script.encode()) > MAX_SCRIPT_BYTES:
            errors.append(field.too_long(f"{where}.luaScript", MAX_SCRIPT_BYTES))
    return errors


def customization_denial(obj: dict[str, Any], others: list[dict[str, Any]]) -> tuple[str, str] | None:
    """karmada-webhook's refusal of ``obj``, ``others`` being the other customizations stored: the
    first hook another of the same target sets (those others by name), else the first script that
    does not load; None when it admits it."""
    custom = Customization.from_object(obj)
    for other in sorted(others, key=lambda o: str((o.get("metadata") or {}).get("name"))):
        if (other.get("metadata") or {}).get("deletionTimestamp"):
            continue
        theirs = Customization.from_object(other)
        if (theirs.api_version, theirs.kind) != (custom.api_version, custom.kind):
            continue
        for hook, operation in _OPERATIONS.items():
            if custom.scripts.get(hook) and theirs.scripts.get(hook):
                return WEBHOOK, (
                    f"conflicting with InterpreterOperation({operation}) of existing "
                    f"ResourceInterpreterCustomization({theirs.name})"
                )
    for hook, operation in _OPERATIONS.items():
        script = custom.scripts.get(hook)
        if not script:
            continue
        try:
            check_script(script, HOOK_FUNCTIONS[hook], KUBE_LIBRARY)
        except LuaScriptError as exc:
            return WEBHOOK, f"InterpreterOperation({operation}) Lua script error: {exc}"
    return None


def merge(objects: Iterable[Mapping[str, Any]]) -> tuple[list[Customization], dict[str, dict[str, str]]]:
    """The customizations in force, one per target, and the hooks refused for a conflict.

    Several customizations may interpret one target with different hooks; for a hook two of them
    set, the older one (creationTimestamp, then name) keeps it — Karmada's webhook refuses the
    newer one's write, and this decides the same when both got stored anyway. Returns the merged
    customizations and, per customization name, hook → the customization that holds it.
    """
    live = [obj for obj in objects if not (obj.get("metadata") or {}).get("deletionTimestamp")]
    live.sort(key=lambda o: (str(o["metadata"].get("creationTimestamp") or ""), str(o["metadata"].get("name"))))
    ordered = [Customization.from_object(obj) for obj in live]
    scripts: dict[tuple[str, str], dict[str, str]] = {}
    owners: dict[tuple[str, str], dict[str, str]] = {}
    refused: dict[str, dict[str, str]] = {}
    for custom in ordered:
        if not custom.api_version or not custom.kind:
            continue
        target = (custom.api_version, custom.kind)
        for hook, script in custom.scripts.items():
            holder = owners.setdefault(target, {}).get(hook)
            if holder is not None:
                refused.setdefault(custom.name, {})[hook] = holder
                continue
            scripts.setdefault(target, {})[hook] = script
            owners[target][hook] = custom.name
    merged = [
        Customization(
            name=sorted(set(owners[target].values()))[0],
            api_version=target[0],
            kind=target[1],
            scripts=hooks,
            owners=owners[target],
        )
        for target, hooks in scripts.items()
    ]
    return merged, refused
