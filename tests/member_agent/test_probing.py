"""The agent's probe of the member's API: kube's health output read right, a failure threshold
that ignores blips, and the Ready condition the report then carries.

The pure parts are table-driven; the probe itself runs against a real simulated member
(in-process, over HTTPS with its kubeconfig) while it is healthy, while it is shutting down
(``/readyz`` fails, ``/livez`` does not) and once it is gone.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from controlplane.apis.cluster_v1alpha1 import ClusterReadyReason
from controlplane.apiserver.health import CheckResult, render_health
from member_agent import capacity
from member_agent.agent import member_api
from member_agent.config import AgentConfig
from member_agent.probing import (
    MemberApiHealth,
    ProbeOutcome,
    ProbeResult,
    failed_checks,
    probe_member_api,
)
from simulator.profile import parse_fleet
from simulator.server import SimServer, SimServerConfig

pytestmark = pytest.mark.timeout(60)

KUBE_FAILED_READYZ = (
    "[+]ping ok\n[+]log ok\n[-]etcd failed: reason withheld\n[+]poststarthook/start-informers ok\n"
    "[-]informer-sync failed: reason withheld\nreadyz check failed\n"
)


@pytest.mark.parametrize(
    ("body", "checks"),
    [
        ("ok", []),
        ("[+]ping ok\n[+]etcd ok\nreadyz check passed\n", []),
        (KUBE_FAILED_READYZ, ["etcd failed: reason withheld", "informer-sync failed: reason withheld"]),
        ("internal server error: etcd is down\n", []),
    ],
)
def test_failed_checks_read_kubes_verbose_output(body: str, checks: list[str]) -> None:
    assert failed_checks(body) == checks


OK = ProbeResult(ProbeOutcome.OK)
DOWN = ProbeResult(ProbeOutcome.UNREACHABLE, "GET /readyz: Connect call failed")
SICK = ProbeResult(ProbeOutcome.NOT_READY, "GET /readyz answered 500: etcd failed: reason withheld")


@pytest.mark.parametrize(
    ("probes", "reason"),
    [
        ([(0, OK)], None),
        # Failing for less than the threshold (30 s): a blip, nothing reported.
        ([(0, OK), (10, DOWN), (20, DOWN), (39, DOWN)], None),
        # Failing for the threshold: reported, by what the last probe saw.
        ([(10, DOWN), (40, DOWN)], ClusterReadyReason.MEMBER_API_UNREACHABLE),
        ([(10, SICK), (40, SICK)], ClusterReadyReason.MEMBER_API_NOT_READY),
        ([(10, DOWN), (40, SICK)], ClusterReadyReason.MEMBER_API_NOT_READY),
        # One passing probe clears it, and the threshold counts afresh.
        ([(10, DOWN), (40, DOWN), (50, OK)], None),
        ([(10, DOWN), (20, OK), (30, DOWN), (50, DOWN)], None),
        ([(10, DOWN), (20, OK), (30, DOWN), (60, DOWN)], ClusterReadyReason.MEMBER_API_UNREACHABLE),
    ],
)
def test_member_api_health_needs_the_failure_threshold(
    probes: list[tuple[float, ProbeResult]], reason: ClusterReadyReason | None
) -> None:
    health = MemberApiHealth(server="https://member:6443", failure_threshold=30)
    problem = None
    for at, result in probes:
        problem = health.observe(result, now=at)
    assert (problem.reason if problem else None) == reason
    assert health.problem == problem


def test_the_problem_message_names_the_server_the_cause_and_what_to_do() -> None:
    health = MemberApiHealth(server="https://member:6443", failure_threshold=0)
    problem = health.observe(DOWN, now=5)
    assert problem is not None
    assert "https://member:6443 has not answered" in problem.message
    assert "Connect call failed" in problem.message
    assert "check that the API server runs" in problem.message


NODE = {
    "metadata": {"name": "n1", "labels": {}},
    "status": {"allocatable": {"cpu": "8", "memory": "32Gi", "nvidia.com/gpu": "4"},
               "conditions": [{"type": "Ready", "status": "True"}]},
}


def test_a_member_api_problem_makes_the_report_not_ready_whatever_the_cache_says() -> None:
    healthy = capacity.summarize([NODE], [], now="2026-01-01T00:00:00Z")
    assert healthy["conditions"][0]["status"] == "True"
    down = capacity.summarize(
        [NODE], [], now="2026-01-01T00:01:00Z", previous_conditions=healthy["conditions"],
        api_problem=(ClusterReadyReason.MEMBER_API_UNREACHABLE, "the member's API server x has not answered for 31s"),
    )
    [ready] = down["conditions"]
    assert (ready["status"], ready["reason"]) == ("False", "MemberAPIUnreachable")
    assert ready["message"].startswith("the member's API server x has not answered for 31s: 1/1 nodes ready")
    assert ready["lastTransitionTime"] == "2026-01-01T00:01:00Z"
    assert down["lastReportTime"] == "2026-01-01T00:01:00Z"


@pytest.mark.parametrize(
    ("results", "verbose", "status", "body"),
    [
        ([CheckResult("ping"), CheckResult("etcd")], False, 200, "ok"),
        ([CheckResult("ping"), CheckResult("etcd")], True, 200, "[+]ping ok\n[+]etcd ok\nreadyz check passed\n"),
        # A failure lists every check whatever verbose says, with the reason withheld.
        (
            [CheckResult("ping"), CheckResult("etcd", "store closed")],
            False,
            500,
            "[+]ping ok\n[-]etcd failed: reason withheld\nreadyz check failed\n",
        ),
        (
            [CheckResult("ping"), CheckResult("etcd", "store closed", excluded=True)],
            True,
            200,
            "[+]ping ok\n[+]etcd excluded: ok\nreadyz check passed\n",
        ),
    ],
)
def test_simulated_health_answers_in_kubes_format(
    results: list[CheckResult], verbose: bool, status: int, body: str
) -> None:
    assert render_health("readyz", results, verbose=verbose) == (status, body)


FLEET = {
    "clusters": [
        {
            "name": "probed",
            "nodeGroups": [{"name": "a", "count": 1, "cpu": 8, "memoryGiB": 32,
                            "gpu": {"product": "NVIDIA-L4", "count": 1}}],
        }
    ]
}


async def test_probe_a_real_member_up_shutting_down_and_gone(tmp_path: Path) -> None:
    config = SimServerConfig(profile=parse_fleet(FLEET).clusters[0], state_dir=tmp_path / "member",
                             snapshot_interval=None)
    server = SimServer(config)
    await server.start()
    try:
        api = await member_api(
            AgentConfig(hub="https://hub:6443", cluster_name="probed", kubeconfig=server.kubeconfig_path,
                        state_dir=tmp_path / "agent")
        )
        try:
            assert await probe_member_api(api, request_timeout=5) == ProbeResult(ProbeOutcome.OK)
            status, body = await api.get_text("/livez", query={"verbose": ""})
            assert (status, body) == (200, "[+]ping ok\n[+]log ok\n[+]etcd ok\nlivez check passed\n")

            server.request_stop()  # shutting down: not ready, still live
            result = await probe_member_api(api, request_timeout=5)
            assert result.outcome is ProbeOutcome.NOT_READY
            assert result.detail == "GET /readyz answered 500: shutdown failed: reason withheld"

            await server.shutdown()
            result = await probe_member_api(api, request_timeout=5)
            assert result.outcome is ProbeOutcome.UNREACHABLE
            assert result.detail.startswith("GET /readyz: ")
        finally:
            await api.close()
    finally:
        await server.shutdown()
