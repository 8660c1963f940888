"""Kubeflow Trainer's TrainJob (trainer.kubeflow.org/v1alpha1), read with its runtime.

A TrainJob names its runtime and carries no pod template; what it runs is the runtime's
trainer step with the TrainJob's ``spec.trainer`` written in (:mod:`controlplane.apis.trainer_runtime`).
The detector hands the interpreter a copy that carries the runtime (the hub's TrainingRuntimes
and ClusterTrainingRuntimes, :mod:`controlplane.controllers.trainingruntimes`), as it hands it
copies with the GPUs of DRA claims written in. Read so:

* replicas: the node count (``spec.trainer.numNodes``, else the runtime's ``mlPolicy.numNodes``);
  one component, the trainer Job (``node``), whose requirements are the trainer pod template's,
  its ``node`` container asking ``resourcesPerNode`` when the TrainJob sets it;
* a gang: the trainer's JobSet runs in one cluster (its nodes reach each other through the
  JobSet's headless Service), so the hub places the TrainJob whole whatever the runtime's pod
  group policy, which only decides whether the member's scheduler starts the nodes together;
* dependencies: a TrainingRuntime (namespaced, in the TrainJob's namespace) goes with the TrainJob
  so the member's trainer can resolve it, as do the Secrets its initializers name
  (``spec.initializer.dataset.secretRef`` / ``model.secretRef``). A ClusterTrainingRuntime is
  cluster-scoped: a ClusterPropagationPolicy sends it;
* status: the members' ``conditions`` merged (``Failed`` True when any member's is) and
  ``jobsStatus`` summed by child Job name; health Unhealthy once ``Failed``, Healthy once
  ``Complete``, while ``Created`` is True (the trainer's first releases) or while a child Job is
  ready (``jobsStatus[].ready``; the current trainer sets no condition while it runs), else Unknown.

Every reader of a TrainJob's replicas or requirements hands it the copy with its runtime, got one
way (:func:`~controlplane.apis.trainer_runtime.resolved`): the detector, the graceful eviction
controller, the waste report. A TrainJob read alone (no runtime in the copy: the binding
controller, which only copies it into a Work) counts ``numNodes`` (1 when unset) pods asking
``resourcesPerNode``. The scheduler never gives a TrainJob an alternative GPU shape
(:data:`~controlplane.apis.trainer_runtime.NO_ALTERNATIVE_SHAPES`), so :meth:`with_gpu_request`
has nothing of its own to rewrite.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from controlplane.apis import trainer
from controlplane.apis.trainer_runtime import TrainerNodes, resolved_runtime, trainer_nodes, unresolved_nodes
from controlplane.apis.untyped import Obj, as_int
from controlplane.interpreter.base import (
    Component,
    FinishedPhase,
    GangOfRoles,
    Health,
    MemberStatuses,
    PodSetSlot,
    TemplateSlot,
    condition_true,
    finished_by_conditions,
    put_conditions,
    reported,
    sum_by_name,
)
from controlplane.interpreter.dependencies import Dependency, DependencyKind, sorted_dependencies
from controlplane.interpreter.health import status_of
from controlplane.interpreter.requirements import ReplicaRequirements, requirements

#: The counts of one entry of ``status.jobsStatus`` (child Jobs of one replicated Job).
JOB_COUNTS = ("ready", "succeeded", "failed", "active", "suspended")


def nodes_of(obj: Obj) -> TrainerNodes:
    """The trainer step of a TrainJob, with its runtime when the copy carries one."""
    runtime = resolved_runtime(obj)
    return trainer_nodes(obj, runtime) if runtime is not None else unresolved_nodes(obj)


class TrainJobInterpreter(GangOfRoles):
    group = trainer.GROUP
    kind = trainer.TRAIN_JOB

    def template_slots(self, obj: Obj) -> list[TemplateSlot]:
        return []  # the pod template is the runtime's, not the TrainJob's

    def pod_set_slots(self, obj: Obj) -> list[PodSetSlot]:
        return []

    def components(self, obj: Obj) -> list[Component]:
        nodes = nodes_of(obj)
        return [Component(name=nodes.job, replicas=nodes.count, requirements=requirements(nodes.template))]

    def replica_requirements(self, obj: Obj) -> ReplicaRequirements:
        return requirements(nodes_of(obj).template)

    def with_replicas(self, obj: Obj, replicas: int) -> Obj:
        return copy.deepcopy(obj)

    def dependencies(self, obj: Obj) -> list[Dependency]:
        found: set[Dependency] = set()
        ref = trainer.runtime_ref(obj)
        if ref.name and ref.api_group == trainer.GROUP and ref.kind == trainer.TRAINING_RUNTIME:
            found.add(Dependency(trainer.TRAINING_RUNTIME, ref.name, trainer.API_VERSION))
        initializer = (obj.get("spec") or {}).get("initializer") or {}
        for step in ("dataset", "model"):
            secret = ((initializer.get(step) or {}).get("secretRef") or {}).get("name")
            if isinstance(secret, str) and secret:
                found.add(Dependency(DependencyKind.SECRET, secret))
        return sorted_dependencies(found)

    def aggregate_status(self, obj: Obj, member_statuses: MemberStatuses) -> Obj:
        present = reported(member_statuses)
        if not present:
            return {}
        out: Obj = {}
        put_conditions(out, member_statuses, any_true=frozenset({"Failed"}))
        if jobs := sum_by_name(present, "jobsStatus", JOB_COUNTS):
            out["jobsStatus"] = jobs
        return out

    def health_of(self, observed: Obj) -> Health:
        status = status_of(observed)
        finished = self.finished(status)
        if finished is not None:
            return Health.UNHEALTHY if finished is FinishedPhase.FAILED else Health.HEALTHY
        jobs = status.get("jobsStatus") or ()
        ready = any(as_int((entry or {}).get("ready")) for entry in jobs if isinstance(entry, Mapping))
        return Health.HEALTHY if condition_true(status, "Created") or ready else Health.UNKNOWN

    def finished(self, status: Mapping[str, Any] | None) -> FinishedPhase | None:
        return finished_by_conditions(status, succeeded="Complete")

    def between_runs(self, status: Mapping[str, Any] | None) -> bool:
        """Not finished and no child Job active: suspended, or not started yet."""
        if self.finished(status) is not None:
            return False
        jobs = (status or {}).get("jobsStatus") or ()
        return not any(as_int((entry or {}).get("active")) for entry in jobs if isinstance(entry, Mapping))
