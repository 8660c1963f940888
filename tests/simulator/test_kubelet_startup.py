"""The simulated kubelet does not start a pod whose ConfigMaps or Secrets are missing, as kube's
kubelet does not: a volume it cannot mount keeps the pod ContainerCreating, an environment it
cannot build is CreateContainerConfigError; ``optional`` references never stop it."""

from __future__ import annotations

from typing import Any

import pytest

from simulator.kubelet import (
    START_RETRY_CAP_SECONDS,
    START_RETRY_SECONDS,
    KubeletTimes,
    StartBlocked,
    next_status,
    running_since,
    start_blocked,
)

CM, SECRET = "ConfigMap", "Secret"


def _pod(
    *, volumes: list[dict[str, Any]] | None = None, env: list[dict[str, Any]] | None = None,
    env_from: list[dict[str, Any]] | None = None, status: dict[str, Any] | None = None,
) -> dict[str, Any]:
    container: dict[str, Any] = {"name": "server", "image": "vllm"}
    if env:
        container["env"] = env
    if env_from:
        container["envFrom"] = env_from
    return {
        "metadata": {"name": "p", "namespace": "ml", "uid": "u-1"},
        "spec": {"containers": [container], "volumes": volumes or [], "nodeName": "n1"},
        "status": status or {"phase": "Pending"},
    }


def _blocked(pod: dict[str, Any], found: dict[tuple[str, str], frozenset[str] | None]) -> tuple[str, str, str] | None:
    blocked = start_blocked(pod, found)
    return None if blocked is None else (blocked.waiting_reason, blocked.message, blocked.event_message)


@pytest.mark.parametrize(
    ("pod", "found", "expected"),
    [
        pytest.param(
            _pod(env_from=[{"configMapRef": {"name": "app-config"}}]), {(CM, "app-config"): None},
            ("CreateContainerConfigError", 'configmap "app-config" not found', 'Error: configmap "app-config" not found'),
            id="env-from-missing-configmap",
        ),
        pytest.param(
            _pod(env_from=[{"secretRef": {"name": "hf-token"}}]), {(SECRET, "hf-token"): None},
            ("CreateContainerConfigError", 'secret "hf-token" not found', 'Error: secret "hf-token" not found'),
            id="env-from-missing-secret",
        ),
        pytest.param(
            _pod(env=[{"name": "TOKEN", "valueFrom": {"secretKeyRef": {"name": "hf", "key": "token"}}}]),
            {(SECRET, "hf"): frozenset({"other"})},
            ("CreateContainerConfigError", "couldn't find key token in Secret ml/hf",
             "Error: couldn't find key token in Secret ml/hf"),
            id="env-missing-key",
        ),
        pytest.param(
            _pod(env=[{"name": "MODE", "valueFrom": {"configMapKeyRef": {"name": "c", "key": "mode"}}}]),
            {(CM, "c"): frozenset({"mode"})}, None, id="env-key-present",
        ),
        pytest.param(
            _pod(env_from=[{"configMapRef": {"name": "c", "optional": True}}]), {(CM, "c"): None}, None,
            id="optional-env-from",
        ),
        pytest.param(
            _pod(volumes=[{"name": "cfg", "configMap": {"name": "app-config"}}]), {(CM, "app-config"): None},
            ("ContainerCreating", "",
             'MountVolume.SetUp failed for volume "cfg" : configmap "app-config" not found'),
            id="volume-missing-configmap",
        ),
        pytest.param(
            _pod(volumes=[{"name": "cfg", "configMap": {"name": "c", "items": [{"key": "a", "path": "a"}]}}]),
            {(CM, "c"): frozenset({"b"})},
            ("ContainerCreating", "",
             'MountVolume.SetUp failed for volume "cfg" : configmap references non-existent config key: a'),
            id="volume-missing-key",
        ),
        pytest.param(
            _pod(volumes=[{"name": "certs", "secret": {"secretName": "tls", "optional": True}}]),
            {(SECRET, "tls"): None}, None, id="optional-volume",
        ),
        pytest.param(
            # Volumes are mounted before any container is configured.
            _pod(volumes=[{"name": "certs", "secret": {"secretName": "tls"}}],
                 env_from=[{"configMapRef": {"name": "c"}}]),
            {(SECRET, "tls"): None, (CM, "c"): None},
            ("ContainerCreating", "", 'MountVolume.SetUp failed for volume "certs" : secret "tls" not found'),
            id="volume-first",
        ),
    ],
)
def test_what_keeps_a_pod_from_starting(
    pod: dict[str, Any], found: dict[tuple[str, str], frozenset[str] | None], expected: tuple[str, str, str] | None
) -> None:
    assert _blocked(pod, found) == expected


def _next(pod: dict[str, Any], times: KubeletTimes, now: float, blocked: StartBlocked | None) -> Any:
    return next_status(
        pod, times, now=now, startup_delay=2.0, default_duration=300.0, host_ip="10.0.0.1", pod_ip="10.1.0.1",
        blocked=blocked,
    )


def test_a_blocked_pod_waits_says_why_and_starts_once_it_can() -> None:
    pod = _pod(env_from=[{"configMapRef": {"name": "app-config"}}])
    blocked = start_blocked(pod, {(CM, "app-config"): None})
    status, due = _next(pod, KubeletTimes(bound_at=100.0), 110.0, blocked)
    assert status["phase"] == "Pending"
    waiting = status["containerStatuses"][0]["state"]["waiting"]
    assert waiting == {"reason": "CreateContainerConfigError", "message": 'configmap "app-config" not found'}
    conditions = {c["type"]: c for c in status["conditions"]}
    assert conditions["Ready"]["status"] == "False"
    assert conditions["Ready"]["reason"] == "ContainersNotReady"
    assert conditions["Ready"]["message"] == "containers with unready status: [server]"
    assert conditions["PodReadyToStartContainers"]["status"] == "True"
    assert due == 110.0 + START_RETRY_SECONDS

    # Looked at again, still blocked: nothing new to write, and the retry backs off.
    pod["status"] = status
    again, later = _next(pod, KubeletTimes(bound_at=100.0, start_attempts=3), 150.0, blocked)
    assert again is None
    assert later == 150.0 + START_RETRY_SECONDS * 8
    _, capped = _next(pod, KubeletTimes(bound_at=100.0, start_attempts=30), 150.0, blocked)
    assert capped == 150.0 + START_RETRY_CAP_SECONDS

    # The ConfigMap appeared: the pod runs from now, not from when it was due.
    running, _ = _next(pod, KubeletTimes(bound_at=100.0, start_attempts=4), 200.0, None)
    assert running["phase"] == "Running"
    assert running_since(running) == pytest.approx(200.0)


def test_a_pod_waiting_for_its_volumes_has_no_sandbox_ready() -> None:
    pod = _pod(volumes=[{"name": "cfg", "configMap": {"name": "c"}}])
    blocked = start_blocked(pod, {(CM, "c"): None})
    status, _ = _next(pod, KubeletTimes(bound_at=100.0), 110.0, blocked)
    assert status["containerStatuses"][0]["state"] == {"waiting": {"reason": "ContainerCreating"}}
    conditions = {c["type"]: c["status"] for c in status["conditions"]}
    assert conditions["PodReadyToStartContainers"] == "False"
    assert "podIP" not in status


def test_a_pod_that_never_waited_starts_when_due() -> None:
    running, _ = _next(_pod(), KubeletTimes(bound_at=100.0), 150.0, None)
    assert running_since(running) == pytest.approx(102.0)
