"""Child processes that end with their parent, even when the parent is killed outright.

A process that is SIGKILLed (or taken by the OOM killer) runs no cleanup, and a child in a
session of its own gets no terminal signal either. On Linux a child can ask the kernel for a
signal when its parent dies (``prctl(PR_SET_PDEATHSIG)``); :func:`parent_death_signal` builds
the ``preexec_fn`` that does so. ``gpufed up`` starts every component with it, and the hub
starts its embedded etcd with it, so no process of a fleet outlives the one that started it.

The kernel ties the signal to the *thread* that forked: fork from a thread that lives as long
as the parent (the event loop's). Other systems have no such signal; there the function
returns None and children of a killed parent keep running.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys
from collections.abc import Callable
from typing import Final

#: ``prctl`` option from <linux/prctl.h>: the signal a process receives when its parent dies.
PR_SET_PDEATHSIG: Final = 1
#: Exit code of a child whose parent died before it could arm the parent-death signal.
ORPHANED_AT_START: Final = 125


def _load_prctl() -> Callable[[int, int, int, int, int], int] | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]
    prctl.restype = ctypes.c_int
    return prctl


#: Resolved once, in the parent: the forked child then only calls a ready function pointer.
_PRCTL: Final = _load_prctl()


def parent_death_signal(signum: signal.Signals = signal.SIGTERM) -> Callable[[], None] | None:
    """A ``preexec_fn`` that makes the child receive ``signum`` when the calling thread ends
    (Linux); None where the kernel offers no such thing.

    Build it right before forking, in the thread that forks (it records the parent's pid). In
    the child it restores the signal's default action (a handler inherited from the parent
    would swallow a signal arriving before ``exec``), arms the signal, then checks that the
    parent is still the one it was forked from: a parent that died before the signal was
    armed would otherwise leave the child running, so the child exits at once instead.
    """
    prctl = _PRCTL
    if prctl is None:
        return None
    parent = os.getpid()

    def arm() -> None:
        signal.signal(signum, signal.SIG_DFL)
        prctl(PR_SET_PDEATHSIG, int(signum), 0, 0, 0)
        if os.getppid() != parent:
            os._exit(ORPHANED_AT_START)

    return arm


__all__ = ["ORPHANED_AT_START", "PR_SET_PDEATHSIG", "parent_death_signal"]
