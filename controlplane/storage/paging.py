"""Reading a key range in bounded pages, as one consistent list.

A single etcd range over a large collection builds the whole answer in etcd's memory
and in one gRPC message, which fails outright once it passes the client's receive
limit (``RESOURCE_EXHAUSTED ... larger than max``) -- after etcd has already paid for
it. kube-apiserver's etcd3 store and its reflectors read in pages of 500 keys instead.
:func:`read_range` does the same for every list the etcd store serves: it asks for at
most ``page_size`` keys at a time and pins every page after the first to the first
page's revision, so the pages together are exactly the range as of that one revision
(no key missed or seen twice while writes continue); a watch from ``revision + 1``
then follows on without a gap.

Counting keys does not bound bytes: 500 objects near etcd's 1.5 MiB request limit are
750 MiB. A page whose response exceeds the client's limit raises
:class:`ResponseTooLarge` in the page reader; the page is then asked again with half
as many keys, down to one key.

In: a page reader ``(start_after, limit, revision) -> ListResult`` (revision 0: now),
the caller's ``limit`` (0: all), ``revision`` and ``start_after``. Out: a
:class:`~controlplane.storage.interface.ListResult` as the Store contract defines it.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

from controlplane.storage.interface import Gone, KeyValue, ListResult, StorageError

logger = logging.getLogger(__name__)

#: Keys per etcd range: kube's reflector and apiserver page size.
DEFAULT_PAGE_SIZE = 500
#: How often an unpinned list starts over when history was compacted between its pages.
_RESTARTS = 3

PageReader = Callable[[str | None, int, int], Awaitable[ListResult]]
"""``(start_after or None, limit >= 1, revision or 0 for now)`` -> one page."""


class ResponseTooLarge(StorageError):
    """One response would exceed the client's receive limit (ask for fewer keys)."""


async def read_range(
    read_page: PageReader,
    *,
    limit: int = 0,
    revision: int | None = None,
    start_after: str | None = None,
    page_size: int = DEFAULT_PAGE_SIZE,
) -> ListResult:
    """Up to ``limit`` keys (0: all) after ``start_after``, as of ``revision`` (None: now)."""
    if page_size < 1:
        raise ValueError(f"page_size must be at least 1, got {page_size}")
    for _attempt in range(_RESTARTS):
        try:
            return await _read_pages(read_page, limit, revision, start_after, page_size)
        except _CompactedMidList:
            # The list picked its own revision and history was compacted past it between
            # two pages: a fresh list at a new revision is just as correct.
            logger.info("history compacted while listing in pages; listing again")
    return await _read_pages(read_page, limit, revision, start_after, page_size, restart=False)


class _CompactedMidList(Exception):
    """A later page of a list that pinned its own revision found that revision compacted."""


async def _read_pages(
    read_page: PageReader,
    limit: int,
    revision: int | None,
    start_after: str | None,
    page_size: int,
    *,
    restart: bool = True,
) -> ListResult:
    items: list[KeyValue] = []
    at = revision
    after = start_after
    size = page_size
    while True:
        ask = size if not limit else min(size, limit - len(items))
        try:
            page = await read_page(after, ask, at or 0)
        except ResponseTooLarge:
            if ask <= 1:
                raise
            size = ask // 2
            logger.info("an etcd range response was too large; asking for %d keys per page", size)
            continue
        except Gone:
            if restart and revision is None and at is not None:
                raise _CompactedMidList from None
            raise
        if at is None:
            at = page.revision
        items.extend(page.items)
        if page.items:
            after = page.items[-1].key
        if not page.more:
            return ListResult(items=items, revision=at, more=False)
        if limit and len(items) >= limit:
            return ListResult(items=items, revision=at, more=True, remaining=page.remaining)
