"""What a member agent's own credential can do to its Cluster, with real processes: a hub,
a simulated member, its agent, and the real kubectl holding the agent's stored credential.

After an admin cordons and taints the cluster and sets its labels, tier and price, the
agent's credential cannot undo any of it by any write verb (403 Forbidden naming the
fields), while the agent's own status reports keep landing and a restarted agent
registers again without taking the admin's values back."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from e2e.harness import Kubectl, ProcessGroup, wait_for
from e2e.test_members import FLEET, _agent_kubeconfig, _ready

pytestmark = pytest.mark.e2e
CLUSTER = "onprem-a100"
#: The cluster whose name is taken over: another one than :data:`CLUSTER`, on the same hub.
TAKEN = "cloud-h100"
PRODUCT = "NVIDIA-A100-SXM4-80GB"


@pytest.fixture(scope="module")
def hub(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Kubectl]:
    """One hub for the module: each test joins a member of its own (another cluster name)."""
    with ProcessGroup.running_hub(tmp_path_factory.mktemp("agent-credential-hub")) as running:
        yield running


def _forbidden(result: Any, *fields: str) -> None:
    assert result.returncode != 0, result.stdout
    assert "is forbidden" in result.stderr, result.stderr
    for field in fields:
        assert field in result.stderr, result.stderr


def test_agent_credential_cannot_undo_an_admins_cordon_but_reports_status(
    processes: ProcessGroup, hub: Kubectl, tmp_path: Path
) -> None:
    _sim, member, dcgm = processes.start_member(FLEET, CLUSTER)
    agent_proc = processes.start_agent(hub, FLEET, CLUSTER, member, dcgm)
    wait_for(lambda: _ready(hub.json("get", "cluster", CLUSTER)), timeout=90, what=f"{CLUSTER} Ready")

    # The admin drains the cluster and changes what the agent registered.
    hub.run("patch", "cluster", CLUSTER, "--type", "merge", "-p", json.dumps({"spec": {
        "unschedulable": True,
        "taints": [{"key": "maintenance", "value": "true", "effect": "NoExecute"}],
        "tier": 3,
        "pricing": {PRODUCT: 2.5},
    }}))
    hub.run("label", "cluster", CLUSTER, "team=ml")
    admin_view = hub.json("get", "cluster", CLUSTER)

    agent = Kubectl(_agent_kubeconfig(processes.root / f"agent-{CLUSTER}", hub, tmp_path))
    undo = {
        "metadata": {"labels": {"tenant": "finance"}},
        "spec": {"unschedulable": False, "taints": [], "tier": 0, "pricing": {PRODUCT: 0.01}},
    }
    _forbidden(
        agent.run("patch", "cluster", CLUSTER, "--type", "merge", "-p", json.dumps(undo), check=False),
        ".spec.unschedulable", ".spec.taints", ".spec.tier", f".spec.pricing.{PRODUCT}", ".metadata.labels.tenant",
    )
    _forbidden(agent.run("patch", "cluster", CLUSTER, "--type", "json", "-p", json.dumps(
        [{"op": "remove", "path": "/spec/taints"}]), check=False), ".spec.taints")
    _forbidden(agent.run("label", "cluster", CLUSTER, "team=finance", "--overwrite", check=False),
               ".metadata.labels.team")
    _forbidden(agent.run("annotate", "cluster", CLUSTER, "x=y", check=False),
               ".metadata.annotations.x")
    replaced = json.loads(json.dumps(admin_view))
    replaced["spec"].update(unschedulable=False, taints=[])
    del replaced["metadata"]["resourceVersion"]  # an unconditional PUT: status reports move it on
    (tmp_path / "replace.json").write_text(json.dumps(replaced))
    _forbidden(agent.run("replace", "-f", str(tmp_path / "replace.json"), check=False), ".spec.unschedulable")
    applied: dict[str, Any] = {
        "apiVersion": "cluster.gpufed.io/v1alpha1", "kind": "Cluster", "metadata": {"name": CLUSTER},
        "spec": {"provider": "onprem", "unschedulable": False, "tier": 0},
    }
    (tmp_path / "apply.yaml").write_text(yaml.safe_dump(applied))
    _forbidden(agent.run("apply", "--server-side", "--force-conflicts", "--field-manager", "gpufed-agent",
                         "-f", str(tmp_path / "apply.yaml"), check=False), ".spec.unschedulable")

    after = hub.json("get", "cluster", CLUSTER)
    assert after["spec"] == admin_view["spec"]
    assert after["metadata"]["labels"] == admin_view["metadata"]["labels"]

    # The agent's own status reports keep landing (200s), on top of the admin's spec.
    reported = admin_view["status"]["lastReportTime"]
    wait_for(lambda: hub.json("get", "cluster", CLUSTER)["status"]["lastReportTime"] != reported,
             timeout=30, what="a newer status report from the agent")
    assert agent_proc.alive()
    assert "Forbidden" not in agent_proc.log()

    # A restarted agent registers again: its tier and price stay the admin's, with a warning.
    agent_proc.stop()
    before_restart = hub.json("get", "cluster", CLUSTER)["status"]["lastReportTime"]
    agent_proc = processes.start_agent(hub, FLEET, CLUSTER, member, dcgm)
    wait_for(lambda: hub.json("get", "cluster", CLUSTER)["status"]["lastReportTime"] != before_restart,
             timeout=60, what="status reports from the restarted agent")
    restarted = hub.json("get", "cluster", CLUSTER)
    assert restarted["spec"] == admin_view["spec"]
    assert restarted["metadata"]["labels"] == {"tier": "onprem", "team": "ml"}
    assert agent_proc.alive()
    log = agent_proc.log()
    assert f"not applying spec.pricing.{PRODUCT}" in log, log[-3000:]


def _agent_argv(join: list[str], member: Kubectl, dcgm: str, state: Path) -> list[str]:
    return [*join, "--cluster-name", TAKEN, "--kubeconfig", str(member.kubeconfig), "--state-dir", str(state),
            "--dcgm-url", dcgm, "--heartbeat-interval", "2", "--report-interval", "3"]


def test_a_cluster_name_is_taken_over_only_with_a_token_scoped_to_it(
    processes: ProcessGroup, hub: Kubectl, tmp_path: Path
) -> None:
    sim, member, dcgm = processes.start_member(FLEET, TAKEN)
    first = processes.start_agent(hub, FLEET, TAKEN, member, dcgm)
    wait_for(lambda: _ready(hub.json("get", "cluster", TAKEN)), timeout=90, what=f"{TAKEN} Ready")
    # The join token reached the agent through a file: nothing secret on its command line.
    token_file = Path(first.argv[first.argv.index("--token-file") + 1])
    assert first.popen is not None
    cmdline = Path(f"/proc/{first.popen.pid}/cmdline").read_bytes().decode()
    assert token_file.read_text().strip() not in cmdline
    first_state = processes.root / f"agent-{TAKEN}"
    assert first_state.stat().st_mode & 0o777 == 0o700
    owner_kubeconfig = _agent_kubeconfig(first_state, hub, tmp_path)

    # Another holder of an ordinary join token cannot take the name (nor revoke the member's credential).
    # (Without leader election: in the same member it would otherwise wait as a follower of the
    # member's own agent, as a second replica does, and never try to join.)
    intruder = processes.start_raw("intruder", [*_agent_argv(
        processes.join_command(hub), member, dcgm, tmp_path / "intruder"), "--leader-elect=false"])
    wait_for(lambda: not intruder.alive(), timeout=60, what="the intruding agent to give up")
    assert intruder.popen is not None and intruder.popen.returncode != 0
    assert f'cluster "{TAKEN}" has already joined the hub' in intruder.log(), intruder.log()
    assert f"gpufed token create --cluster {TAKEN}" in intruder.log()
    assert Kubectl(owner_kubeconfig).run("get", "cluster", TAKEN, check=False).returncode == 0
    reported = hub.json("get", "cluster", TAKEN)["status"]["lastReportTime"]
    wait_for(lambda: hub.json("get", "cluster", TAKEN)["status"]["lastReportTime"] != reported,
             timeout=30, what="the member's agent to keep reporting")

    # An admin's explicit re-join (a token scoped to the name) replaces the old credential.
    first.stop()
    rejoined = processes.start_raw("rejoined", _agent_argv(
        processes.join_command(hub, cluster=TAKEN), member, dcgm, tmp_path / "rejoined"))
    wait_for(lambda: "joined the hub as cluster" in rejoined.log() or not rejoined.alive(), timeout=60,
             what="the re-join")
    assert rejoined.alive(), rejoined.log()
    # It registers (without the first agent's cluster file) and reports, and keeps running.
    reported = hub.json("get", "cluster", TAKEN)["status"]["lastReportTime"]
    wait_for(lambda: hub.json("get", "cluster", TAKEN)["status"]["lastReportTime"] != reported or not rejoined.alive(),
             timeout=30, what="the re-joined agent's first report")
    assert rejoined.alive(), rejoined.log()
    stale = Kubectl(owner_kubeconfig).run("get", "cluster", TAKEN, check=False)
    assert stale.returncode != 0 and "Unauthorized" in stale.stderr, stale.stderr

    # The member's snapshot (every object, Secrets included) is its owner's alone.
    sim.stop()
    member_state = processes.root / f"member-{TAKEN}"
    assert member_state.stat().st_mode & 0o777 == 0o700
    assert (member_state / "snapshot.json").stat().st_mode & 0o777 == 0o600
