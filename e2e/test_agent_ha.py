"""Two agents for one cluster (two replicas sharing the agent's state volume), as real processes:
they elect one leader on the Lease ``gpufed-system/gpufed-agent-<cluster>`` in the member; only it
applies Works and holds the proxy tunnel, which stays up (no flapping between the two); killed
(SIGKILL, no release), the other takes over within the lease duration, applies what the hub
asks from then on and opens the tunnel."""

from __future__ import annotations

import json
import signal
import time
import urllib.request

import pytest

from e2e.harness import Kubectl, ProcessGroup, free_port, wait_for
from e2e.test_members import FLEET, _ready

pytestmark = pytest.mark.e2e
CLUSTER = "onprem-a100"
LEASE = ("get", "lease", "-n", "gpufed-system", f"gpufed-agent-{CLUSTER}", "-o", "json")
#: Short election timings, so the takeover is quick: a dead leader's Lease expires after 3 s.
ELECTION = (
    "--leader-elect=true",
    "--leader-elect-lease-duration",
    "3s",
    "--leader-elect-renew-deadline",
    "2s",
    "--leader-elect-retry-period",
    "500ms",
)


def _policy_and_configmap(name: str) -> str:
    return json.dumps(
        {
            "apiVersion": "v1",
            "kind": "List",
            "items": [
                {
                    "apiVersion": "v1",
                    "kind": "ConfigMap",
                    "metadata": {"name": name, "namespace": "ml"},
                    "data": {"k": "v"},
                },
                {
                    "apiVersion": "policy.karmada.io/v1alpha1",
                    "kind": "PropagationPolicy",
                    "metadata": {"name": name, "namespace": "ml"},
                    "spec": {
                        "resourceSelectors": [{"apiVersion": "v1", "kind": "ConfigMap", "name": name}],
                        "placement": {"clusterAffinity": {"clusterNames": [CLUSTER]}},
                    },
                },
            ],
        }
    )


def _metrics(port: int) -> dict[str, float] | None:
    """The agent's /metrics as {name: value} (one cluster: labels dropped); None while it does not answer."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
            text = response.read().decode()
    except OSError:
        return None
    values = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, _, value = line.rpartition(" ")
            values[name.partition("{")[0]] = float(value)
    return values


def _leading(port: int) -> float | None:
    metrics = _metrics(port)
    return None if metrics is None else metrics.get("gpufed_agent_leader_election_master_status")


def _propagated(member: Kubectl, name: str) -> bool:
    return member.json_or_none("get", "configmap", name, "-n", "ml") is not None


def test_two_agents_elect_one_leader_and_the_other_takes_over_when_it_dies(processes: ProcessGroup) -> None:
    _sim, member, dcgm = processes.start_member(FLEET, CLUSTER, time_scale=20.0)
    _, hub = processes.start_hub()
    ports = (free_port(), free_port())
    first = processes.start_agent(
        hub,
        FLEET,
        CLUSTER,
        member,
        dcgm,
        extra=("--enable-proxy", "--metrics-listen", f"127.0.0.1:{ports[0]}", *ELECTION),
    )
    wait_for(lambda: _ready(hub.json("get", "cluster", CLUSTER)), timeout=120, what=f"{CLUSTER} Ready")
    assert _leading(ports[0]) == 1.0
    # The second replica: the same flags and state directory, its own metrics port.
    argv = list(first.argv)
    argv[argv.index("--metrics-listen") + 1] = f"127.0.0.1:{ports[1]}"
    second = processes.start_raw(f"agent-{CLUSTER}-2", argv)
    wait_for(lambda: _leading(ports[1]) == 0.0, timeout=60, what="the second agent up, following")
    hub.run("create", "namespace", "ml")
    hub.run("apply", "-f", "-", input_text=_policy_and_configmap("before"))
    wait_for(lambda: _propagated(member, "before"), timeout=60, what="the leader to apply the first Work")

    # Over a few seconds (several renewals), the leader keeps its one tunnel and the follower
    # opens none, runs nothing, and waits.
    lease = member.json(*LEASE)["spec"]
    for _ in range(6):
        leader, follower = _metrics(ports[0]), _metrics(ports[1])
        assert leader is not None and follower is not None
        assert leader["gpufed_agent_leader_election_master_status"] == 1.0
        assert leader["gpufed_agent_proxy_tunnel_connections"] == 1.0
        assert leader["gpufed_agent_proxy_tunnel_connected"] == 1.0
        assert follower["gpufed_agent_leader_election_master_status"] == 0.0
        assert "gpufed_agent_proxy_tunnel_connections" not in follower
        time.sleep(1)
    renewed = member.json(*LEASE)["spec"]
    assert (
        renewed["holderIdentity"] == lease["holderIdentity"]
        and renewed["leaseTransitions"] == lease["leaseTransitions"]
    )
    assert renewed["renewTime"] != lease["renewTime"]
    assert "became leader of cluster onprem-a100" in first.log()
    assert "became leader" not in second.log() and "attempting to acquire leader lease" in second.log()

    first.signal(signal.SIGKILL)  # no release: the follower waits for the Lease to expire
    wait_for(lambda: _leading(ports[1]) == 1.0, timeout=60, what="the second agent to take over")
    taken = member.json(*LEASE)["spec"]
    assert taken["holderIdentity"] != lease["holderIdentity"]
    assert taken["leaseTransitions"] == lease["leaseTransitions"] + 1
    hub.run("apply", "-f", "-", input_text=_policy_and_configmap("after"))
    wait_for(lambda: _propagated(member, "after"), timeout=60, what="the new leader to apply the next Work")
    proxied = wait_for(
        lambda: (
            hub.run(
                "get",
                "--raw",
                f"/apis/cluster.gpufed.io/v1alpha1/clusters/{CLUSTER}/proxy/api/v1/namespaces/ml/configmaps/after",
                check=False,
            ).returncode
            == 0
        ),
        timeout=60,
        what="the proxy through the new leader's tunnel",
    )
    assert proxied
    assert "became leader of cluster onprem-a100" in second.log()
