"""The hub's hpa-scale-target-marker: a workload an HPA scales in the members keeps their replicas.

A HorizontalPodAutoscaler propagated with its workload scales each member's copy; the agent's
next apply of the Work would set ``spec.replicas`` back to the hub's division, and the two would
fight. As Karmada's ``hpaScaleTargetMarker`` does, the workload an HPA's ``scaleTargetRef``
names (apiVersion's group, kind and name, in the HPA's namespace) is labelled
``resourcetemplate.karmada.io/retain-replicas: "true"`` while a propagated HPA (one a policy
claimed: it carries the propagation finalizer, and is not being deleted) targets it; the agent
then keeps each member's replicas (:func:`member_agent.manifests.with_member_replicas`).

The label is removed once no such HPA targets the workload (the HPA was deleted, retargeted, or
never claimed) -- but only where this controller set it: it also writes the annotation
``gpufed.io/retain-replicas-by-hpa``, and a label set by hand (without that annotation) is the
user's and stays, as in Karmada, where the agent honours it however it got there.

In: the hub's HPAs and every propagatable workload (informers; an index of HPAs by the workload
they target). Out: the workload's label and annotation, written with a compare-and-swap update.
Level-based and restart-safe: each reconcile reads the workload and the HPAs targeting it now.
"""

from __future__ import annotations

import logging
from collections.abc import Hashable, Iterable
from typing import Any

from controlplane.apis import constants as c
from controlplane.apis.views import ObjectView
from controlplane.controllers.context import ControllerContext
from controlplane.controllers.reconciling import KeyedController
from controlplane.interpreter.registry import group_of
from controlplane.objectclient import WatchEventType, errors

log = logging.getLogger(__name__)

HPA_API_VERSION = "autoscaling/v2"
HPA_KIND = "HorizontalPodAutoscaler"
INDEX_SCALE_TARGET = "scale-target"

#: A workload an HPA may target: namespace, API group, kind, name.
TargetKey = tuple[str, str, str, str]


def scale_target(hpa: dict[str, Any]) -> TargetKey | None:
    """The workload the HPA's ``spec.scaleTargetRef`` names (None when it names none)."""
    view = ObjectView(hpa)
    ref = view.spec.get("scaleTargetRef")
    if not isinstance(ref, dict) or not ref.get("kind") or not ref.get("name"):
        return None
    return (view.namespace, group_of(str(ref.get("apiVersion") or "")), str(ref["kind"]), str(ref["name"]))


def _targets(hpa: dict[str, Any]) -> Iterable[Hashable]:
    target = scale_target(hpa)
    return () if target is None else (target,)


def propagated(hpa: dict[str, Any]) -> bool:
    """Whether a policy claimed the HPA (it goes to the members) and it is not being deleted."""
    view = ObjectView(hpa)
    return c.FINALIZER_WORKLOAD in view.finalizers and not view.is_deleting


def marked(workload: dict[str, Any], *, wanted: bool) -> dict[str, Any] | None:
    """The workload with its label and annotation as ``wanted`` says; None when nothing changes.
    A label the user set (no annotation) is never removed, nor annotated."""
    view = ObjectView(workload)
    labels, annotations = dict(view.labels), dict(view.annotations)
    labelled = labels.get(c.LABEL_RETAIN_REPLICAS) == c.RETAIN_REPLICAS_VALUE
    ours = c.ANNOTATION_RETAIN_REPLICAS_BY_HPA in annotations
    if wanted and not labelled:
        labels[c.LABEL_RETAIN_REPLICAS] = c.RETAIN_REPLICAS_VALUE
        annotations[c.ANNOTATION_RETAIN_REPLICAS_BY_HPA] = "true"
    elif not wanted and ours:
        annotations.pop(c.ANNOTATION_RETAIN_REPLICAS_BY_HPA)
        if labelled:
            labels.pop(c.LABEL_RETAIN_REPLICAS)
    else:
        return None
    return {**workload, "metadata": {**workload["metadata"], "labels": labels, "annotations": annotations}}


class HPAScaleTargetMarker(KeyedController[TargetKey]):
    """Labels the workloads propagated HPAs scale (keys: namespace, group, kind, name)."""

    name = "hpa-scale-target-marker"

    def __init__(self, ctx: ControllerContext) -> None:
        super().__init__(ctx, workers=1)
        self.hpas = ctx.workload_informer(HPA_API_VERSION, HPA_KIND)
        if self.hpas is None:
            return  # the hub serves no HPAs: nothing to mark
        self.hpas.add_index(INDEX_SCALE_TARGET, _targets)
        self.hpas.add_handler(self._on_hpa)
        ctx.add_workload_handler(self._on_workload)

    async def _on_hpa(self, event: WatchEventType, obj: dict[str, Any], old: dict[str, Any] | None) -> None:
        for hpa in (obj, old):
            target = scale_target(hpa) if hpa is not None else None
            if target is not None:
                await self.loop.add(target)

    async def _on_workload(self, event: WatchEventType, obj: dict[str, Any], old: dict[str, Any] | None) -> None:
        if event is WatchEventType.DELETED or self.hpas is None:
            return
        view = ObjectView(obj)
        key = (view.namespace, group_of(view.api_version), view.kind, view.name)
        if c.ANNOTATION_RETAIN_REPLICAS_BY_HPA in view.annotations or self.hpas.index_keys(INDEX_SCALE_TARGET, key):
            await self.loop.add(key)

    async def reconcile(self, key: TargetKey) -> float | None:
        """Label the workload while a propagated HPA targets it; unlabel it when none does."""
        if self.hpas is None:
            return None
        namespace, group, kind, name = key
        rt = next((t for t in self.ctx.workload_types if t.group == group and t.kind == kind), None)
        if rt is None:
            return None  # not a kind the hub propagates
        workload = self.ctx.cached(rt, namespace, name)
        if workload is None or ObjectView(workload).is_deleting:
            return None
        wanted = any(propagated(hpa) for hpa in self.hpas.by_index(INDEX_SCALE_TARGET, key))
        body = marked(workload, wanted=wanted)
        if body is None:
            return None
        try:
            await self.ctx.objects.update(rt, body)
        except errors.NotFound:
            return None
        log.info("%s %s/%s: %s", kind, namespace, name,
                 "scaled by a propagated HPA: members keep their replicas" if wanted
                 else "no propagated HPA scales it any more: members take the hub's replicas")
        return None
