"""The status controller: Work status -> the binding's aggregatedStatus -> the hub workload's status.

In: a binding's Works (their ``Applied`` condition at the current generation and the member
object's status and health the agent reported) and the hub workload. Out:

* the binding's ``status.aggregatedStatus`` — one entry per chosen cluster, in name order:
  ``{clusterName, applied, appliedMessage?, health?, status?}`` — and its ``FullyApplied``
  condition (True when every chosen cluster's Work is applied at its current generation); the
  health is the agent's, or, from an agent that did not report one, the kind's rule (the one the
  agents apply) on what the hub knows of the member's copy: the status reported and the spec the
  Work asks for (:func:`member_object`); an InterpretStatus or InterpretHealth webhook of the
  kind, where the agent ran no customization's script, reflects each member's status or judges
  its health first (:func:`~controlplane.controllers.webhookinterpreting.reflected_by_webhook`);
* the workload's ``.status`` on the hub, merged by its interpreter from the members'
  statuses (a Deployment's ``readyReplicas`` is the sum over members; a kind without replicas
  by its status interpreter, :mod:`controlplane.interpreter.native`, if it has one: a
  DaemonSet's node counts, a Service's load balancer points), keeping the
  conditions the hub itself sets (the detector's ``Propagated``, the scheduler's
  ``Schedulable``). Once the interpreter says the workload finished (Succeeded or Failed),
  its status is final: nothing a member reports afterwards turns it back
  (:func:`~controlplane.interpreter.keep_finished`), and the condition that says so carries the
  hub's time of that write (:func:`~controlplane.interpreter.stamp_finish`).

Only the clusters in ``spec.clusters`` count. A cluster whose replicas were evicted keeps its
Work while its graceful eviction task lasts, but it is left out of both the aggregated status
and the workload's status: its replicas have been replaced elsewhere, so counting them would
count the same replicas twice (a Deployment would show more ready replicas than it asks for).
``kubectl get resourcebinding -o yaml`` still shows the task, and the Work its status.

Both are written only when they change (compare and swap), so a restarted hub or a repeated
reconcile writes nothing. A change to a state in which some chosen cluster is only *waiting*
(its Work not written yet, or its member not reporting the current generation yet) is held
for a while (:class:`WaitingHold`: :data:`WAITING_HOLD_SECONDS`, or longer when members have
lately taken longer to report, up to :data:`MAX_WAITING_HOLD_SECONDS`): the Work's creation
and the member's first report come moments apart, and each would otherwise cost the binding (and the workload) a status
write that the next one replaces at once. A cluster whose member applied the Work but whose
object is not healthy yet (a Deployment's replicas starting) counts as waiting too: most
become healthy within the hold, and the ready state is then the first one written (that hold
starts when the last Work is applied, so a slow Work does not use it up). The next
Work event writes the state it brings; a member that stays silent shows as waiting, and an
object that stays unhealthy shows so, once the hold is over.
"""

from __future__ import annotations

import json
import logging
import statistics
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from controlplane.apis.events import EventType
from controlplane.apis.kube.generation import content_changed
from controlplane.apis.untyped import as_int
from controlplane.apis.views import BindingView, ManifestStatusView, ObjectView, WorkView
from controlplane.apis.work_v1alpha1 import (
    BindingKey,
    ConditionType,
    FullyAppliedReason,
    Health,
    WorkReason,
    binding_name,
)
from controlplane.controllers.context import (
    INDEX_BINDING,
    MAX_WAITING_HOLD_SECONDS,
    WAITING_HOLD_SECONDS,
    ControllerContext,
)
from controlplane.controllers.customizations import INTERPRETED, RIC_API_VERSION, RIC_KIND
from controlplane.controllers.events import EventReason, record_event
from controlplane.controllers.informing import spec_unchanged
from controlplane.controllers.notstarting import (
    MissingDependency,
    dependency_of,
    pods_not_starting_message,
    what_is_said,
)
from controlplane.controllers.reconciling import KeyedController
from controlplane.controllers.webhookinterpreting import (
    MemberAnswers,
    aggregated_by_webhook,
    reflected_by_webhook,
)
from controlplane.controllers.workloads import (
    WorkloadConditionType,
    binding_namespace,
    find_condition,
    is_deleting,
    with_condition,
)
from controlplane.controllers.works import (
    binding_key_of_work,
    cluster_of_namespace,
    main_manifest,
    resource_generation,
    work_manifest,
)
from controlplane.interpreter import interpreter_for, keep_finished, stamp_finish
from controlplane.interpreter.customized import CustomizedInterpreter, hook_of_reason
from controlplane.interpreter.native import StatusInterpreter, status_interpreter_for
from controlplane.interpreter.registry import customized_status_for, group_of
from controlplane.objectclient import WatchEventType

log = logging.getLogger(__name__)

WORK_NOT_WRITTEN = "the Work is not written yet"
WORK_NOT_APPLIED = "the member has not applied the current Work yet"
WAITING_MESSAGES = frozenset({WORK_NOT_WRITTEN, WORK_NOT_APPLIED})


def member_object(
    work: Mapping[str, Any], resource: Mapping[str, Any], status: Mapping[str, Any]
) -> dict[str, Any]:
    """What the hub knows of a member's copy of the workload, as an observed object for the
    kind's health rule: its apiVersion and kind, the spec its Work asks for (when the Work
    carries the manifest) and the status its member reported; no metadata, as the member's
    generation is its own."""
    observed: dict[str, Any] = {
        "apiVersion": resource.get("apiVersion"),
        "kind": resource.get("kind"),
        "status": dict(status),
    }
    spec = (work_manifest(work, resource) or {}).get("spec")
    if isinstance(spec, Mapping):
        observed["spec"] = spec
    return observed


def member_health(
    interpreter: StatusInterpreter, work: Mapping[str, Any], resource: Mapping[str, Any], status: Mapping[str, Any]
) -> Health:
    """A member copy's health judged here: by a customization's ``healthInterpretation`` on the
    status (:meth:`~controlplane.interpreter.customized.CustomizedInterpreter.health`), else by
    the kind's rule on :func:`member_object`."""
    if isinstance(interpreter, CustomizedInterpreter):
        return interpreter.health(status)
    return interpreter.health_of(member_object(work, resource, status))


def aggregate(
    resource: Mapping[str, Any],
    targets: list[Mapping[str, Any]],
    works: Mapping[str, Mapping[str, Any]],
    interpreter: StatusInterpreter | None,
) -> tuple[list[dict[str, Any]], list[tuple[str, Mapping[str, Any] | None]], list[str]]:
    """(aggregatedStatus, (cluster, member status) pairs, clusters not applied yet with why)."""
    items: list[dict[str, Any]] = []
    members: list[tuple[str, Mapping[str, Any] | None]] = []
    pending: list[str] = []
    for target in sorted(targets, key=lambda t: str(t.get("name"))):
        cluster = str(target.get("name"))
        work = works.get(cluster)
        if work is None:
            items.append({"clusterName": cluster, "applied": False, "appliedMessage": WORK_NOT_WRITTEN})
            members.append((cluster, None))
            pending.append(f"{cluster}: Work not written yet")
            continue
        work_view = WorkView(work)
        generation = work_view.generation
        applied_condition = work_view.condition(ConditionType.APPLIED)
        current = applied_condition is not None and applied_condition.get("observedGeneration") in (None, generation)
        applied = bool(current and applied_condition and applied_condition.get("status") == "True")
        item: dict[str, Any] = {"clusterName": cluster, "applied": applied}
        if not applied:
            if applied_condition is None or not current:
                message = WORK_NOT_APPLIED
            else:
                message = str(applied_condition.get("message") or applied_condition.get("reason") or "not applied")
            item["appliedMessage"] = message
            pending.append(f"{cluster}: {message}")
        manifest = main_manifest(work, resource)
        member_status = manifest.get("status") if manifest else None
        health = manifest.get("health") if manifest else None
        if member_status is not None and interpreter is not None and (
            health is None or _judges_health_here(interpreter, manifest)
        ):
            health = str(member_health(interpreter, work, resource, member_status))
        if health:
            item["health"] = str(health)
        if member_status is not None:
            item["status"] = member_status
        items.append(item)
        members.append((cluster, member_status))
    return items, members, pending


def observed_everywhere(
    workload: Mapping[str, Any],
    resource: Mapping[str, Any],
    targets: Sequence[Mapping[str, Any]],
    works: Mapping[str, Mapping[str, Any]],
) -> bool:
    """Whether every chosen cluster reports the status of the workload's current generation: its
    Work was rendered from that generation (:func:`resource_generation`; a Work from before the
    stamp is trusted), its agent applied the Work's current generation, and the member object's
    ``status.observedGeneration`` has reached the member's own generation (an empty status has
    not). Karmada's Deployment aggregation asks the same before it moves ``observedGeneration``;
    until then a rollout client (``kubectl rollout status``) waits for the update to be observed."""
    generation = ObjectView(workload).generation
    for target in targets:
        work = works.get(str(target.get("name")))
        if work is None:
            return False
        stamped = resource_generation(work)
        if stamped is not None and stamped != generation:
            return False
        work_view = WorkView(work)
        applied = work_view.condition(ConditionType.APPLIED)
        if applied is None or applied.get("status") != "True":
            return False
        if applied.get("observedGeneration") not in (None, work_view.generation):
            return False
        entry = main_manifest(work, resource) or {}
        member_generation, status = entry.get("generation"), entry.get("status") or {}
        reports_generation = not status or "observedGeneration" in status
        behind = isinstance(member_generation, int) and as_int(status.get("observedGeneration")) < member_generation
        if reports_generation and behind:
            return False
    return True


def _waiting(item: Mapping[str, Any]) -> bool:
    """Whether an aggregatedStatus entry is a state that usually lasts moments: the Work not
    written or applied yet, or applied with the member's object not healthy yet."""
    if item.get("appliedMessage") in WAITING_MESSAGES:
        return True
    return bool(item.get("applied")) and item.get("health") == Health.UNHEALTHY


def _judges_health_here(interpreter: StatusInterpreter, manifest: Mapping[str, Any] | None) -> bool:
    """Whether the customization's healthInterpretation runs at the hub for this manifest: its
    agent reported the health by its own rules, not by the script (an older agent)."""
    interpreted = ManifestStatusView(manifest).interpreted_by
    return (
        isinstance(interpreter, CustomizedInterpreter)
        and interpreter.has("healthInterpretation")
        and "healthInterpretation" not in interpreted
    )


@dataclass(frozen=True, slots=True)
class AgentInterpretation:
    """What the agents' customization hooks made of the member objects, from the Works."""

    #: Clusters whose status the agent reflected with the customization's statusReflection.
    reflected: frozenset[str]
    #: Cluster → health, where the agent judged it with the customization's healthInterpretation.
    healths: dict[str, str]
    #: (cluster, hook, message, customization generation) of each script that failed at an agent.
    failures: list[tuple[str, str, str, int | None]]


def agent_interpretation(resource: Mapping[str, Any], works: Mapping[str, Mapping[str, Any]]) -> AgentInterpretation:
    reflected: set[str] = set()
    healths: dict[str, str] = {}
    failures: list[tuple[str, str, str, int | None]] = []
    for cluster, work in sorted(works.items()):
        manifest = ManifestStatusView(main_manifest(work, resource))
        interpreted = manifest.interpreted_by
        if "statusReflection" in interpreted:
            reflected.add(cluster)
        if "healthInterpretation" in interpreted and manifest.health:
            healths[cluster] = manifest.health
        for condition in manifest.conditions:
            hook = hook_of_reason(str(condition.get("reason") or ""))
            if condition.get("type") == INTERPRETED and condition.get("status") == "False" and hook is not None:
                generation = condition.get("observedGeneration")
                failures.append((cluster, hook, str(condition.get("message") or ""), generation))
    return AgentInterpretation(frozenset(reflected), healths, failures)


def report_agent_failures(
    interpreter: CustomizedInterpreter,
    resource: Mapping[str, Any],
    failures: list[tuple[str, str, str, int | None]],
    generation_of: Callable[[str], int | None],
) -> None:
    """Hand the scripts that failed at agents to the customization's failure reporting (the
    customizations controller: conditions and Events, once per distinct failure), leaving out
    reports about an earlier generation of the customization (a script since replaced)."""
    obj = {
        "apiVersion": resource.get("apiVersion"),
        "kind": resource.get("kind"),
        "metadata": {"namespace": resource.get("namespace"), "name": resource.get("name")},
    }
    for cluster, hook, message, generation in failures:
        owner = interpreter.custom.owner(hook)
        current = generation_of(owner)
        if generation is not None and current is not None and generation != current:
            continue
        prefix = f"{hook} script of ResourceInterpreterCustomization {interpreter.custom.owner(hook)} failed: "
        interpreter.report_member_failure(hook, f"{message.removeprefix(prefix)} (in cluster {cluster})", obj)


class WaitingHold:
    """How long a waiting status is held back: :data:`WAITING_HOLD_SECONDS`, or as long as the
    recent waits took to end (their upper decile, with a fifth more as margin), capped at
    :data:`MAX_WAITING_HOLD_SECONDS`.

    A wait ends when the binding leaves the waiting state (or moves from *not applied* to
    *replicas starting*). A hold that runs out counts as a wait of twice its length (the wait is
    at least that long, how much longer is not known yet), so a growing backlog lengthens the
    hold before the waits under way have ended. When the hub or the fleet is busy, members report later than the base
    hold, and each waiting state would be written only for the ready state to replace it moments
    later: one binding status write and one watch event per workload, exactly when the hub can
    least afford them. Following the observed waits keeps those writes away; the cap bounds how
    late a member that stays silent is shown waiting."""

    #: How many of the latest waits are remembered.
    WINDOW = 32
    #: Margin over the waits' upper decile.
    MARGIN = 1.2

    def __init__(self, base: float = WAITING_HOLD_SECONDS, cap: float = MAX_WAITING_HOLD_SECONDS) -> None:
        self.base, self.cap = base, max(base, cap)
        self._waits: deque[float] = deque(maxlen=self.WINDOW)
        self._seconds = base

    @property
    def seconds(self) -> float:
        return self._seconds

    def ran_out(self, waited: float) -> None:
        """A hold ran out after ``waited`` seconds, its binding still waiting."""
        self.ended(2 * waited)

    def ended(self, waited: float) -> None:
        """A wait ended after ``waited`` seconds."""
        self._waits.append(max(0.0, waited))
        if len(self._waits) < 2:
            upper = self._waits[0]
        else:
            upper = statistics.quantiles(self._waits, n=10, method="inclusive")[-1]
        self._seconds = min(self.cap, max(self.base, upper * self.MARGIN))


class StatusController(KeyedController[BindingKey]):
    """Reconciles bindings (keys: ``(namespace, name)``) into binding and workload status."""

    name = "status"

    def __init__(self, ctx: ControllerContext) -> None:
        super().__init__(ctx)
        #: Bindings whose status is held while a cluster is waiting: since when (monotonic), whether
        #: every Work was applied then (replicas starting), and whether the hold ran out.
        self._waiting_since: dict[BindingKey, tuple[float, bool, bool]] = {}
        self.hold = WaitingHold(ctx.settings.waiting_hold_seconds, ctx.settings.max_waiting_hold_seconds)
        self.answers = MemberAnswers()  # the status and health webhooks' answers about unchanged reports
        ctx.works.add_handler(self._on_work)
        ctx.bindings.add_handler(self._on_binding)
        ctx.add_workload_handler(self._on_workload)

    async def _on_work(self, event: WatchEventType, obj: dict[str, Any], old: dict[str, Any] | None) -> None:
        key = binding_key_of_work(obj)
        if key is not None:
            await self.loop.add(key)
            if event is not WatchEventType.DELETED:
                await self._note_unserved_kind(key, obj, old)
                await self._note_pods_not_starting(key, obj, old)

    async def _note_pods_not_starting(
        self, key: BindingKey, work: Mapping[str, Any], old: Mapping[str, Any] | None
    ) -> None:
        """A Warning Event on the hub workload when a member starts reporting pods of it that
        were placed but cannot start (a manifest's ``notStarting``), or reports a new reason:
        the member's words, and what to do about an object it lacks (:func:`dependency_of`)."""
        reported = [entry for entry in WorkView(work).manifest_statuses if isinstance(entry.get("notStarting"), Mapping)]
        if not reported:
            return  # the common case, on every Work status write: nothing to compare
        before = {
            _json_key(entry.get("identifier")): entry.get("notStarting")
            for entry in WorkView(old).manifest_statuses
        } if old is not None else {}
        news = [
            entry["notStarting"] for entry in reported
            if what_is_said(entry["notStarting"])
            != what_is_said(before.get(_json_key(entry.get("identifier"))))
        ]
        if not news:
            return
        workload = self._workload_of(key)
        if workload is None:
            return
        cluster = cluster_of_namespace(WorkView(work).namespace) or WorkView(work).namespace
        for stuck in news:
            dependency = dependency_of(stuck)
            on_hub = dependency is None or await self._on_hub(dependency, ObjectView(workload).namespace)
            await record_event(
                self.ctx, workload, type=EventType.WARNING, reason=EventReason.PODS_NOT_STARTING,
                message=pods_not_starting_message(cluster, stuck, on_hub=on_hub),
            )

    async def _on_hub(self, dependency: MissingDependency, namespace: str | None) -> bool:
        """Whether the hub has the object (in the workload's namespace when it is namespaced;
        True when the hub cannot tell: the hint then says how to propagate it)."""
        rt = self.ctx.registry.for_kind(dependency.api_version, dependency.kind)
        if rt is None or (rt.namespaced and not namespace):
            return True
        return await self.ctx.get(rt, namespace if rt.namespaced else None, dependency.name) is not None

    def _workload_of(self, key: BindingKey) -> dict[str, Any] | None:
        resource = BindingView(self.ctx.bindings.get(*key)).resource
        informer = self.ctx.workload_informer(str(resource.get("apiVersion")), str(resource.get("kind")))
        return informer.get(resource.get("namespace"), str(resource.get("name"))) if informer else None

    async def _note_unserved_kind(
        self, key: BindingKey, work: Mapping[str, Any], old: Mapping[str, Any] | None
    ) -> None:
        """A Warning Event on the hub workload when a member starts reporting that it does not
        serve the workload's kind (the Work's ``Applied=False`` reason ``KindNotServed``)."""
        condition = WorkView(work).condition(ConditionType.APPLIED)
        before = WorkView(old).condition(ConditionType.APPLIED)
        if condition is None or condition.get("reason") != WorkReason.KIND_NOT_SERVED:
            return
        if before is not None and before.get("reason") == WorkReason.KIND_NOT_SERVED:
            return
        workload = self._workload_of(key)
        if workload is None:
            return
        cluster = cluster_of_namespace(WorkView(work).namespace)
        await record_event(
            self.ctx, workload, type=EventType.WARNING, reason=EventReason.KIND_NOT_SERVED,
            message=f"cluster {cluster}: {condition.get('message')}",
        )

    async def _on_binding(self, event: WatchEventType, obj: dict[str, Any], old: dict[str, Any] | None) -> None:
        if event is WatchEventType.DELETED:
            return
        if spec_unchanged(old, obj, event):
            return
        meta = obj["metadata"]
        await self.loop.add((str(meta.get("namespace")), str(meta["name"])))

    async def _on_workload(self, event: WatchEventType, obj: dict[str, Any], old: dict[str, Any] | None) -> None:
        if event is WatchEventType.DELETED:
            return
        if event is WatchEventType.MODIFIED and old is not None and not content_changed(old, obj):
            return
        meta = obj["metadata"]
        key = (binding_namespace(meta.get("namespace")), binding_name(str(meta["name"]), str(obj.get("kind"))))
        if self.ctx.bindings.get(*key) is None:
            return  # not propagated (yet): the binding's own events bring the status here
        await self.loop.add(key)

    async def reconcile(self, key: BindingKey) -> float | None:
        ctx = self.ctx
        binding = ctx.bindings.get(key[0], key[1])  # cached: the status write is a compare-and-swap
        if binding is None or is_deleting(binding):
            self._waiting_since.pop(key, None)
            return None
        view = BindingView(binding)
        targets = view.spec.get("clusters")
        if targets is None:
            return None
        resource = view.resource
        api_version, kind = str(resource.get("apiVersion")), str(resource.get("kind"))
        interpreter = interpreter_for(api_version, kind)
        folding = interpreter or customized_status_for(api_version, kind) or status_interpreter_for(
            group_of(api_version), kind
        )
        works: dict[str, dict[str, Any]] = {}
        for work in ctx.works.by_index(INDEX_BINDING, key):
            cluster = cluster_of_namespace(str(work["metadata"].get("namespace") or ""))
            if cluster is not None:
                works[cluster] = work
        works = await reflected_by_webhook(ctx, resource, works, self.answers)  # where the agent ran no script for them
        items, members, pending = aggregate(resource, list(targets), works, folding)
        interpreted = None
        if isinstance(folding, CustomizedInterpreter):
            interpreted = agent_interpretation(resource, works)
            report_agent_failures(folding, resource, interpreted.failures, self._customization_generation)
        hold = self._hold(key, items)
        if hold is not None:
            return hold
        await self._write_binding_status(binding, items, pending, len(targets))
        if await aggregated_by_webhook(ctx, resource, items):  # Karmada's precedence: before the interpreter
            return None
        if folding is not None:
            await self._write_workload_status(
                api_version, kind, resource, folding, members, interpreted, targets=targets, works=works
            )
        return None

    def _customization_generation(self, name: str) -> int | None:
        rt = self.ctx.registry.for_kind(RIC_API_VERSION, RIC_KIND)
        found = self.ctx.cached(rt, None, name) if rt is not None else None
        generation = ObjectView(found).generation
        return int(generation) if generation is not None else None

    def _hold(self, key: BindingKey, items: list[dict[str, Any]]) -> float | None:
        """Seconds to hold the status back while a cluster is only waiting; None: write now."""
        now = time.monotonic()
        if not any(_waiting(item) for item in items):
            ended = self._waiting_since.pop(key, None)
            if ended is not None:
                self.hold.ended(now - ended[0])
            return None
        starting = not any(item.get("appliedMessage") in WAITING_MESSAGES for item in items)
        since, was_starting, ran_out = self._waiting_since.get(key, (now, starting, False))
        if starting and not was_starting:
            self.hold.ended(now - since)
            since, ran_out = now, False  # every Work applied: the replicas' start gets a hold of its own
        left = self.hold.seconds - (now - since)
        if left <= 0 and not ran_out:
            # A wait at least this long: while members fall further behind (a growing backlog),
            # the waits that ended are shorter than those under way, and the hold learns late.
            self.hold.ran_out(now - since)
            ran_out = True
        self._waiting_since[key] = (since, starting, ran_out)
        return left if left > 0 else None

    def idle_horizon(self) -> float:
        """How far ahead a held binding counts as work to do (the controller manager's idle)."""
        return self.hold.seconds

    async def _write_binding_status(
        self, binding: dict[str, Any], items: list[dict[str, Any]], pending: list[str], total: int
    ) -> None:
        ctx = self.ctx
        status = dict(binding.get("status") or {})  # its conditions and aggregatedStatus are replaced, not changed
        if pending or not total:
            shown = "; ".join(pending[:5]) + (f" and {len(pending) - 5} more" if len(pending) > 5 else "")
            condition = {
                "type": str(ConditionType.FULLY_APPLIED),
                "status": "False",
                "reason": str(FullyAppliedReason.NOT_FULLY_APPLIED),
                "message": f"{total - len(pending)}/{total} Work(s) applied" + (f": {shown}" if shown else ""),
            }
        else:
            condition = {
                "type": str(ConditionType.FULLY_APPLIED),
                "status": "True",
                "reason": str(FullyAppliedReason.SUCCESS),
                "message": f"all {total} Work(s) applied",
            }
        status["conditions"] = with_condition(status.get("conditions"), condition, now=ctx.now_text())
        status["aggregatedStatus"] = items
        if status != BindingView(binding).status:
            await ctx.objects.update_status(ctx.binding_rt, {**binding, "status": status})

    async def _write_workload_status(
        self,
        api_version: str,
        kind: str,
        resource: Mapping[str, Any],
        interpreter: StatusInterpreter,
        members: list[tuple[str, Mapping[str, Any] | None]],
        interpreted: AgentInterpretation | None = None,
        *,
        targets: Sequence[Mapping[str, Any]],
        works: Mapping[str, Mapping[str, Any]],
    ) -> None:
        ctx = self.ctx
        informer = ctx.workload_informer(api_version, kind)
        rt = informer.rt if informer is not None else None  # the version watched, its objects' own
        if rt is None or informer is None or not rt.has_status:
            return
        workload = informer.get(resource.get("namespace"), str(resource.get("name")))
        if workload is None or is_deleting(workload):
            return
        if resource.get("uid") and ObjectView(workload).metadata.get("uid") != resource.get("uid"):
            return  # the binding still describes an earlier object of that name
        current = workload.get("status") or {}
        if isinstance(interpreter, CustomizedInterpreter) and interpreted is not None:
            folded = interpreter.aggregate_status(
                workload, members, reflected=interpreted.reflected, healths=interpreted.healths
            )
        else:
            folded = interpreter.aggregate_status(workload, members)
        if "observedGeneration" in folded and not observed_everywhere(workload, resource, targets, works):
            folded = {k: v for k, v in folded.items() if k != "observedGeneration"}
            if current.get("observedGeneration") is not None:  # the generation the members last all ran
                folded["observedGeneration"] = current["observedGeneration"]
        aggregated = keep_finished(interpreter, current, folded)
        if aggregated is current:
            return  # finished: final
        aggregated = stamp_finish(interpreter, aggregated, now=ctx.now_text())
        merged: dict[str, Any] = dict(aggregated)
        for ctype in WorkloadConditionType:  # the hub's own conditions stay
            own = find_condition(current.get("conditions"), ctype)
            if own is not None:
                merged["conditions"] = [*(merged.get("conditions") or []), dict(own)]
        # Compared as it would be stored: a CRD's status defaults (a RayJob's succeeded and failed)
        # the members may not report are in the stored status, and an update would change nothing.
        stored = rt.status_defaults(merged) if rt.status_defaults is not None else merged
        if stored == current:
            return
        await ctx.objects.update_status(rt, {**workload, "status": stored})  # the store copies the status


def _json_key(value: Any) -> str:
    return json.dumps(value, sort_keys=True)
