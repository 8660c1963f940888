"""The simulated kubelet: what happens to a pod after the scheduler binds it.

A bound pod becomes Running and Ready after the profile's start-up delay. Pods that
run to completion -- ``restartPolicy`` Never or OnFailure (Job and Kubeflow training
job pods), or a RayJob's head -- finish after their duration: the pod annotation
``sim.gpufed.io/duration`` (``300s``, ``5m``, ``1h30m`` or plain seconds), else the
profile's ``jobDurationSeconds``. They end Succeeded, or Failed when the annotation
``sim.gpufed.io/exit-code`` is non-zero. Pods with ``restartPolicy: Always`` run until
deleted. Each pod's GPU utilization is its ``sim.gpufed.io/gpu-utilization``
annotation (a 0-1 ratio), else a draw from the profile's distribution.

A pod whose volumes or environment name a ConfigMap or Secret the member does not have (or a
key it lacks), not ``optional``, does not start, as on a real node: it stays Pending,
``ContainerCreating`` while a volume cannot be mounted (event ``FailedMount``) or
``CreateContainerConfigError`` while a container's environment cannot be built (event
``Failed``), looked at again on a doubling backoff, and starts once the object is there
(:func:`start_blocked`).

In: a pod dict, when it was bound and started (simulated seconds), and "now".
Out: the pod's next ``status`` (or None: nothing to do yet) and when to look again.
Pure: the runtime loop in :mod:`simulator.cluster` does the writes.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from controlplane.apis.constants import ANNOTATION_SIM_DURATION, ANNOTATION_SIM_GPU_UTILIZATION
from controlplane.apis.durations import duration_seconds
from controlplane.interpreter.dependencies import DependencyKind, Reference, pod_spec_references
from simulator.clock import parse_rfc3339, rfc3339
from simulator.controllers.rayjob import ANNOTATION_RUN_TO_COMPLETION

#: A non-zero value makes a run-to-completion pod end Failed with that exit code.
ANNOTATION_SIM_EXIT_CODE: Final = "sim.gpufed.io/exit-code"
#: When a pod that cannot start yet is looked at again (simulated seconds): kubelet retries
#: its volume mounts and container configuration on a doubling backoff, capped.
START_RETRY_SECONDS: Final = 5.0
START_RETRY_CAP_SECONDS: Final = 300.0
#: The kinds the kubelet reads before it starts a pod's containers.
STARTUP_KINDS: Final = (DependencyKind.CONFIG_MAP, DependencyKind.SECRET)

def parse_duration(text: str) -> float:
    """``300s``, ``5m``, ``1h30m``, ``1.5h`` or ``300`` as seconds; ValueError otherwise."""
    value = text.strip()
    if not value:
        raise ValueError("empty duration")
    try:
        seconds = float(value)
    except ValueError:
        pass
    else:
        if seconds < 0:
            raise ValueError(f"negative duration {text!r}")
        return seconds
    total = duration_seconds(value)
    if total is None:
        raise ValueError(f"{text!r} is not a duration (e.g. 300s, 5m, 1h30m)")
    return total


def _annotations(pod: Mapping[str, Any]) -> Mapping[str, str]:
    return (pod.get("metadata") or {}).get("annotations") or {}


def runs_to_completion(pod: Mapping[str, Any]) -> bool:
    restart = (pod.get("spec") or {}).get("restartPolicy") or "Always"
    return restart != "Always" or _annotations(pod).get(ANNOTATION_RUN_TO_COMPLETION) == "true"


def pod_duration(pod: Mapping[str, Any], default: float) -> float:
    raw = _annotations(pod).get(ANNOTATION_SIM_DURATION)
    if raw is None:
        return default
    try:
        return parse_duration(str(raw))
    except ValueError:
        return default


def annotated_utilization(pod: Mapping[str, Any]) -> float | None:
    raw = _annotations(pod).get(ANNOTATION_SIM_GPU_UTILIZATION)
    if raw is None:
        return None
    try:
        value = float(str(raw).strip().removesuffix("%")) / (100 if str(raw).strip().endswith("%") else 1)
    except ValueError:
        return None
    return min(1.0, max(0.0, value))


def exit_code(pod: Mapping[str, Any]) -> int:
    try:
        return int(_annotations(pod).get(ANNOTATION_SIM_EXIT_CODE, 0))
    except ValueError:
        return 1


@dataclass(frozen=True, slots=True)
class KubeletTimes:
    """What the kubelet remembers about one pod (simulated seconds)."""

    bound_at: float
    started_at: float | None = None
    #: Times the pod was found unable to start (:class:`StartBlocked`): the retry backs off.
    start_attempts: int = 0


def _container_statuses(
    pod: Mapping[str, Any], state: dict[str, Any], *, ready: bool
) -> list[dict[str, Any]]:
    out = []
    uid = str((pod.get("metadata") or {}).get("uid") or "")
    for index, container in enumerate((pod.get("spec") or {}).get("containers") or []):
        image = str(container.get("image") or "")
        out.append(
            {
                "name": container.get("name", f"c{index}"),
                "image": image,
                "imageID": f"{image}@sha256:{'0' * 64}" if image else "",
                "containerID": f"containerd://{uid.replace('-', '')}{index:02d}",
                "ready": ready,
                "started": "running" in state,
                "restartCount": 0,
                "state": state,
            }
        )
    return out


def _conditions(now: str, *, ready: bool, reason: str | None = None) -> list[dict[str, Any]]:
    def cond(kind: str, status: bool, why: str | None = None) -> dict[str, Any]:
        out: dict[str, Any] = {
            "type": kind,
            "status": "True" if status else "False",
            "lastProbeTime": None,
            "lastTransitionTime": now,
        }
        if why:
            out["reason"] = why
        return out

    return [
        cond("PodReadyToStartContainers", ready or reason is None),
        cond("Initialized", True),
        cond("Ready", ready, reason),
        cond("ContainersReady", ready, reason),
        cond("PodScheduled", True),
    ]


@dataclass(frozen=True, slots=True)
class StartBlocked:
    """Why the kubelet cannot start a pod's containers yet, in kubelet's words: a volume it
    cannot mount (the pod stays ``ContainerCreating``; event ``FailedMount``) or a container
    environment it cannot build (``CreateContainerConfigError``; event ``Failed``)."""

    waiting_reason: str
    #: The waiting container's message ("" while its volumes are not mounted).
    message: str
    event_reason: str
    event_message: str
    #: Volumes unmounted: no container is started, the sandbox is not ready to start them.
    mounting: bool


def startup_references(pod: Mapping[str, Any]) -> list[Reference]:
    """The ConfigMaps and Secrets the pod's volumes and environment name (what
    :func:`start_blocked` needs looked up)."""
    return [r for r in pod_spec_references(pod.get("spec")) if r.dependency.kind in STARTUP_KINDS]


def start_blocked(
    pod: Mapping[str, Any], found: Mapping[tuple[str, str], frozenset[str] | None]
) -> StartBlocked | None:
    """What stops the kubelet from starting ``pod`` (None: nothing). ``found`` gives, for each
    (kind, name) of :func:`startup_references`, the keys of the object in the pod's namespace,
    None when it does not exist. Volumes are mounted first; then each container's environment
    is built (kubelet's ``makeEnvironmentVariables``): a missing object or key that is not
    ``optional`` stops it."""
    namespace = str((pod.get("metadata") or {}).get("namespace") or "default")
    references = startup_references(pod)
    for reference in references:
        if reference.volume is None or reference.optional:
            continue
        problem = _missing(reference, found, namespace, volume=True)
        if problem:
            return StartBlocked(
                "ContainerCreating", "", "FailedMount",
                f'MountVolume.SetUp failed for volume "{reference.volume}" : {problem}', mounting=True,
            )
    for reference in references:
        if reference.container is None or reference.optional:
            continue
        problem = _missing(reference, found, namespace, volume=False)
        if problem:
            return StartBlocked("CreateContainerConfigError", problem, "Failed", f"Error: {problem}", mounting=False)
    return None


def _missing(
    reference: Reference, found: Mapping[tuple[str, str], frozenset[str] | None], namespace: str, *, volume: bool
) -> str:
    kind, name = str(reference.dependency.kind), reference.dependency.name
    keys = found.get((kind, name))
    if keys is None:
        return f'{kind.lower()} "{name}" not found'
    for key in reference.keys:
        if key not in keys:
            if volume:
                return f"{kind.lower()} references non-existent config key: {key}"
            return f"couldn't find key {key} in {kind} {namespace}/{name}"
    return ""


def _blocked_status(
    pod: Mapping[str, Any], status: Mapping[str, Any], blocked: StartBlocked, times: KubeletTimes, *,
    now: float, host_ip: str, pod_ip: str,
) -> dict[str, Any] | None:
    """The Pending status of a pod the kubelet cannot start; None when it already says so."""
    waiting: dict[str, Any] = {"reason": blocked.waiting_reason}
    if blocked.message:
        waiting["message"] = blocked.message
    names = [str(c.get("name")) for c in (pod.get("spec") or {}).get("containers") or []]
    statuses = [
        {**entry, "imageID": "", "containerID": "", "started": False, "state": {"waiting": waiting}}
        for entry in _container_statuses(pod, {"waiting": waiting}, ready=False)
    ]
    if [c.get("state") for c in status.get("containerStatuses") or []] == [c["state"] for c in statuses]:
        return None
    stamp = rfc3339(now)
    conditions = _conditions(stamp, ready=False, reason="ContainersNotReady")
    for condition in conditions:
        if condition["type"] == "PodReadyToStartContainers":
            condition["status"] = "False" if blocked.mounting else "True"
        if condition["type"] in ("Ready", "ContainersReady"):
            condition["message"] = f"containers with unready status: [{' '.join(names)}]"
    new: dict[str, Any] = {
        "phase": "Pending",
        "conditions": conditions,
        "hostIP": host_ip,
        "hostIPs": [{"ip": host_ip}],
        "startTime": rfc3339(times.bound_at),
        "containerStatuses": statuses,
        "qosClass": status.get("qosClass", "BestEffort"),
    }
    if not blocked.mounting:
        new["podIP"], new["podIPs"] = pod_ip, [{"ip": pod_ip}]
    return new


def running_since(status: Mapping[str, Any]) -> float | None:
    """When the pod's containers started (simulated seconds), from its status."""
    for entry in status.get("containerStatuses") or []:
        started = ((entry.get("state") or {}).get("running") or {}).get("startedAt")
        if started:
            return parse_rfc3339(started)
    return None


def next_status(
    pod: Mapping[str, Any],
    times: KubeletTimes,
    *,
    now: float,
    startup_delay: float,
    default_duration: float,
    host_ip: str,
    pod_ip: str,
    blocked: StartBlocked | None = None,
) -> tuple[dict[str, Any] | None, float | None]:
    """The pod's new status if a transition is due, and the next time to look at it.
    ``blocked``: what keeps a pod due to start from starting (:func:`start_blocked`)."""
    status = pod.get("status") or {}
    current = status.get("phase") or "Pending"
    if current in ("Succeeded", "Failed"):
        return None, None
    started = times.started_at
    if current == "Pending":
        due = times.bound_at + startup_delay
        if now < due:
            return None, due
        if blocked is not None:
            pending = _blocked_status(pod, status, blocked, times, now=now, host_ip=host_ip, pod_ip=pod_ip)
            return pending, now + min(START_RETRY_SECONDS * 2**times.start_attempts, START_RETRY_CAP_SECONDS)
        # A pod that waited for its volumes or configuration starts now, not when it was due.
        was_waiting = any("waiting" in (c.get("state") or {}) for c in status.get("containerStatuses") or [])
        started = now if was_waiting else due
        stamp = rfc3339(started)
        new = {
            "phase": "Running",
            "conditions": _conditions(stamp, ready=True),
            "hostIP": host_ip,
            "hostIPs": [{"ip": host_ip}],
            "podIP": pod_ip,
            "podIPs": [{"ip": pod_ip}],
            "startTime": rfc3339(times.bound_at),
            "containerStatuses": _container_statuses(pod, {"running": {"startedAt": stamp}}, ready=True),
            "qosClass": status.get("qosClass", "BestEffort"),
        }
        if not runs_to_completion(pod):
            return new, None
        finish = started + pod_duration(pod, default_duration)
        if now < finish:
            return new, finish
        return _finished(pod, new, started=started, finished=finish), None
    if not runs_to_completion(pod):
        return None, None
    if started is None:
        started = times.bound_at + startup_delay
    finish = started + pod_duration(pod, default_duration)
    if now < finish:
        return None, finish
    return _finished(pod, dict(status), started=started, finished=finish), None


def _finished(
    pod: Mapping[str, Any], status: dict[str, Any], *, started: float, finished: float
) -> dict[str, Any]:
    code = exit_code(pod)
    stamp = rfc3339(finished)
    terminated = {
        "exitCode": code,
        "reason": "Completed" if code == 0 else "Error",
        "startedAt": rfc3339(started),
        "finishedAt": stamp,
    }
    status = dict(status)
    status["phase"] = "Succeeded" if code == 0 else "Failed"
    status["conditions"] = _conditions(
        stamp, ready=False, reason="PodCompleted" if code == 0 else "PodFailed"
    )
    status["containerStatuses"] = _container_statuses(pod, {"terminated": terminated}, ready=False)
    return status
