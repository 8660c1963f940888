"""A Pod's ``kubectl get`` cells as kube's ``printPod`` (pkg/printers/internalversion) makes them.

READY counts the ready, running containers and the started, ready sidecars (init containers with
``restartPolicy: Always``) of all the pod's containers and sidecars; STATUS is what is happening to
the pod, in kubectl's words: an init container's failure or wait (``Init:CrashLoopBackOff``,
``Init:ExitCode:1``, ``Init:0/2``), else its containers' states read from the last to the first, so
the first container that says something wins (``CrashLoopBackOff``, ``Error``, ``ExitCode:137``,
``Signal:9``; ``Completed`` with a container still running is ``Running`` or ``NotReady``), else
the status' reason or the phase, ``SchedulingGated`` for a pod kube-scheduler holds,
``Terminating`` for a pod being deleted that has not finished (``Unknown`` on a lost node);
RESTARTS sums the restarts (while the pod initializes, of its init containers) with the time since
the last one (``3 (5m ago)``).

The printer (``kubectl get pods``: :mod:`controlplane.apiserver.podcolumns`) and the pod view of a
workload (`gpufed explain`/`describe`, the hub's pod list: :mod:`controlplane.apis.podview`) both
show a pod's status with :func:`pod_cells`, so they word it alike.

In: a Pod (as stored, or as a member lists it) and "now". Out: strings. Pure: no I/O.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, NamedTuple

from controlplane.apis.durations import human_duration
from controlplane.apis.pods import REASON_SCHEDULING_GATED
from controlplane.apis.timestamps import parse_time_or_none
from controlplane.apis.untyped import Obj, dig, json_int

#: kube's ``NodeUnreachablePodReason``: the node controller's reason for a pod on a lost node.
_NODE_LOST = "NodeLost"
_TERMINAL = ("Succeeded", "Failed")


class PodCells(NamedTuple):
    ready: str
    status: str
    restarts: str
    #: The number RESTARTS shows, as a number.
    restart_count: int = 0


def _mapping(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _items(value: Any) -> list[dict[str, Any]]:
    return [item for item in value if isinstance(item, dict)] if isinstance(value, list) else []


def _restartable(container: dict[str, Any] | None) -> bool:
    """A sidecar: an init container that restarts always (kube's ``IsRestartableInitContainer``)."""
    return container is not None and container.get("restartPolicy") == "Always"


def _last_finished(status: dict[str, Any]) -> datetime | None:
    terminated = _mapping(status.get("lastState")).get("terminated")
    if not isinstance(terminated, dict):
        return None
    return parse_time_or_none(terminated.get("finishedAt"), naive_as_utc=True)


def _later(current: datetime | None, other: datetime | None) -> datetime | None:
    if other is None:
        return current
    return other if current is None or other > current else current


def _condition_true(conditions: list[dict[str, Any]], kind: str) -> bool:
    return any(cond.get("type") == kind and cond.get("status") == "True" for cond in conditions)


def _exit(prefix: str, terminated: dict[str, Any]) -> str:
    """A terminated container without a reason, by its signal or exit code."""
    signal = json_int(terminated.get("signal"))
    return (
        f"{prefix}Signal:{signal}" if signal else f"{prefix}ExitCode:{json_int(terminated.get('exitCode'))}"
    )


def pod_cells(obj: Obj, now: datetime) -> PodCells:
    """READY, STATUS and RESTARTS of a Pod, as kube's ``printPod``."""
    spec, status = _mapping(obj.get("spec")), _mapping(obj.get("status"))
    conditions = _items(status.get("conditions"))
    phase = str(status.get("phase") or "")
    reason = str(status.get("reason") or "") or phase
    if any(
        c.get("type") == "PodScheduled" and c.get("reason") == REASON_SCHEDULING_GATED for c in conditions
    ):
        reason = REASON_SCHEDULING_GATED
    init_specs = _items(spec.get("initContainers"))
    init_by_name = {str(c.get("name")): c for c in init_specs}
    total = len(_items(spec.get("containers"))) + sum(1 for c in init_specs if _restartable(c))
    ready = restarts = sidecar_restarts = 0
    last_restart: datetime | None = None
    last_sidecar_restart: datetime | None = None
    initializing = False
    for index, container in enumerate(_items(status.get("initContainerStatuses"))):
        count = json_int(container.get("restartCount"))
        restarts += count
        finished = _last_finished(container)
        last_restart = _later(last_restart, finished)
        sidecar = _restartable(init_by_name.get(str(container.get("name"))))
        if sidecar:
            sidecar_restarts += count
            last_sidecar_restart = _later(last_sidecar_restart, finished)
        state = _mapping(container.get("state"))
        terminated, waiting = state.get("terminated"), state.get("waiting")
        if isinstance(terminated, dict) and json_int(terminated.get("exitCode")) == 0:
            continue
        if sidecar and container.get("started") is True:
            ready += 1 if container.get("ready") else 0
            continue
        if isinstance(terminated, dict):  # initialization failed
            reason = (
                f"Init:{terminated['reason']}" if terminated.get("reason") else _exit("Init:", terminated)
            )
        elif (
            isinstance(waiting, dict) and waiting.get("reason") and waiting.get("reason") != "PodInitializing"
        ):
            reason = f"Init:{waiting['reason']}"
        else:
            reason = f"Init:{index}/{len(init_specs)}"
        initializing = True
        break
    if not initializing or _condition_true(conditions, "Initialized"):
        restarts, last_restart = sidecar_restarts, last_sidecar_restart
        running = False
        for container in reversed(_items(status.get("containerStatuses"))):
            restarts += json_int(container.get("restartCount"))
            last_restart = _later(last_restart, _last_finished(container))
            state = _mapping(container.get("state"))
            terminated, waiting = state.get("terminated"), state.get("waiting")
            if isinstance(waiting, dict) and waiting.get("reason"):
                reason = str(waiting["reason"])
            elif isinstance(terminated, dict):
                reason = str(terminated["reason"]) if terminated.get("reason") else _exit("", terminated)
            elif container.get("ready") and isinstance(state.get("running"), dict):
                running = True
                ready += 1
        # A pod with a container still running is not done: kube's "back to Running".
        if reason == "Completed" and running:
            reason = "Running" if _condition_true(conditions, "Ready") else "NotReady"
    if dig(obj, "metadata", "deletionTimestamp"):
        if status.get("reason") == _NODE_LOST:
            reason = "Unknown"
        elif phase not in _TERMINAL:
            reason = "Terminating"
    shown = str(restarts)
    if restarts and last_restart is not None:
        shown = f"{restarts} ({human_duration((now - last_restart).total_seconds())} ago)"
    return PodCells(f"{ready}/{total}", reason, shown, restarts)
