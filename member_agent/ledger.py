"""What the agent has applied to its member cluster, per Work, kept in the state directory.

The ownership labels on member objects say which Work an object belongs to, but finding them
would mean listing every kind in the member. The ledger remembers, per Work key
(``namespace/name``), the identifiers of the objects applied for it, so a Work deleted while the
agent was down still has its objects removed, and a manifest dropped from a Work is pruned.
It is written *before* applying (desired + previous) and trimmed after pruning, so a crash in
between can only leave extra entries (pruned on the next pass), never orphaned objects.

It also remembers whether the Work, as last applied (or, while suspended, as last seen), had
``preserveResourcesOnDeletion``: a Work deleted while the agent was down is gone from the hub
with its flag, and the ledger's copy decides whether its objects are deleted or released (left
running without gpufed's labels). The hub deletes a Work whose cluster left the placement only
once the agent has applied the generation that cleared the flag, so that copy says "delete".

In: the state directory. Out: ``get``/``set``/``drop``/``keys``/``preserves``; each change is
written atomically (temporary file + rename, mode 0600). File format: ``{"version": 2, "works":
{key: {"objects": [identifier, ...], "preserveResourcesOnDeletion": bool}}}``; the first format
(``{key: [identifier, ...]}``) is read as Works without the flag.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

logger = logging.getLogger(__name__)

LEDGER_FILE = "applied-works.json"
FORMAT_VERSION = 2


def _identifiers(value: Any) -> list[dict[str, Any]]:
    return [dict(i) for i in value if isinstance(i, dict)] if isinstance(value, list) else []


class Ledger:
    def __init__(self, state_dir: Path) -> None:
        self.path = state_dir / LEDGER_FILE
        self._preserve: set[str] = set()
        self._entries: dict[str, list[dict[str, Any]]] = self._load()

    def _load(self) -> dict[str, list[dict[str, Any]]]:
        try:
            data = json.loads(self.path.read_text())
        except FileNotFoundError:
            return {}
        except (OSError, ValueError) as exc:
            logger.warning("ignoring unreadable ledger %s: %s", self.path, exc)
            return {}
        if not isinstance(data, dict):
            return {}
        if data.get("version") != FORMAT_VERSION:
            # The first format: every value a list of identifiers.
            return {str(k): _identifiers(v) for k, v in data.items() if isinstance(v, list)}
        works = data.get("works")
        entries: dict[str, list[dict[str, Any]]] = {}
        for key, entry in (works.items() if isinstance(works, dict) else ()):
            if not isinstance(entry, dict):
                continue
            entries[str(key)] = _identifiers(entry.get("objects"))
            if entry.get("preserveResourcesOnDeletion") is True:
                self._preserve.add(str(key))
        return entries

    def _save(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(".tmp")
        document = {
            "version": FORMAT_VERSION,
            "works": {
                key: {"objects": objects, "preserveResourcesOnDeletion": key in self._preserve}
                for key, objects in self._entries.items()
            },
        }
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as handle:
            json.dump(document, handle, sort_keys=True)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, self.path)

    def keys(self) -> list[str]:
        return sorted(self._entries)

    def __contains__(self, work_key: object) -> bool:
        return work_key in self._entries

    def __iter__(self) -> Iterator[str]:
        return iter(self.keys())

    def get(self, work_key: str) -> list[dict[str, Any]]:
        return [dict(i) for i in self._entries.get(work_key, [])]

    def preserves(self, work_key: str) -> bool:
        """Whether the Work, as last recorded, asked for its objects to stay when it is deleted."""
        return work_key in self._preserve

    def set(self, work_key: str, identifiers: list[dict[str, Any]], *, preserve: bool | None = None) -> None:
        """Record the Work's objects (and its ``preserveResourcesOnDeletion``; None keeps it)."""
        same_flag = preserve is None or preserve == (work_key in self._preserve)
        if self._entries.get(work_key) == identifiers and same_flag:
            return
        self._entries[work_key] = [dict(i) for i in identifiers]
        if preserve is True:
            self._preserve.add(work_key)
        elif preserve is False:
            self._preserve.discard(work_key)
        self._save()

    def drop(self, work_key: str) -> None:
        self._preserve.discard(work_key)
        if self._entries.pop(work_key, None) is not None:
            self._save()
