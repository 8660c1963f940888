"""The Work applier: makes the member cluster hold exactly what its Works say, and reports back.

In: Work objects (``work.gpufed.io/v1alpha1``, ``spec.workload.manifests`` and
``spec.conflictResolution``), the member's API, the pods that do not run yet
(:class:`~member_agent.podstates.PendingPods`, kept from the agent's pod cache), its watch caches of the
kinds the Works hold (:data:`CachedObject`: a status pass reads them first and asks the member
only for what they lack; an apply always reads the member, see below) and the :class:`Ledger`.
Out: member objects server-side applied with field manager ``gpufed-agent`` and the ownership
labels ``work.gpufed.io/name`` / ``work.gpufed.io/namespace`` (+ ``app.kubernetes.io/managed-by:
gpufed``); objects a Work no longer holds (or of a deleted Work) deleted; and the Work's status
(Applied/Available conditions, per-manifest member status, health and unschedulable pods).

The decisions are pure functions (the manifests' in :mod:`member_agent.manifests`,
:func:`assess_health`, the pod summaries of :mod:`member_agent.podstates`, :func:`work_conditions`); the
:class:`WorkApplier` only performs them.

A ResourceInterpreterCustomization of the kind (:mod:`member_agent.interpreting`) retains the
member's fields before an update of an existing object (``retention``) and makes its manifest
status from the whole member object (``statusReflection``, ``healthInterpretation``; such kinds
are read from the member, not the watch caches' trimmed copies).

A queued job in a member that runs Kueue (its manifest keeps the label
``kueue.x-k8s.io/queue-name``) is created as the Work says (suspended); an update keeps the
member's suspend flag (:func:`~member_agent.manifests.with_member_kueue_suspend`), which is
the member's Kueue's to flip. A Deployment or StatefulSet labelled
``resourcetemplate.karmada.io/retain-replicas: "true"`` keeps the member's ``spec.replicas``
(:func:`~member_agent.manifests.with_member_replicas`): the member's HPA owns them.

Conflict resolution: an existing member object that does not carry this Work's ownership labels
is a conflict. ``Abort`` (the default) leaves it untouched and the Work's Applied condition says
so; ``Overwrite`` takes it over (a forced apply that also sets the ownership labels). Objects
this Work owns are applied with ``force=true``: the Work is the source of truth for the fields
it sets. Pruning deletes only objects that still carry this Work's labels. The ownership
check before an apply reads the live object, never a watch cache: right after a preserved
object was released (its labels removed) the cache may still show it labelled, and a Work
re-created with the same name would then take over an object that is no longer gpufed's.

Deleted Works: their objects are deleted, unless the Work had ``preserveResourcesOnDeletion``
(Karmada's field: the workload was deleted on the hub but must keep running in the member).
Then each object that still carries this Work's labels is *released*: rewritten without
gpufed's ownership labels (:func:`released`), so it is the member's own from then on — the
agent's watches no longer see it, and a later Work naming it meets a foreign object
(``Abort`` leaves it alone). Either way the Work leaves the ledger. The ledger holds the flag
of the generation last applied (or, for a suspended Work, last seen): the hub deletes a Work
whose cluster left the placement only after the agent applied the generation that cleared it,
so a restarted or reconnected agent that finds such a Work gone deletes its objects.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from controlplane.apis import constants as c
from controlplane.apis.untyped import as_int
from controlplane.apis.work_v1alpha1 import ConditionType as WorkConditionType
from controlplane.apis.work_v1alpha1 import Health, WorkReason
from member_agent.assessing import assess_health
from member_agent.claims import ClaimStates
from member_agent.drift import (
    ANNOTATION_DIGESTS,
    CONTENT_DIGEST,
    AppliedVersions,
    annotation_digests,
    content_digest,
)
from member_agent.interpreting import MemberInterpreters
from member_agent.kubeapi import ApiError, Conflict, KindNotServed, KubeTransport, NotFound
from member_agent.ledger import Ledger
from member_agent.manifests import (
    ApplyDecision,
    Identifier,
    conflict_resolution,
    decide_apply,
    desired_manifests,
    owned_by,
    preserves_on_deletion,
    prune_targets,
    released,
    with_member_kueue_suspend,
    with_member_replicas,
    work_key,
)
from member_agent.podstates import (
    ClaimTrouble,
    claims_to_check,
    failed_create_summary,
    no_claim_trouble,
    not_starting_summary,
    storage_wait_summary,
    unschedulable_summary,
)

logger = logging.getLogger(__name__)


#: The spec fields the kinds' health rules read: the replicas asked for, a Service's type (a
#: ClusterIP Service is healthy once applied, a LoadBalancer one once it has an ingress point).
_SPEC_READ = ("replicas", "type")
_METADATA_KEPT = ("name", "namespace", "uid", "generation", "resourceVersion", "labels")


def status_fields(obj: Mapping[str, Any], *, api_version: str, kind: str) -> dict[str, Any]:
    """What a Work status needs of a member object, and all a watch cache keeps of it: its
    identity and versions, labels, the spec fields health rules read (:data:`_SPEC_READ`) and
    status (:func:`work_status` computes the same from this as from the whole object), and what
    tells drift (:mod:`member_agent.drift`). List items carry no kind, so it is given."""
    metadata = obj.get("metadata") or {}
    spec = obj.get("spec")
    trimmed: dict[str, Any] = {
        "apiVersion": api_version,
        "kind": kind,
        "metadata": {key: metadata[key] for key in _METADATA_KEPT if key in metadata},
        "status": obj.get("status") or {},
    }
    if not metadata.get("generation"):
        # What tells an edit in the member of a kind without a generation (drift: member_agent.drift).
        trimmed[CONTENT_DIGEST] = content_digest(obj)
    if metadata.get("annotations"):
        # What tells an edit of the annotations a Work sets (member_agent.drift).
        trimmed[ANNOTATION_DIGESTS] = annotation_digests(obj)
    kept = {key: spec[key] for key in _SPEC_READ if key in spec} if isinstance(spec, Mapping) else {}
    if kept:
        trimmed["spec"] = kept
    return trimmed


def pending_of(
    results: Sequence[ManifestResult], pending_pods: Callable[[str], Iterable[Mapping[str, Any]]]
) -> list[Mapping[str, Any]]:
    """The pending pods of the namespaces the results' member objects live in."""
    namespaces = {str((r.live.get("metadata") or {}).get("namespace") or "") for r in results if r.live}
    return [pod for namespace in sorted(namespaces) for pod in pending_pods(namespace)]


def _no_pending_pods(namespace: str) -> Iterable[Mapping[str, Any]]:
    return ()


@dataclass(slots=True)
class ManifestResult:
    identifier: Identifier
    applied: bool = False
    conflict: bool = False
    error: str | None = None
    live: dict[str, Any] | None = None
    #: The member does not serve the manifest's kind.
    not_served: bool = False


def _condition(
    ctype: WorkConditionType,
    status: str,
    reason: str,
    message: str,
    *,
    generation: int,
    now: str,
    previous: Sequence[Mapping[str, Any]],
) -> dict[str, Any]:
    transition = now
    for old in previous:
        if old.get("type") == ctype and old.get("status") == status and old.get("lastTransitionTime"):
            transition = str(old["lastTransitionTime"])
    return {
        "type": str(ctype),
        "status": status,
        "reason": str(reason),
        "message": message,
        "lastTransitionTime": transition,
        "observedGeneration": generation,
    }


def _listing(items: list[str], limit: int = 5) -> str:
    more = f" and {len(items) - limit} more" if len(items) > limit else ""
    return "; ".join(items[:limit]) + more


def work_conditions(
    results: Sequence[ManifestResult],
    healths: Sequence[Health],
    *,
    generation: int,
    now: str,
    previous: Sequence[Mapping[str, Any]] = (),
) -> list[dict[str, Any]]:
    """The Work's Applied and Available conditions (a transition time kept while a status holds)."""
    applied = _applied(results)
    available = _available(results, healths)
    return [
        _condition(WorkConditionType.APPLIED, *applied, generation=generation, now=now, previous=previous),
        _condition(WorkConditionType.AVAILABLE, *available, generation=generation, now=now, previous=previous),
    ]


def _applied(results: Sequence[ManifestResult]) -> tuple[str, WorkReason, str]:
    """Applied's status, reason and message: unserved kinds first, then conflicts, then failures."""
    conflicts = [r for r in results if r.conflict]
    unserved = [r for r in results if r.not_served]
    failures = [r for r in results if r.error and not r.conflict and not r.not_served]
    also_failed = (
        " | also failed: " + _listing([f"{r.identifier.describe()}: {r.error}" for r in failures]) if failures else ""
    )
    if unserved and not conflicts:
        message = _listing(
            [
                f"{r.identifier.describe()}: the member cluster does not serve {r.identifier.kind} in "
                f"{r.identifier.api_version} (install its CustomResourceDefinition in the member, or keep the "
                "kind off this cluster with the policy's placement)"
                for r in unserved
            ]
        )
        return "False", WorkReason.KIND_NOT_SERVED, message + also_failed
    if conflicts:
        message = _listing(
            [
                f"{r.identifier.describe()} already exists in the member cluster and is not managed by this Work;"
                " conflictResolution is Abort, so it was left untouched"
                for r in conflicts
            ]
        )
        return "False", WorkReason.CONFLICT, message + also_failed
    if failures:
        return "False", WorkReason.APPLY_FAILED, _listing([f"{r.identifier.describe()}: {r.error}" for r in failures])
    return "True", WorkReason.APPLIED, f"all {len(results)} manifest(s) applied"


def _available(results: Sequence[ManifestResult], healths: Sequence[Health]) -> tuple[str, WorkReason, str]:
    """Available's status, reason and message: any unhealthy manifest first, then unknown health."""
    pairs = list(zip(results, healths, strict=True))
    unhealthy = [r.identifier.describe() for r, h in pairs if h == Health.UNHEALTHY]
    unknown = [r.identifier.describe() for r, h in pairs if h == Health.UNKNOWN]
    if unhealthy:
        return "False", WorkReason.UNHEALTHY, "not healthy: " + _listing(unhealthy)
    if unknown:
        return "Unknown", WorkReason.HEALTH_UNKNOWN, "health not known yet: " + _listing(unknown)
    return "True", WorkReason.AVAILABLE, f"all {len(results)} manifest(s) healthy"


def manifest_status(
    result: ManifestResult,
    pods: Iterable[Mapping[str, Any]],
    interpreters: MemberInterpreters | None = None,
    claims: ClaimTrouble = no_claim_trouble,
) -> tuple[dict[str, Any], Health]:
    """One manifest's status: the member object's status and health, by its kind's customization
    (:mod:`member_agent.interpreting`) when one interprets it, else whole and by the agent's rules."""
    own = result.live is not None and not result.conflict
    interpreted = interpreters.interpret(result.live) if interpreters and result.live is not None and own else None
    health = assess_health(result.live) if own else Health.UNKNOWN
    if interpreted is not None and interpreted.health is not None:
        health = interpreted.health
    entry: dict[str, Any] = {"identifier": result.identifier.as_dict(), "health": str(health)}
    if result.live is not None and own:
        entry["status"] = result.live.get("status") or {}
        generation = (result.live.get("metadata") or {}).get("generation")
        if isinstance(generation, int):
            entry["generation"] = generation
        if interpreted is not None and "statusReflection" in interpreted.interpreted_by:
            entry["status"] = dict(interpreted.status or {})
        unschedulable = unschedulable_summary(result.live, pods, claims=claims)
        if unschedulable:
            entry["unschedulable"] = unschedulable
        not_starting = (
            not_starting_summary(result.live, pods)
            or failed_create_summary(result.live)
            or storage_wait_summary(result.live, pods, claims=claims)
        )
        if not_starting:
            entry["notStarting"] = not_starting
    if interpreted is not None:
        if interpreted.interpreted_by:
            entry["interpretedBy"] = interpreted.interpreted_by
        if interpreted.condition is not None:
            entry["conditions"] = [interpreted.condition]
    return entry, health


def work_status(
    work: Mapping[str, Any],
    results: Sequence[ManifestResult],
    pods: Sequence[Mapping[str, Any]],
    *,
    now: str,
    interpreters: MemberInterpreters | None = None,
    claims: ClaimTrouble = no_claim_trouble,
) -> dict[str, Any]:
    """The Work's status from the apply results (ordered by manifest ordinal)."""
    ordered = sorted(results, key=lambda r: r.identifier.ordinal)
    entries = [manifest_status(r, pods, interpreters, claims) for r in ordered]
    generation = as_int((work.get("metadata") or {}).get("generation"), 0)
    previous = (work.get("status") or {}).get("conditions") or []
    return {
        "conditions": work_conditions(
            ordered, [h for _, h in entries], generation=generation, now=now, previous=previous
        ),
        "manifestStatuses": [e for e, _ in entries],
    }


def status_changed(old: Mapping[str, Any] | None, new: Mapping[str, Any]) -> bool:
    """Whether ``new`` differs from ``old`` in anything but condition timestamps."""

    def comparable(status: Mapping[str, Any] | None) -> Any:
        status = dict(status or {})
        status["conditions"] = [
            {k: v for k, v in cond.items() if k != "lastTransitionTime"}
            for cond in status.get("conditions") or []
        ]
        return status

    return bool(comparable(old) != comparable(new))


#: The agent's watch caches, asked before the member is by a status pass (never by an apply,
#: which must not act on a lagging view): the object a (resolved) identifier
#: names as last seen by a synced watch, or None when no cache covers it -- its kind is not
#: watched (or not synced yet), or the watch does not hold it (absent, or not labelled as
#: gpufed's, which only a GET can tell apart).
CachedObject = Callable[[Identifier], Mapping[str, Any] | None]


def _no_cache(_ident: Identifier) -> Mapping[str, Any] | None:
    return None


@dataclass(slots=True)
class WorkApplier:
    """Performs the applier's decisions against the member cluster.

    A status pass reads member objects from ``cached`` when it holds them and fetches only the
    rest, so it costs no request at all over Works whose objects the agent watches. An apply
    reads the live object for its ownership decision.
    """

    member: KubeTransport
    ledger: Ledger
    #: A namespace's pods that no node holds yet (a :class:`PendingPods`).
    pending_pods: Callable[[str], Iterable[Mapping[str, Any]]] = _no_pending_pods
    field_manager: str = c.FIELD_MANAGER_AGENT
    cached: CachedObject = _no_cache
    #: The customizations whose member-side hooks (retention, status reflection, health) run here.
    interpreters: MemberInterpreters | None = None
    #: Why the claims of pods waiting for them are unbound (read for those pods only, cached).
    claims: ClaimStates | None = None
    #: The version each apply answered, per object (:mod:`member_agent.drift`).
    versions: AppliedVersions = field(default_factory=AppliedVersions)
    _namespaces: set[str] = field(default_factory=set)

    def __post_init__(self) -> None:
        if self.claims is None:
            self.claims = ClaimStates(self.member)

    async def _status(self, work: Mapping[str, Any], results: Sequence[ManifestResult], *, now: str) -> dict[str, Any]:
        """The Work's status, after reading the claims its unplaced pods wait for."""
        pods = pending_of(results, self.pending_pods)
        claims = self.claims
        assert claims is not None
        await claims.refresh(claims_to_check(pods))
        return work_status(work, results, pods, now=now, interpreters=self.interpreters, claims=claims)

    async def _live(self, path: str) -> dict[str, Any] | None:
        try:
            return await self.member.get(path)
        except NotFound:
            return None

    async def _current(self, ident: Identifier, path: str) -> dict[str, Any] | None:
        """The member object ``ident`` names: from the watch caches, else from the member."""
        interpreted = self.interpreters is not None and self.interpreters.interprets_status(
            ident.api_version, ident.kind
        )
        known = None if interpreted else self.cached(ident)  # a customization sees the whole object
        if known is not None:
            return dict(known)
        return await self._live(path)

    async def _ensure_namespace(self, namespace: str) -> None:
        if not namespace or namespace in self._namespaces:
            return
        if await self._live(f"/api/v1/namespaces/{namespace}") is None:
            body = {
                "apiVersion": "v1",
                "kind": "Namespace",
                "metadata": {"name": namespace, "labels": {c.LABEL_MANAGED_BY: c.MANAGED_BY_VALUE}},
            }
            try:
                await self.member.create("/api/v1/namespaces", body)
                logger.info("created namespace %s in the member cluster", namespace)
            except ApiError as exc:
                if exc.code != 409:
                    raise
        self._namespaces.add(namespace)

    async def _resolve(self, ident: Identifier) -> tuple[Identifier, str]:
        info = await self.member.resource_info(ident.api_version, ident.kind)
        if info.namespaced and not ident.namespace:
            ident = Identifier(ident.group, ident.version, ident.kind, "default", ident.name, ident.ordinal)
        elif not info.namespaced and ident.namespace:
            ident = Identifier(ident.group, ident.version, ident.kind, "", ident.name, ident.ordinal)
        return ident, info.path(ident.name, ident.namespace or None)

    async def _apply_one(
        self, work: Mapping[str, Any], ident: Identifier, body: dict[str, Any]
    ) -> ManifestResult:
        meta = work.get("metadata") or {}
        work_ns, work_name = str(meta.get("namespace")), str(meta.get("name"))
        result = ManifestResult(identifier=ident)
        try:
            ident, path = await self._resolve(ident)
            result.identifier = ident
            if ident.namespace:
                body["metadata"]["namespace"] = ident.namespace
                if ident.kind != "Namespace":
                    await self._ensure_namespace(ident.namespace)
            live = await self._live(path)  # not the cache: it may lag behind a release
            decision = decide_apply(
                live, work_namespace=work_ns, work_name=work_name, resolution=conflict_resolution(work)
            )
            if decision == ApplyDecision.SKIP_CONFLICT:
                result.conflict = True
                result.error = "exists and is not managed by this Work"
                result.live = live
                return result
            if live is not None:
                body = with_member_replicas(with_member_kueue_suspend(body, live), live)
            if live is not None and self.interpreters is not None:
                body, failure = self.interpreters.retain(body, live)
                if failure is not None:  # the member's object stays as it is; the status says why
                    result.error, result.live = f"not updated: {failure.describe()}", live
                    return result
            result.live = await self.member.apply(path, body, field_manager=self.field_manager, force=True)
            result.applied = True
            self.versions.applied(ident.object_key, result.live, body)
            if ident.kind == "Namespace":
                self._namespaces.add(ident.name)
        except KindNotServed as exc:
            result.error, result.not_served = exc.message, True
            logger.warning("work %s/%s: cannot apply %s: %s", work_ns, work_name, ident.describe(), exc.message)
        except ApiError as exc:
            if exc.code in (0, 429) or exc.code >= 500:
                raise
            result.error = exc.message
            logger.warning(
                "work %s/%s: cannot apply %s: %s", work_ns, work_name, ident.describe(), exc.message
            )
        return result

    async def _delete_owned(self, ident: Identifier, *, work_namespace: str, work_name: str) -> None:
        try:
            ident, path = await self._resolve(ident)
        except NotFound:
            return  # the member no longer serves the kind: nothing of it can exist
        self.versions.forget(ident.object_key)
        live = await self._live(path)
        if live is None or not owned_by(live, work_namespace=work_namespace, work_name=work_name):
            return
        try:
            await self.member.delete(path)
            logger.info("deleted %s (no longer in work %s/%s)", ident.describe(), work_namespace, work_name)
        except NotFound:
            pass
        if ident.kind == "Namespace":
            self._namespaces.discard(ident.name)

    async def reconcile(self, work: Mapping[str, Any], *, now: str) -> dict[str, Any]:
        """Apply the Work, prune what it dropped; return its new status. A kind the member did
        not serve is looked up again (an apply is rare: a new generation, or the periodic resync)."""
        self.member.discovery.recheck()
        key = work_key(work)
        meta = work.get("metadata") or {}
        work_ns, work_name = str(meta.get("namespace")), str(meta.get("name"))
        desired = desired_manifests(work)
        previous = [Identifier.from_dict(i) for i in self.ledger.get(key)]
        targets = prune_targets(previous, [ident for ident, _ in desired])
        preserve = preserves_on_deletion(work)
        self.ledger.set(
            key, [i.as_dict() for i in targets] + [ident.as_dict() for ident, _ in desired], preserve=preserve
        )
        results = [await self._apply_one(work, ident, body) for ident, body in desired]
        for ident in targets:
            await self._delete_owned(ident, work_namespace=work_ns, work_name=work_name)
        self.ledger.set(key, [r.identifier.as_dict() for r in results], preserve=preserve)
        return await self._status(work, results, now=now)

    async def refresh_status(self, work: Mapping[str, Any], *, now: str) -> dict[str, Any]:
        """The Work's status from the member objects as they are now, without applying."""
        meta = work.get("metadata") or {}
        work_ns, work_name = str(meta.get("namespace")), str(meta.get("name"))
        applied = {Identifier.from_dict(i).object_key for i in self.ledger.get(work_key(work))}
        results = []
        for ident, _ in desired_manifests(work):
            result = ManifestResult(identifier=ident)
            try:
                ident, path = await self._resolve(ident)
                result.identifier = ident
                result.live = await self._current(ident, path)
            except KindNotServed as exc:
                result.error, result.not_served = exc.message, True
            except ApiError as exc:
                if exc.code in (0, 429) or exc.code >= 500:
                    raise
                result.error = exc.message
            if result.live is not None and not owned_by(
                result.live, work_namespace=work_ns, work_name=work_name
            ):
                result.conflict = True
                result.error = "exists and is not managed by this Work"
            elif result.not_served:
                pass
            elif result.live is None and result.error is None:
                result.error = (
                    "not found in the member cluster" if ident.object_key in applied else "not applied yet"
                )
            else:
                result.applied = True
            results.append(result)
        return await self._status(work, results, now=now)

    def record_preserve(self, key: str, preserve: bool) -> None:
        """Record a Work's ``preserveResourcesOnDeletion`` as seen now without applying it (a
        suspended Work); nothing is recorded for a Work that never applied anything."""
        if key in self.ledger:
            self.ledger.set(key, self.ledger.get(key), preserve=preserve)

    async def _release_owned(self, ident: Identifier, *, work_namespace: str, work_name: str) -> None:
        """Leave the object running without this Work's ownership labels (a compare-and-swap
        update, retried on a conflict with a fresh read)."""
        try:
            ident, path = await self._resolve(ident)
        except NotFound:
            return
        self.versions.forget(ident.object_key)
        for _ in range(5):
            live = await self._live(path)
            body = released(live, work_namespace=work_namespace, work_name=work_name) if live else None
            if body is None:
                return  # gone, or not this Work's (any more)
            try:
                await self.member.replace(path, body)
            except NotFound:
                return
            except Conflict:
                continue
            logger.info(
                "released %s: kept in the member without the labels of deleted work %s/%s",
                ident.describe(), work_namespace, work_name,
            )
            return
        raise Conflict(409, "Conflict", f"{ident.describe()} kept changing while its labels were being removed")

    async def remove_work(self, key: str, *, preserve: bool | None = None) -> None:
        """Delete every object the ledger records for a Work that no longer exists — or, when the
        Work had ``preserveResourcesOnDeletion`` (``preserve``; None: as the ledger recorded it),
        release them. The ledger forgets the Work either way."""
        work_ns, _, work_name = key.partition("/")
        keep = self.ledger.preserves(key) if preserve is None else preserve
        for ident in prune_targets((Identifier.from_dict(i) for i in self.ledger.get(key)), ()):
            if keep:
                await self._release_owned(ident, work_namespace=work_ns, work_name=work_name)
            else:
                await self._delete_owned(ident, work_namespace=work_ns, work_name=work_name)
        self.ledger.drop(key)
        if keep:
            logger.info("released the objects of deleted work %s (preserveResourcesOnDeletion)", key)
        else:
            logger.info("removed the objects of deleted work %s", key)
