"""Priority and fairness, the pure parts: classification by kube's bootstrap FlowSchemas, each
level's seats, and fair queuing within a level (shuffle sharding, bounded queues,
withdrawal; the fair order itself is in test_queueset)."""

from __future__ import annotations

import asyncio

import pytest

from controlplane.apiserver import errors
from controlplane.apiserver.flowcontrol import FlowControlConfig, FlowController, RequestDigest
from controlplane.apiserver.flowcontrol.levels import Classification, bootstrap_configuration
from controlplane.apiserver.flowcontrol.queueing import FairQueues, LevelLimits, Outcome, deal, flow_hash
from controlplane.apiserver.identity import Role, UserInfo

ADMIN = UserInfo("admin", Role.ADMIN)
AGENT = UserInfo("agent:c1", Role.AGENT, cluster="c1")
VIEWER = UserInfo("dashboard", Role.VIEWER)
ALICE = UserInfo("alice", Role.USER, user_groups=("team-a", "system:authenticated"))
NOBODY = UserInfo("system:anonymous", Role.USER, user_groups=("system:unauthenticated",))
ROBOT = UserInfo("system:serviceaccount:ml:robot", Role.USER,
                 user_groups=("system:serviceaccounts", "system:serviceaccounts:ml", "system:authenticated"))
ELECTOR = UserInfo("system:serviceaccount:kube-system:elector", Role.USER,
                   user_groups=("system:serviceaccounts", "system:serviceaccounts:kube-system", "system:authenticated"))


def classify(user: UserInfo, *, verb: str, group: str, resource: str, namespace: str = "ns1",
             total: int = 600) -> Classification:
    digest = RequestDigest(user.name, user.groups, verb, True, group, resource, "", namespace)
    return bootstrap_configuration(total).classify(digest)


@pytest.mark.parametrize(
    ("user", "verb", "group", "resource", "schema", "level", "flow"),
    [
        (ADMIN, "list", "", "configmaps", "exempt", "exempt", ""),
        (AGENT, "update", "coordination.k8s.io", "leases", "system-agents", "system", "agent:c1"),
        (AGENT, "patch", "cluster.gpufed.io", "clusters", "system-agents", "system", "agent:c1"),
        (ALICE, "update", "coordination.k8s.io", "leases", "leader-election", "leader-election", "alice"),
        (ALICE, "list", "coordination.k8s.io", "leases", "global-default", "global-default", "alice"),
        (VIEWER, "list", "", "configmaps", "global-default", "global-default", "dashboard"),
        (NOBODY, "get", "", "namespaces", "global-default", "global-default", "system:anonymous"),
        (ROBOT, "list", "", "pods", "service-accounts", "workload-low", ROBOT.name),
        (ELECTOR, "update", "coordination.k8s.io", "leases", "system-leader-election", "leader-election", ELECTOR.name),
        (ELECTOR, "list", "", "pods", "kube-system-service-accounts", "workload-high", "ns1"),
    ],
)
def test_classification(
    user: UserInfo, verb: str, group: str, resource: str, schema: str, level: str, flow: str
) -> None:
    found = classify(user, verb=verb, group=group, resource=resource)
    assert (found.flow_schema, found.level, found.flow) == (schema, level, flow)


@pytest.mark.parametrize(
    ("total", "expected"),
    [
        # kube's shares (system 30, node-high 40, leader-election 10, workload-high 40, workload-low
        # 100, global-default 20, catch-all 5; 245 in all) of 400 + 200 seats.
        (600, {"system": 74, "node-high": 98, "leader-election": 25, "workload-high": 98, "workload-low": 245,
               "global-default": 49, "catch-all": 13}),
        (1, {"system": 1, "node-high": 1, "leader-election": 1, "workload-high": 1, "workload-low": 1,
             "global-default": 1, "catch-all": 1}),
    ],
)
def test_levels_share_the_total_as_kube_computes_nominal_limits(total: int, expected: dict[str, int]) -> None:
    levels = bootstrap_configuration(total).levels
    assert {name: level.limits.seats for name, level in levels.items() if level.limits is not None} == expected
    assert levels["exempt"].limits is None


def _queue(flow: str, queues: int) -> int:
    return deal(flow_hash("s", flow), deck_size=queues, hand_size=1)[0]


def _flows_in_distinct_queues(count: int, queues: int) -> list[str]:
    flows: list[str] = []
    for n in range(1000):
        name = f"user-{n}"
        if _queue(name, queues) not in {_queue(f, queues) for f in flows}:
            flows.append(name)
        if len(flows) == count:
            return flows
    raise AssertionError("no distinct queues found")


@pytest.mark.parametrize(
    ("limits", "offers", "outcomes"),
    [
        # Seats first; then the flow's queue until it is full.
        (LevelLimits(2, 8, 2), [0, 0, 0, 0, 0], ["execute", "execute", "queued", "queued", "queue-full"]),
        # A full queue does not refuse another flow's requests.
        (LevelLimits(1, 8, 1), [0, 0, 0, 1], ["execute", "queued", "queue-full", "queued"]),
        # No queueing at all: beyond the seats, refused at once.
        (LevelLimits(1, 8, 0), [0, 1], ["execute", "concurrency-limit"]),
    ],
)
def test_bounded_queues(limits: LevelLimits, offers: list[int], outcomes: list[str]) -> None:
    flows = _flows_in_distinct_queues(2, limits.queues)
    level: FairQueues[str] = FairQueues(limits)
    assert [level.offer(flow_hash("s", flows[i]), f"r{n}", now=0).value for n, i in enumerate(offers)] == outcomes


def test_a_withdrawn_request_is_not_dispatched() -> None:
    woken: list[str] = []
    level: FairQueues[str] = FairQueues(LevelLimits(1, 4, 5), wake=woken.append)
    assert [level.offer(7, r, now=0) for r in ("r0", "r1", "r2")] == [Outcome.EXECUTE, Outcome.QUEUED, Outcome.QUEUED]
    assert level.withdraw("r1", now=1) is True
    assert level.withdraw("r1", now=1) is False
    level.finish("r0", now=2)
    assert woken == ["r2"]
    assert level.withdraw("r2", now=2) is False  # running: no longer waiting
    level.finish("r2", now=3)
    assert woken == ["r2"]
    assert (level.executing, level.waiting, level.seats_in_use) == (0, 0, 0)


async def test_levels_are_isolated_and_a_wait_times_out() -> None:
    # 20 seats: global-default's current limit is 2 (a tiny server lends all of it: 0 seats, and
    # its requests wait for the next adjustment, as in kube).
    controller = FlowController(FlowControlConfig(total_concurrency=20, queue_wait_seconds=0.05))
    flood = classify(VIEWER, verb="list", group="", resource="configmaps", total=20)
    agent = classify(AGENT, verb="update", group="coordination.k8s.io", resource="leases", total=20)
    seats = controller.levels["global-default"].concurrency
    assert seats > 0
    held = [controller.seat(flood) for _ in range(seats)]
    for seat in held:
        await seat.__aenter__()
    # global-default is full: the flood's next request waits, then is refused with 429 ...
    with pytest.raises(errors.TooManyRequests, match=r"global-default.*time-out") as refused:
        async with controller.seat(flood):
            pass
    assert refused.value.retry_after_seconds == 1
    rejected = controller.metrics.rejected.labels("global-default", "global-default", "time-out")
    assert rejected._value.get() == 1
    assert controller.levels["global-default"].waiting == 0
    # ... while the system level serves the agent at once.
    async with asyncio.timeout(5):
        async with controller.seat(agent):
            assert controller.levels["system"].executing == 1
    for seat in held:
        await seat.__aexit__(None, None, None)
    assert controller.levels["global-default"].executing == 0


async def test_a_queued_request_runs_when_a_seat_frees() -> None:
    controller = FlowController(FlowControlConfig(total_concurrency=20, queue_wait_seconds=60))
    flow = classify(ALICE, verb="list", group="", resource="configmaps", total=20)
    held = [controller.seat(flow) for _ in range(controller.levels["global-default"].concurrency)]
    assert held
    for seat in held:
        await seat.__aenter__()
    first, *others = held
    ran = asyncio.Event()

    async def second() -> None:
        async with controller.seat(flow):
            ran.set()

    task = asyncio.create_task(second())
    await asyncio.sleep(0)  # one step of the loop: the task queues (it has no other await before)
    assert controller.levels["global-default"].waiting == 1 and not ran.is_set()
    await first.__aexit__(None, None, None)
    await task
    for seat in others:
        await seat.__aexit__(None, None, None)
    assert ran.is_set() and controller.levels["global-default"].executing == 0


def test_the_hub_serves_the_metrics_under_kube_names() -> None:
    from prometheus_client import generate_latest

    from controlplane.metrics import HubMetrics

    metrics = HubMetrics(process_collectors=False)
    metrics.flowcontrol.reject(classify(ALICE, verb="list", group="", resource="pods"), "queue-full")
    text = generate_latest(metrics.registry).decode()
    assert (
        'apiserver_flowcontrol_rejected_requests_total{flow_schema="global-default",'
        'priority_level="global-default",reason="queue-full"} 1.0'
    ) in text
    for name in ("current_inqueue_requests", "current_executing_requests", "request_wait_duration_seconds"):
        assert f"# TYPE apiserver_flowcontrol_{name} " in text


@pytest.mark.parametrize(("deck", "hand"), [(128, 6), (64, 8), (16, 4), (4, 4), (1, 1)])
def test_shuffle_sharding_deals_distinct_queues_of_the_deck(deck: int, hand: int) -> None:
    for flow in ("alice", "bob", "system:serviceaccount:ml:robot", ""):
        cards = deal(flow_hash("global-default", flow), deck_size=deck, hand_size=hand)
        assert len(set(cards)) == hand and all(0 <= card < deck for card in cards)
    # Different flows get different hands (with 128 queues and 6 cards, nearly always).
    assert deal(flow_hash("s", "alice"), deck_size=128, hand_size=6) != deal(flow_hash("s", "bob"), deck_size=128, hand_size=6)


def test_a_request_joins_the_shortest_queue_of_its_hand() -> None:
    # One seat, queues of one request, a hand of two: a flow queues two requests before it is full.
    level: FairQueues[str] = FairQueues(LevelLimits(1, 8, 1, hand_size=2))
    flow = flow_hash("s", "alice")
    outcomes = [level.offer(flow, f"r{n}", now=0).value for n in range(4)]
    assert outcomes == ["execute", "queued", "queued", "queue-full"]
    assert level.active_queues == 2
    assert (level.dispatched, level.rejected) == (1, 1)
