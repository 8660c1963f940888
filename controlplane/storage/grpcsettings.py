"""How gRPC runs the hub's etcd client, set before gRPC's core first starts.

In: the process environment. Out: ``GRPC_EXPERIMENTS`` turning gRPC's EventEngine client off
(``-event_engine_client``), unless the environment already names experiments of its own (then
those stand, as given).

Why: with the EventEngine client (on by default in the grpcio releases the hub installs) every
etcd call's I/O completes on a thread of its own pool, which then wakes grpc.aio's poller
thread, which wakes the event loop; with the client it replaces, the poller thread does the
I/O itself. On this project's machines a lone compare-and-swap update costs the hub about 0.37
ms of CPU instead of 0.52 (the event loop's share is the same; the rest was gRPC's threads),
and its wall time drops likewise; see docs/benchmarks.md, "The etcd client's threads".

gRPC's core reads the variable once, when ``grpc`` is first imported (setting it later does
nothing), so :mod:`controlplane.storage` imports this module before anything of its own that
imports gRPC. ``tests/storage/test_grpc_settings.py`` fails when an installed grpcio no longer
knows the experiment (it logs ``Unknown experiment``), so an upgrade that drops it is noticed.
"""

from __future__ import annotations

import os

#: The experiments the hub's etcd client runs with, in ``GRPC_EXPERIMENTS``'s syntax.
EXPERIMENTS = "-event_engine_client"


def configure(environ: dict[str, str] | os._Environ[str] = os.environ) -> str:
    """Set ``GRPC_EXPERIMENTS`` in ``environ`` unless it is set; return what it holds."""
    return environ.setdefault("GRPC_EXPERIMENTS", EXPERIMENTS)


configure()
