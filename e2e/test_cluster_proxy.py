"""The cluster proxy with real processes: a hub, a simulated member, its agent with
``--enable-proxy``, the real kubectl and the `gpufed get|logs|exec` commands.

``kubectl exec`` and ``gpufed exec`` reach the member's pod over WebSockets through the agent;
the hub's RBAC refuses a viewer any request through the proxy (a read of the member's Secret
included), and the member's rules for impersonated users
(``impersonatedAccess`` in the fleet entry) keep a team's user in its namespace.

``kubectl port-forward`` reaches the pod's echo server (SPDY/3.1 tunnelled in a WebSocket),
and a member's refusal of an exec is what kubectl shows, after its fallback to SPDY.

The hub reaches the member only through the tunnel its agent opened: while a log is being
followed through the proxy, the hub process holds no connection to the member's API port
(read from /proc), the agent does. Restarting the hub ends the follow with an error, and the
agent opens its tunnel again to the new hub process. Killing the agent (SIGKILL) ends a
followed log and an exec in flight with errors naming the cluster; the agent started again
reopens its tunnel.
"""

from __future__ import annotations

import json
import os
import queue
import re
import socket
import subprocess
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import yaml

from controlplane.hub import ADMIN_USER
from e2e.harness import GPUFED, KUBECTL, Kubectl, Process, ProcessGroup, wait_for
from e2e.test_members import FLEET, _agent_kubeconfig, _ready

pytestmark = pytest.mark.e2e
CLUSTER = "onprem-a100"
PROXY = f"/apis/cluster.gpufed.io/v1alpha1/clusters/{CLUSTER}/proxy"
POD = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {"name": "train-0", "namespace": "ml", "labels": {"app": "train"}},
    "spec": {"containers": [{"name": "main", "image": "train:1", "resources": {"requests": {"cpu": "1"}}}]},
}

TEAM_USER = "tess"
#: Lets user tess proxy to (and exec through) cluster onprem-a100 at the hub.
TEAM_RBAC = [
    {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": "proxy-onprem"},
     "rules": [{"apiGroups": ["cluster.gpufed.io"], "resources": ["clusters/proxy"], "resourceNames": [CLUSTER],
                "verbs": ["get", "create"]}]},
    {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding", "metadata": {"name": "tess-proxy"},
     "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "proxy-onprem"},
     "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": TEAM_USER}]},
]


def _kubeconfig(base: Kubectl, target: Path, *, server: str | None = None, token: str | None = None) -> Kubectl:
    config = yaml.safe_load(base.kubeconfig.read_text())
    if server is not None:
        config["clusters"][0]["cluster"]["server"] = server
    if token is not None:
        config["users"][0]["user"]["token"] = token
    target.write_text(yaml.safe_dump(config))
    return Kubectl(target)


def _server(kubectl: Kubectl) -> str:
    return str(yaml.safe_load(kubectl.kubeconfig.read_text())["clusters"][0]["cluster"]["server"]).rstrip("/")


def _remote_ports(pid: int) -> set[int]:
    """The remote TCP ports of every socket process ``pid`` holds (from /proc)."""
    inodes = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[len("socket:["):-1])
    ports = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with open(table) as handle:
            for line in handle.readlines()[1:]:
                fields = line.split()
                if fields[9] in inodes:
                    ports.add(int(fields[2].rsplit(":", 1)[1], 16))
    return ports


class Lines:
    """A child's stdout, line by line, readable with a timeout."""

    def __init__(self, proc: subprocess.Popen[str]) -> None:
        self.proc = proc
        self._lines: queue.Queue[str | None] = queue.Queue()
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self._lines.put(line.rstrip("\n"))
        self._lines.put(None)

    def next(self, timeout: float = 60.0) -> str | None:
        return self._lines.get(timeout=timeout)

    def stop(self) -> None:
        """Kill the child (if still running) and release its pipes."""
        self.proc.kill()
        self.proc.wait(timeout=10)
        self.thread.join(timeout=10)
        for pipe in (self.proc.stdout, self.proc.stderr):
            if pipe is not None:
                pipe.close()


def _started(pods: list[dict[str, Any]]) -> int:
    return sum(1 for pod in pods if pod.get("status", {}).get("startTime"))


def _gpufed(hub: Kubectl, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([GPUFED, *args, "-n", "default", "--kubeconfig", str(hub.kubeconfig)],
                          capture_output=True, text=True, timeout=60, check=False)


def _timeline(hub: Kubectl) -> list[list[str]] | None:
    """The rows of `gpufed events deployment/infer` once both the hub and the member have some."""
    result = _gpufed(hub, "events", "deployment/infer")
    rows = [line.split(None, 5) for line in result.stdout.splitlines()[1:]]
    origins = {row[1] for row in rows}
    return rows if {"hub", CLUSTER} <= origins else None


def _limited_fleet(tmp_path: Path) -> Path:
    """The shared fleet, with the member's rules for impersonated hub users: admins anything,
    viewers read, user tess namespace ml and only reading pods in default (as a member's RBAC would)."""
    fleet = yaml.safe_load(FLEET.read_text())
    entry = next(c for c in fleet["clusters"] if c["name"] == CLUSTER)
    entry["impersonatedAccess"] = [
        {"subjects": ["gpufed:admins"]},
        {"subjects": ["gpufed:viewers"], "verbs": ["get", "list", "watch"]},
        {"subjects": [TEAM_USER], "namespaces": ["ml"]},
        {"subjects": [TEAM_USER], "verbs": ["get"], "resources": ["pods"], "namespaces": ["default"]},
    ]
    path = tmp_path / "fleet.yaml"
    path.write_text(yaml.safe_dump(fleet))
    return path


def _exec(hub: Kubectl, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([GPUFED, "exec", "--kubeconfig", str(hub.kubeconfig), *args], input=stdin,
                          capture_output=True, text=True, timeout=60, check=False)


def _exec_through_the_proxy(hub: Kubectl, through: Kubectl, viewer: Kubectl, tmp_path: Path) -> None:
    """kubectl exec|attach and gpufed exec through the proxy; the hub's RBAC and the member's limit them."""
    # The real kubectl, pointed at the proxy: exec over WebSockets (v5.channel.k8s.io).
    assert through.run("exec", "train-0", "-n", "ml", "--", "echo", "hi").stdout == "hi\n"
    failed = through.run("exec", "train-0", "-n", "ml", "--", "sh", "-c", "exit 3", check=False)
    assert failed.returncode == 3, failed
    # kubectl attach: the container's output as it is written, until kubectl leaves.
    attach = subprocess.Popen([KUBECTL, "--kubeconfig", str(through.kubeconfig), "attach", "train-0", "-n", "ml"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    lines = Lines(attach)
    try:
        first = _step(lines.next())
        assert _step(lines.next()) == first + 1
    finally:
        lines.stop()
    # gpufed exec: the remote command's output and exit code; stdin with -i; a workload's pod.
    result = _exec(hub, "-n", "ml", "train-0", "--", "sh", "-c", "hostname; exit 4")
    assert (result.returncode, result.stdout) == (4, "train-0\n"), result
    assert _exec(hub, "-n", "ml", "train-0", "-i", "--", "cat", stdin="hello\n").stdout == "hello\n"
    infer = _exec(hub, "deployment/infer", "-c", "server", "--", "hostname")
    assert infer.returncode == 0 and infer.stdout.startswith("infer-"), infer
    # A viewer may not exec either (exec is create on clusters/proxy).
    refused = viewer.run("exec", "train-0", "-n", "ml", "--", "echo", "hi", check=False)
    assert refused.returncode != 0 and "Forbidden" in refused.stderr and "clusters/proxy" in refused.stderr, refused
    # A team allowed to proxy to the cluster at the hub is limited to namespace ml by the member.
    hub.run("apply", "-f", "-", input_text=json.dumps({"apiVersion": "v1", "kind": "List", "items": TEAM_RBAC}))
    token = subprocess.run(
        [GPUFED, "token", "create", "--kubeconfig", str(hub.kubeconfig), "--user", TEAM_USER, "--name", TEAM_USER],
        capture_output=True, text=True, check=True, timeout=60,
    ).stdout.strip()
    team = _kubeconfig(hub, tmp_path / "team.kubeconfig", token=token)
    assert team.run("get", "--raw", PROXY + "/api/v1/namespaces/ml/pods").returncode == 0
    other = team.run("get", "--raw", PROXY + "/api/v1/namespaces/default/pods", check=False)
    assert other.returncode != 0 and "Forbidden" in other.stderr and "member cluster" in other.stderr, other
    # (the team may not list Clusters at the hub: it names the one it uses)
    assert _exec(team, "--cluster", CLUSTER, "-n", "ml", "train-0", "--", "echo", "ok").stdout == "ok\n"
    pod = through.json("get", "pods", "-n", "default", "-l", "app=infer")["items"][0]["metadata"]["name"]
    denied = _exec(team, "--cluster", CLUSTER, pod, "-c", "server", "--", "echo", "ok")
    refusal = f'User "{TEAM_USER}" cannot create resource "pods/exec"'
    assert denied.returncode == 1 and refusal in denied.stderr, denied
    # kubectl shows the member's refusal too (its WebSocket is refused, its SPDY retry gets the same).
    team_through = _kubeconfig(through, tmp_path / "team-proxy.kubeconfig", token=token)
    refused = team_through.run("exec", pod, "-n", "default", "-c", "server", "--", "echo", "ok", check=False)
    assert refused.returncode != 0 and refusal in refused.stderr and "(Forbidden)" in refused.stderr, refused


def _port_forward(through: Kubectl) -> None:
    """kubectl port-forward through the proxy: every port of a simulated pod echoes."""
    forward = subprocess.Popen(
        [KUBECTL, "--kubeconfig", str(through.kubeconfig), "port-forward", "pod/train-0", "-n", "ml", "0:8080"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    lines = Lines(forward)
    try:
        line = lines.next()
        found = re.match(r"Forwarding from 127\.0\.0\.1:(\d+) -> 8080", line or "")
        assert found, line
        payload = b"through the hub, the agent and the member\n" * 2000
        with socket.create_connection(("127.0.0.1", int(found.group(1))), timeout=60) as conn:
            conn.sendall(payload)
            echoed = b""
            while len(echoed) < len(payload):
                chunk = conn.recv(65536)
                assert chunk, echoed[-100:]
                echoed += chunk
        assert echoed == payload
    finally:
        lines.stop()


def _step(line: str | None) -> int:
    assert line is not None and line.startswith("[main] step "), line
    return int(line.split()[2].rstrip(":"))


@pytest.mark.slow
def test_cluster_proxy_through_the_agent(processes: ProcessGroup, tmp_path: Path) -> None:
    launched = processes.launch_member(_limited_fleet(tmp_path), CLUSTER)
    hub_proc, hub = processes.start_hub()
    _sim, member, dcgm = launched()
    agent = processes.start_agent(hub, FLEET, CLUSTER, member, dcgm, extra=("--enable-proxy",))
    wait_for(lambda: _ready(hub.json("get", "cluster", CLUSTER)), timeout=90, what=f"{CLUSTER} Ready")
    # The workload's pod, created on the member directly (the test's setup, not the proxy).
    member.run("create", "namespace", "ml")
    member.run("apply", "-f", "-", input_text=json.dumps(POD))
    wait_for(lambda: member.json("get", "pod", "train-0", "-n", "ml").get("status", {}).get("startTime"),
             timeout=60, what="the pod to start")

    # An admin lists the member's pods through the hub.
    def proxied() -> Any:
        result = hub.run("get", "--raw", PROXY + "/api/v1/namespaces/ml/pods", check=False)
        return result.returncode == 0 and json.loads(result.stdout)["items"]

    # The tunnel may open a moment after the cluster is Ready.
    pods = wait_for(proxied, timeout=60, what="the proxy to answer")
    assert [p["metadata"]["name"] for p in pods] == ["train-0"]

    # kubectl pointed at the proxy as its server, as Karmada documents for its proxy.
    through = _kubeconfig(hub, tmp_path / "proxy.kubeconfig", server=_server(hub) + PROXY)
    assert "train-0" in through.run("get", "pods", "-n", "ml").stdout
    tail = through.run("logs", "train-0", "-n", "ml", "--tail", "2").stdout.splitlines()
    assert len(tail) == 2 and _step(tail[1]) == _step(tail[0]) + 1

    # A viewer may not proxy at all (it would read the member's Secrets; kube's view role has no
    # */proxy); nor may an agent credential.
    viewer_token = subprocess.run(
        [GPUFED, "token", "create", "--kubeconfig", str(hub.kubeconfig), "--role", "viewer", "--name", "ann"],
        capture_output=True, text=True, check=True, timeout=60,
    ).stdout.strip()
    viewer = _kubeconfig(through, tmp_path / "viewer.kubeconfig", token=viewer_token)
    member.run("create", "secret", "generic", "topsecret", "-n", "default", "--from-literal=password=hunter2")
    for args in (("get", "secret", "topsecret", "-n", "default", "-o", "jsonpath={.data}"), ("get", "pods", "-n", "ml"),
                 ("create", "namespace", "x")):
        denied = viewer.run(*args, check=False)
        assert denied.returncode != 0 and "(Forbidden)" in denied.stderr, denied
        assert "clusters/proxy" in denied.stderr, denied
        assert "hunter2" not in denied.stdout and "aHVudGVyMg" not in denied.stdout
    agent_kubectl = Kubectl(_agent_kubeconfig(processes.root / f"agent-{CLUSTER}", hub, tmp_path))
    refused = agent_kubectl.run("get", "--raw", PROXY + "/api/v1/namespaces/ml/pods", check=False)
    assert refused.returncode != 0 and "forbidden" in refused.stderr.lower()

    # gpufed get fans out with a CLUSTER column.
    table = subprocess.run(
        [GPUFED, "get", "pods", "-n", "ml", "-l", "app=train", "--clusters", "all", "--kubeconfig", str(hub.kubeconfig)],
        capture_output=True, text=True, timeout=60, check=False,
    )
    assert table.stdout.splitlines()[0].split()[:2] == ["CLUSTER", "NAME"], table
    assert table.stdout.splitlines()[1].split()[:2] == [CLUSTER, "train-0"], table
    as_json = subprocess.run(
        [GPUFED, "get", "pods", "-n", "ml", "-l", "app=train", "-o", "json", "--kubeconfig", str(hub.kubeconfig)],
        capture_output=True, text=True, timeout=60, check=False,
    )
    listed = json.loads(as_json.stdout)
    assert listed["kind"] == "List", as_json
    assert [(i["kind"], i["metadata"]["name"], i["metadata"]["annotations"]["gpufed.io/cluster"])
            for i in listed["items"]] == [("Pod", "train-0", CLUSTER)], as_json
    one = subprocess.run(
        [GPUFED, "get", "pod/train-0", "-n", "ml", "-o", "yaml", "--kubeconfig", str(hub.kubeconfig)],
        capture_output=True, text=True, timeout=60, check=False,
    )
    assert yaml.safe_load(one.stdout)["metadata"]["name"] == "train-0", one
    names = subprocess.run(
        [GPUFED, "get", "pods", "-n", "ml", "-o", "name", "--kubeconfig", str(hub.kubeconfig)],
        capture_output=True, text=True, timeout=60, check=False,
    )
    assert f"{CLUSTER} pod/train-0" in names.stdout.splitlines(), names

    # A workload propagated by the hub: its pods' logs and its events, wherever it runs.
    manifests = Path(__file__).parent / "manifests"
    hub.run("apply", "-f", str(manifests / "policy.yaml"))
    hub.run("apply", "-f", str(manifests / "deployment.yaml"))
    wait_for(lambda: _started(member.json("get", "pods", "-n", "default", "-l", "app=infer")["items"]) == 3,
             timeout=90, what="the Deployment's 3 pods to start on the member")
    logs = _gpufed(hub, "logs", "deployment/infer", "-c", "server", "--all-pods", "--tail", "1")
    assert logs.returncode == 0, logs.stderr
    assert len(logs.stdout.splitlines()) == 3, logs.stdout
    assert all(line.startswith(f"[{CLUSTER}/infer-") and "[server] step" in line for line in logs.stdout.splitlines())
    _exec_through_the_proxy(hub, through, viewer, tmp_path)
    _port_forward(through)
    events = wait_for(lambda: _timeline(hub), timeout=60, what="hub and member events")
    assert any(row[1] == "hub" and row[4] == "deployment/infer" for row in events), events
    assert any(row[1] == CLUSTER and row[4].startswith("pod/infer-") for row in events), events
    _workload_pod_views(hub, tmp_path)
    # kubectl top through the proxy: the member serves metrics.k8s.io as metrics-server does.
    top = through.run("top", "pods", "-n", "default", "-l", "app=infer").stdout.splitlines()
    assert top[0].split() == ["NAME", "CPU(cores)", "MEMORY(bytes)"] and len(top) == 4, top

    # gpufed logs -f follows the pod's log through the agent: new lines arrive as they are written.
    follow = subprocess.Popen(
        [GPUFED, "logs", "pod/train-0", "-n", "ml", "-f", "--tail", "1", "--kubeconfig", str(hub.kubeconfig)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    lines = Lines(follow)
    try:
        first = _step(lines.next())
        assert [_step(lines.next()) for _ in range(3)] == [first + 1, first + 2, first + 3]

        # While the stream is open, only the agent is connected to the member's API port.
        member_port = urlsplit(_server(member)).port
        assert member_port is not None and hub_proc.popen is not None and agent.popen is not None
        assert member_port in _remote_ports(agent.popen.pid)
        assert member_port not in _remote_ports(hub_proc.popen.pid)
        callers = json.loads(member.run("get", "--raw", "/debug/gpufed/callers").stdout)["callers"]
        logged = [c for c in callers if c["path"] == "/api/v1/namespaces/ml/pods/train-0/log"]
        assert logged and {c["impersonateUser"] for c in logged} == {ADMIN_USER}, logged

        # The hub goes away: the follow ends with an error naming the cluster.
        port = urlsplit(_server(hub)).port
        hub_proc.stop()
        assert follow.wait(timeout=60) != 0
        assert follow.stderr is not None
        assert CLUSTER in follow.stderr.read()
    finally:
        lines.stop()

    # The hub comes back on the same address: the agent opens its tunnel again.
    hub_again = processes.start("hub-again", "controlplane", "--state-dir", str(processes.root / "hub"),
                                "--listen", f"127.0.0.1:{port}")
    wait_for(proxied, timeout=90, what="the agent's tunnel to the restarted hub")
    _agent_killed(processes, hub, through, agent, hub_again, member_port, proxied)


def _agent_killed(
    processes: ProcessGroup, hub: Kubectl, through: Kubectl, agent: Process, hub_proc: Process, member_port: int,
    proxied: Callable[[], Any],
) -> None:
    """The agent is killed (SIGKILL) while a log is followed and an exec runs through it: both
    clients end with an error naming the cluster; the agent started again (its credential in its
    state dir) reopens its tunnel, and the hub still holds no connection to the member."""
    follow = subprocess.Popen(
        [GPUFED, "logs", "pod/train-0", "-n", "ml", "-f", "--tail", "1", "--kubeconfig", str(hub.kubeconfig)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    execing = subprocess.Popen(
        [KUBECTL, "--kubeconfig", str(through.kubeconfig), "exec", "-i", "train-0", "-n", "ml", "--", "cat"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    followed, echoed = Lines(follow), Lines(execing)
    try:
        _step(followed.next())
        assert execing.stdin is not None
        execing.stdin.write("hello\n")
        execing.stdin.flush()
        assert echoed.next() == "hello"
        agent.stop(kill=True)
        for client in (follow, execing):
            assert client.wait(timeout=60) != 0
            assert client.stderr is not None
            stderr = client.stderr.read()
            assert CLUSTER in stderr, stderr
    finally:
        followed.stop()
        echoed.stop()
        if execing.stdin is not None:
            execing.stdin.close()
    processes.start_raw("agent-again", agent.argv)
    wait_for(proxied, timeout=90, what="the restarted agent's tunnel")
    assert hub_proc.popen is not None and member_port not in _remote_ports(hub_proc.popen.pid)


def _pod_rows(text: str) -> list[list[str]]:
    """The rows of a pod table (CLUSTER NAME READY STATUS NODE GPU-REQUEST DEVICES GPU-UTIL RESTARTS)."""
    return [line.split() for line in text.splitlines() if line.split()[:1] == [CLUSTER] and "infer-" in line]


def _metric(text: str, name: str, **labels: str) -> float:
    for line in text.splitlines():
        if line.startswith(name + "{") and all(f'{k}="{v}"' in line for k, v in labels.items()):
            return float(line.rsplit(" ", 1)[1])
    return 0.0


def _workload_pod_views(hub: Kubectl, tmp_path: Path) -> None:
    """explain, describe, top, the hub's pod list (what the dashboard shows) and its RBAC, and
    the hub's proxy metrics, for the Deployment infer running on the member."""

    def explained() -> list[list[str]] | None:
        rows = _pod_rows(_gpufed(hub, "explain", "deployment/infer").stdout)
        # GPU devices come with the agent's next DCGM report.
        return rows if len(rows) == 3 and all(row[6].startswith("gpu") for row in rows) else None

    rows = wait_for(explained, timeout=90, what="explain to list the 3 pods with their GPU devices")
    assert all(row[2:4] == ["3/3", "Running"] and row[5] == "nvidia.com/gpu=1" and row[8] == "0" for row in rows), rows
    explain = _gpufed(hub, "explain", "deployment/infer").stdout
    assert "gpufed logs deployment/infer -n default --all-pods -f" in explain, explain

    described = _gpufed(hub, "describe", "deployment/infer")
    assert described.returncode == 0, described.stderr
    assert f"Placement:    {CLUSTER}=3" in described.stdout and f"Cluster {CLUSTER}:" in described.stdout
    assert len(_pod_rows(described.stdout)) == 3, described.stdout
    pod = rows[0][1]
    one = _gpufed(hub, "describe", f"pod/{pod}")
    assert one.returncode == 0 and f"Cluster:      {CLUSTER}" in one.stdout and "GPU devices:  gpu" in one.stdout, one

    top = _gpufed(hub, "top", "pods")
    assert top.returncode == 0, top.stderr
    header, *lines = top.stdout.splitlines()
    assert header.split()[:3] == ["CLUSTER", "NAME", "CPU(cores)"] and "GPU DEVICES" in header, header
    used = [line.split() for line in lines if "infer-" in line]
    assert len(used) == 3 and all(row[0] == CLUSTER and row[4] == "1" and row[5].startswith("gpu") for row in used), top
    nodes = _gpufed(hub, "top", "nodes")
    assert nodes.returncode == 0 and "GPUS(used/total)" in nodes.stdout, nodes
    unknown = _gpufed(hub, "get", "deploymnts", "--clusters", CLUSTER)
    assert (unknown.returncode, unknown.stderr) == (
        1, f'cluster {CLUSTER}: the server doesn\'t have a resource type "deploymnts"\n'), unknown  # named once

    # The hub's pod list the dashboard reads, with each pod's log link.
    pods_path = "/apis/work.gpufed.io/v1alpha1/namespaces/default/resourcebindings/infer-deployment/pods"
    listing = json.loads(hub.run("get", "--raw", pods_path).stdout)
    [cluster] = listing["clusters"]
    assert sorted(p["name"] for p in cluster["pods"]) == sorted(row[1] for row in rows)
    log_path = cluster["pods"][0]["logPath"]
    assert "[server] step" in hub.run("get", "--raw", log_path + "?tailLines=1&container=server").stdout
    assert "resourcebindings/${encodeURIComponent(shownPods.name)}/pods" in hub.run("get", "--raw", "/ui/dashboard.js").stdout

    # A team bound to view, without clusters/proxy: the list says so and shows no pod; no log.
    token = subprocess.run(
        [GPUFED, "token", "create", "--kubeconfig", str(hub.kubeconfig), "--user", "vera", "--group", "team"],
        capture_output=True, text=True, check=True, timeout=60,
    ).stdout.strip()
    hub.run("create", "clusterrolebinding", "team-view", "--clusterrole", "view", "--group", "team")
    team = _kubeconfig(hub, tmp_path / "team.kubeconfig", token=token)

    def team_listing() -> Any:
        result = team.run("get", "--raw", pods_path, check=False)
        return result.returncode == 0 and json.loads(result.stdout)

    [seen] = wait_for(team_listing, timeout=60, what="the team's binding to take effect")["clusters"]
    assert seen["pods"] == [] and "clusters/proxy" in seen["forbidden"], seen
    refused = team.run("get", "--raw", log_path, check=False)
    assert refused.returncode != 0 and "(Forbidden)" in refused.stderr, refused.stderr

    # The hub's proxy metrics move with a proxied request.
    before = hub.run("get", "--raw", "/metrics").stdout
    assert _metric(before, "gpufed_proxy_tunnel_connected", cluster=CLUSTER) == 1.0
    hub.run("get", "--raw", PROXY + "/api/v1/namespaces/ml/pods")
    after = hub.run("get", "--raw", "/metrics").stdout
    labels = {"cluster": CLUSTER, "verb": "get", "code": "200"}
    assert _metric(after, "gpufed_proxy_requests_total", **labels) > _metric(before, "gpufed_proxy_requests_total", **labels)
    direction = {"cluster": CLUSTER, "direction": "from_member"}
    assert _metric(after, "gpufed_proxy_relayed_bytes_total", **direction) > _metric(
        before, "gpufed_proxy_relayed_bytes_total", **direction)
