"""``-n`` as kubectl takes it: when not given, or given empty, the namespace of the kubeconfig's
current context, else ``default`` (``kubectl config set-context --current --namespace=ml`` and
then ``gpufed explain deploy/x`` looks in ``ml``)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from controlplane.apiserver.kubeconfig import write_kubeconfig
from gpufed.cli import parse

#: Every command that names objects of one namespace, as kubectl's commands do.
COMMANDS = [
    ["explain", "deploy/x"],
    ["get", "pods"],
    ["logs", "deploy/x"],
    ["exec", "deploy/x"],
    ["top", "pods"],
    ["describe", "deploy/x"],
    ["events", "deploy/x"],
]


def kubeconfig(path: Path, namespace: str | None) -> Path:
    write_kubeconfig(path, server="https://127.0.0.1:1", ca_pem=b"ca", token="t", user="u")
    if namespace is not None:
        document = yaml.safe_load(path.read_text())
        document["contexts"][0]["context"]["namespace"] = namespace
        path.write_text(yaml.safe_dump(document))
    return path


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: c[0])
def test_the_namespace_is_the_contexts_unless_given(command: list[str], tmp_path: Path) -> None:
    tail = ["--", "true"] if command[0] == "exec" else []  # the remote command comes last
    config = ["--kubeconfig", str(kubeconfig(tmp_path / "ml.kubeconfig", "ml"))]
    assert parse([*command, *config, *tail]).namespace == "ml"
    assert parse([*command, *config, "-n", "", *tail]).namespace == "ml"  # empty: as if not given
    assert parse([*command, *config, "-n", "team-a", *tail]).namespace == "team-a"
    plain = ["--kubeconfig", str(kubeconfig(tmp_path / "plain.kubeconfig", None))]
    assert parse([*command, *plain, *tail]).namespace == "default"


def test_the_kubeconfig_from_the_environment_gives_it_too(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KUBECONFIG", str(kubeconfig(tmp_path / "env.kubeconfig", "ml")))
    assert parse(["explain", "deploy/x"]).namespace == "ml"


def test_a_kubeconfig_that_cannot_be_read_leaves_default_for_the_command_to_report(tmp_path: Path) -> None:
    assert parse(["explain", "deploy/x", "--kubeconfig", str(tmp_path / "missing")]).namespace == "default"
    broken = tmp_path / "broken"
    broken.write_text("- not a kubeconfig\n")
    assert parse(["explain", "deploy/x", "--kubeconfig", str(broken)]).namespace == "default"


def test_waste_keeps_no_namespace_meaning_every_one(tmp_path: Path) -> None:
    config = ["--kubeconfig", str(kubeconfig(tmp_path / "ml.kubeconfig", "ml"))]
    assert parse(["waste", *config]).namespace is None
