from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from gpufed.cli import main
from tests.whatif.fleets import t4_cluster

TRACE = """name,submit_s,duration_s,gpus,cluster
a,0,600,1,onprem
b,10,600,0.5,onprem
c,20,600,2,onprem
d,30,60,4,cloud
"""


@pytest.fixture
def files(tmp_path: Path) -> tuple[Path, Path]:
    fleet = tmp_path / "fleet.yaml"
    fleet.write_text(
        yaml.safe_dump(
            {
                "clusters": [
                    t4_cluster("onprem", nodes=2, gpus=2),
                    t4_cluster("cloud", nodes=1, gpus=4, provider="aws"),
                ]
            }
        )
    )
    trace = tmp_path / "trace.csv"
    trace.write_text(TRACE)
    return fleet, trace


def test_run_json(files: tuple[Path, Path], capsys: pytest.CaptureFixture[str]) -> None:
    fleet, trace = files
    assert (
        main(["whatif", "run", "--fleet", str(fleet), "--trace", str(trace), "-o", "json", "--seed", "3"])
        == 0
    )
    out = json.loads(capsys.readouterr().out)
    assert list(out["strategies"]) == ["gpufed", "static", "karmada-like", "pooled"]
    assert out["trace"]["format"] == "generic" and out["trace"]["jobs"] == 4
    assert 0 < out["strategies"]["pooled"]["allocation_pct_at_100"] <= 100


def test_run_table_and_plot(
    files: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    fleet, trace = files
    plot = tmp_path / "out.png"
    code = main(
        [
            "whatif",
            "run",
            "--fleet",
            str(fleet),
            "--trace",
            str(trace),
            "--compare",
            "gpufed,pooled",
            "--member-scoring",
            "random",
            "--plot",
            str(plot),
        ]
    )
    assert code == 0
    table = capsys.readouterr().out.splitlines()
    assert table[0].split()[:3] == ["STRATEGY", "ALLOC@100%", "ALLOC@130%"]
    assert [line.split()[0] for line in table[1:3]] == ["gpufed", "pooled"]
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--compare", "gpufed,bogus"], "unknown strategy 'bogus'"),
        (["--inflate", "1.1"], "--inflate must be between 1.3 and 10"),
    ],
)
def test_bad_arguments(
    files: tuple[Path, Path], args: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    fleet, trace = files
    with pytest.raises(SystemExit):
        main(["whatif", "run", "--fleet", str(fleet), "--trace", str(trace), *args])
    assert message in capsys.readouterr().err


def test_bad_trace_is_an_error_with_the_line(
    files: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    fleet, _ = files
    trace = tmp_path / "bad.csv"
    trace.write_text("name,submit_s,duration_s,gpus\na,0,10,x\n")
    assert main(["whatif", "run", "--fleet", str(fleet), "--trace", str(trace)]) == 1
    assert "line 2: column gpus: 'x' is not a number" in capsys.readouterr().err


def test_bad_policy_is_an_error(
    files: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    fleet, trace = files
    policy = tmp_path / "p.yaml"
    policy.write_text(
        "apiVersion: policy.gpufed.io/v1alpha1\nkind: PropagationPolicy\nmetadata: {name: p}\nspec: {}\n"
    )
    assert main(["whatif", "run", "--fleet", str(fleet), "--trace", str(trace), "--policy", str(policy)]) == 1
    assert "resourceSelectors" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("text", "message"), [("kind: [", " is not valid YAML: "), ("- a\n- b\n", ": expected one PropagationPolicy document")]
)
def test_a_policy_file_that_is_not_one_mapping_is_an_error(
    files: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str, message: str
) -> None:
    fleet, trace = files
    policy = tmp_path / "p.yaml"
    policy.write_text(text)
    assert main(["whatif", "run", "--fleet", str(fleet), "--trace", str(trace), "--policy", str(policy)]) == 1
    assert f"{policy}{message}" in capsys.readouterr().err


def test_split_writes_a_fleet(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    nodes = tmp_path / "nodes.csv"
    nodes.write_text(
        "sn,cpu_milli,memory_mib,gpu,model\nn0,32000,65536,2,T4\nn1,32000,65536,8,G2\nn2,8000,32768,1,V100M16\n"
    )
    assert (
        main(["whatif", "split", str(nodes), "--clusters", "2", "--by", "onprem-cloud", "--seed", "1"]) == 0
    )
    out = capsys.readouterr().out
    assert "CC BY 4.0" in out
    fleet = yaml.safe_load(out)
    assert [c["name"] for c in fleet["clusters"]] == ["onprem", "cloud-aws-1"]
    fleet_file = tmp_path / "fleet.yaml"
    fleet_file.write_text(out)
    trace = tmp_path / "t.csv"
    trace.write_text(TRACE.replace(",onprem", ",").replace(",cloud", ","))
    assert (
        main(
            ["whatif", "run", "--fleet", str(fleet_file), "--trace", str(trace), "--no-replay", "-o", "json"]
        )
        == 0
    )


MISSING = "sn,cpu_milli,memory_mib,gpu,model"


def test_a_node_list_without_its_columns_names_the_missing_ones(
    files: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    """A pod list given as the node list (it was ``error: t20.csv: 'model'``)."""
    _, trace = files
    assert main(["whatif", "split", str(trace), "--clusters", "2", "--by", "random"]) == 1
    assert capsys.readouterr().err == (
        f"error: {trace}: line 1: the header lacks column(s) {MISSING} of an openb node list"
        " (needs sn,cpu_milli,memory_mib,gpu,model)\n"
    )
    variant = ["whatif", "variant", str(trace), "--kind", "cpu", "--percent", "10", "--nodes", str(trace)]
    assert main(variant) == 1
    assert f"error: {trace}: line 1: the header lacks column(s) {MISSING} " in capsys.readouterr().err


@pytest.mark.parametrize(("text", "found"), [("", "is empty"), ("- a\n", "holds a list, not a mapping")])
def test_a_fleet_file_that_is_not_a_mapping_is_named_with_what_it_needs(
    text: str, found: str, files: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _, trace = files
    fleet = tmp_path / "empty.yaml"
    fleet.write_text(text)
    assert main(["whatif", "run", "--fleet", str(fleet), "--trace", str(trace)]) == 1
    assert capsys.readouterr().err == (
        f"error: {fleet} {found}: a fleet file is a mapping with clusters: (a list of clusters,"
        " each with a name), or one cluster's mapping\n"
    )
