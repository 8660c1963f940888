"""The ports of one `gpufed up` run: every component keeps the one it had when it is free.

In: the hub port asked for on the command line and the ports remembered in ``DIR/up.json``.
Out: a port per component (a free one where the remembered one is taken), a sentence when the
hub's is not the one asked for, and the choice saved for the next run.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

from controlplane.storage.embedded import free_port, port_is_free

DEFAULT_HUB_PORT: Final = 6443
HOST: Final = "127.0.0.1"


@dataclass
class Ports:
    """Every component's port, remembered across runs so that a resumed fleet keeps its URLs."""

    hub: int = 0
    members: dict[str, dict[str, int]] = field(default_factory=dict)

    @classmethod
    def load(cls, path: Path) -> Ports:
        try:
            data = json.loads(path.read_text())
            return cls(hub=int(data.get("hub", 0)),
                       members={k: {"api": int(v["api"]), "dcgm": int(v["dcgm"])}
                                for k, v in dict(data.get("members", {})).items()})
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            return cls()

    def save(self, path: Path) -> None:
        tmp = path.with_name(f".{path.name}.tmp")
        tmp.write_text(json.dumps({"hub": self.hub, "members": self.members}, indent=2) + "\n")
        os.replace(tmp, path)

    def assign_members(self, names: Sequence[str]) -> None:
        """Keep each member's remembered ports that are still free; pick new ones for the rest."""
        taken = {self.hub}
        for name in names:
            wanted = self.members.get(name, {})
            chosen: dict[str, int] = {}
            for role in ("api", "dcgm"):
                port = wanted.get(role, 0)
                if not port or port in taken or not port_is_free(HOST, port):
                    port = free_port(HOST, taken=taken)
                taken.add(port)
                chosen[role] = port
            self.members[name] = chosen


def choose_hub_port(*, requested: int | None, remembered: int) -> tuple[int, str | None]:
    """The hub's port and, when it is not the one asked for, a sentence saying why. ``requested``
    0 is a free port, as ``--listen :0`` is for the hub (the caller remembers it as any other)."""
    if requested == 0:
        return free_port(HOST), None
    wanted = requested or remembered or DEFAULT_HUB_PORT
    if port_is_free(HOST, wanted):
        return wanted, None
    if requested is None and remembered and wanted != DEFAULT_HUB_PORT and port_is_free(HOST, DEFAULT_HUB_PORT):
        return DEFAULT_HUB_PORT, f"port {wanted} (used last time) is taken; the hub listens on {DEFAULT_HUB_PORT}"
    port = free_port(HOST)
    return port, f"port {wanted} is taken; the hub listens on {port} instead"
