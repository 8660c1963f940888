"""The member's ``apiEnablements`` read from discovery that fails, lies or is very large: the list
stays bounded and says when it is partial, a failed pass keeps the list the agent had (as Karmada
keeps a Cluster's status while its member is not healthy), a bad answer never stops the agent, and
a restarted agent's first report carries the stored list."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from controlplane.apis.apienablements import MAX_API_RESOURCES, Collected, api_enablements
from member_agent import apienabling
from member_agent.agent import Agent
from member_agent.apienabling import collect, group_versions
from member_agent.config import AgentConfig
from member_agent.kubeapi import Request
from member_agent.reachability import Unreachable
from simulator.hollow.api import HollowKubeApi
from tests.controllers.fleet import eventually
from tests.simulator.test_hollow_member import member as hollow_member

pytestmark = pytest.mark.timeout(30)

NOW = "2026-01-01T00:00:00Z"
POD = {"name": "pods", "kind": "Pod"}
CORE = {"groupVersion": "v1", "resources": [POD]}
BATCH = {"groupVersion": "batch/v1", "resources": [{"name": "jobs", "kind": "Job"}]}


class Scripted(HollowKubeApi):
    """A member whose discovery answers are given by ``answer(path)`` (an exception is raised)."""

    def __init__(self, answer: Callable[[str], Any]) -> None:
        super().__init__(hollow_member(nodes=1))
        self.answer = answer

    async def _exchange(self, request: Request) -> dict[str, Any]:
        self.requests += 1
        result = self.answer(request.path)
        if isinstance(result, BaseException):
            raise result
        return result  # type: ignore[no-any-return]


def groups(names: list[str]) -> dict[str, Any]:
    return {"groups": [{"name": n.split("/")[0], "versions": [{"groupVersion": n}]} for n in names]}


def down() -> Unreachable:
    return Unreachable("https://member", "connection refused")


@pytest.mark.parametrize(
    "documents",
    [
        [CORE, "v1", 7, None],
        [{"groupVersion": "v1", "resources": [POD, "pods", 3, None, {"name": 5}]}],
        [CORE, {"groupVersion": "apps/v1", "resources": {"deployments": 1}}],
        [CORE, {"groupVersion": "apps/v1", "resources": 12}],
        [CORE, {"groupVersion": ["v2"], "resources": [POD]}],
    ],
    ids=[
        "documents-not-objects",
        "resources-not-objects",
        "resources-a-map",
        "resources-a-number",
        "bad-version",
    ],
)
def test_answers_of_the_wrong_shape_are_skipped(documents: list[Any]) -> None:
    collected = api_enablements(documents)
    assert collected.enablements[-1] == CORE  # "apps/v1", when listed, sorts first, without resources
    assert all(set(e) == {"groupVersion"} for e in collected.enablements[:-1])
    assert all(isinstance(r, dict) for e in collected.enablements for r in e.get("resources") or ())


@pytest.mark.parametrize(
    ("core", "apis"),
    [
        ({"versions": ["v1", 3, None, {"v": 1}]}, {"groups": [{"name": "a", "versions": ["v1"]}, "b", 4]}),
        (["v1"], {"groups": {"a": 1}}),
        ({"versions": "v1"}, {"groups": [{"name": "a", "versions": [{"groupVersion": 9}, "x"]}]}),
    ],
    ids=["items-not-objects", "documents-not-objects", "fields-not-lists"],
)
def test_group_versions_of_the_wrong_shape_are_skipped(core: Any, apis: Any) -> None:
    assert set(group_versions(core, apis)) <= {"v1"}


async def test_a_member_answering_wrong_shapes_is_listed_without_them() -> None:
    def answer(path: str) -> Any:
        if path == "/api":
            return {"versions": ["v1", 3]}
        if path == "/apis":
            return {"groups": [{"name": "a", "versions": ["v1"]}, *groups(["batch/v1"])["groups"]]}
        return {"resources": ["pods"]} if path == "/apis/batch/v1" else {"resources": [POD]}

    collected = await collect(Scripted(answer))
    assert collected is not None and collected.enablements == [{"groupVersion": "batch/v1"}, CORE]


async def test_group_versions_left_unread_past_the_bound_make_the_list_partial() -> None:
    """Twenty group versions of 400 resources and 400 ``*/status``: the bound counts resources,
    not subresources, and the versions past it are counted as left out."""
    names = [f"g{i:02}.example.com/v1" for i in range(20)]
    resources = [r for j in range(400) for r in ({"name": f"r{j}", "kind": "K"}, {"name": f"r{j}/status"})]

    def answer(path: str) -> Any:
        return (
            {"versions": []}
            if path == "/api"
            else groups(names)
            if path == "/apis"
            else {"resources": resources}
        )

    member = Scripted(answer)
    collected = await collect(member)
    assert collected is not None and not collected.complete
    assert len(collected.enablements) == MAX_API_RESOURCES // 400
    # Two batches of eight read (6,400 resources): four of them left out, four versions not asked.
    assert collected.truncated == 4 * 400 + 4
    assert member.requests == 2 + 2 * apienabling.CONCURRENCY


async def test_group_versions_without_resources_are_bounded() -> None:
    names = [f"g{i:05}.example.com/v1" for i in range(20_000)]

    def answer(path: str) -> Any:
        return (
            {"versions": ["v1"]}
            if path == "/api"
            else groups(names)
            if path == "/apis"
            else {"resources": []}
        )

    member = Scripted(answer)
    collected = await collect(member, limit=100)
    assert collected is not None and not collected.complete
    assert len(collected.enablements) == 100
    assert member.requests <= 2 + 100 + apienabling.CONCURRENCY


async def test_group_versions_that_do_not_answer_are_bounded_too() -> None:
    """A member naming 20,000 group versions that each answer with something else than a list of
    resources is asked for no more of them than one with empty ones."""
    names = [f"g{i:05}.example.com/v1" for i in range(20_000)]

    def answer(path: str) -> Any:
        return {"versions": ["v1"]} if path == "/api" else groups(names) if path == "/apis" else "not a document"

    member = Scripted(answer)
    await collect(member, limit=100)
    assert member.requests <= 2 + 100 + apienabling.CONCURRENCY


@pytest.mark.parametrize("failing", ["/api", "/apis", "every group version"])
async def test_a_pass_that_reads_nothing_keeps_the_list(failing: str) -> None:
    def answer(path: str) -> Any:
        if path == failing or (failing == "every group version" and path not in ("/api", "/apis")):
            return down()
        return {"versions": ["v1"]} if path == "/api" else groups(["batch/v1"]) if path == "/apis" else CORE

    assert await collect(Scripted(answer), previous=[CORE, BATCH]) is None


async def test_a_group_version_that_does_not_answer_keeps_its_previous_entry() -> None:
    def answer(path: str) -> Any:
        if path == "/apis/batch/v1":
            return down()
        return {"versions": ["v1"]} if path == "/api" else groups(["batch/v1"]) if path == "/apis" else CORE

    collected = await collect(Scripted(answer), previous=[CORE, BATCH])
    assert collected is not None and collected.failed and not collected.complete
    assert collected.enablements == [BATCH, CORE]


def agent_with(tmp_path: Path, answer: Callable[[str], Any]) -> Agent:
    config = AgentConfig(
        hub="https://hub:6443", cluster_name="c", state_dir=tmp_path, api_enablements_interval=3600
    )
    agent = Agent(config)
    agent.member = Scripted(answer)
    return agent


async def test_the_agent_keeps_its_list_when_its_member_is_down_and_survives_a_bad_answer(
    tmp_path: Path,
) -> None:
    state = {"answer": "good"}

    def answer(path: str) -> Any:
        if state["answer"] == "down":
            return down()
        if state["answer"] == "broken":
            return RuntimeError("not discovery")
        if path == "/api":
            return {"versions": ["v1"]}
        return groups([]) if path == "/apis" else CORE

    agent = agent_with(tmp_path, answer)
    member = agent.member
    assert isinstance(member, Scripted)
    loop = asyncio.create_task(agent._api_enablements_loop())
    try:
        await until(lambda: agent.api_enablements is not None, "the first list")
        good = agent.api_enablements
        assert good == Collected([CORE])
        for state["answer"] in ("down", "broken"):
            await read_again(agent, member, f"a read of a {state['answer']} member")
            assert agent.api_enablements is good
            assert not loop.done()
        state["answer"] = "good"
        await read_again(agent, member, "a read after the failures")
        assert not loop.done() and agent.api_enablements == good
    finally:
        loop.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await loop


def test_a_restarted_agents_first_report_carries_the_stored_list(tmp_path: Path) -> None:
    agent = agent_with(tmp_path, lambda path: down())
    stored_condition = {
        "type": "CompleteAPIEnablements",
        "status": "True",
        "reason": "Complete",
        "message": "collected complete APIEnablements from the cluster",
        "lastTransitionTime": NOW,
    }
    agent.cluster = {
        "status": {"apiEnablements": [CORE], "conditions": [{"type": "Ready"}, stored_condition]}
    }
    report: dict[str, Any] = {"conditions": [{"type": "Ready", "status": "True"}], "lastReportTime": NOW}
    agent._add_api_enablements(report)
    assert report["apiEnablements"] == [CORE]
    assert report["conditions"] == [{"type": "Ready", "status": "True"}, stored_condition]


async def test_before_its_first_pass_a_failed_group_version_keeps_the_stored_entry(tmp_path: Path) -> None:
    def answer(path: str) -> Any:
        if path == "/apis/batch/v1":
            return down()
        return {"versions": ["v1"]} if path == "/api" else groups(["batch/v1"]) if path == "/apis" else CORE

    agent = agent_with(tmp_path, answer)
    agent.cluster = {"status": {"apiEnablements": [CORE, BATCH]}}
    assert await agent._gather_api_enablements()
    assert agent.api_enablements is not None and agent.api_enablements.enablements == [BATCH, CORE]


async def read_again(agent: Agent, member: Scripted, what: str) -> None:
    """Ask the agent's loop to read its member (as after a Work with a CRD) and wait for a request."""
    reads = member.requests
    agent._api_enablements_due.set()
    await until(lambda: member.requests > reads, what)


def until(condition: Callable[[], bool], what: str) -> Any:
    async def probe() -> bool:
        return condition()

    return eventually(probe, what=what)
