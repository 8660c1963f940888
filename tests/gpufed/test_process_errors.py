"""The long-running commands (`up`, `controlplane`, `agent`) refuse a state dir, fleet file or
flag they cannot use with one line naming it, not a traceback."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpufed.cli import main
from gpufed.commands.up.layout import demo_fleet

CA_HASH = "sha256:" + "0" * 64


@pytest.fixture
def a_file(tmp_path: Path) -> Path:
    path = tmp_path / "a-file"
    path.write_text("")
    return path


@pytest.mark.parametrize("command", [
    ["up", "--port", "0", "--state-dir"],
    ["controlplane", "--listen", "127.0.0.1:0", "--state-dir"],
])
def test_a_state_dir_below_a_file_is_named(command: list[str], a_file: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    state = a_file / "state"
    assert main([*command, str(state)]) == 1
    assert capsys.readouterr().err.splitlines()[-1] == f"error: {state}: Not a directory"


def test_up_names_a_fleet_file_that_is_not_there(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    missing = tmp_path / "fleet.yaml"
    assert main(["up", "--port", "0", "--state-dir", str(tmp_path / "state"), "--fleet", str(missing)]) == 2
    assert capsys.readouterr().err == f"error: cannot read fleet file {missing}: No such file or directory\n"


def test_up_keeps_the_previous_fleet_when_the_new_one_is_not_yaml(tmp_path: Path,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    state = tmp_path / "state"
    state.mkdir()
    (state / "fleet.yaml").write_text("clusters: []\n")
    broken = tmp_path / "broken.yaml"
    broken.write_text("clusters: [\n")
    assert main(["up", "--port", "0", "--state-dir", str(state), "--fleet", str(broken)]) == 2
    assert capsys.readouterr().err == (
        f"error: {broken} is not valid YAML: expected the node content, but found '<stream end>' at line 2, column 1\n"
    )
    assert (state / "fleet.yaml").read_text() == "clusters: []\n"


def test_agent_names_a_member_kubeconfig_that_is_not_there(tmp_path: Path,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    missing = tmp_path / "member.kubeconfig"
    argv = ["agent", "--hub", "https://127.0.0.1:1", "--hub-ca-hash", CA_HASH, "--cluster-name", "gpu-a",
            "--kubeconfig", str(missing), "--state-dir", str(tmp_path / "agent")]
    assert main(argv) == 2
    assert capsys.readouterr().err.splitlines()[-1] == (
        f"error: --kubeconfig {missing}: no such file (the member cluster's kubeconfig)"
    )


def test_agent_says_a_malformed_ca_hash_in_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["agent", "--hub", "https://127.0.0.1:1", "--hub-ca-hash", "sha256:00", "--cluster-name", "gpu-a",
            "--state-dir", str(tmp_path / "agent")]
    assert main(argv) == 2
    assert capsys.readouterr().err.splitlines()[-1:] == [
        "error: --hub-ca-hash must look like sha256:<64 hex digits>, got 'sha256:00'"
    ]


def test_whatif_names_a_policy_file_that_is_not_there(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    trace = tmp_path / "trace.csv"
    trace.write_text("name,submit_s,duration_s,gpus\njob-1,0,100,1\n")
    missing = tmp_path / "policy.yaml"
    argv = ["whatif", "run", "--fleet", str(demo_fleet()), "--trace", str(trace), "--policy", str(missing)]
    assert main(argv) == 1
    assert capsys.readouterr().err.splitlines()[-1] == f"error: {missing}: No such file or directory"


def test_member_and_hub_kubeconfigs_that_are_not_there_are_named_by_their_flag(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["sim-cluster", "reclaim", "--state-dir", str(tmp_path), "--nodes", "1"]) == 1
    assert capsys.readouterr().err == (
        f"error: no member kubeconfig at {tmp_path / 'kubeconfig'}: start the member (`gpufed sim-cluster` or "
        "`gpufed up`) or pass its --state-dir\n"
    )
    missing = tmp_path / "hub.kubeconfig"
    argv = ["sim-fleet", "--clusters", "1", "--nodes", "1", "--state-dir", str(tmp_path / "fleet"),
            "--hub-kubeconfig", str(missing)]
    assert main(argv) == 1
    assert capsys.readouterr().err.splitlines()[-1] == f"error: --hub-kubeconfig {missing}: no such file"


def test_sim_fleet_names_a_state_dir_it_cannot_make(a_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["sim-fleet", "--clusters", "1", "--nodes", "1", "--state-dir", str(a_file / "fleet"),
            "--hub-kubeconfig", str(a_file)]
    assert main(argv) == 1
    assert capsys.readouterr().err.splitlines()[-1] == f"error: {a_file / 'fleet'}: Not a directory"


@pytest.mark.parametrize(("flag", "value", "problem"), [
    ("--api-enablements-interval", "-1", "must be greater than 0 (got -1)"),
    ("--heartbeat-interval", "0", "must be greater than 0 (got 0)"),
    ("--dcgm-max-bytes", "-5", "must be greater than 0 (got -5)"),
    ("--status-hold", "0.5e3", "must be less than or equal to 60 (got 500)"),
    ("--cluster-name", "GPU_A", "must be a DNS-1123 label of at most 53 characters (lower case letters, digits and"
                                " '-', starting and ending with a letter or digit) (got GPU_A)"),
])
def test_agent_names_the_flag_whose_value_its_configuration_refuses(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], flag: str, value: str, problem: str
) -> None:
    argv = ["agent", "--hub", "https://127.0.0.1:1", "--hub-ca-hash", CA_HASH, "--cluster-name", "gpu-a",
            "--state-dir", str(tmp_path / "agent"), flag, value]
    assert main(argv) == 2
    assert capsys.readouterr().err.splitlines()[-1] == f"error: {flag}: {problem}"
