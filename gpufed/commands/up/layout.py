"""Where one `gpufed up` run keeps its things, and the lock that makes the state dir its own.

In: the state dir and, optionally, a fleet file. Out: the path of every file in the state
dir (``Layout``), an exclusive lock on it (two runs on one dir would fight), the fleet copied
in where the members read it, and ``DIR/hub.kubeconfig`` linked to the hub's admin kubeconfig.
"""

from __future__ import annotations

import contextlib
import fcntl
import importlib.resources
import os
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Final

DEFAULT_STATE_DIR: Final = Path(".gpufed")


class _Below:
    """A file or directory of the state dir: ``parts`` joined below the layout's root."""

    def __init__(self, *parts: str) -> None:
        self.parts = parts

    def __get__(self, layout: Layout, owner: type[Layout] | None = None) -> Path:
        return layout.root.joinpath(*self.parts)


@dataclass(frozen=True)
class Layout:
    """The files of one `gpufed up` state dir."""

    root: Path

    hub_dir = _Below("hub")
    hub_kubeconfig = _Below("hub", "hub.kubeconfig")
    kubeconfig = _Below("hub.kubeconfig")
    """What users point kubectl at: a link to the hub's admin kubeconfig."""
    fleet = _Below("fleet.yaml")
    ports = _Below("up.json")
    lock = _Below("up.lock")
    logs = _Below("logs")

    def member_dir(self, cluster: str) -> Path:
        return self.root / "members" / cluster

    def agent_dir(self, cluster: str) -> Path:
        return self.root / "agents" / cluster

    def log(self, component: str) -> Path:
        return self.logs / f"{component.replace('/', '-')}.log"


@contextlib.contextmanager
def exclusive(path: Path) -> Iterator[None]:
    """Hold an exclusive lock on ``path`` (two `gpufed up` on one state dir would fight)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a+") as handle:
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.seek(0)
            holder = handle.read().strip() or "?"
            raise UpError(f"another `gpufed up` (pid {holder}) is running on {path.parent}") from None
        handle.seek(0)
        handle.truncate()
        handle.write(f"{os.getpid()}\n")
        handle.flush()
        yield


class UpError(Exception):
    """`gpufed up` cannot go on; the message says why and what to do."""


def demo_fleet() -> Path:
    return Path(str(importlib.resources.files("gpufed.fleets") / "demo.yaml"))


def resolve_fleet(explicit: Path | None, layout: Layout) -> Path:
    """Copy the chosen fleet into the state dir (the members read it there on every start)."""
    source = explicit or (layout.fleet if layout.fleet.exists() else demo_fleet())
    if source.resolve() != layout.fleet.resolve():
        layout.root.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source, layout.fleet)
    return layout.fleet


def link_kubeconfig(layout: Layout) -> None:
    """DIR/hub.kubeconfig -> hub/hub.kubeconfig (relative, so the state dir can move)."""
    link = layout.kubeconfig
    target = layout.hub_kubeconfig.relative_to(layout.root)
    if link.is_symlink() and Path(os.readlink(link)) == target:
        return
    tmp = link.with_name(f".{link.name}.tmp")
    tmp.unlink(missing_ok=True)
    try:
        tmp.symlink_to(target)
    except OSError:  # no symlinks here: a copy, refreshed on every start
        shutil.copyfile(layout.hub_kubeconfig, tmp)
    os.replace(tmp, link)
