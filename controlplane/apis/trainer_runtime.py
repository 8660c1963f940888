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
  (``replicas: 1``, whatever the runtime's replicated Job says) with ``parallelism`` and
  ``completions`` the node count, so the trainer step is the node count of pods, for placement
  and for Kueue's pod set alike;
* the node count is the TrainJob's ``spec.trainer.numNodes``, else the runtime's
  ``mlPolicy.numNodes``, else the trainer Job's own ``parallelism`` (1 when unset);
* the trainer Job's container named ``node`` takes the TrainJob's ``spec.trainer`` image,
  command, args and environment, and its ``resourcesPerNode`` (when it sets limits or requests)
  replaces that container's resources whole, as the jobset plugin's builder does;
* ``podGroupPolicy.coscheduling`` (or ``volcano``) asks the member to start the nodes together.

The dataset and model initializers (replicated Jobs labelled ``dataset-initializer`` /
``model-initializer``) run before the trainer, one pod each; placement does not count them, but
Kueue's pod sets do (:func:`replicated_jobs`: one per replicated Job of the JobSet, as Kueue's
TrainJob integration builds them).

``spec.runtimePatches`` (one entry per ``manager``) patch the runtime's replicated Jobs by name:
each pod template's labels, annotations and nodeSelector are merged in, its tolerations and
scheduling gates replaced. Kueue owns the entry of manager :data:`KUEUE_MANAGER`, where it writes
an admitted flavor's node labels (:func:`with_kueue_patch`).

:func:`with_runtime` gives the copy of a TrainJob that carries its runtime (under
:data:`RESOLVED_RUNTIME`, a key no stored object has); it is only read, never sent or stored.

In: TrainJobs and runtimes as plain dicts. Out: :class:`TrainerNodes`, copies. Pure.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from controlplane.apis.trainer import GROUP, RuntimeLookup, is_train_job, named_runtime

#: The label of a runtime's replicated Job that says which step of the TrainJob it runs.
LABEL_ANCESTOR: Final = f"{GROUP}/trainjob-ancestor-step"
ANCESTOR_TRAINER: Final = "trainer"
#: The steps the trainer's jobset builder runs as one Job (``replicas: 1``) whatever the runtime says.
ONE_JOB_STEPS: Final = frozenset({ANCESTOR_TRAINER, "dataset-initializer", "model-initializer"})
#: The trainer step's replicated Job (runtimes without the ancestor label) and its container.
NODE: Final = "node"
#: Where a resolved copy keeps its runtime (see the module docstring).
RESOLVED_RUNTIME: Final = "gpufed.io/resolved-runtime"
#: Why the scheduler never gives a TrainJob an alternative GPU shape, nor steering or packing
#: hints (``gpufed explain`` says it for a TrainJob whose policy lists shapes).
NO_ALTERNATIVE_SHAPES: Final = (
    "not used for a TrainJob: its GPUs are asked by its runtime's node container, which the TrainJob changes only "
    "through spec.trainer.resourcesPerNode, and the trainer's releases apply that differently (the first replace "
    "the container's resources whole, later ones merge them key by key, so a runtime's nvidia.com/gpu stays "
    "beside a MIG profile written there): no rewrite asks the same GPUs of every member's trainer. Its pods have "
    "no template of their own either, for a shape's node selector or the scheduler's preferred node-affinity terms"
)
#: The manager of the ``spec.runtimePatches`` entry Kueue owns.
KUEUE_MANAGER: Final = "kueue.x-k8s.io/manager"
#: What a runtime patch of a pod template merges (maps, under ``metadata`` or ``spec``) and replaces (lists).
_MERGED: Final = (("labels", True), ("annotations", True), ("nodeSelector", False))
_REPLACED: Final = ("tolerations", "schedulingGates")


@dataclass(frozen=True, slots=True)
class TrainerNodes:
    """The trainer step of a TrainJob: ``count`` pods of ``template`` in the replicated Job ``job``."""

    job: str
    count: int
    template: dict[str, Any] = field(hash=False)
    gang: bool = False


@dataclass(frozen=True, slots=True)
class ReplicatedJob:
    """One replicated Job of a TrainJob's JobSet: ``count`` pods of the pod template ``template``,
    in ``replicas`` child Jobs of ``per_replica`` pods each (JobSet's ``PodsCountPerReplica``)."""

    name: str
    count: int
    template: dict[str, Any] = field(hash=False)
    replicas: int = 1
    per_replica: int = 1


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


def resolved(workload: dict[str, Any], lookup: RuntimeLookup) -> dict[str, Any]:
    """``workload`` as the interpreter should read it: a TrainJob with the runtime it names as
    ``lookup`` finds it (:func:`with_runtime`; without one when ``lookup`` has none), anything
    else as it is. The one way every reader of a TrainJob's nodes and GPUs gets its runtime,
    whatever holds the runtimes (the controllers' informers, a list the waste report read)."""
    return with_runtime(workload, named_runtime(workload, lookup)) if is_train_job(workload) else workload


def runtime_lookup(runtimes: Iterable[Mapping[str, Any]]) -> RuntimeLookup:
    """A lookup over listed TrainingRuntimes and ClusterTrainingRuntimes (as stored)."""
    held: dict[tuple[str, str | None, str], Mapping[str, Any]] = {}
    for runtime in runtimes:
        meta = _mapping(runtime.get("metadata"))
        namespace = meta.get("namespace")
        held[(str(runtime.get("kind")), str(namespace) if namespace else None, str(meta.get("name")))] = runtime
    return lambda kind, namespace, name: held.get((kind, namespace or None, name))


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


def _pod_template(replicated: Mapping[str, Any]) -> dict[str, Any]:
    return copy.deepcopy(dict(_mapping(_mapping(_mapping(replicated.get("template")).get("spec")).get("template"))))


def node_template(trainjob: Mapping[str, Any], runtime_spec: Mapping[str, Any]) -> dict[str, Any]:
    """The trainer pods' template: the runtime's, its ``node`` container with the TrainJob's
    ``spec.trainer`` written in, then its runtime patches. A copy; neither input is changed."""
    replicated = trainer_job(runtime_spec) or {}
    template = _pod_template(replicated)
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
    return patched(template, str(replicated.get("name") or NODE), trainjob)


def _patches(trainjob: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    patches = _mapping(trainjob.get("spec")).get("runtimePatches")
    return [p for p in patches if isinstance(p, Mapping)] if isinstance(patches, list) else []


def patched(template: dict[str, Any], job: str, trainjob: Mapping[str, Any]) -> dict[str, Any]:
    """The pod template of the replicated Job ``job`` with the TrainJob's runtime patches applied
    in order (see the module docstring), in place; returned."""
    for patch in _patches(trainjob):
        jobs = _mapping(_mapping(_mapping(patch.get("trainingRuntimeSpec")).get("template")).get("spec")).get("replicatedJobs")
        for entry in jobs if isinstance(jobs, list) else ():
            if not isinstance(entry, Mapping) or entry.get("name") != job:
                continue
            pod = _mapping(_mapping(_mapping(entry.get("template")).get("spec")).get("template"))
            for key, in_meta in _MERGED:
                given = _mapping(_mapping(pod.get("metadata" if in_meta else "spec")).get(key))
                if given:
                    part = template.setdefault("metadata" if in_meta else "spec", {})
                    part[key] = {**_mapping(part.get(key)), **copy.deepcopy(dict(given))}
            for key in _REPLACED:
                value = _mapping(pod.get("spec")).get(key)
                if isinstance(value, list) and value:
                    template.setdefault("spec", {})[key] = copy.deepcopy(value)
    return template


def _pods_per_replica(replicated: Mapping[str, Any]) -> int:
    """JobSet's ``PodsCountPerReplica``: the Job's ``parallelism`` (1 when unset), or its
    ``completions`` when fewer."""
    spec = _mapping(_mapping(replicated.get("template")).get("spec"))
    parallelism = spec.get("parallelism")
    count = parallelism if isinstance(parallelism, int) and not isinstance(parallelism, bool) and parallelism >= 0 else 1
    completions = spec.get("completions")
    return completions if isinstance(completions, int) and not isinstance(completions, bool) and 0 <= completions < count else count


def replicated_jobs(trainjob: Mapping[str, Any], runtime: Mapping[str, Any]) -> list[ReplicatedJob]:
    """Every replicated Job of the JobSet the trainer builds for ``trainjob`` run with ``runtime``,
    in the runtime's order, counted as Kueue counts a JobSet's pod sets (``replicas`` times the
    pods per replica): the trainer step with the node count (:func:`num_nodes`) and its template
    (:func:`node_template`); the others (the initializers) with their pods per replica and their
    own template, runtime patches applied. The trainer's jobset builder runs the trainer step
    and the labelled initializers (:data:`ONE_JOB_STEPS`) as one Job each, whatever ``replicas``
    the runtime gives them (the node count becomes the trainer Job's ``parallelism``, not more
    Jobs); any other replicated Job keeps the runtime's ``replicas`` (JobSet's default 1)."""
    spec = _mapping(runtime.get("spec"))
    trainer_step = trainer_job(spec)
    out: list[ReplicatedJob] = []
    for job in _replicated_jobs(spec):
        name = str(job.get("name") or "")
        given = job.get("replicas")
        replicas = given if isinstance(given, int) and not isinstance(given, bool) and given >= 0 else 1
        if job is trainer_step:
            nodes = num_nodes(trainjob, spec)
            out.append(ReplicatedJob(name, nodes, node_template(trainjob, spec), 1, nodes))
        else:
            if _ancestor(job) in ONE_JOB_STEPS:
                replicas = 1
            per_replica = _pods_per_replica(job)
            out.append(ReplicatedJob(name, replicas * per_replica, patched(_pod_template(job), name, trainjob), replicas, per_replica))
    return out


def without_kueue_patch(trainjob: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of ``trainjob`` without Kueue's runtime patch (the TrainJob as its user wrote it)."""
    spec = dict(_mapping(trainjob.get("spec")))
    if "runtimePatches" in spec:
        spec["runtimePatches"] = [p for p in _patches(trainjob) if p.get("manager") != KUEUE_MANAGER]
    return {**trainjob, "spec": spec}


def _kueue_entry(trainjob: Mapping[str, Any]) -> Mapping[str, Any] | None:
    return next((p for p in _patches(trainjob) if p.get("manager") == KUEUE_MANAGER), None)


def seeded_kueue_patch(trainjob: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of ``trainjob`` with Kueue's runtime patch, empty, added when it has none (as Kueue's
    TrainJob webhook adds it on create)."""
    out = copy.deepcopy(dict(trainjob))
    if _kueue_entry(out) is None:
        spec = _ensure(out, "spec")
        given = spec.get("runtimePatches")
        patches: list[Any] = given if isinstance(given, list) else []
        spec["runtimePatches"] = [*patches, {"manager": KUEUE_MANAGER, "trainingRuntimeSpec": {"template": {"spec": {}}}}]
    return out


def with_kueue_patch(trainjob: Mapping[str, Any], jobs: list[dict[str, Any]] | None) -> dict[str, Any]:
    """A copy of ``trainjob`` whose Kueue runtime patch (added when missing:
    :func:`seeded_kueue_patch`) patches ``jobs`` (``replicatedJobs`` entries; None: none, as
    Kueue leaves it when it stops the TrainJob; a TrainJob without the entry then stays as it is)."""
    if jobs is None and _kueue_entry(trainjob) is None:
        return copy.deepcopy(dict(trainjob))
    out = seeded_kueue_patch(trainjob)
    entry = _kueue_entry(out)
    assert isinstance(entry, dict)
    job_set = _ensure(_ensure(_ensure(entry, "trainingRuntimeSpec"), "template"), "spec")
    if jobs is None:
        job_set.pop("replicatedJobs", None)
    else:
        job_set["replicatedJobs"] = copy.deepcopy(jobs)
    return out


def _ensure(parent: dict[str, Any], key: str) -> dict[str, Any]:
    child = parent.get(key)
    if not isinstance(child, dict):
        child = parent[key] = {}
    return child


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
