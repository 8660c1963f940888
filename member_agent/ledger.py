"""What the agent has applied to its member cluster, per Work, kept in the state directory.

The ownership labels on member objects say which Work an object belongs to, but finding them
would mean listing every kind in the member. The ledger remembers, per Work key
(``namespace/name``), the identifiers of the objects applied for it, so a Work deleted while the
agent was down still has its objects removed, and a manifest dropped from a Work is pruned.
It is written *before* applying (desired + previous) and trimmed after pruning, so a crash in
between can only leave extra entries (pruned on the next pass), never orphaned objects.

In: the state directory. Out: ``get``/``set``/``drop``/``keys``; each change is written
atomically (temporary file + rename, mode 0600).
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


class Ledger:
    def __init__(self, state_dir: Path) -> None:
        self.path = state_dir / LEDGER_FILE
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
        return {
            str(k): [dict(i) for i in v if isinstance(i, dict)]
            for k, v in data.items()
            if isinstance(v, list)
        }

    def _save(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(".tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as handle:
            json.dump(self._entries, handle, sort_keys=True)
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

    def set(self, work_key: str, identifiers: list[dict[str, Any]]) -> None:
        if self._entries.get(work_key) == identifiers:
            return
        self._entries[work_key] = [dict(i) for i in identifiers]
        self._save()

    def drop(self, work_key: str) -> None:
        if self._entries.pop(work_key, None) is not None:
            self._save()
