"""Every gpufed process (hub, agent, member, each user command) starts through `gpufed.cli`; it
imports the module of the one subcommand it runs, so a member or an agent does not pay for
importing the hub (seconds of CPU per process on a small machine)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from gpufed.cli import SUBCOMMANDS, build_parser

_PROBE = """
import contextlib, io, json, sys
from gpufed.cli import main
with contextlib.redirect_stdout(io.StringIO()), contextlib.suppress(SystemExit):
    main(sys.argv[1:])
print(json.dumps(sorted(sys.modules)))
"""


def _modules_after(*argv: str) -> set[str]:
    """The modules a fresh interpreter has imported after parsing ``gpufed ARGV``."""
    done = subprocess.run(
        [sys.executable, "-c", _PROBE, *argv], capture_output=True, text=True, timeout=120, check=True
    )
    return set(json.loads(done.stdout.splitlines()[-1]))


def test_top_level_help_imports_no_subcommand() -> None:
    assert not {name for name in _modules_after("--help") if name.startswith("gpufed.commands.")}


@pytest.mark.parametrize(
    ("command", "not_imported"),
    [
        # A member and an agent run on member clusters: none of the hub's server, admission or
        # scheduler code.
        ("sim-cluster", ["controlplane.apiserver.app", "controlplane.admission", "gpufed.commands.controlplane"]),
        ("agent", ["controlplane.apiserver.app", "controlplane.admission", "simulator",
                   "controlplane.scheduler", "controlplane.reports.accounting", "numpy"]),
        # The hub does not load the demo launcher or the what-if simulator.
        ("controlplane", ["gpufed.commands.up", "simulator.whatif"]),
        ("waste", ["controlplane.apiserver.app", "simulator.whatif", "gpufed.commands.up"]),
        # The commands that reach members' pods through the hub read pod views, not the waste
        # accounting (which brings the scheduler core and numpy: a second of CPU per command).
        *((command, ["controlplane.reports", "controlplane.scheduler", "numpy"])
          for command in ("exec", "logs", "get", "top", "events")),
        # Minting a join token is a request and a line of text, not the hub's API server.
        ("token", ["controlplane.apiserver.app", "controlplane.apiserver.auth"]),
    ],
)
def test_a_subcommand_imports_only_its_own_module(command: str, not_imported: list[str]) -> None:
    modules = _modules_after(command, "--help")
    assert SUBCOMMANDS[command][0] in modules
    assert not [name for name in not_imported if name in modules]
    others = {module for name, (module, _) in SUBCOMMANDS.items() if module != SUBCOMMANDS[command][0]}
    assert not modules & others


def _modules_of(*modules: str) -> set[str]:
    """The modules a fresh interpreter has imported after importing ``MODULES``."""
    probe = f"import json, sys, {', '.join(modules)}; print(json.dumps(sorted(sys.modules)))"
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, check=True)
    return set(json.loads(done.stdout.splitlines()[-1]))


@pytest.mark.parametrize(
    ("modules", "not_imported"),
    [
        # What `gpufed agent` runs: the agent reads Kueue's label names, not Kueue's API models.
        (("gpufed.commands.agent", "member_agent.agent"),
         ["controlplane.apis.kueue_v1beta1", "controlplane.apis.kueue_multikueue", "controlplane.admission"]),
        # What `gpufed sim-cluster` runs: its API server's OpenAPI catalog names Kueue's visibility
        # kinds without importing the hub's visibility endpoints, and Kueue's admission with them;
        # it keeps its objects in memory, without etcd's client.
        (("gpufed.commands.simcluster", "simulator.server"),
         ["controlplane.apiserver.visibility", "controlplane.admission", "controlplane.apis.kueue_v1beta1",
          "controlplane.storage.etcd", "aetcd", "grpc"]),
    ],
)
def test_a_process_imports_only_what_it_runs(modules: tuple[str, ...], not_imported: list[str]) -> None:
    imported = _modules_of(*modules)
    assert set(modules) <= imported
    assert not [name for name in not_imported if name in imported]


def test_the_whole_parser_still_knows_every_subcommands_flags() -> None:
    parser = build_parser()
    for name in SUBCOMMANDS:
        with pytest.raises(SystemExit) as exited:
            parser.parse_args([name, "--no-such-flag-anywhere"])
        assert exited.value.code == 2
    args = parser.parse_args(["agent", "--hub", "https://hub:6443", "--cluster-name", "a", "--state-dir", "/tmp/x"])
    assert (args.command, args.cluster_name) == ("agent", "a")


def test_cel_is_imported_with_the_first_validation_rule_not_with_the_servers() -> None:
    assert "cel" not in _modules_of("controlplane.hub", "simulator.server")
