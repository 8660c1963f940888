"""What the member's API serves: the agent's cache of its discovery documents.

In: the ``/api/v1`` or ``/apis/<group>/<version>`` document of an API version (or None when
the member does not serve that version at all). Out: a kind's :class:`ResourceInfo` (plural and
scope), or :class:`KindNotServed`.

A kind the member does not serve is remembered as such: asking again within a back-off (5 s at
first, doubling up to 5 min per kind) answers from memory without a request, so a Work that
carries it costs no request per status pass; after the back-off the next question looks again
(an operator installed meanwhile is found). :meth:`DiscoveryCache.recheck` drops what is
remembered as unserved, for a caller that knows the member may have changed (a Work's new
generation is applied). A kind that was served and is no longer is found on a miss too: a
lookup of a kind the cached document lacks fetches the document again.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from member_agent.apierrors import NotFound

FIRST_BACKOFF = 5.0
MAX_BACKOFF = 300.0


class KindNotServed(NotFound):
    """The member's API does not serve the kind (its group/version or its resource is missing)."""

    def __init__(self, api_version: str, kind: str) -> None:
        super().__init__(
            404, "NotFound", f"the member cluster does not serve kind {kind} in {api_version}"
        )
        self.api_version = api_version
        self.kind = kind


@dataclass(frozen=True, slots=True)
class ResourceInfo:
    api_version: str
    kind: str
    plural: str
    namespaced: bool

    def collection_path(self, namespace: str | None) -> str:
        prefix = f"/api/{self.api_version}" if "/" not in self.api_version else f"/apis/{self.api_version}"
        if self.namespaced:
            if not namespace:
                raise ValueError(f"{self.kind} is namespaced: a namespace is required")
            return f"{prefix}/namespaces/{namespace}/{self.plural}"
        return f"{prefix}/{self.plural}"

    def path(self, name: str, namespace: str | None) -> str:
        return f"{self.collection_path(namespace)}/{name}"


def discovery_path(api_version: str) -> str:
    return f"/api/{api_version}" if "/" not in api_version else f"/apis/{api_version}"


def resources_of(api_version: str, document: Mapping[str, Any] | None) -> dict[str, ResourceInfo]:
    """Kind -> resource of a discovery document (subresources left out)."""
    out: dict[str, ResourceInfo] = {}
    for resource in (document or {}).get("resources") or []:
        name = str(resource.get("name", ""))
        if "/" in name or not name:
            continue
        kind = str(resource.get("kind"))
        out[kind] = ResourceInfo(
            api_version=api_version, kind=kind, plural=name, namespaced=bool(resource.get("namespaced"))
        )
    return out


@dataclass(slots=True)
class _Unserved:
    retry_at: float
    delay: float


@dataclass(slots=True)
class DiscoveryCache:
    """Served kinds per API version, and kinds known not to be served with their back-off."""

    clock: Callable[[], float] = time.monotonic
    first_backoff: float = FIRST_BACKOFF
    max_backoff: float = MAX_BACKOFF
    _served: dict[str, dict[str, ResourceInfo]] = field(default_factory=dict)
    _unserved: dict[tuple[str, str], _Unserved] = field(default_factory=dict)

    def cached(self, api_version: str, kind: str) -> ResourceInfo | None:
        """The kind's resource if known; raises :class:`KindNotServed` while a kind known not to be
        served is backing off; None: look it up (and :meth:`learn`)."""
        info = self._served.get(api_version, {}).get(kind)
        if info is not None:
            return info
        unserved = self._unserved.get((api_version, kind))
        if unserved is not None and self.clock() < unserved.retry_at:
            raise KindNotServed(api_version, kind)
        return None

    def learn(self, api_version: str, document: Mapping[str, Any] | None, *, kind: str) -> ResourceInfo:
        """Record ``document`` (None: the version is not served) and answer for ``kind``."""
        self._served[api_version] = resources_of(api_version, document)
        info = self._served[api_version].get(kind)
        if info is not None:
            self._unserved.pop((api_version, kind), None)
            return info
        previous = self._unserved.get((api_version, kind))
        delay = min(self.max_backoff, previous.delay * 2) if previous else self.first_backoff
        self._unserved[(api_version, kind)] = _Unserved(retry_at=self.clock() + delay, delay=delay)
        raise KindNotServed(api_version, kind)

    def recheck(self) -> None:
        """Forget which kinds were not served: the next lookup of each asks the member again."""
        for entry in self._unserved.values():
            entry.retry_at = 0.0

    def unserved(self) -> list[tuple[str, str]]:
        return sorted(self._unserved)
