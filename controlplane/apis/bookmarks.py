"""When a watch that asked for bookmarks (``allowWatchBookmarks=true``) gets its next one.

kube-apiserver's watch cache sends such a watch a BOOKMARK about every minute, whatever else it
sends, and one shortly (2 s) before the watch's timeout ends it, so that a client resuming from
the last resourceVersion it got resumes from a recent one and is not answered 410 Gone
(``cacheWatcher.nextBookmarkTime`` in k8s.io/apiserver's cacher). The hub's watches and the
simulated members' both follow :func:`next_bookmark`.

In: the current time, the watch's deadline, the period and the lead before the deadline, in
seconds of one clock (the event loop's). Out: when the next bookmark is due, or None. Pure: no I/O.
"""

from __future__ import annotations

from typing import Final

#: Seconds between two bookmarks of a watch (kube's watch cache: one minute).
BOOKMARK_PERIOD: Final = 60.0
#: A watch that ends on a timeout gets a bookmark this many seconds before it.
BOOKMARK_BEFORE_TIMEOUT: Final = 2.0


def next_bookmark(
    now: float, *, deadline: float | None, period: float = BOOKMARK_PERIOD,
    before_timeout: float = BOOKMARK_BEFORE_TIMEOUT,
) -> float | None:
    """When a watch ending at ``deadline`` (None: it ends on no timer) gets its next bookmark:
    ``period`` from ``now``, or ``before_timeout`` (kube's :data:`BOOKMARK_BEFORE_TIMEOUT`) before
    the deadline if that comes first; None when that moment is already past (no bookmark is left
    to send)."""
    at = now + period
    if deadline is None:
        return at
    at = min(at, deadline - before_timeout)
    return at if at > now else None
