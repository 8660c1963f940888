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


def test_a_kubeconfig_that_cannot_be_read_is_named(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["token", "list", "--kubeconfig", str(tmp_path)]) == 1
    assert capsys.readouterr().err == f"error: cannot read the kubeconfig {tmp_path}: Is a directory\n"
    binary = tmp_path / "binary.kubeconfig"
    binary.write_bytes(b"\xff\xfe")
    assert main(["queues", "--kubeconfig", str(binary)]) == 1
    assert capsys.readouterr().err == f"error: {binary} is not UTF-8 text\n"
    ca_file = tmp_path / "ca-file.kubeconfig"
    ca_file.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: c\n"
        "contexts: [{name: c, context: {cluster: h, user: u}}]\n"
        "clusters: [{name: h, cluster: {server: 'https://127.0.0.1:1', certificate-authority: missing-ca.crt}}]\n"
        "users: [{name: u, user: {token: t}}]\n"
    )
    assert main(["get", "pods", "--kubeconfig", str(ca_file)]) == 1
    assert capsys.readouterr().err == (
        f"error: cannot read the kubeconfig {ca_file}: {tmp_path / 'missing-ca.crt'}: No such file or directory\n"
    )


@pytest.mark.parametrize(
    ("argv", "line"),
    [
        (["-l", "a b"], "error: unable to parse requirement: found 'b', expected: in, notin, =, ==, !=, gt, lt"),
        (["-A", "-l", "a in (x"], 'error: unable to parse requirement: found end of input in selector "a in (x"'),
        (["-n", "a/b", "-l", "a b"], "invalid namespace \"a/b\": [may not contain '/']"),
        (["-n", ".."], "invalid namespace \"..\": [may not be '..']"),
        (["x", "-n", "a%/b"], "error: invalid namespace \"a%/b\": [may not contain '/' may not contain '%']"),
    ],
)
def test_get_refuses_what_kubectl_cannot_send_once_before_asking_anyone(
    argv: list[str], line: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """As kubectl 1.32 words it (a list's namespace without ``error: ``, as kubectl prints it);
    no hub is asked (its kubeconfig is not even read), so no member answers it again."""
    assert main(["get", "pods", *argv, "--kubeconfig", str(tmp_path / "missing.kubeconfig")]) == 1
    assert capsys.readouterr().err == line + "\n"
