"""Find the interpreter for a workload by (API group, kind).

The key ignores the version: ``kubeflow.org/v1`` and ``kubeflow.org/v2beta1`` MPIJobs
share one interpreter, as their replica specs have the same shape. A Pod is one replica, as in
Karmada. Kinds without an interpreter (ConfigMap, Service, DaemonSet, any kind the hub serves…)
have no replicas:
callers treat ``None`` as "propagate the whole object to every chosen cluster" (Karmada's
default interpretation); :func:`~controlplane.interpreter.native.status_interpreter_for` says
how the hub status of some of them is folded from the members'. A ResourceInterpreterCustomization
installed with :func:`set_customized` overrides the kind's interpreter (group and kind, as above).
A custom kind whose CRD has a ``scale`` subresource gets a :class:`ScaleInterpreter`
(:func:`set_scaled`) unless a built-in interpreter knows the kind. Precedence: a customization,
then the built-in interpreter, then the CRD's scale subresource; a customization's hooks fall
back to whichever of the other two the kind has.

:func:`judge_health` judges a member object by its kind's built-in health rule (the agent's
``health``; customizations and CRD scale subresources aside, as the agent runs a customization's
``healthInterpretation`` itself).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from controlplane.apis.kubeflow import TRAINING_KINDS
from controlplane.apis.work_v1alpha1 import Health
from controlplane.interpreter.base import KindInterpreter
from controlplane.interpreter.customized import CustomizedInterpreter
from controlplane.interpreter.deployment import DeploymentInterpreter
from controlplane.interpreter.health import generic_health
from controlplane.interpreter.job import JobInterpreter
from controlplane.interpreter.jobset import JobSetInterpreter
from controlplane.interpreter.kubeflow import KubeflowJobInterpreter
from controlplane.interpreter.leaderworkerset import LeaderWorkerSetInterpreter
from controlplane.interpreter.native import HealthRule, native_health_rule, native_health_rules
from controlplane.interpreter.pod import PodInterpreter
from controlplane.interpreter.raycluster import RayClusterInterpreter
from controlplane.interpreter.rayjob import RayJobInterpreter
from controlplane.interpreter.replicaset import ReplicaSetInterpreter
from controlplane.interpreter.scaled import ScaleInterpreter
from controlplane.interpreter.statefulset import StatefulSetInterpreter
from controlplane.interpreter.trainjob import TrainJobInterpreter

_REGISTRY: dict[tuple[str, str], KindInterpreter] = {}
#: Interpreters made from ResourceInterpreterCustomizations; they win over the built-in ones.
_CUSTOMIZED: dict[tuple[str, str], CustomizedInterpreter] = {}
#: Interpreters made from the scale subresources of the served CRDs; the built-in ones win.
_SCALED: dict[tuple[str, str], ScaleInterpreter] = {}


def group_of(api_version: str) -> str:
    """``apps/v1`` -> ``apps``; the core group ``v1`` -> ``""``."""
    return api_version.rsplit("/", 1)[0] if "/" in api_version else ""


def register(interpreter: KindInterpreter) -> None:
    """Add (or replace) the interpreter for ``(interpreter.group, interpreter.kind)``."""
    _REGISTRY[(interpreter.group, interpreter.kind)] = interpreter


def interpreter_for(api_version: str, kind: str) -> KindInterpreter | None:
    """The interpreter for objects of ``apiVersion``/``kind``, or None when the kind has none.

    A customization of the kind wins when the kind has replicas (a built-in interpreter or a
    replica hook); one that only interprets status is :func:`customized_status_for`'s."""
    key = (group_of(api_version), kind)
    custom = _CUSTOMIZED.get(key)
    if custom is not None and custom.replicated:
        return custom
    return _uncustomized(key)


def _uncustomized(key: tuple[str, str]) -> KindInterpreter | None:
    return _REGISTRY.get(key) or _SCALED.get(key)


def builtin_interpreter_for(api_version: str, kind: str) -> KindInterpreter | None:
    """The interpreter of the kind customizations aside: the built-in one, else its CRD's scale one."""
    return _uncustomized((group_of(api_version), kind))


def customizes(api_version: str, kind: str, hook: str) -> bool:
    """Whether a customization of the kind has the Lua script ``hook`` (e.g. ``replicaResource``)."""
    custom = _CUSTOMIZED.get((group_of(api_version), kind))
    return custom is not None and custom.has(hook)


def customized_status_for(api_version: str, kind: str) -> CustomizedInterpreter | None:
    """The customization of a kind without replicas, which folds and judges its status."""
    custom = _CUSTOMIZED.get((group_of(api_version), kind))
    return custom if custom is not None and not custom.replicated else None


def set_customized(api_version: str, kind: str, interpreter: CustomizedInterpreter | None) -> None:
    """Install (or with None remove) the customization-made interpreter of a kind."""
    key = (group_of(api_version), kind)
    if interpreter is None:
        _CUSTOMIZED.pop(key, None)
    else:
        _CUSTOMIZED[key] = interpreter


def set_scaled(interpreters: Iterable[ScaleInterpreter]) -> list[tuple[str, str]]:
    """Make ``interpreters`` the CRD scale interpreters in force (replacing the previous set) and
    return the (group, kind) keys whose interpretation changed. A customization installed on
    one of them is rebuilt on the new fallback, so its hooks keep falling back to the kind's
    replicas however the CRD and the customization came and went."""
    wanted = {(i.group, i.kind): i for i in interpreters}
    changed = [key for key in sorted(set(_SCALED) | set(wanted)) if _SCALED.get(key) != wanted.get(key)]
    for key in changed:
        before = _uncustomized(key)
        if key in wanted:
            _SCALED[key] = wanted[key]
        else:
            _SCALED.pop(key, None)
        after, custom = _uncustomized(key), _CUSTOMIZED.get(key)
        if custom is not None and custom.base is before and after is not before:
            _CUSTOMIZED[key] = custom.rebased(after)
    return changed


def registered_kinds() -> list[tuple[str, str]]:
    return sorted(_REGISTRY)


def health_rule_for(api_version: str, kind: str) -> HealthRule | None:
    """The built-in health rule of ``apiVersion``/``kind`` (its interpreter's, else that of a kind
    without replicas), None when no built-in kind has one. Rules go by group and kind, as
    Karmada's interpreter hooks go by GVK: a kind of another group with the same name (Knative's
    ``serving.knative.dev`` Service, Volcano's ``batch.volcano.sh`` Job) has a status of another
    shape and gets no built-in rule. Only an object without ``apiVersion`` (what is known of it
    is its kind) gets the rule of the built-in kind of its name."""
    group = group_of(api_version)
    interpreter = _REGISTRY.get((group, kind))
    if interpreter is not None:
        return interpreter.health_of
    rule = native_health_rule(group, kind)
    if rule is None and not api_version:
        rule = _health_rules_by_kind().get(kind)
    return rule


def _health_rules_by_kind() -> dict[str, HealthRule]:
    out: dict[str, HealthRule] = {key[1]: rule for key, rule in native_health_rules()}
    out.update({key[1]: interpreter.health_of for key, interpreter in sorted(_REGISTRY.items())})
    return out


def judge_health(observed: Mapping[str, Any] | None) -> Health:
    """Health of a member object by its kind's rule (:func:`health_rule_for`), a kind without one
    by the generic rules (:func:`~controlplane.interpreter.health.generic_health`); Unknown for
    no object. In: the observed object, or what is known of it."""
    if observed is None:
        return Health.UNKNOWN
    rule = health_rule_for(str(observed.get("apiVersion") or ""), str(observed.get("kind") or ""))
    return rule(dict(observed)) if rule is not None else generic_health(observed)


_BUILTIN: tuple[KindInterpreter, ...] = (
    DeploymentInterpreter(),
    StatefulSetInterpreter(),
    JobInterpreter(),
    *(KubeflowJobInterpreter(training) for training in TRAINING_KINDS.values()),
    RayJobInterpreter(),
    RayClusterInterpreter(),
    ReplicaSetInterpreter(),
    LeaderWorkerSetInterpreter(),
    JobSetInterpreter(),
    TrainJobInterpreter(),
    PodInterpreter(),
)
for _interpreter in _BUILTIN:
    register(_interpreter)
