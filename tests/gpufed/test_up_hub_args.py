"""`gpufed up --hub-arg`: flags for the demo hub, checked by the hub's own parser before anything
starts, and passed to the hub's command line after the ones `gpufed up` sets; and the flag that
tells each agent its simulated member's node scoring."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from gpufed.cli import build_parser, main
from gpufed.commands.up.command import hub_args, hub_spec, scoring_flags
from gpufed.commands.up.layout import Layout, UpError
from simulator.profile import parse_fleet


def test_hub_args_are_split_and_checked_by_the_hubs_parser() -> None:
    assert hub_args(["--kueue-fair-sharing", "--kueue-wait-for-pods-ready-timeout 300"]) == (
        "--kueue-fair-sharing", "--kueue-wait-for-pods-ready-timeout", "300",
    )
    assert hub_args([]) == ()
    for values, message in [
        (["--no-such-flag"], "--hub-arg: unrecognized arguments: --no-such-flag"),
        (["--kueue-wait-for-pods-ready-timeout=soon"], "--kueue-wait-for-pods-ready-timeout"),
        (["--etcd-certfile /c.pem"], "--etcd-certfile and --etcd-keyfile go together"),
        (["--listen=0.0.0.0:1"], "use gpufed up --port"),
        (["--state-dir /tmp/x"], "use gpufed up --state-dir"),
    ]:
        with pytest.raises(UpError, match="--hub-arg") as refused:
            hub_args(values)
        assert message in str(refused.value)


def test_the_hub_runs_with_the_hub_args_after_up_own_flags(tmp_path: Path) -> None:
    args = build_parser().parse_args([
        "up", "--state-dir", str(tmp_path), "--hub-arg=--kueue-fair-sharing", "--hub-arg", "--leader-lease-ttl 20",
    ])
    args.hub_arg = list(hub_args(args.hub_arg))
    argv = hub_spec(args, Layout(tmp_path), 7443).argv
    assert argv[argv.index("controlplane"):] == (
        "controlplane", "--state-dir", str(Layout(tmp_path).hub_dir), "--listen", "127.0.0.1:7443",
        "--log-level", "INFO", "--kueue-fair-sharing", "--leader-lease-ttl", "20",
    )


def test_up_refuses_a_wrong_hub_arg_before_starting_anything(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    state = tmp_path / "state"
    assert main(["up", "--state-dir", str(state), "--hub-arg=--kueue-fair-shareing"]) == 2
    assert "error: --hub-arg: unrecognized arguments: --kueue-fair-shareing" in capsys.readouterr().err
    assert not state.exists()


def test_up_passes_its_waste_flags_to_the_hub(tmp_path: Path) -> None:
    args = build_parser().parse_args([
        "up", "--state-dir", str(tmp_path), "--waste-sample-interval", "5", "--waste-bucket-length", "10",
    ])
    argv = hub_spec(args, Layout(tmp_path), 7443).argv
    assert argv[argv.index("--log-level"):] == (
        "--log-level", "INFO", "--waste-sample-interval", "5.0", "--waste-bucket-length", "10",
    )
    unset = build_parser().parse_args(["up", "--state-dir", str(tmp_path)])
    assert "--waste-bucket-length" not in hub_spec(unset, Layout(tmp_path), 7443).argv  # the hub's default


@pytest.mark.parametrize("value", ["7", "90", "0", "2.5", "five"])
def test_up_refuses_a_bucket_length_the_hub_would_refuse(value: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        build_parser().parse_args(["up", f"--waste-bucket-length={value}"])
    error = capsys.readouterr().err
    assert "argument --waste-bucket-length:" in error, error
    if value.isdigit():
        assert "divides a minute (1, 2, 3, 4, 5, 6, 10, 12, 15, 20, 30 or 60)" in error, error
    else:
        assert f"expected whole seconds >= 0, not '{value}'" in error, error


def test_up_sets_the_hubs_bucket_length_itself() -> None:
    with pytest.raises(UpError, match="gpufed up sets the hub's --waste-bucket-length itself; use gpufed up --waste-bucket-length"):
        hub_args(["--waste-bucket-length 5"])


@pytest.mark.parametrize(
    ("scoring", "reported"), [(None, "LeastAllocated"), ("best-fit", "MostAllocated"), ("fgd", "FragmentationAware")]
)
def test_each_agent_reports_its_simulated_members_scoring(scoring: str | None, reported: str) -> None:
    entry: dict[str, Any] = {"name": "c", "nodeGroups": [{"name": "n", "count": 1, "cpu": 8, "memoryGiB": 32}]}
    if scoring:
        entry["simulation"] = {"scoring": scoring}
    profile = parse_fleet({"clusters": [entry]}).cluster("c")
    assert scoring_flags(profile) == ("--member-node-scoring", reported)
