"""The files of a `gpufed up` state dir, where the README and the members look for them."""

from __future__ import annotations

from pathlib import Path

from gpufed.commands.up.layout import Layout, link_kubeconfig, resolve_fleet


def test_state_dir_files(tmp_path: Path) -> None:
    layout = Layout(tmp_path)
    assert layout.hub_dir == tmp_path / "hub"
    assert layout.hub_kubeconfig == tmp_path / "hub" / "hub.kubeconfig"
    assert layout.kubeconfig == tmp_path / "hub.kubeconfig"
    assert layout.fleet == tmp_path / "fleet.yaml"
    assert layout.ports == tmp_path / "up.json"
    assert layout.lock == tmp_path / "up.lock"
    assert layout.logs == tmp_path / "logs"
    assert layout.log("member/a") == tmp_path / "logs" / "member-a.log"
    assert layout.member_dir("a") == tmp_path / "members" / "a"
    assert layout.agent_dir("a") == tmp_path / "agents" / "a"


def test_fleet_copied_in_and_kubeconfig_linked(tmp_path: Path) -> None:
    source = tmp_path / "mine.yaml"
    source.write_text("clusters: []\n")
    layout = Layout(tmp_path / "state")
    assert resolve_fleet(source, layout) == tmp_path / "state" / "fleet.yaml"
    assert layout.fleet.read_text() == "clusters: []\n"
    layout.hub_dir.mkdir(parents=True)
    layout.hub_kubeconfig.write_text("kind: Config\n")
    link_kubeconfig(layout)
    assert (tmp_path / "state" / "hub.kubeconfig").read_text() == "kind: Config\n"
