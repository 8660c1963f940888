"""A TrainJob read with its runtime, as Kubeflow Trainer's plugins expand it (written once for
the hub's interpreter and the simulated member's trainer controller).

A TrainJob carries no pod template: its runtime (a TrainingRuntime in its namespace or a
ClusterTrainingRuntime, :func:`~controlplane.apis.trainer.runtime_ref`) holds a JobSet template
(``spec.template.spec.replicatedJobs``), the ML policy (``spec.mlPolicy``: ``numNodes``,
``torch.numProcPerNode``...) and the pod group policy (``spec.podGroupPolicy``). The trainer
builds the JobSet from them, and this module reads what placement needs the same way:

* the trainer step is the replicated Job whose template is labelled
  ``trainer.kubeflow.org/trainjob-ancestor-step: trainer`` (a runtime of the first releases,
  without the label, names it ``node``); the trainer's jobset plugin runs it once
  (``replicas: 1``) with ``parallelism`` and ``completions`` the node count;
* the node count is the TrainJob's ``spec.trainer.numNodes``, else the runtime's
  ``mlPolicy.numNodes``, else the trainer Job's own ``parallelism`` (1 when unset);
* the trainer Job's container named ``node`` takes the TrainJob's ``spec.trainer`` image,
  command, args and environment, and its ``resourcesPerNode`` (when it sets limits or requests)
  replaces that container's resources whole, as the jobset plugin's builder does;
* ``podGroupPolicy.coscheduling`` (or ``volcano``) asks the member to start the nodes together.

The dataset and model initializers (replicated Jobs labelled ``dataset-initializer`` /
``model-initializer``) run before the trainer, one pod each; they are not counted.

:func:`with_runtime` gives the copy of a TrainJob that carries its runtime (under
:data:`RESOLVED_RUNTIME`, a key no stored object has); it is only read, never sent or stored.

In: TrainJobs and runtimes as plain dicts. Out: :class:`TrainerNodes`, copies. Pure.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from controlplane.apis.trainer import GROUP

#: The label of a runtime's replicated Job that says which step of the TrainJob it runs.
LABEL_ANCESTOR: Final = f"{GROUP}/trainjob-ancestor-step"
ANCESTOR_TRAINER: Final = "trainer"
#: The trainer step's replicated Job (runtimes without the ancestor label) and its container.
NODE: Final = "node"
#: Where a resolved copy keeps its runtime (see the module docstring).
RESOLVED_RUNTIME: Final = "gpufed.io/resolved-runtime"


@dataclass(frozen=True, slots=True)
class TrainerNodes:
    """The trainer step of a TrainJob: ``count`` pods of ``template`` in the replicated Job ``job``."""

    job: str
    count: int
    template: dict[str, Any] = field(hash=False)
    gang: bool = False


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _positive(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def with_runtime(trainjob: Mapping[str, Any], runtime: Mapping[str, Any] | None) -> dict[str, Any]:
    """A copy of ``trainjob`` carrying ``runtime`` (None: the runtime is not known)."""
    out = dict(trainjob)
    if runtime is not None:
        out[RESOLVED_RUNTIME] = runtime
    return out


def resolved_runtime(trainjob: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The runtime a resolved copy carries, None for a TrainJob read alone."""
    runtime = trainjob.get(RESOLVED_RUNTIME)
    return runtime if isinstance(runtime, Mapping) else None


def _replicated_jobs(runtime_spec: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    jobs = _mapping(_mapping(runtime_spec.get("template")).get("spec")).get("replicatedJobs")
    return [job for job in jobs if isinstance(job, Mapping)] if isinstance(jobs, list) else []


def _ancestor(replicated: Mapping[str, Any]) -> str | None:
    labels = _mapping(_mapping(_mapping(replicated.get("template")).get("metadata")).get("labels"))
    value = labels.get(LABEL_ANCESTOR)
    return str(value) if value is not None else None


def trainer_job(runtime_spec: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The runtime's replicated Job of the trainer step (see the module docstring), or None."""
    jobs = _replicated_jobs(runtime_spec)
    labelled = next((job for job in jobs if _ancestor(job) == ANCESTOR_TRAINER), None)
    return labelled or next((job for job in jobs if job.get("name") == NODE), None)


def num_nodes(trainjob: Mapping[str, Any], runtime_spec: Mapping[str, Any]) -> int:
    """How many trainer pods the TrainJob runs (see the module docstring)."""
    trainer = _mapping(_mapping(trainjob.get("spec")).get("trainer"))
    ml_policy = _mapping(runtime_spec.get("mlPolicy"))
    job_spec = _mapping(_mapping((trainer_job(runtime_spec) or {}).get("template")).get("spec"))
    return _positive(trainer.get("numNodes")) or _positive(ml_policy.get("numNodes")) or _positive(
        job_spec.get("parallelism")) or 1


def is_gang(runtime_spec: Mapping[str, Any]) -> bool:
    """Whether the runtime's pod group policy has the nodes start together."""
    policy = _mapping(runtime_spec.get("podGroupPolicy"))
    return any(isinstance(policy.get(plugin), Mapping) for plugin in ("coscheduling", "volcano"))


def node_template(trainjob: Mapping[str, Any], runtime_spec: Mapping[str, Any]) -> dict[str, Any]:
    """The trainer pods' template: the runtime's, its ``node`` container with the TrainJob's
    ``spec.trainer`` written in. A copy; neither input is changed."""
    replicated = trainer_job(runtime_spec) or {}
    template = copy.deepcopy(dict(_mapping(_mapping(_mapping(replicated.get("template")).get("spec")).get("template"))))
    trainer = _mapping(_mapping(trainjob.get("spec")).get("trainer"))
    containers = _mapping(template.get("spec")).get("containers")
    for container in containers if isinstance(containers, list) else ():
        if not isinstance(container, dict) or container.get("name") != NODE:
            continue
        for key in ("image", "command", "args"):
            if trainer.get(key) is not None:
                container[key] = copy.deepcopy(trainer[key])
        resources = _mapping(trainer.get("resourcesPerNode"))
        if resources.get("limits") or resources.get("requests"):
            container["resources"] = {k: copy.deepcopy(resources[k]) for k in ("limits", "requests") if resources.get(k)}
        env = trainer.get("env")
        if isinstance(env, list) and env:
            kept = [e for e in container.get("env") or () if not any(e.get("name") == n.get("name") for n in env)]
            container["env"] = kept + copy.deepcopy(env)
    return template


def trainer_nodes(trainjob: Mapping[str, Any], runtime: Mapping[str, Any]) -> TrainerNodes:
    """The trainer step of ``trainjob`` run with ``runtime`` (a TrainingRuntime or ClusterTrainingRuntime)."""
    spec = _mapping(runtime.get("spec"))
    replicated = trainer_job(spec) or {}
    return TrainerNodes(
        job=str(replicated.get("name") or NODE),
        count=num_nodes(trainjob, spec),
        template=node_template(trainjob, spec),
        gang=is_gang(spec),
    )


def unresolved_nodes(trainjob: Mapping[str, Any]) -> TrainerNodes:
    """What the TrainJob alone says of its trainer step (its runtime unknown): ``numNodes`` (1
    when unset) pods asking ``resourcesPerNode``."""
    trainer = _mapping(_mapping(trainjob.get("spec")).get("trainer"))
    resources = {k: copy.deepcopy(v) for k, v in _mapping(trainer.get("resourcesPerNode")).items() if k in ("limits", "requests")}
    container: dict[str, Any] = {"name": NODE, **({"resources": resources} if resources else {})}
    return TrainerNodes(job=NODE, count=_positive(trainer.get("numNodes")) or 1,
                        template={"spec": {"containers": [container]}})
