"""Commands that talk to the hub turn its errors into one ``error: …`` line and exit status 1
(no traceback), whichever command it is."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpufed.cli import main


@pytest.mark.parametrize(
    "argv",
    [
        ["queues"],
        ["describe", "deploy/x"],
        ["top", "pods"],
        ["top", "nodes"],
        ["cordon", "gpu-a"],
        ["taint", "gpu-a", "a=b:NoSchedule"],
        ["exec", "x", "--kubeconfig", "{missing}", "--", "true"],
    ],
)
def test_a_hub_error_is_one_line_and_status_1(
    argv: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "missing.kubeconfig"
    args = [arg.format(missing=missing) for arg in argv]
    if "--kubeconfig" not in args:
        args += ["--kubeconfig", str(missing)]
    assert main(args) == 1
    err = capsys.readouterr().err
    assert err == (
        f"error: no hub kubeconfig at {missing}: start a hub (`gpufed up` or `gpufed controlplane`) or pass --kubeconfig\n"
    )
