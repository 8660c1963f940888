"""Child processes that end with their parent, even when the parent is killed outright.

A process that is SIGKILLed (or taken by the OOM killer) runs no cleanup, and a child in a
session of its own gets no terminal signal either. On Linux a process can ask the kernel for
a signal when its parent dies (``prctl(PR_SET_PDEATHSIG)``), and the request survives
``exec``. :func:`dying_with_parent` wraps a command line in a tiny trampoline that asks for
the signal and then ``exec``s the command: the command keeps the trampoline's pid and gets
SIGTERM when the process that started it dies. ``gpufed up`` starts every component this
way, and the hub starts its embedded etcd this way, so no process of a fleet outlives the
one that started it.

Why not a ``preexec_fn``: it makes ``subprocess`` fork the whole interpreter and run Python
in the child before ``exec``. In a process that uses gRPC (the hub's etcd client) the fork
runs gRPC's fork handlers in the child, which can abort it; without a ``preexec_fn`` Python
starts children with ``vfork``/``posix_spawn``, which runs none of that.

The kernel ties the signal to the *thread* that started the child: start children from a
thread that lives as long as the parent (the event loop's). Other systems have no such
signal; there the command is returned unchanged and children of a killed parent keep running.

:class:`Backoff` is the restart schedule of a crashed child, shared by ``gpufed up``'s supervisor
and the hub's watch over its embedded etcd (:mod:`controlplane.storage.etcdkeeper`).
"""

from __future__ import annotations

import os
import random
import signal
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

#: ``prctl`` option from <linux/prctl.h>: the signal a process receives when its parent dies.
PR_SET_PDEATHSIG: Final = 1
#: Exit code of a child whose parent died before it could arm the parent-death signal.
ORPHANED_AT_START: Final = 125
#: Exit code of a trampoline whose ``prctl`` failed (it runs nothing rather than run unguarded).
PRCTL_FAILED: Final = 126
#: Exit code when the command cannot be run (missing, not executable), as a shell answers.
CANNOT_RUN: Final = 127

# argv: parent pid, signal number, command... Restores the signal's default action (a handler
# inherited from the parent would swallow it), arms it, then checks that the parent is still
# the one that started it: a parent that died before the signal was armed would otherwise
# leave the command running.
_TRAMPOLINE: Final = f"""\
import ctypes, os, signal, sys
parent, signum = int(sys.argv[1]), int(sys.argv[2])
signal.signal(signum, signal.SIG_DFL)
if ctypes.CDLL(None, use_errno=True).prctl({PR_SET_PDEATHSIG}, signum, 0, 0, 0) != 0:
    os.write(2, b"cannot set the parent-death signal: " + os.strerror(ctypes.get_errno()).encode() + b"\\n")
    os._exit({PRCTL_FAILED})
if os.getppid() != parent:
    os._exit({ORPHANED_AT_START})
try:
    os.execvp(sys.argv[3], sys.argv[3:])
except OSError as error:
    os.write(2, f"cannot run {{sys.argv[3]}}: {{error.strerror}}\\n".encode())
    os._exit({CANNOT_RUN})
"""


def supported() -> bool:
    """Whether the kernel can signal a child when its parent dies (Linux)."""
    return sys.platform.startswith("linux")


def dying_with_parent(argv: Sequence[str], *, signum: signal.Signals = signal.SIGTERM) -> list[str]:
    """``argv`` run so that it receives ``signum`` when this process dies (Linux); ``argv``
    unchanged elsewhere. Build it in the process that starts the command, right before."""
    if not supported():
        return list(argv)
    return [sys.executable, "-I", "-S", "-c", _TRAMPOLINE, str(os.getpid()), str(int(signum)), *argv]


@dataclass(frozen=True)
class Backoff:
    """Restart delays: exponential from ``initial`` with ``jitter`` up to ``cap`` seconds;
    a process that ran ``stable_after`` seconds before crashing starts over at ``initial``."""

    initial: float = 1.0
    cap: float = 30.0
    jitter: float = 1.0
    stable_after: float = 60.0

    def delay(self, restarts: int, *, uniform: float | None = None) -> float:
        """Seconds to wait before the ``restarts``-th restart in a row (1 for the first):
        ``initial`` doubled each time, plus ``uniform`` (0..1, random when None) times
        ``jitter``, at most ``cap``."""
        spread = random.random() if uniform is None else uniform
        return min(self.cap, self.initial * 2.0 ** max(0, restarts - 1) + spread * self.jitter)


__all__ = ["CANNOT_RUN", "ORPHANED_AT_START", "PRCTL_FAILED", "PR_SET_PDEATHSIG", "Backoff", "dying_with_parent", "supported"]
