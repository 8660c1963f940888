"""The status board of `gpufed up`: one line per component, redrawn in place on a terminal.

In: the supervised processes and the hub's view of the clusters. Out: a live table on a
terminal, plain lines when something changed on anything else, the messages above them, and
the welcome text that says how to use the fleet once it is up.
"""

from __future__ import annotations

import shutil
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import IO

from gpufed.commands.up.layout import Layout
from gpufed.commands.up.polling import ClusterView, HubView
from gpufed.commands.up.ports import HOST
from gpufed.supervising import ProcessState, SupervisedProcess


def format_uptime(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    seconds = int(seconds)
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"


def status_rows(processes: Sequence[SupervisedProcess], clusters: Mapping[str, ClusterView]) -> list[list[str]]:
    rows = [["COMPONENT", "PID", "STATE", "UPTIME", "RESTARTS", "CLUSTER"]]
    for process in processes:
        kind, _, cluster = process.name.partition("/")
        view = clusters.get(cluster) if kind == "member" else None
        rows.append([
            process.name,
            str(process.pid or "-"),
            process.state.value,
            format_uptime(process.uptime),
            str(process.restarts),
            view.describe() if view else "",
        ])
    return rows


def render_table(rows: Sequence[Sequence[str]], *, width: int) -> list[str]:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = []
    for row in rows:
        line = "  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip()
        lines.append(line[:width])
    return lines


class StatusBoard:
    """The live table on a terminal (redrawn in place), plain lines on anything else.

    A closed terminal (EIO, a broken pipe) silences the board; it never stops a shutdown.
    """

    def __init__(self, stream: IO[str], processes: list[SupervisedProcess], hub: HubView | None) -> None:
        self.stream: IO[str] | None = stream
        self.processes = processes
        self.hub = hub
        self.live = stream.isatty()
        self._drawn = 0
        self._said: dict[str, str] = {}

    def say(self, text: str) -> None:
        """A message above the live table."""
        self._write(self._erase() + text + "\n" + self._table())

    def refresh(self) -> None:
        if self.live:
            self._write(self._erase() + self._table())
            return
        lines = []
        for process in self.processes:
            if process.pid is None and process.state is ProcessState.STARTING:
                continue  # the line with the pid follows
            pid = f" (pid {process.pid})" if process.pid else ""
            lines += self._changed(process.name, f"{process.name}: {process.state.value}{pid}")
        for view in (self.hub.clusters.values() if self.hub else ()):
            lines += self._changed(f"cluster/{view.name}", f"cluster {view.name}: {view.describe()}")
        self._write("".join(line + "\n" for line in lines))

    def _changed(self, key: str, line: str) -> list[str]:
        if self._said.get(key) == line:
            return []
        self._said[key] = line
        return [line]

    def _table(self) -> str:
        if not self.live or not self.processes:
            return ""
        width = shutil.get_terminal_size((120, 24)).columns - 1
        lines = render_table(status_rows(self.processes, self.hub.clusters if self.hub else {}), width=width)
        self._drawn = len(lines)
        return "".join(f"\x1b[2K{line}\n" for line in lines)

    def _erase(self) -> str:
        drawn, self._drawn = self._drawn, 0
        return f"\x1b[{drawn}F\x1b[J" if self.live and drawn else ""

    def _write(self, text: str) -> None:
        if self.stream is None or not text:
            return
        try:
            self.stream.write(text)
            self.stream.flush()
        except OSError:
            self.stream = None


def activate_line() -> list[str]:
    """How another shell gets this ``gpufed`` on its PATH: the virtualenv's activate script
    (``make install`` puts gpufed in ``.venv/bin``, not on the PATH); nothing outside a venv."""
    activate = Path(sys.executable).parent / "activate"
    if sys.prefix == sys.base_prefix or not activate.is_file():
        return []
    return [f"  . {activate.absolute()}        # puts gpufed on this shell's PATH"]


def welcome(layout: Layout, port: int, names: list[str]) -> str:
    kubeconfig = layout.kubeconfig.absolute()
    member = layout.member_dir(names[0]).absolute() / "kubeconfig"
    return "\n".join([
        "",
        f"gpufed is up: a hub and {len(names)} member cluster(s) ({', '.join(names)}).",
        "",
        *activate_line(),
        f"  export KUBECONFIG={kubeconfig}",
        "  kubectl get clusters",
        "  kubectl apply -f job.yaml          # a Deployment, Job, PyTorchJob, ... and a PropagationPolicy",
        "  kubectl get resourcebindings,works -A",
        f"  kubectl --kubeconfig {member} get nodes   # inside member {names[0]}",
        "",
        f"Dashboard: https://{HOST}:{port}/ui   (sign in with the token of "
        f"`kubectl config view --raw -o jsonpath='{{.users[0].user.token}}'`)",
        f"Logs: {layout.logs.absolute()}/   Ctrl-C stops everything; `gpufed up` again resumes this fleet.",
        "",
    ])
