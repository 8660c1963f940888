"""The hub suspects itself when every cluster stops reporting at once, end to end.

Both agents reach the hub through one TCP proxy (a load balancer in front of the hub); cutting
it stops every heartbeat at the same moment, as a frozen hub replica behind a load balancer
did. Both clusters go ``Unknown`` and get the ``NoSchedule`` half of the unreachable taint,
but the hub — seeing the whole fleet silent — sets no ``NoExecute`` taint, starts no eviction
even past the toleration, says so in its log and on ``/metrics``, and returns to normal when
the reports come back.

Timings are shortened by flags: grace 4 s, unreachable toleration 6 s, agent heartbeat 2 s.
"""

from __future__ import annotations

import re
import time
from typing import Any

import pytest
import yaml

from e2e.harness import Kubectl, ProcessGroup, wait_for
from e2e.test_failover import CLOUD, FLEET, MANIFESTS, ONPREM, UNREACHABLE, partition_proxy

TOLERATION_SECONDS = 6
HUB_FLAGS = (
    "--cluster-monitor-grace-period", "4",
    "--default-unreachable-toleration-seconds", str(TOLERATION_SECONDS),
    "--graceful-eviction-timeout", "30",
)
pytestmark = pytest.mark.e2e


def _ready(cluster: dict[str, Any]) -> str:
    for cond in cluster.get("status", {}).get("conditions", []):
        if cond["type"] == "Ready":
            return str(cond["status"])
    return ""


def _taints(cluster: dict[str, Any]) -> set[tuple[str, str]]:
    return {(t["key"], t["effect"]) for t in cluster.get("spec", {}).get("taints") or ()}


def _running(member: Kubectl, selector: str) -> int:
    pods = member.json("get", "pods", "-n", "ml", "-l", selector, "--field-selector=status.phase=Running")
    return len(pods["items"])


def _binding(hub: Kubectl) -> dict[str, Any]:
    return dict(hub.json("get", "resourcebinding", "infer-deployment", "-n", "ml"))


def _placement(hub: Kubectl) -> dict[str, int]:
    return {t["name"]: t["replicas"] for t in _binding(hub)["spec"].get("clusters") or ()}


def _fleet_state(hub: Kubectl) -> str | None:
    metrics = hub.run("get", "--raw", "/metrics").stdout
    states = re.findall(r'^gpufed_fleet_disruption_state\{state="(\w+)"\} 1$', metrics, flags=re.M)
    return states[0] if len(states) == 1 else None


@pytest.mark.slow
def test_every_cluster_silent_at_once_is_not_evicted(processes: ProcessGroup) -> None:
    launched = {name: processes.launch_member(FLEET, name, time_scale=20.0) for name in (ONPREM, CLOUD)}
    hub_proc, hub = processes.start_hub("hub", *HUB_FLAGS)
    server = yaml.safe_load(hub.kubeconfig.read_text())["clusters"][0]["cluster"]["server"]
    with partition_proxy(int(server.rsplit(":", 1)[1])) as balancer:
        members: dict[str, Kubectl] = {}
        for name, up in launched.items():
            _, members[name], dcgm = up()
            join = processes.join_command(hub)
            join[join.index("--hub") + 1] = balancer.url
            processes.start_agent(hub, FLEET, name, members[name], dcgm, join=join)
        wait_for(lambda: [_ready(c) for c in hub.json("get", "clusters")["items"]] == ["True", "True"],
                 timeout=90, what="both clusters Ready")
        hub.run("apply", "-f", "-", input_text="apiVersion: v1\nkind: Namespace\nmetadata: {name: ml}\n")
        hub.run("apply", "-f", str(MANIFESTS / "overflow-policy.yaml"))
        hub.run("apply", "-f", str(MANIFESTS / "infer.yaml"))
        wait_for(lambda: _running(members[ONPREM], "app=infer") == 6 and _running(members[CLOUD], "app=infer") == 4,
                 timeout=90, what="6 Running on-prem and 4 in the cloud")
        assert _fleet_state(hub) == "Normal"

        balancer.partition()  # every heartbeat stops reaching the hub at once

        def all_unknown() -> bool:
            return all(_ready(c) == "Unknown" for c in hub.json("get", "clusters")["items"])

        wait_for(all_unknown, timeout=60, what="both clusters Unknown")
        wait_for(lambda: _fleet_state(hub) == "FullDisruption", timeout=30, what="the hub to report a full disruption")
        time.sleep(TOLERATION_SECONDS + 4)  # past the toleration of any NoExecute taint set meanwhile
        for cluster in hub.json("get", "clusters")["items"]:
            assert _ready(cluster) == "Unknown"
            taints = _taints(cluster)
            assert (UNREACHABLE, "NoSchedule") in taints, taints
            assert (UNREACHABLE, "NoExecute") not in taints, taints
        binding = _binding(hub)
        assert not binding["spec"].get("gracefulEvictionTasks"), binding["spec"]
        assert _placement(hub) == {ONPREM: 6, CLOUD: 4}
        assert "all 2 clusters stopped reporting or are not ready at once; suspecting the hub's own connectivity, " \
               "not evicting" in hub_proc.log()

        balancer.heal()
        wait_for(lambda: [_ready(c) for c in hub.json("get", "clusters")["items"]] == ["True", "True"],
                 timeout=90, what="both clusters Ready again")
        wait_for(lambda: _fleet_state(hub) == "Normal", timeout=30, what="the hub back to normal")
        for cluster in hub.json("get", "clusters")["items"]:
            assert not any(key == UNREACHABLE for key, _ in _taints(cluster))
        assert _placement(hub) == {ONPREM: 6, CLOUD: 4}
        assert _running(members[ONPREM], "app=infer") == 6
