"""The hub's etcd client runs gRPC with the settings of :mod:`controlplane.storage.grpcsettings`."""

from __future__ import annotations

import os
import subprocess
import sys

from controlplane.storage import grpcsettings

#: Imports the storage package, then makes gRPC's core start (a channel that connects), and
#: prints what ``GRPC_EXPERIMENTS`` holds.
PROBE = """
import asyncio, os
import controlplane.storage
import grpc.aio

async def main():
    async with grpc.aio.insecure_channel("127.0.0.1:1") as channel:
        channel.get_state(try_to_connect=True)
        await asyncio.sleep(0.2)

asyncio.run(main())
print(os.environ.get("GRPC_EXPERIMENTS"))
"""


def probe(**env: str) -> subprocess.CompletedProcess[str]:
    environ = {k: v for k, v in os.environ.items() if k != "GRPC_EXPERIMENTS"} | env
    return subprocess.run(
        [sys.executable, "-c", PROBE], env=environ, capture_output=True, text=True, timeout=60, check=True
    )


def test_the_storage_package_sets_the_experiments_and_grpc_knows_them() -> None:
    """An installed grpcio that no longer knows the experiment says ``Unknown experiment``."""
    done = probe()
    assert done.stdout.strip() == grpcsettings.EXPERIMENTS == "-event_engine_client"
    assert "Unknown experiment" not in done.stderr, done.stderr


def test_experiments_set_by_the_user_stand() -> None:
    assert probe(GRPC_EXPERIMENTS="-event_engine_dns").stdout.strip() == "-event_engine_dns"
    environ = {"GRPC_EXPERIMENTS": "x"}
    assert grpcsettings.configure(environ) == "x"
    assert grpcsettings.configure({}) == grpcsettings.EXPERIMENTS


def test_grpc_reports_an_unknown_experiment() -> None:
    """The check above can fail: gRPC does log an experiment it does not know."""
    assert "Unknown experiment" in probe(GRPC_EXPERIMENTS="-no_such_experiment").stderr
