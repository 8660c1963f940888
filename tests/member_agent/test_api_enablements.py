"""The agent's ``status.apiEnablements``: what its member's discovery serves, as Karmada's cluster
status controller lists it (every group version, subresources left out, sorted), with the
``CompleteAPIEnablements`` condition in Karmada's words; from the full simulated member (its API
machinery, a CRD installed while it runs) and from a hollow member; bounded for a member that
serves too much."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import orjson
import pytest
from pydantic import ValidationError

from controlplane.apis.apienablements import (
    MAX_API_RESOURCES,
    Collected,
    api_enablements,
    enablements_condition,
    served_kinds,
)
from gpufed.cli import build_parser
from member_agent.agent import Agent
from member_agent.apienabling import collect
from member_agent.apierrors import error_from_status
from member_agent.config import AgentConfig, config_from_args
from member_agent.kubeapi import KubeApi, Request
from simulator.hollow.api import HollowKubeApi
from simulator.hollow.member import HollowError
from simulator.resources import member_registry
from tests.controllers.fleet import eventually
from tests.controllers.test_custom_kinds import GROUP, crd
from tests.member_agent.memberapi import ServedMember, member_client, served_member
from tests.simulator.test_hollow_member import member as hollow_member

pytestmark = pytest.mark.timeout(30)

NOW = "2026-01-01T00:00:00Z"
LATER = "2026-01-01T00:05:00Z"
CRDS = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"


@pytest.fixture
async def served() -> AsyncIterator[ServedMember]:
    async with served_member(member_registry(without=frozenset({"jobsets"}))) as member:
        yield member


@pytest.fixture
async def api(served: ServedMember) -> AsyncIterator[KubeApi]:
    async with member_client(served.url) as client:
        yield client


def versions(collected: Collected) -> list[str]:
    return [entry["groupVersion"] for entry in collected.enablements]


def resources(collected: Collected, group_version: str) -> list[dict[str, str]] | None:
    return next(
        (e.get("resources") for e in collected.enablements if e["groupVersion"] == group_version), None
    )


async def test_a_member_without_a_crd_and_after_it_is_installed(api: KubeApi) -> None:
    before = await collect(api)
    assert before.complete
    assert versions(before) == sorted(versions(before))
    assert "v1" in versions(before) and "apps/v1" in versions(before)
    assert not any(v.startswith("jobset.x-k8s.io/") for v in versions(before))  # its CRD is not installed
    assert f"{GROUP}/v1" not in versions(before)
    pods = resources(before, "v1")
    assert pods is not None and {"name": "pods", "kind": "Pod"} in pods
    # No subresources (pods/status, deployments/scale).
    assert all("/" not in r["name"] for e in before.enablements for r in e.get("resources") or ())
    assert [r["name"] for r in pods] == sorted(r["name"] for r in pods)
    assert enablements_condition(before, now=NOW) == {
        "type": "CompleteAPIEnablements",
        "status": "True",
        "reason": "Complete",
        "message": "collected complete APIEnablements from the cluster",
        "lastTransitionTime": NOW,
    }
    assert await collect(api) == before  # the same member, the same list

    await api.create(CRDS, crd())
    after = await collect(api)
    assert resources(after, f"{GROUP}/v1") == [{"name": "trainers", "kind": "Trainer"}]
    assert (f"{GROUP}/v1", "Trainer") in (served_kinds({"apiEnablements": after.enablements}) or ())
    assert after != before


async def test_a_hollow_member_serves_its_discovery() -> None:
    collected = await collect(HollowKubeApi(hollow_member(nodes=2)))
    assert collected.complete
    assert ("discovery.k8s.io/v1", "EndpointSlice") in (
        served_kinds({"apiEnablements": collected.enablements}) or ()
    )
    assert ("batch/v1", "Job") in (served_kinds({"apiEnablements": collected.enablements}) or ())
    assert versions(collected) == sorted(versions(collected))


class FailingOne(HollowKubeApi):
    """A hollow member whose ``batch/v1`` does not answer discovery (an aggregated API down)."""

    async def _exchange(self, request: Request) -> dict[str, Any]:
        if request.path == "/apis/batch/v1":
            self.requests += 1
            raise _unavailable()
        return await super()._exchange(request)


def _unavailable() -> Exception:
    error = HollowError(503, "ServiceUnavailable", "the server is currently unable to handle the request")
    return error_from_status(503, orjson.dumps(error.status()))


async def test_a_group_version_that_does_not_answer_makes_the_list_partial() -> None:
    collected = await collect(FailingOne(hollow_member(nodes=2)))
    assert "batch/v1" not in versions(collected) and "apps/v1" in versions(collected)
    condition = enablements_condition(collected, now=LATER, previous=[_complete_since(NOW)])
    assert (condition["status"], condition["reason"]) == ("False", "Partial")
    assert (
        condition["message"]
        == f"might collect partial APIEnablements({len(collected.enablements)}) from the cluster"
    )
    assert condition["lastTransitionTime"] == LATER  # its status changed


def _complete_since(when: str) -> dict[str, str]:
    return {
        "type": "CompleteAPIEnablements",
        "status": "True",
        "reason": "Complete",
        "lastTransitionTime": when,
    }


def test_a_condition_that_stays_keeps_its_transition_time_and_an_empty_list_says_so() -> None:
    complete = api_enablements([{"groupVersion": "v1", "resources": [{"name": "pods", "kind": "Pod"}]}])
    assert (
        enablements_condition(complete, now=LATER, previous=[_complete_since(NOW)])["lastTransitionTime"]
        == NOW
    )
    empty = enablements_condition(api_enablements([], failed=True), now=NOW)
    assert (empty["status"], empty["reason"], empty["message"]) == (
        "False",
        "Empty",
        "collected empty APIEnablements from the cluster",
    )


def test_a_member_serving_100000_resources_is_listed_up_to_the_bound() -> None:
    documents = [
        {
            "groupVersion": f"g{i:04d}.example.com/v1",
            "resources": [{"name": f"r{j:03d}", "kind": f"R{j}"} for j in range(100)],
        }
        for i in range(1000)
    ]
    collected = api_enablements(documents)
    listed = sum(len(e["resources"]) for e in collected.enablements)
    assert listed == MAX_API_RESOURCES  # whole group versions of 100, in name order
    assert versions(collected)[-1] == f"g{MAX_API_RESOURCES // 100 - 1:04d}.example.com/v1"
    assert collected.truncated == 100_000 - MAX_API_RESOURCES and not collected.complete
    condition = enablements_condition(collected, now=NOW)
    assert (condition["status"], condition["reason"]) == ("False", "Partial")
    assert condition["message"] == (
        f"might collect partial APIEnablements({MAX_API_RESOURCES // 100}) from the cluster: "
        f"the cluster serves more than {MAX_API_RESOURCES} resources; the list stops there"
    )


async def test_the_collector_stops_asking_past_the_bound() -> None:
    api = HollowKubeApi(hollow_member(nodes=2))
    collected = await collect(api, limit=3)
    assert collected.truncated and not collected.complete
    assert sum(len(e.get("resources") or ()) for e in collected.enablements) <= 3
    # /api, /apis and one batch of group versions: not one request per group version served.
    assert api.requests <= 2 + 8


async def test_the_agent_reports_its_list_when_it_changes_and_carries_it_in_each_report(
    tmp_path: Path,
) -> None:
    agent = Agent(AgentConfig(hub="https://hub:6443", cluster_name="c", state_dir=tmp_path))
    hollow = hollow_member(nodes=2)
    agent.member = HollowKubeApi(hollow)
    report: dict[str, Any] = {"conditions": [{"type": "Ready", "status": "True"}], "lastReportTime": NOW}
    agent._add_api_enablements(report)
    # Not gathered yet: the report is an older agent's.
    assert "apiEnablements" not in report and len(report["conditions"]) == 1

    assert await agent._gather_api_enablements()
    assert agent._report_due.is_set()
    agent._report_due.clear()
    assert not await agent._gather_api_enablements()  # the same APIs: no report of its own
    assert not agent._report_due.is_set()

    agent.cluster = {"status": {"conditions": [_complete_since(NOW)]}}
    agent._add_api_enablements(report)
    assert agent.api_enablements is not None
    assert report["apiEnablements"] == agent.api_enablements.enablements
    assert [c["type"] for c in report["conditions"]] == ["Ready", "CompleteAPIEnablements"]
    assert report["conditions"][1]["lastTransitionTime"] == NOW


class Establishing(HollowKubeApi):
    """A hollow member that does not serve ``batch/v1`` until ``established`` (a CRD applied
    moments ago, which its API server has not established yet)."""

    established = False

    async def _exchange(self, request: Request) -> dict[str, Any]:
        answer = await super()._exchange(request)
        if request.path == "/apis" and not self.established:
            answer["groups"] = [g for g in answer["groups"] if g["name"] != "batch"]
        return answer


async def test_after_a_crd_is_applied_the_list_is_read_again_until_it_changes(tmp_path: Path) -> None:
    config = AgentConfig(
        hub="https://hub:6443", cluster_name="c", state_dir=tmp_path, api_enablements_interval=3600
    )
    agent = Agent(config)
    member = agent.member = Establishing(hollow_member(nodes=2))
    loop = asyncio.create_task(agent._api_enablements_loop())
    try:
        await _until(lambda: agent.api_enablements is not None, "the first list")
        assert agent.api_enablements is not None and "batch/v1" not in versions(agent.api_enablements)
        agent._api_enablements_due.set()  # as after a Work with a CRD applied
        reads = member.requests
        await _until(lambda: member.requests > reads, "a read at once (not served yet)")
        member.established = True
        # Read again after a second or so, not after the hour-long interval.
        await _until(
            lambda: "batch/v1" in versions(agent.api_enablements or Collected([])), "batch/v1 listed"
        )
    finally:
        loop.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await loop


def _until(condition: Callable[[], bool], what: str) -> Awaitable[bool]:
    async def probe() -> bool:
        return condition()

    return eventually(probe, what=what)


AGENT = ("agent", "--hub", "https://hub:6443", "--cluster-name", "c", "--state-dir", "/tmp/agent-state")


def test_the_flag_sets_how_often_discovery_is_read_and_is_bounded_as_the_other_intervals() -> None:
    assert config_from_args(build_parser().parse_args(AGENT)).api_enablements_interval == 60.0
    flagged = build_parser().parse_args([*AGENT, "--api-enablements-interval", "15"])
    assert config_from_args(flagged).api_enablements_interval == 15.0
    for bad in ("0", "-5"):
        with pytest.raises(ValidationError) as refused:
            config_from_args(build_parser().parse_args([*AGENT, "--api-enablements-interval", bad]))
        # ``gpufed agent`` prints the first problem and exits 2, as for --report-interval 0.
        assert [(e["loc"], e["msg"]) for e in refused.value.errors()] == [
            (("api_enablements_interval",), "Input should be greater than 0")
        ]
