"""Make the C allocator hand large freed buffers back to the operating system.

Why: the hub's watches move event buffers of up to megabytes each (an object encoded for one
client, its TLS copy, the socket buffer), allocated and freed at the rate objects change.
glibc serves allocations below its mmap threshold (128 KiB, raised further at run time
every time a larger block is freed) from heaps it rarely shrinks, so a burst of large
events -- or many watchers that stall and are dropped -- leaves the process hundreds of MB
larger long after the buffers are gone. Below a fixed 64 KiB threshold, such buffers are
mapped on their own and unmapped when freed, so what a dropped watcher held is returned.

In: nothing. Out: True when the setting was applied (Linux with glibc), False elsewhere.
Called once, at the start of a hub process.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
import sys

log = logging.getLogger(__name__)

#: ``mallopt`` parameter from <malloc.h>.
M_MMAP_THRESHOLD = -3
#: Allocations at least this large get their own mapping, returned to the system when freed.
MMAP_THRESHOLD_BYTES = 64 * 1024


def return_large_buffers_to_the_system() -> bool:
    if not sys.platform.startswith("linux"):
        return False
    name = ctypes.util.find_library("c")
    if name is None:
        return False
    try:
        libc = ctypes.CDLL(name)
        mallopt = libc.mallopt
    except (OSError, AttributeError):  # not glibc (musl has no mallopt)
        return False
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    applied = bool(mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES))
    if not applied:
        log.debug("mallopt(M_MMAP_THRESHOLD) was refused; large buffers stay in the heap")
    return applied
