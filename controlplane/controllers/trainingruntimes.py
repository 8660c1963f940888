"""The hub's TrainingRuntimes and ClusterTrainingRuntimes, as the detector reads them to place a
TrainJob (:mod:`controlplane.interpreter.trainjob`) and Kueue admission to build its Workload's
pod sets (:func:`controlplane.admission.objects.trainjob_pod_sets`), each with its own watch.

A TrainJob's replicas, GPUs and pod template are its runtime's: :class:`TrainingRuntimes` watches
both kinds; :meth:`TrainingRuntimes.resolved` gives the copy of a TrainJob the interpreter reads
(with its runtime, :func:`~controlplane.apis.trainer_runtime.with_runtime`) and
:meth:`TrainingRuntimes.missing` the words for a runtime the hub does not have (the trainer's
webhook refuses such a TrainJob, but its runtime may be deleted afterwards). A runtime created,
replaced or deleted queues the TrainJobs that name it (those of its namespace for a
TrainingRuntime, all for a ClusterTrainingRuntime), so their bindings follow it.

In: the controller context's informers. Out: TrainJob copies; TrainJobs queued. No writes.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from controlplane.apis import trainer
from controlplane.apis.trainer_runtime import resolved
from controlplane.apis.views import ObjectView
from controlplane.controllers.context import ControllerContext, not_listed
from controlplane.controllers.informing import Informer
from controlplane.gojson import go_quote
from controlplane.objectclient import WatchEventType

#: Called with a TrainJob whose runtime changed.
Requeue = Callable[[dict[str, Any]], Awaitable[None]]
#: A workload as the interpreter should read it (:meth:`TrainingRuntimes.resolved`).
Resolve = Callable[[dict[str, Any]], dict[str, Any]]


class TrainingRuntimes:
    """The runtimes the hub holds, by kind, namespace and name."""

    def __init__(self, ctx: ControllerContext, requeue: Requeue) -> None:
        self.ctx = ctx
        self._requeue = requeue
        self._informers: dict[str, Informer] = {}
        for kind in trainer.RUNTIME_PLURALS:
            rt = ctx.watch_kind(trainer.API_VERSION, kind, self._on_runtime)
            if rt is not None:
                self._informers[kind] = ctx.informer(rt)

    def _lookup(self, kind: str, namespace: str | None, name: str) -> Mapping[str, Any] | None:
        informer = self._informers.get(kind)
        return informer.get(namespace, name) if informer is not None else None

    def runtime_of(self, trainjob: Mapping[str, Any]) -> Mapping[str, Any] | None:
        """The runtime ``trainjob`` names, None when the hub does not have it."""
        return trainer.named_runtime(trainjob, self._lookup)

    def unlisted(self, workload: Mapping[str, Any]) -> bool:
        """Whether ``workload`` is a TrainJob whose runtime's informer has not listed yet: its
        runtime's absence says nothing until it has."""
        ref = trainer.runtime_ref(dict(workload))
        return trainer.is_train_job(workload) and not_listed(self._informers.get(ref.kind))

    def missing(self, workload: Mapping[str, Any]) -> str | None:
        """For a TrainJob whose runtime the hub does not have: why it cannot be placed; else None."""
        if not trainer.is_train_job(workload) or self.runtime_of(workload) is not None:
            return None
        ref = trainer.runtime_ref(dict(workload))
        where = "" if ref.cluster_scoped else f" in namespace {ObjectView(workload).namespace}"
        return (f"{ref.kind}.{ref.api_group} {go_quote(ref.name)} not found{where}: the TrainJob's nodes, GPUs and pod "
                "template are its runtime's; it is placed once the runtime exists")

    def resolved(self, workload: dict[str, Any]) -> dict[str, Any]:
        """``workload`` as the interpreter should read it: a TrainJob with its runtime, anything else as it is."""
        return resolved(workload, self._lookup)

    async def _on_runtime(self, event: WatchEventType, obj: dict[str, Any], old: dict[str, Any] | None) -> None:
        if event is WatchEventType.MODIFIED and old is not None and old.get("spec") == obj.get("spec"):
            return
        informer = self.ctx.workload_informer(trainer.API_VERSION, trainer.TRAIN_JOB)
        if informer is None:
            return
        view = ObjectView(obj)
        cluster_scoped = obj.get("kind") == trainer.CLUSTER_TRAINING_RUNTIME
        for trainjob in informer.items():
            ref = trainer.runtime_ref(trainjob)
            if (ref.kind, ref.name) != (obj.get("kind"), view.name):
                continue
            if cluster_scoped or ObjectView(trainjob).namespace == view.namespace:
                await self._requeue(trainjob)
