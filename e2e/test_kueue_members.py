"""Two-level admission end to end (real hub, a simulated on-prem member and its agent, kubectl):
the member's Cluster declares ``spec.kueue.enabled``; a Job the hub admitted reaches the member
with its ``kueue.x-k8s.io/queue-name`` label and still suspended, so no pod starts until the
member's own Kueue admits it. The test plays that Kueue with kubectl on the member (it flips
``spec.suspend``); the pods then run, and a later change of the Job on the hub, applied by the
agent, leaves them running (the member's Kueue owns the flag).
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from e2e.harness import Kubectl, ProcessGroup, wait_for
from e2e.test_quotas import FLEET, QUEUES, _admitted_in, _job, _running_pods

pytestmark = pytest.mark.e2e
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"


def _member_job(member: Kubectl, name: str) -> dict[str, Any] | None:
    return member.json_or_none("get", "job", name, "-n", "ml")


def test_a_kueue_member_gets_the_job_queued_and_suspended(processes: ProcessGroup) -> None:
    hub, members = processes.start_fleet(FLEET, ("onprem-a100",))
    member = members["onprem-a100"]
    hub.run("apply", "-f", str(QUEUES))
    hub.run("patch", "cluster", "onprem-a100", "--type", "merge", "-p", '{"spec":{"kueue":{"enabled":true}}}')
    hub.run("apply", "-f", "-", input_text=json.dumps(_job("k1", "team-a")))
    wait_for(lambda: _admitted_in(hub, "k1") == "team-a", timeout=60, what="k1 admitted by team-a at the hub")
    assert hub.json("get", "job", "k1", "-n", "ml")["spec"]["suspend"] is False

    wait_for(lambda: _member_job(member, "k1") is not None, timeout=60, what="k1 in the member")
    job = _member_job(member, "k1")
    assert job is not None
    assert job["metadata"]["labels"][QUEUE_LABEL] == "team-a"
    assert job["spec"]["suspend"] is True
    assert _running_pods(member, "k1") == 0

    # The member's Kueue admits it in its LocalQueue team-a and starts it.
    member.run("patch", "job", "k1", "-n", "ml", "--type", "merge", "-p", '{"spec":{"suspend":false}}')
    wait_for(lambda: _running_pods(member, "k1") == 1, timeout=120, what="k1's pod Running in the member")

    # A change on the hub reaches the member; the member's Kueue keeps the say on suspension.
    hub.run("annotate", "job", "k1", "-n", "ml", "team.example.com/note=rerun")

    def note_applied() -> bool:
        annotations = ((_member_job(member, "k1") or {}).get("metadata") or {}).get("annotations") or {}
        return annotations.get("team.example.com/note") == "rerun"

    wait_for(note_applied, timeout=60, what="the hub's change applied in the member")
    job = _member_job(member, "k1")
    assert job is not None and job["spec"]["suspend"] is False
    assert _running_pods(member, "k1") == 1
