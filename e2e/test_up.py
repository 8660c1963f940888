"""`gpufed up` end to end: the whole demo fleet as real processes, stopped with Ctrl-C
(SIGINT) and started again on the same state dir, checked with the real kubectl."""

from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

from e2e.harness import GPUFED, Kubectl, free_port, wait_for
from gpufed.supervising import ProcInfo, descendants, kill_if_alive, read_process_table

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(600)]

CLUSTERS = {"onprem-a100", "cloud-h100", "cloud-l4"}
DEPLOYMENT = {
    "apiVersion": "apps/v1",
    "kind": "Deployment",
    "metadata": {"name": "mig-infer", "namespace": "team-a"},
    "spec": {
        "replicas": 2,
        "selector": {"matchLabels": {"app": "mig-infer"}},
        "template": {
            "metadata": {"labels": {"app": "mig-infer"}},
            "spec": {"containers": [{
                "name": "server", "image": "registry.example.com/infer:1",
                "resources": {"limits": {"nvidia.com/mig-1g.10gb": 1}},
            }]},
        },
    },
}
WORK = {
    "apiVersion": "work.gpufed.io/v1alpha1",
    "kind": "Work",
    "metadata": {"name": "team-a-mig-infer", "namespace": "gpufed-es-onprem-a100"},
    "spec": {"workload": {"manifests": [DEPLOYMENT]}},
}
CONFIGMAP = {
    "apiVersion": "v1", "kind": "ConfigMap",
    "metadata": {"name": "survives-restarts", "namespace": "default"},
    "data": {"answer": "42"},
}


@dataclass
class Up:
    """One `gpufed up` run, as a user starts it (its own session, like a terminal's job)."""

    state: Path
    log: Path
    args: tuple[str, ...] = ()
    popen: subprocess.Popen[bytes] | None = None
    seen: list[ProcInfo] = field(default_factory=list)

    def start(self) -> Up:
        with self.log.open("ab") as out:
            self.popen = subprocess.Popen(
                [GPUFED, "up", "--state-dir", str(self.state), "--time-scale", "10", *self.args],
                stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                env=dict(os.environ, PYTHONUNBUFFERED="1"), start_new_session=True,
            )
        return self

    @property
    def output(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    def remember_children(self) -> list[ProcInfo]:
        """Every process below `gpufed up` right now (agents, members, hub, the hub's etcd)."""
        assert self.popen is not None
        table = read_process_table()
        found = descendants(self.popen.pid, table)
        known = {info.pid for info in self.seen}
        self.seen += [info for info in found if info.pid not in known]
        return found

    def interrupt(self, *, timeout: float = 120) -> int:
        assert self.popen is not None
        self.popen.send_signal(signal.SIGINT)
        return self.popen.wait(timeout=timeout)

    def survivors(self) -> list[ProcInfo]:
        table = read_process_table()
        return [info for info in self.seen if table.get(info.pid, (0, -1))[1] == info.start_ticks]

    def kill(self) -> None:
        if self.popen is not None and self.popen.poll() is None:
            self.remember_children()
            self.popen.send_signal(signal.SIGINT)
            try:
                self.popen.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.popen.kill()
                self.popen.wait(timeout=10)
        kill_if_alive(self.seen)


@pytest.fixture
def up_runs(tmp_path: Path) -> Iterator[list[Up]]:
    runs: list[Up] = []
    yield runs
    for run in runs:
        run.kill()


def _ready(cluster: dict[str, Any]) -> bool:
    return any(
        c["type"] == "Ready" and c["status"] == "True" for c in cluster.get("status", {}).get("conditions", [])
    )


def _wait_up(run: Up, hub: Kubectl) -> dict[str, dict[str, Any]]:
    def started() -> bool:
        assert run.popen is not None and run.popen.poll() is None, f"gpufed up exited:\n{run.output[-4000:]}"
        return "gpufed is up" in run.output

    wait_for(started, timeout=300, interval=1, what="gpufed up to report the fleet up")

    def all_ready() -> dict[str, dict[str, Any]]:
        clusters = {c["metadata"]["name"]: c for c in hub.json("get", "clusters")["items"]}
        return clusters if set(clusters) == CLUSTERS and all(map(_ready, clusters.values())) else {}

    return wait_for(all_ready, timeout=60, what="the three demo clusters Ready in the hub")  # type: ignore[no-any-return]


def _member_deployment(member: Kubectl) -> dict[str, Any] | None:
    result = member.run("get", "deployment", "mig-infer", "-n", "team-a", "-o", "yaml", check=False)
    if result.returncode != 0:
        return None
    deployment: dict[str, Any] = yaml.safe_load(result.stdout)
    return deployment if deployment.get("status", {}).get("availableReplicas") == 2 else None


@pytest.mark.slow
def test_up_stops_cleanly_and_resumes_the_same_fleet(tmp_path: Path, up_runs: list[Up]) -> None:
    state = tmp_path / "state"
    hub = Kubectl(state / "hub.kubeconfig")
    member = Kubectl(state / "members" / "onprem-a100" / "kubeconfig")

    # A port of its own: the default 6443 may be taken by then by another test's hub, and a hub
    # on a new port means new URLs, so the agents would join again. The second run finds the
    # port in its state dir.
    first = Up(state, tmp_path / "up-1.log", args=("--port", str(free_port()))).start()
    up_runs.append(first)
    clusters = _wait_up(first, hub)
    assert clusters["onprem-a100"]["spec"]["provider"] == "onprem"
    assert clusters["cloud-h100"]["spec"]["pricing"] == {"NVIDIA-H100-80GB-HBM3": 4.10}
    assert clusters["cloud-l4"]["metadata"]["labels"]["capacity-type"] == "spot"
    summary = {e["resource"]: e["capacity"] for e in clusters["onprem-a100"]["status"]["gpuSummary"]}
    assert summary["nvidia.com/gpu"] == 16 and summary["nvidia.com/mig-1g.10gb"] == 32, summary
    assert (state / "hub.kubeconfig").resolve() == (state / "hub" / "hub.kubeconfig").resolve()
    assert "export KUBECONFIG=" in first.output and "/ui" in first.output

    (tmp_path / "objects.yaml").write_text(yaml.safe_dump_all([CONFIGMAP, WORK]))
    hub.run("apply", "-f", str(tmp_path / "objects.yaml"))
    deployment = wait_for(lambda: _member_deployment(member), timeout=90,
                          what="the Work's Deployment available in member onprem-a100")
    children = first.remember_children()
    commands = [Path(f"/proc/{info.pid}/cmdline").read_bytes().replace(b"\0", b" ") for info in children]
    assert any(b"etcd" in c for c in commands), commands  # the embedded etcd is watched too
    assert sum(b" agent " in c for c in commands) == 3, commands

    assert first.interrupt() == 0, first.output[-4000:]
    assert "stopped." in first.output
    assert first.survivors() == [], first.survivors()

    second = Up(state, tmp_path / "up-2.log").start()
    up_runs.append(second)
    _wait_up(second, hub)
    assert hub.json("get", "configmap", "survives-restarts", "-n", "default")["data"] == {"answer": "42"}
    work = hub.json("get", "work", "team-a-mig-infer", "-n", "gpufed-es-onprem-a100")
    assert work["metadata"]["uid"]
    # The member kept its objects: the same Deployment (not re-created by the agent), still running.
    again = wait_for(lambda: _member_deployment(member), timeout=60, what="the Deployment after the restart")
    assert again["metadata"]["uid"] == deployment["metadata"]["uid"]
    assert again["metadata"]["creationTimestamp"] == deployment["metadata"]["creationTimestamp"]
    pods = member.json("get", "pods", "-n", "team-a")["items"]
    assert len(pods) == 2 and all(p["status"]["phase"] == "Running" for p in pods), pods
    # The agents kept their credentials: only the first run minted join tokens.
    tokens = subprocess.run([GPUFED, "token", "list", "--kubeconfig", str(hub.kubeconfig)],
                            capture_output=True, text=True, timeout=60, check=True).stdout
    assert sum("bootstrap" in line for line in tokens.splitlines()) == 3, tokens

    second.remember_children()
    assert second.interrupt() == 0, second.output[-4000:]
    assert second.survivors() == []
