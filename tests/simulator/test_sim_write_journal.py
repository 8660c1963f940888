"""A simulated member killed with SIGKILL right after writes comes back with every write it
acknowledged, at the resourceVersions it gave them, and its resourceVersions go on upward: the
write journal (:mod:`simulator.journal`) replayed over the last snapshot."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from controlplane.storage import EventType, KeyValue, WatchEvent
from simulator.journal import WriteJournal, replay
from simulator.profile import parse_fleet
from simulator.server import SimServer, SimServerConfig

FLEET = {
    "clusters": [
        {
            "name": "k",
            "nodeGroups": [
                {
                    "name": "a100",
                    "count": 1,
                    "cpu": 8,
                    "memoryGiB": 64,
                    "gpu": {"product": "NVIDIA-A100-SXM4-80GB", "count": 1},
                }
            ],
        }
    ]
}

#: The member process: 30 ConfigMaps, a snapshot taken after the first 10 (so writes on both
#: sides of it), one of them deleted and one updated after it; then it prints what it was
#: answered and waits to be killed.
CHILD = """
import asyncio, json, sys
from pathlib import Path
from simulator.profile import parse_fleet
from simulator.server import SimServer, SimServerConfig

async def main():
    profile = parse_fleet(json.loads(sys.argv[2])).clusters[0]
    sim = SimServer(SimServerConfig(profile=profile, state_dir=Path(sys.argv[1]), seed=1, snapshot_interval=None))
    await sim.start()
    rt = sim.objects.registry.require("v1", "ConfigMap")
    versions = {}
    for i in range(30):
        made = await sim.objects.create(
            rt, {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": f"cm-{i}"}, "data": {"i": str(i)}},
            namespace="default",
        )
        versions[f"cm-{i}"] = made["metadata"]["resourceVersion"]
        if i == 9:
            await sim.snapshot()
    await sim.objects.delete(rt, namespace="default", name="cm-3")
    del versions["cm-3"]
    current = await sim.objects.get(rt, namespace="default", name="cm-20")
    current["data"] = {"i": "changed"}
    versions["cm-20"] = (await sim.objects.update(rt, current, namespace="default"))["metadata"]["resourceVersion"]
    print(json.dumps(versions), flush=True)
    await asyncio.Event().wait()

asyncio.run(main())
"""


def _writes_then_killed(state_dir: Path) -> dict[str, str]:
    """Run the member process on ``state_dir``, SIGKILL it once it has printed; what it printed."""
    with subprocess.Popen(
        [sys.executable, "-c", CHILD, str(state_dir), json.dumps(FLEET)],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env=os.environ,
    ) as child:
        try:
            assert child.stdout is not None
            line = child.stdout.readline()
        finally:
            child.send_signal(signal.SIGKILL)
            child.wait(timeout=30)
    versions: dict[str, str] = json.loads(line)
    return versions


async def test_a_killed_member_keeps_every_acknowledged_write(tmp_path: Path) -> None:
    acknowledged = _writes_then_killed(tmp_path)

    profile = parse_fleet(FLEET).clusters[0]
    async with SimServer(
        SimServerConfig(profile=profile, state_dir=tmp_path, seed=1, snapshot_interval=None)
    ) as sim:
        rt = sim.objects.registry.require("v1", "ConfigMap")
        listed = await sim.objects.list(rt, namespace="default")
        found = {
            o["metadata"]["name"]: o["metadata"]["resourceVersion"]
            for o in listed.items
            if o["metadata"]["name"].startswith("cm-")
        }
        assert found == acknowledged
        changed = await sim.objects.get(rt, namespace="default", name="cm-20")
        assert changed["data"] == {"i": "changed"}
        made = await sim.objects.create(
            rt, {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "after"}}, namespace="default"
        )
        assert int(made["metadata"]["resourceVersion"]) > max(int(v) for v in acknowledged.values())


def _put(key: str, value: bytes, create: int, mod: int) -> WatchEvent:
    return WatchEvent(
        type=EventType.PUT, kv=KeyValue(key=key, value=value, create_revision=create, mod_revision=mod)
    )


def test_replay_skips_what_the_snapshot_holds_and_a_line_cut_short(tmp_path: Path) -> None:
    journal = WriteJournal(tmp_path)
    journal.record(_put("/a", b"a0", 2, 2))
    journal.record(_put("/b", b"\xff", 3, 3))
    journal.set_aside()  # a snapshot at revision 3 is being written
    journal.record(_put("/a", b"a1", 2, 4))
    journal.record(
        WatchEvent(type=EventType.DELETE, kv=KeyValue(key="/b", value=b"", create_revision=3, mod_revision=5))
    )
    journal.close()
    with open(journal.path, "ab") as cut:
        cut.write(b'{"r":6,"k":"/c","c":6,"v"')

    snapshot = [
        KeyValue(key="/a", value=b"a0", create_revision=2, mod_revision=2),
        KeyValue(key="/b", value=b"\xff", create_revision=3, mod_revision=3),
    ]
    items, revision = replay(tmp_path, snapshot, 3)
    assert revision == 5
    assert items == [KeyValue(key="/a", value=b"a1", create_revision=2, mod_revision=4)]


@pytest.mark.parametrize("written", [True, False])
def test_a_set_aside_journal_goes_once_its_snapshot_is_written(tmp_path: Path, written: bool) -> None:
    journal = WriteJournal(tmp_path)
    journal.record(_put("/a", b"a0", 2, 2))
    journal.set_aside()
    journal.record(_put("/a", b"a1", 2, 3))
    if written:
        journal.snapshot_written()
    journal.set_aside()  # the next snapshot: a journal still set aside is kept, this one goes on
    journal.close()
    items, revision = replay(tmp_path, [], 1)
    expected = [KeyValue(key="/a", value=b"a1", create_revision=2, mod_revision=3)]
    assert (items, revision) == (expected, 3)


def test_a_write_after_a_line_cut_short_is_kept(tmp_path: Path) -> None:
    """The member killed mid-line, started again: its next write is a line of its own (appended to
    the cut one, the two would be one unreadable line, dropped on the next replay)."""
    journal = WriteJournal(tmp_path)
    journal.record(_put("/a", b"a0", 2, 2))
    journal.close()
    with open(journal.path, "ab") as cut:
        cut.write(b'{"r":3,"k":"/b","c":3,"v"')
    again = WriteJournal(tmp_path)  # the restarted member
    again.record(_put("/c", b"c0", 3, 3))
    again.record(_put("/d", b"d0", 4, 4))
    again.close()
    items, revision = replay(tmp_path, [], 1)
    assert revision == 4
    assert [item.key for item in items] == ["/a", "/c", "/d"]
