"""kube's dump_priority_levels counts as active only the queues with requests waiting
(apf_controller_debug.go: ``len(q.Requests) > 0``), not those whose requests only execute."""

from __future__ import annotations

import asyncio
import time

from controlplane.apiserver.flowcontrol import FlowControlConfig, FlowController
from controlplane.apiserver.flowcontrol.debugging import dump_priority_levels
from controlplane.apiserver.flowcontrol.queueing import flow_hash

#: One seat (of a server of one, neither lent nor borrowed), two queues and a hand of both: a request waits in the queue with
#: less work waiting, so a second waiting request takes the other queue, whatever its flow.
NARROW = {
    "apiVersion": "flowcontrol.apiserver.k8s.io/v1", "kind": "PriorityLevelConfiguration",
    "metadata": {"name": "narrow"},
    "spec": {"type": "Limited", "limited": {
        "nominalConcurrencyShares": 1, "lendablePercent": 0, "borrowingLimitPercent": 0,
        "limitResponse": {"type": "Queue", "queuing": {"queues": 2, "handSize": 2, "queueLengthLimit": 10}},
    }},
}


def _counts(controller: FlowController, level: str) -> list[str]:
    """The level's ActiveQueues, WaitingRequests and ExecutingRequests in the dump."""
    for line in dump_priority_levels(controller).splitlines()[1:]:
        cells = [cell.strip() for cell in line.split(",")[:-1]]
        if cells[0] == level:
            return [cells[1], cells[4], cells[5]]
    raise AssertionError(f"no line for {level}")


async def test_active_queues_are_those_with_requests_waiting() -> None:
    controller = FlowController(FlowControlConfig(total_concurrency=1))
    controller.update((), [NARROW])
    level = controller.levels["narrow"]
    assert level.concurrency == 1
    loop = asyncio.get_running_loop()
    now = time.monotonic()
    first, second, third = (loop.create_future() for _ in range(3))
    assert _counts(controller, "narrow") == ["0", "0", "0"]
    level.offer(flow_hash("narrow", "a"), first, now=now)
    assert _counts(controller, "narrow") == ["0", "0", "1"]  # it executes: no queue is active
    level.offer(flow_hash("narrow", "b"), second, now=now)
    assert _counts(controller, "narrow") == ["1", "1", "1"]
    level.offer(flow_hash("narrow", "c"), third, now=now)
    assert _counts(controller, "narrow") == ["2", "2", "1"]  # one waits in each queue
    level.finish(first, now=now)
    assert _counts(controller, "narrow") == ["1", "1", "1"]
    level.finish(second, now=now)
    assert _counts(controller, "narrow") == ["0", "0", "1"]
    level.finish(third, now=now)
    assert _counts(controller, "narrow") == ["0", "0", "0"]
