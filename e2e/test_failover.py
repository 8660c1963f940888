"""Cluster health, failover, cordon and a highly available hub, end to end with real processes.

* An agent that stops heartbeating turns its cluster Unknown and tainted unreachable
  (NoSchedule + NoExecute) after the grace period; once the default toleration runs out its
  replicas are rescheduled to the other cluster and Running there. Restarted, the agent
  removes the stale copies from its member, and the hub's Deployment never shows more ready
  replicas than it asks for.
* `gpufed cordon` keeps new work off a cluster while what runs there stays.
* An agent cut off from the hub (a TCP proxy between them stops passing traffic) keeps its
  member's pods; after it reconnects, the replicas that moved away are removed from its
  member and the ones still wanted there keep running, untouched.
* Two hub replicas on one etcd: both serve kubectl; kill -9 the leader while 500 workloads
  are being applied; the other replica takes over (the gpufed-system/gpufed-controllers
  Lease names it) and every workload ends up placed exactly once, with no orphaned Work and
  no member object without a Work.

Timings are shortened by flags: cluster monitor grace 4 s, default unreachable toleration
2 s, graceful eviction timeout 30 s, agent heartbeat 2 s, leader lease 3 s.
"""

from __future__ import annotations

import contextlib
import logging
import socket
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from e2e.harness import (
    GPUFED,
    KUBECTL,
    Kubectl,
    ProcessGroup,
    apply_overflow_policy_without_returns,
    free_port,
    wait_for,
)

HERE = Path(__file__).parent
FLEET = HERE / "fleets" / "failover.yaml"
MANIFESTS = HERE / "manifests" / "placement"
UNREACHABLE = "cluster.gpufed.io/unreachable"
CORDONED = "cluster.gpufed.io/unschedulable"
ONPREM, CLOUD = "onprem-a100", "cloud-h100"
FAST_FAILOVER = (
    "--cluster-monitor-grace-period", "4",
    "--default-unreachable-toleration-seconds", "2",
    "--graceful-eviction-timeout", "30",
)
LOAD_WORKLOADS = 500
pytestmark = pytest.mark.e2e
log = logging.getLogger(__name__)


def _ready(cluster: dict[str, Any]) -> str:
    for cond in cluster.get("status", {}).get("conditions", []):
        if cond["type"] == "Ready":
            return str(cond["status"])
    return ""


def _taints(cluster: dict[str, Any]) -> set[tuple[str, str]]:
    return {(t["key"], t["effect"]) for t in cluster.get("spec", {}).get("taints") or ()}


def _running(member: Kubectl, selector: str, namespace: str = "ml") -> int:
    pods = member.json("get", "pods", "-n", namespace, "-l", selector, "--field-selector=status.phase=Running")
    return len(pods["items"])


def _pod_uids(member: Kubectl, selector: str, namespace: str = "ml") -> set[str]:
    pods = member.json("get", "pods", "-n", namespace, "-l", selector, "--field-selector=status.phase=Running")
    return {p["metadata"]["uid"] for p in pods["items"]}


def _gpufed(hub: Kubectl, *args: str) -> str:
    result = subprocess.run([GPUFED, *args, "--kubeconfig", str(hub.kubeconfig)],
                            capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 0, result.stderr
    return result.stdout.strip()


def _placement(hub: Kubectl, workload: str, namespace: str = "ml") -> dict[str, int]:
    binding = hub.json("get", "resourcebinding", f"{workload}-deployment", "-n", namespace)
    return {t["name"]: t["replicas"] for t in binding["spec"].get("clusters") or ()}


class ReadyWatch:
    """Remembers the most ready replicas the hub's Deployment ever showed while polled."""

    def __init__(self, hub: Kubectl, name: str, namespace: str = "ml") -> None:
        self.hub, self.name, self.namespace = hub, name, namespace
        self.most = 0

    def ready(self) -> int:
        deployment = self.hub.json("get", "deployment", self.name, "-n", self.namespace)
        ready = int(deployment.get("status", {}).get("readyReplicas") or 0)
        self.most = max(self.most, ready)
        return ready

    def sampled(self, condition: bool) -> bool:
        """``condition``, after one more look at the hub's ready replicas (for polling loops)."""
        self.ready()
        return condition


def _launch_members(processes: ProcessGroup) -> dict[str, Callable[[], tuple[Any, Kubectl, str]]]:
    """Both members of FLEET started (before the hub, so they come up beside it)."""
    return {name: processes.launch_member(FLEET, name, time_scale=20.0) for name in (ONPREM, CLOUD)}


def _start_fleet(
    processes: ProcessGroup, hub: Kubectl, launched: dict[str, Callable[[], tuple[Any, Kubectl, str]]],
    *, via: dict[str, str] | None = None,
) -> tuple[dict[str, Kubectl], dict[str, Any], dict[str, str]]:
    """The :func:`_launch_members` members, once up, and their agents (an agent in ``via`` talks
    to the hub through that URL)."""
    members: dict[str, Kubectl] = {}
    agents: dict[str, Any] = {}
    dcgms: dict[str, str] = {}
    for name, up in launched.items():
        _, member, dcgm = up()
        join = processes.join_command(hub)
        if via and name in via:
            join[join.index("--hub") + 1] = via[name]
        agents[name] = processes.start_agent(hub, FLEET, name, member, dcgm, join=join)
        members[name], dcgms[name] = member, dcgm
    wait_for(lambda: [_ready(c) for c in hub.json("get", "clusters")["items"]] == ["True", "True"],
             timeout=90, what="both clusters Ready")
    hub.run("apply", "-f", "-", input_text="apiVersion: v1\nkind: Namespace\nmetadata: {name: ml}\n")
    return members, agents, dcgms


def test_silent_agent_goes_unknown_its_replicas_move_and_cordon_keeps_running_work(processes: ProcessGroup) -> None:
    launched = _launch_members(processes)
    _, hub = processes.start_hub("hub", *FAST_FAILOVER)
    members, agents, dcgms = _start_fleet(processes, hub, launched)
    apply_overflow_policy_without_returns(hub, MANIFESTS)
    hub.run("apply", "-f", str(MANIFESTS / "infer.yaml"))
    onprem, cloud = members[ONPREM], members[CLOUD]
    wait_for(lambda: _running(onprem, "app=infer") == 6 and _running(cloud, "app=infer") == 4,
             timeout=90, what="6 Running on-prem and 4 in the cloud")

    # Cordon the cloud: it is tainted, what runs there stays; more replicas do not go there.
    assert _gpufed(hub, "cordon", CLOUD) == f"cluster/{CLOUD} cordoned"
    assert (CORDONED, "NoSchedule") in _taints(hub.json("get", "cluster", CLOUD))
    hub.run("scale", "deployment", "infer", "-n", "ml", "--replicas", "12")
    wait_for(lambda: sum(_placement(hub, "infer").values()) >= 10 and _placement(hub, "infer").get(CLOUD) == 4,
             timeout=60, what="the binding to keep 4 in the cordoned cloud")
    assert _placement(hub, "infer").get(CLOUD) == 4
    assert _running(cloud, "app=infer") == 4
    assert _gpufed(hub, "uncordon", CLOUD) == f"cluster/{CLOUD} uncordoned"
    hub.run("scale", "deployment", "infer", "-n", "ml", "--replicas", "10")
    settled = ReadyWatch(hub, "infer")
    wait_for(lambda: settled.ready() == 10 and _placement(hub, "infer") == {ONPREM: 6, CLOUD: 4},
             timeout=60, what="10 ready replicas, 6 on-prem and 4 in the cloud")
    watch = ReadyWatch(hub, "infer")  # from here on, the hub must never show more than 10

    # Stop the on-prem agent: after the grace period its cluster is Unknown and tainted ...
    agents[ONPREM].stop()

    def unknown_and_tainted() -> bool:
        cluster = hub.json("get", "cluster", ONPREM)
        return _ready(cluster) == "Unknown" and {(UNREACHABLE, "NoSchedule"), (UNREACHABLE, "NoExecute")} <= _taints(cluster)

    wait_for(unknown_and_tainted, timeout=60, what=f"{ONPREM} Unknown and tainted unreachable")
    # ... and once the toleration runs out its replicas are rescheduled to the cloud and Running there.
    wait_for(lambda: watch.sampled(_placement(hub, "infer") == {CLOUD: 10}),
             timeout=60, what="all 10 replicas rescheduled to the cloud")
    wait_for(lambda: watch.sampled(_running(cloud, "app=infer") == 10),
             timeout=90, what="10 Running in the cloud")
    # The member keeps its pods while its agent is away.
    assert _running(onprem, "app=infer") == 6
    wait_for(lambda: watch.ready() == 10 and not hub.json("get", "works", "-n", f"gpufed-es-{ONPREM}")["items"],
             timeout=60, what="the on-prem Work to go once the cloud replicas are Running")

    agents[ONPREM] = processes.start_agent(
        hub, FLEET, ONPREM, onprem, dcgms[ONPREM], join=processes.join_command(hub)
    )

    def recovered() -> bool:
        cluster = hub.json("get", "cluster", ONPREM)
        return _ready(cluster) == "True" and not any(key == UNREACHABLE for key, _ in _taints(cluster))

    wait_for(recovered, timeout=60, what=f"{ONPREM} Ready again without the unreachable taints")
    # The restarted agent removes the stale copies; nothing was ever counted twice on the hub.
    wait_for(lambda: watch.sampled(_running(onprem, "app=infer") == 0),
             timeout=60, what="the stale on-prem copies to disappear")
    assert watch.ready() == 10
    assert watch.most == 10, f"the hub showed {watch.most} ready replicas of 10"
    assert _placement(hub, "infer") == {CLOUD: 10}
    assert _running(cloud, "app=infer") == 10


class Partition:
    """A TCP proxy in front of the hub that can stop passing traffic (a network partition).

    While cut, open connections are closed and new ones are accepted and closed at once, as a
    firewall rejecting the agent would look to it. Binds 127.0.0.1 only.
    """

    def __init__(self, upstream_port: int) -> None:
        self.upstream = ("127.0.0.1", upstream_port)
        self.port = free_port()
        self.cut = threading.Event()
        self._lock = threading.Lock()
        self._open: set[socket.socket] = set()
        self._listener = socket.create_server(("127.0.0.1", self.port))
        self._listener.settimeout(0.2)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._accept, name="partition-proxy", daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.port}"

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                client, _ = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            if self.cut.is_set():
                client.close()
                continue
            try:
                server = socket.create_connection(self.upstream, timeout=5)
            except OSError:
                client.close()
                continue
            with self._lock:
                self._open.update((client, server))
            for src, dst in ((client, server), (server, client)):
                threading.Thread(target=self._pump, args=(src, dst), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket) -> None:
        try:
            while data := src.recv(65536):
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for sock in (src, dst):
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)
                sock.close()
                with self._lock:
                    self._open.discard(sock)

    def partition(self) -> None:
        self.cut.set()
        with self._lock:
            sockets = list(self._open)
        for sock in sockets:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)

    def heal(self) -> None:
        self.cut.clear()

    def close(self) -> None:
        self._stop.set()
        self.partition()
        self._listener.close()
        self._thread.join(timeout=5)


@contextlib.contextmanager
def partition_proxy(upstream_port: int) -> Iterator[Partition]:
    proxy = Partition(upstream_port)
    try:
        yield proxy
    finally:
        proxy.close()


PINNED = """\
apiVersion: policy.gpufed.io/v1alpha1
kind: PropagationPolicy
metadata: {name: pinned-on-prem, namespace: ml}
spec:
  resourceSelectors: [{apiVersion: apps/v1, kind: Deployment, name: pinned}]
  placement:
    clusterAffinity: {clusterNames: [onprem-a100]}
    clusterTolerations: [{key: cluster.gpufed.io/unreachable, operator: Exists, effect: NoExecute}]
    replicaScheduling: {replicaSchedulingType: Divided, replicaDivisionPreference: Aggregated}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: pinned, namespace: ml}
spec:
  replicas: 2
  selector: {matchLabels: {app: pinned}}
  template:
    metadata: {labels: {app: pinned}}
    spec:
      containers:
        - name: server
          image: registry.example.com/ml/cache:1.0
          resources: {requests: {cpu: 100m}}
"""


def test_a_cut_off_agent_keeps_its_pods_and_reconnecting_removes_only_what_moved(processes: ProcessGroup) -> None:
    launched = _launch_members(processes)
    _, hub = processes.start_hub("hub", *FAST_FAILOVER)
    server = yaml.safe_load(hub.kubeconfig.read_text())["clusters"][0]["cluster"]["server"]
    hub_port = int(server.rsplit(":", 1)[1])
    with partition_proxy(hub_port) as proxy:
        members, _, _ = _start_fleet(processes, hub, launched, via={ONPREM: proxy.url})
        onprem, cloud = members[ONPREM], members[CLOUD]
        apply_overflow_policy_without_returns(hub, MANIFESTS)
        infer = (MANIFESTS / "infer.yaml").read_text().replace("replicas: 10", "replicas: 4")
        hub.run("apply", "-f", "-", input_text=infer)
        hub.run("apply", "-f", "-", input_text=PINNED)
        wait_for(lambda: _running(onprem, "app=infer") == 4 and _running(onprem, "app=pinned") == 2,
                 timeout=90, what="infer (4) and pinned (2) Running on-prem")
        pinned_pods = _pod_uids(onprem, "app=pinned")
        watch = ReadyWatch(hub, "infer")

        proxy.partition()
        wait_for(lambda: _ready(hub.json("get", "cluster", ONPREM)) == "Unknown",
                 timeout=60, what=f"{ONPREM} Unknown while cut off")
        wait_for(lambda: watch.sampled(_placement(hub, "infer") == {CLOUD: 4}),
                 timeout=60, what="infer rescheduled to the cloud")
        wait_for(lambda: watch.ready() == 4 and _running(cloud, "app=infer") == 4
                 and not any(w["metadata"]["name"].startswith("ml-infer")
                             for w in hub.json("get", "works", "-n", f"gpufed-es-{ONPREM}")["items"]),
                 timeout=90, what="infer Running in the cloud and its on-prem Work gone from the hub")
        # Longer than the grace period and the eviction: the cut-off member still runs everything.
        assert _running(onprem, "app=infer") == 4
        assert _pod_uids(onprem, "app=pinned") == pinned_pods
        # pinned tolerates the unreachable taint for ever: it is still placed on-prem.
        assert _placement(hub, "pinned") == {ONPREM: 2}

        proxy.heal()
        wait_for(lambda: _ready(hub.json("get", "cluster", ONPREM)) == "True",
                 timeout=90, what=f"{ONPREM} Ready again after reconnecting")
        wait_for(lambda: watch.sampled(_running(onprem, "app=infer") == 0),
                 timeout=90, what="the moved replicas to be removed from the reconnected member")
        # What is still wanted there was not touched: the same pods keep running.
        assert _pod_uids(onprem, "app=pinned") == pinned_pods
        assert _placement(hub, "pinned") == {ONPREM: 2}
        assert _placement(hub, "infer") == {CLOUD: 4}
        assert watch.ready() == 4 and watch.most == 4, f"the hub showed {watch.most} ready replicas of 4"
        pinned_ready = hub.json("get", "deployment", "pinned", "-n", "ml")["status"].get("readyReplicas")
        assert pinned_ready == 2


def _load_manifests(count: int) -> str:
    policy = """\
apiVersion: policy.gpufed.io/v1alpha1
kind: PropagationPolicy
metadata: {name: load, namespace: load}
spec:
  resourceSelectors: [{apiVersion: apps/v1, kind: Deployment}]
  placement:
    replicaScheduling: {replicaSchedulingType: Divided, replicaDivisionPreference: TieredOverflow}
"""
    deployments = [
        f"""\
apiVersion: apps/v1
kind: Deployment
metadata: {{name: w{i:03d}, namespace: load}}
spec:
  replicas: 1
  selector: {{matchLabels: {{app: w{i:03d}}}}}
  template:
    metadata: {{labels: {{app: w{i:03d}}}}}
    spec:
      containers: [{{name: c, image: registry.example.com/tiny:1, resources: {{requests: {{cpu: 10m}}}}}}]
"""
        for i in range(count)
    ]
    return "---\n".join([policy, *deployments])


def _fleet_state(hub: Kubectl, members: dict[str, Kubectl]) -> tuple[list[str], dict[str, Any]]:
    """Problems with "every workload placed exactly once, no orphaned Work, no member object
    without a Work" (empty when all holds), and counts for the failure message."""
    problems: list[str] = []
    bindings = hub.json("get", "resourcebindings", "-n", "load")["items"]
    by_name = {b["metadata"]["name"]: b for b in bindings}
    works = hub.json("get", "works", "-A", "-l", "work.gpufed.io/namespace=load")["items"]
    deployments = {d["metadata"]["name"] for d in hub.json("get", "deployments", "-n", "load")["items"]}
    if len(deployments) != LOAD_WORKLOADS:
        problems.append(f"{len(deployments)} Deployments on the hub")
    placed: dict[str, int] = {}
    for work in works:
        binding = work["metadata"]["labels"]["work.gpufed.io/binding"]
        if binding not in by_name:
            problems.append(f"Work {work['metadata']['namespace']}/{work['metadata']['name']} has no binding")
            continue
        placed[binding] = placed.get(binding, 0) + int(work["spec"]["workload"]["manifests"][0]["spec"]["replicas"])
    for name in deployments:
        binding = by_name.get(f"{name}-deployment")
        if binding is None:
            problems.append(f"{name} has no binding")
            continue
        decided = sum(t["replicas"] for t in binding["spec"].get("clusters") or ())
        if decided != 1 or placed.get(binding["metadata"]["name"], 0) != 1:
            problems.append(f"{name}: binding places {decided}, its Works {placed.get(binding['metadata']['name'], 0)}")
    work_keys = {(w["metadata"]["namespace"], w["metadata"]["name"]) for w in works}
    member_objects = 0
    for cluster, member in members.items():
        owned = member.json("get", "deployments", "-A", "-l", "app.kubernetes.io/managed-by=gpufed")["items"]
        member_objects += len(owned)
        for obj in owned:
            labels = obj["metadata"]["labels"]
            key = (labels.get("work.gpufed.io/namespace"), labels.get("work.gpufed.io/name"))
            if key not in work_keys or key[0] != f"gpufed-es-{cluster}":
                problems.append(f"{cluster}: {obj['metadata']['namespace']}/{obj['metadata']['name']} has no Work")
    if member_objects != len(works):
        problems.append(f"{member_objects} member Deployments for {len(works)} Works")
    return problems, {"bindings": len(bindings), "works": len(works), "member objects": member_objects}


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_killing_the_leader_while_500_workloads_are_applied_places_each_exactly_once(
    processes: ProcessGroup, tmp_path: Path
) -> None:
    launched = _launch_members(processes)
    _, etcd_url = processes.start_etcd()
    common = ("--etcd-endpoints", etcd_url, "--leader-lease-ttl", "3")
    hubs = [processes.launch_hub(name, *common, "--identity", name) for name in ("hub-a", "hub-b")]
    (first, hub_a), (second, hub_b) = (up() for up in hubs)
    replicas = {"hub-a": (first, hub_a), "hub-b": (second, hub_b)}

    def holder(via: Kubectl) -> str:
        lease = via.json("get", "lease", "gpufed-controllers", "-n", "gpufed-system")
        return str(lease["spec"]["holderIdentity"])

    leader_name = wait_for(lambda: holder(hub_b), timeout=60, what="a leader")
    leader_proc, _ = replicas[leader_name]
    other_name = "hub-b" if leader_name == "hub-a" else "hub-a"
    _, other = replicas[other_name]
    assert holder(hub_a) == holder(hub_b) == leader_name

    members, _, _ = _start_fleet(processes, other, launched)
    other.run("apply", "-f", "-", input_text="apiVersion: v1\nkind: Namespace\nmetadata: {name: load}\n")
    manifests = tmp_path / "load.yaml"
    manifests.write_text(_load_manifests(LOAD_WORKLOADS))
    # Apply through the replica that survives, and kill -9 the leader part-way through.
    started = time.monotonic()
    applying = subprocess.Popen(
        [KUBECTL, "--kubeconfig", str(other.kubeconfig), "apply", "-f", str(manifests)],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )
    try:
        wait_for(lambda: len(other.json("get", "resourcebindings", "-n", "load")["items"]) >= 100,
                 timeout=120, what="the leader to be placing the workloads")
        leader_proc.stop(kill=True)
        killed_at = time.monotonic() - started
        _, errors = applying.communicate(timeout=240)
    finally:
        if applying.poll() is None:
            applying.kill()
    assert applying.returncode == 0, errors
    wait_for(lambda: holder(other) == other_name, timeout=60, what=f"{other_name} to take over")

    state: dict[str, Any] = {}

    def converged() -> bool:
        problems, counts = _fleet_state(other, members)
        state.update(counts, problems=problems[:10], total_problems=len(problems))
        return not problems

    wait_for(converged, timeout=180, interval=2.0, what=f"every workload placed exactly once (last: {state})")
    assert state["bindings"] == state["works"] == state["member objects"] == LOAD_WORKLOADS
    log.info("leader killed %.1fs into the apply; converged %.1fs after it began", killed_at, time.monotonic() - started)
