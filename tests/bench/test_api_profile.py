"""The API profile's split: a sample counts once, for the innermost frame that names a component
(library frames count for their caller), the gRPC poller thread apart, and the shares add up."""

from __future__ import annotations

import pytest

from bench.api_profile import POLLER_THREAD, split, table

MAIN = "thread (1): MainThread"
LOOP = "BaseEventLoop._run_once (asyncio/base_events.py:1922);Handle._run (asyncio/events.py:80)"
RAW = "\n".join([
    # orjson under the codec counts for encode; uuid under the flow-control levels for APF.
    f"{MAIN};{LOOP};ResourceHandlers._create (controlplane/apiserver/handlers.py:385);"
    "encode (controlplane/apiserver/codec.py:57);dumps (orjson:1) 3",
    f"{MAIN};{LOOP};object_uid (controlplane/apiserver/flowcontrol/levels.py:96);uuid5 (uuid.py:728) 1",
    # The direct etcd call under the create handler is the etcd call's, not the handler's.
    f"{MAIN};{LOOP};Writer._create_attempt (controlplane/apiserver/objects/writing.py:161);"
    "EtcdStore.create (controlplane/storage/etcd/__init__.py:210);"
    "direct_unary.<locals>.call (controlplane/storage/etcd/unary.py:90) 4",
    f"{MAIN};{LOOP} 1",
    "thread (2): Thread-1 (_poll_wrapper);Thread.run (threading.py:975) 2",
    f"{MAIN};frozen (unknown:1) 1",
    "not a sample line",
])


def test_each_sample_counts_once_for_its_innermost_component() -> None:
    found = split(RAW)
    assert found.samples == 12
    assert found.shares == pytest.approx({
        "encode": 3 / 12,
        "flow control (APF)": 1 / 12,
        "etcd call (request, gRPC call, reply)": 4 / 12,
        "event loop": 1 / 12,
        POLLER_THREAD: 2 / 12,
        "other": 1 / 12,
    })
    assert sum(found.shares.values()) == pytest.approx(1.0)


def test_the_table_puts_runs_side_by_side() -> None:
    text = table([("before", split(RAW)), ("empty", split(""))])
    assert "| encode | 25.0 % | 0.0 % |" in text
    assert text.splitlines()[-1] == "| samples | 12 | 0 |"
