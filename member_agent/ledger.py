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

In: the state directory. Out: ``get``/``set``/``drop``/``keys``/``preserves``. Each change is
one line appended to a journal and synced before the call returns (``applied-works.journal``:
``{"set": key, "objects": [...], "preserveResourcesOnDeletion": bool}`` or ``{"drop": key}``),
so a change costs the same whether the agent carries ten Works or ten thousand (rewriting the
whole ledger per change made a member's N applies cost N squared). Once the journal holds more
lines than :data:`COMPACT_AFTER` and twice the Works, the ledger is written whole
(``applied-works.json``, temporary file + rename) and the journal emptied; reading takes that
file, then replays the journal over it (a journal not emptied by a crash leads to the file's
state again, and a last line cut short by a crash is a change that was never acted on). Both
files are mode 0600. The file's format: ``{"version": 2, "works": {key: {"objects":
[identifier, ...], "preserveResourcesOnDeletion": bool}}}``; the first format (``{key:
[identifier, ...]}``) is read as Works without the flag.
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
JOURNAL_FILE = "applied-works.journal"
FORMAT_VERSION = 2
#: The journal is folded into the ledger file once it has more lines than this (and than
#: twice the Works recorded).
COMPACT_AFTER = 1000


def _identifiers(value: Any) -> list[dict[str, Any]]:
    return [dict(i) for i in value if isinstance(i, dict)] if isinstance(value, list) else []


class Ledger:
    def __init__(self, state_dir: Path) -> None:
        self.path = state_dir / LEDGER_FILE
        self.journal_path = state_dir / JOURNAL_FILE
        self._preserve: set[str] = set()
        self._entries: dict[str, list[dict[str, Any]]] = self._load()
        self._journal_lines = self._replay()

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

    def _replay(self) -> int:
        """Apply the journal's changes over the ledger file's; the number of its lines."""
        try:
            text = self.journal_path.read_text()
        except FileNotFoundError:
            return 0
        except OSError as exc:
            logger.warning("ignoring unreadable ledger journal %s: %s", self.journal_path, exc)
            return 0
        lines = text.splitlines()
        for number, line in enumerate(lines, 1):
            try:
                change = json.loads(line)
            except ValueError:
                if number < len(lines):
                    logger.warning("ignoring unreadable line %d of the ledger journal %s", number, self.journal_path)
                continue  # the last line, cut short by a crash while it was written: never acted on
            if not isinstance(change, dict):
                continue
            if isinstance(change.get("set"), str):
                key = change["set"]
                self._entries[key] = _identifiers(change.get("objects"))
                if change.get("preserveResourcesOnDeletion") is True:
                    self._preserve.add(key)
                else:
                    self._preserve.discard(key)
            elif isinstance(change.get("drop"), str):
                self._entries.pop(change["drop"], None)
                self._preserve.discard(change["drop"])
        return len(lines)

    def _append(self, change: dict[str, Any]) -> None:
        """Record one change: a journal line, synced; then, once the journal is long, the whole
        ledger. The line comes first, so a crash before the journal is emptied leaves a journal
        whose every line leads to the ledger file's state: reading it again is harmless."""
        line = (json.dumps(change, sort_keys=True, separators=(",", ":")) + "\n").encode()
        self.journal_path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.journal_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        try:
            os.write(fd, line)
            os.fsync(fd)
        finally:
            os.close(fd)
        self._journal_lines += 1
        if self._journal_lines > max(COMPACT_AFTER, 2 * len(self._entries)):
            self._compact()

    def _compact(self) -> None:
        """Write the whole ledger (atomically), then empty the journal it now holds."""
        self._save()
        fd = os.open(self.journal_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        os.close(fd)
        self._journal_lines = 0

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
        self._append({
            "set": work_key,
            "objects": self._entries[work_key],
            "preserveResourcesOnDeletion": work_key in self._preserve,
        })

    def drop(self, work_key: str) -> None:
        self._preserve.discard(work_key)
        if self._entries.pop(work_key, None) is not None:
            self._append({"drop": work_key})
