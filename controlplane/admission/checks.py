"""Kueue's admission checks: a Workload holding quota is admitted only once every check of its
ClusterQueue is Ready.

In: a ClusterQueue (wire dict, stored at v1beta1: ``spec.admissionChecks`` and
``spec.admissionChecksStrategy``), the AdmissionChecks the hub serves, and a Workload's
``status.admissionChecks`` (the state of each check, set by the check's controller). Out, as
Kueue's workload controller and ClusterQueue cache decide them:

* :func:`check_names`: the checks a Workload must pass for the flavors it was given
  (``AdmissionChecksForWorkload``: a rule with ``onFlavors`` applies when one of them was given);
* :func:`synced_states`: its states with each such check added as ``Pending`` and the others
  dropped, sorted by name (``syncAdmissionCheckConditions``);
* :func:`admitted_condition`: its ``Admitted`` condition when it must change (``SyncAdmittedCondition``);
* :func:`verdict`: whether a check says to evict and requeue it (``Retry``) or to deactivate it
  (``Rejected``), with Kueue's reasons and messages;
* :func:`reset_on_eviction`: the states an eviction leaves (``Pending``, "Reset to Pending
  after eviction. Previously: Retry");
* :func:`unusable_checks`: the checks a ClusterQueue names that do not exist or are not
  ``Active`` (the queue is inactive until they are);
* :func:`start_pod_template` / :func:`restore_pod_template`: one pod set's template as its job
  starts (its flavor's node labels and the Ready checks' ``podSetUpdates`` merged in, Kueue's
  ``podset.Merge``; a conflicting key is an error) and as it is restored when stopped (every pod
  set of a job: :mod:`controlplane.admission.podsets`).

Pure: times come in as RFC 3339 text.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from controlplane.apis import kueue_v1beta1 as kueue
from controlplane.apis.kueue_views import ClusterQueueView, WorkloadView, pod_set_assignments

PENDING: Final = "Pending"
READY: Final = "Ready"
RETRY: Final = "Retry"
REJECTED: Final = "Rejected"

#: The eviction reason of a check in ``Retry`` (Kueue's ``WorkloadEvictedByAdmissionCheck``).
REASON_ADMISSION_CHECK: Final = "AdmissionCheck"
RETRY_MESSAGE: Final = "At least one admission check is false"
#: The eviction reason of a Workload deactivated by a ``Rejected`` check.
REASON_DEACTIVATED: Final = "DeactivatedDueToAdmissionCheck"
#: The Event of a deactivation by a ``Rejected`` check.
EVENT_REJECTED: Final = "AdmissionCheckRejected"
#: The ``Finished`` reason of a Workload whose job cannot start (a ``podSetUpdates`` conflict).
REASON_FAILED_TO_START: Final = "FailedToStart"


def _rules(cluster_queue: Mapping[str, Any]) -> dict[str, frozenset[str]]:
    """Check name → the flavors it applies to (empty: all), in the order the queue names them."""
    view = ClusterQueueView(cluster_queue)
    rules: dict[str, frozenset[str]] = {str(name): frozenset() for name in view.admission_check_names}
    for rule in view.admission_check_rules:
        if isinstance(rule, Mapping) and rule.get("name"):
            rules[str(rule["name"])] = frozenset(str(f) for f in rule.get("onFlavors") or ())
    return rules


def named_checks(cluster_queue: Mapping[str, Any]) -> list[str]:
    """Every check a ClusterQueue names, for any flavor."""
    return list(_rules(cluster_queue))


def check_names(cluster_queue: Mapping[str, Any], admission: Mapping[str, Any] | None) -> set[str]:
    """The checks a Workload admitted with ``admission`` (its ``status.admission``) must pass."""
    given = {
        str(flavor)
        for psa in pod_set_assignments(admission)
        for flavor in (psa.get("flavors") or {}).values()
    }
    return {name for name, on in _rules(cluster_queue).items() if not on or on & given}


def states_of(workload: Mapping[str, Any]) -> list[dict[str, Any]]:
    return [dict(s) for s in WorkloadView(workload).admission_checks if isinstance(s, Mapping)]


def synced_states(states: Sequence[Mapping[str, Any]], names: Iterable[str], *, now: str) -> list[dict[str, Any]]:
    """``states`` with each of ``names`` missing added as Pending and the others dropped, by name."""
    wanted = set(names)
    kept = {str(s.get("name")): dict(s) for s in states if s.get("name") in wanted}
    for name in wanted - kept.keys():
        kept[name] = {"name": name, "state": PENDING, "lastTransitionTime": now, "message": ""}
    return [kept[name] for name in sorted(kept)]


def all_ready(states: Iterable[Mapping[str, Any]]) -> bool:
    return all(s.get("state") == READY for s in states)


def admitted_condition(workload: Mapping[str, Any], states: Sequence[Mapping[str, Any]]) -> dict[str, str] | None:
    """The ``Admitted`` condition of a Workload that holds quota, when it must change: True once
    every check is Ready, False (``UnsatisfiedChecks``) when an admitted one has a check that is
    not; None when it stays as it is."""
    admitted = any(
        c.get("type") == kueue.COND_ADMITTED and c.get("status") == "True"
        for c in (workload.get("status") or {}).get("conditions") or ()
    )
    ready = all_ready(states)
    if admitted == ready:
        return None
    if ready:
        return {"type": kueue.COND_ADMITTED, "status": "True", "reason": kueue.REASON_ADMITTED,
                "message": "The workload is admitted"}
    return {"type": kueue.COND_ADMITTED, "status": "False", "reason": "UnsatisfiedChecks",
            "message": "The workload has not all checks ready"}


@dataclass(frozen=True)
class Verdict:
    """What the checks say of a Workload holding quota: evict it and requeue it (``deactivate``
    False), or evict and deactivate it; ``reason`` and ``message`` are its eviction's."""

    deactivate: bool
    reason: str
    message: str
    event_message: str = ""
    """The Event of a deactivation (Kueue's ``AdmissionCheckRejected``)."""
    requeue_after: int = 0
    """Seconds before a Workload evicted by ``Retry`` is queued again: the most any check in
    ``Retry`` asks (``requeueAfterSeconds``); 0: at once."""


def verdict(states: Sequence[Mapping[str, Any]]) -> Verdict | None:
    """Rejected (any check): deactivate; else Retry (any check): evict and requeue; else None."""
    rejected = [s for s in states if s.get("state") == REJECTED]
    if rejected:
        why = f"Admission check(s): {','.join(str(s.get('name')) for s in rejected)}, were rejected"
        first = rejected[0]
        return Verdict(
            True, REASON_DEACTIVATED, f"The workload is deactivated due to {why}",
            f"Deactivating workload because AdmissionCheck for {first.get('name')} was Rejected: {first.get('message', '')}",
        )
    retry = [s for s in states if s.get("state") == RETRY]
    if retry:
        after = max((s["requeueAfterSeconds"] for s in retry if isinstance(s.get("requeueAfterSeconds"), int)), default=0)
        return Verdict(False, REASON_ADMISSION_CHECK, RETRY_MESSAGE, requeue_after=max(after, 0))
    return None


def reset_on_eviction(states: Sequence[Mapping[str, Any]], *, now: str) -> list[dict[str, Any]]:
    """The states after an eviction: each that is not Pending becomes Pending (a Retry counts in
    ``retryCount``), as Kueue's ``resetChecksOnEviction``."""
    out: list[dict[str, Any]] = []
    for s in states:
        if s.get("state") == PENDING:
            out.append(dict(s))
            continue
        reset: dict[str, Any] = {
            "name": s.get("name"), "state": PENDING, "lastTransitionTime": now,
            "message": f"Reset to Pending after eviction. Previously: {s.get('state')}",
        }
        if s.get("requeueAfterSeconds") is not None:
            reset["requeueAfterSeconds"] = s["requeueAfterSeconds"]
        if s.get("state") == RETRY:
            count = s.get("retryCount")
            reset["retryCount"] = (count if isinstance(count, int) else 0) + 1
        out.append(reset)
    return out


def is_active(check: Mapping[str, Any]) -> bool:
    """Whether an AdmissionCheck's controller set it ``Active=True``."""
    return any(
        c.get("type") == kueue.COND_ACTIVE and c.get("status") == "True"
        for c in (check.get("status") or {}).get("conditions") or ()
    )


def unusable_checks(cluster_queue: Mapping[str, Any], checks: Mapping[str, Mapping[str, Any]]) -> tuple[list[str], list[str]]:
    """(missing, inactive): the checks a ClusterQueue names that do not exist, and those whose
    controller has not set them Active; ``checks``: the AdmissionChecks by name."""
    names = named_checks(cluster_queue)
    missing = [n for n in names if n not in checks]
    inactive = [n for n in names if n in checks and not is_active(checks[n])]
    return missing, inactive


def waiting_on(states: Sequence[Mapping[str, Any]]) -> str:
    """The checks a Workload waits on, in words: ``x (Pending: message), y (Retry)``."""
    parts = []
    for s in states:
        if s.get("state") == READY:
            continue
        message = s.get("message") or ""
        parts.append(f"{s.get('name')} ({s.get('state')}{': ' + message if message else ''})")
    return ", ".join(parts)


# --- podSetUpdates ------------------------------------------------------------------------------

_MAPS: Final = (("annotations", True), ("labels", True), ("nodeSelector", False))
"""The maps of a pod template an update merges into: (field, in the template's metadata)."""


class PodSetUpdateConflict(ValueError):
    """Kueue's ``ErrInvalidPodSetUpdate``: an update sets a key the template (or the flavor, or
    another check) sets to another value; the job fails to start."""


def _conflict(field: str, mine: Mapping[str, Any], theirs: Mapping[str, Any]) -> None:
    for key, value in mine.items():
        if key in theirs and theirs[key] != value:
            raise PodSetUpdateConflict(
                f"invalid admission check PodSetUpdate: conflict for {field}: "
                f"conflict for key={key}, value1={value}, value2={theirs[key]}"
            )


def _merge(info: dict[str, Any], update: Mapping[str, Any]) -> None:
    """Kueue's ``PodSetInfo.Merge``: maps merged (a key set to another value is a conflict),
    tolerations appended unless already there."""
    for field, _ in _MAPS:
        _conflict(field, info.get(field) or {}, update.get(field) or {})
    for field, _ in _MAPS:
        if update.get(field):
            info[field] = {**(update.get(field) or {}), **(info.get(field) or {})}
    tolerations = list(info.get("tolerations") or [])
    for t in update.get("tolerations") or ():
        if t not in tolerations:
            tolerations.append(t)
    if tolerations:
        info["tolerations"] = tolerations


def pod_set_info(template: Mapping[str, Any]) -> dict[str, Any]:
    """A pod template's labels, annotations, nodeSelector and tolerations (Kueue's ``PodSetInfo``);
    the empty ones left out."""
    meta, spec = template.get("metadata") or {}, template.get("spec") or {}
    info: dict[str, Any] = {field: dict((meta if in_meta else spec).get(field) or {}) for field, in_meta in _MAPS}
    info["tolerations"] = [dict(t) for t in spec.get("tolerations") or ()]
    return {k: v for k, v in info.items() if v}


def start_pod_template(
    template: Mapping[str, Any], pod_set: str, node_labels: Mapping[str, str], states: Sequence[Mapping[str, Any]],
) -> dict[str, Any]:
    """The pod template of pod set ``pod_set`` as its job starts: the flavor's ``node_labels``
    and every Ready check's ``podSetUpdates`` for that pod set merged in (Kueue's
    ``getPodSetsInfoFromStatus`` then ``podset.Merge``). Raises :class:`PodSetUpdateConflict`."""
    info: dict[str, Any] = {"nodeSelector": dict(node_labels)} if node_labels else {}
    for state in states:
        for update in state.get("podSetUpdates") or ():
            if isinstance(update, Mapping) and update.get("name") == pod_set:
                try:
                    _merge(info, update)
                except PodSetUpdateConflict as err:
                    raise PodSetUpdateConflict(f"in admission check {state.get('name')!r}: {err}") from None
    merged = pod_set_info(template)
    _merge(merged, info)
    return _with_info(template, merged)


def _with_info(template: Mapping[str, Any], info: Mapping[str, Any]) -> dict[str, Any]:
    out = {**template, "metadata": dict(template.get("metadata") or {}), "spec": dict(template.get("spec") or {})}
    for field, in_meta in (*_MAPS, ("tolerations", False)):
        part = out["metadata"] if in_meta else out["spec"]
        if info.get(field):
            part[field] = copy.deepcopy(info[field])
        else:
            part.pop(field, None)
    if not out["metadata"]:
        out.pop("metadata")
    return out


def restore_pod_template(template: Mapping[str, Any], original: Mapping[str, Any]) -> dict[str, Any]:
    """``template`` with the labels, annotations, nodeSelector and tolerations of ``original``
    (the Workload's pod set, as the job was queued): Kueue's ``RestorePodSpec`` on stop."""
    return _with_info(template, pod_set_info(original))
