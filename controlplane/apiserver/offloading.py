"""Large writes computed off the event loop.

A write whose request body and stored object together pass :data:`INLINE_WRITE_BYTES` (a
Deployment of thousands of env entries, a ConfigMap near etcd's limit) has its pure steps run in a
worker thread, so that one large object does not hold the event loop (other clients' requests,
watches, ``/readyz``) while they run: the copy of its body, apply's typing check, the patch itself,
validation and the managedFields record. Smaller writes, nearly all of them, run them inline: the
thread hop would cost more than they do.

Only pure functions of the write's own values go to the thread: the request's body, the stored
object as decoded for this write, and what the write made of them. The writer awaits the thread,
so nothing else reads or changes those meanwhile; what is shared (the kinds' compiled tables, the
CEL rules' quieted stderr) is only read there, compiled under a lock, or swapped under one.
The threads are the writes' own, two of them, not asyncio's default executor, which aiohttp's
resolver uses: large writes queue behind each other, never in front of a webhook's DNS lookup.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import ParamSpec, TypeVar

#: A write whose request body and stored object together are larger runs its pure steps in a
#: worker thread.
INLINE_WRITE_BYTES = 64 * 1024

P = ParamSpec("P")
T = TypeVar("T")


def is_large(*sizes: int) -> bool:
    """Whether a write of these sizes (its body's, the stored object's) runs off the loop."""
    return sum(sizes) > INLINE_WRITE_BYTES


async def pure(off_loop: bool, compute: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs) -> T:
    """``compute(*args, **kwargs)``, in a worker thread when ``off_loop`` (a large write), else inline."""
    if off_loop:
        call = functools.partial(contextvars.copy_context().run, compute, *args, **kwargs)
        return await asyncio.get_running_loop().run_in_executor(_WRITES, call)
    return compute(*args, **kwargs)


#: The large writes' threads (two: on the hub's cores more would only share the GIL).
_WRITES = ThreadPoolExecutor(max_workers=2, thread_name_prefix="large-write")
