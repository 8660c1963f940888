"""Lists read a page at a time, as client-go's ``pager.ListPager``: what a consumer that folds a
kind's objects into a sum (the resourcequota controller's counts, the waste sampler's pass) calls so
that no single read of the store is unbounded.

In: an :class:`~controlplane.objectclient.ObjectClient`, a kind, a page size and list options. Out:
the pages, every one of the first page's snapshot (the continue token carries its revision). A list
the server answers whole (the watch cache's, at resourceVersion "0", where kube's cache ignores the
limit) comes as one page, from memory.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

from controlplane.objectclient import ObjectClient, ObjectList, ResourceType

#: client-go's ``defaultPageSize``.
DEFAULT_PAGE_SIZE = 500


async def list_pages(
    objects: ObjectClient, rt: ResourceType, *, namespace: str | None = None, limit: int = DEFAULT_PAGE_SIZE,
    resource_version: str | None = None,
) -> AsyncIterator[ObjectList]:
    """The pages of ``rt``'s objects (in ``namespace``), at most ``limit`` objects each; from
    ``resource_version`` ("0": any, which the watch cache answers; None: the latest)."""
    token: str | None = None
    while True:
        page = await objects.list(
            rt, namespace=namespace, limit=limit, continue_token=token, resource_version=resource_version
        )
        yield page
        if not page.continue_token:
            return
        token = page.continue_token
