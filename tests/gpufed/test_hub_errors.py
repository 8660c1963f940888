"""How a user command fails against a real hub, in kubectl's words: the hub's Status as
``Error from server (Reason): …``, a wrong token as ``You must be logged in to the server``, a
refused connection and an untrusted certificate as kubectl says them; Ctrl-C and a reader that
went away end the command without a traceback. The tests that need a hub share their module's
(:data:`SHARED_HUB`): none changes what another reads."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio

from controlplane.apiserver.identity import Role
from controlplane.apiserver.kubeconfig import load_kubeconfig, write_kubeconfig
from controlplane.apiserver.tls import ensure_pki
from controlplane.hub import Hub
from controlplane.hubconfig import HubConfig
from gpufed.cli import main
from gpufed.commands.up.layout import demo_fleet

REPO = Path(__file__).resolve().parents[2]


#: The mark of the tests on the module's hub: they run on its event loop, where that hub runs.
SHARED_HUB = pytest.mark.asyncio(loop_scope="module")


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def hub(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Hub]:
    async with Hub(HubConfig(state_dir=tmp_path_factory.mktemp("hub"), port=0)) as running:
        yield running


def kubeconfig(hub: Hub, path: Path, *, token: str | None = None, server: str | None = None,
               ca_pem: bytes | None = None) -> Path:
    """The hub's admin kubeconfig with one thing changed."""
    admin = load_kubeconfig(hub.kubeconfig_path)
    write_kubeconfig(path, server=server or admin.server, ca_pem=ca_pem or admin.ca_pem,
                     token=token or admin.token, user="someone")
    return path


async def gpufed(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    """The real command line in this process: its exit status and stderr."""
    status = await asyncio.to_thread(main, argv)
    return status, capsys.readouterr().err


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@SHARED_HUB
async def test_a_status_error_is_printed_as_kubectl_prints_it(hub: Hub, capsys: pytest.CaptureFixture[str]) -> None:
    status, err = await gpufed(["token", "revoke", "nope", "--kubeconfig", str(hub.kubeconfig_path)], capsys)
    assert status == 1
    assert err == 'Error from server (NotFound): tokens.auth.gpufed.io "nope" not found\n'


@SHARED_HUB
async def test_a_token_without_permission_gets_the_forbidden_status(
    hub: Hub, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert hub.tokens is not None
    nobody = await hub.tokens.create(role=Role.USER, name="nobody")
    config = kubeconfig(hub, tmp_path / "nobody.kubeconfig", token=nobody.token)
    status, err = await gpufed(["token", "list", "--kubeconfig", str(config)], capsys)
    assert status == 1
    assert err == (
        'Error from server (Forbidden): tokens.auth.gpufed.io is forbidden: User "nobody" cannot list resource '
        '"tokens" in API group "auth.gpufed.io" at the cluster scope\n'
    )


@SHARED_HUB
async def test_a_wrong_token_is_told_to_log_in(hub: Hub, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = kubeconfig(hub, tmp_path / "wrong.kubeconfig", token="abcdef.0123456789abcdef")
    status, err = await gpufed(["queues", "--kubeconfig", str(config)], capsys)
    assert status == 1
    assert err.startswith("error: You must be logged in to the server (Unauthorized")
    assert err.count("\n") == 1


@SHARED_HUB
async def test_a_hub_certificate_of_another_ca_names_the_kubeconfig(
    hub: Hub, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    other = ensure_pki(tmp_path / "other", hosts=[])
    config = kubeconfig(hub, tmp_path / "other-ca.kubeconfig", ca_pem=other.ca_pem)
    status, err = await gpufed(["token", "list", "--kubeconfig", str(config)], capsys)
    host = load_kubeconfig(hub.kubeconfig_path).server.removeprefix("https://").rstrip("/")
    assert status == 1
    assert err == (
        "Unable to connect to the server: tls: failed to verify certificate: x509: certificate signed by unknown "
        f"authority (the certificate of {host} is not signed by the CA in {config})\n"
    )


@SHARED_HUB
async def test_a_hub_that_is_down_is_a_refused_connection(
    hub: Hub, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    port = free_port()
    config = kubeconfig(hub, tmp_path / "down.kubeconfig", server=f"https://127.0.0.1:{port}")
    for argv in (["token", "list"], ["get", "pods"], ["waste"], ["cordon", "gpu-a"]):
        status, err = await gpufed([*argv, "--kubeconfig", str(config)], capsys)
        assert (argv, status) == (argv, 1)
        assert err == (
            f"The connection to the server 127.0.0.1:{port} was refused - did you specify the right host or port?\n"
        )


# Restores SIGINT's default action, then execs the command: Python then raises KeyboardInterrupt on
# it, as at a terminal.
_SIGINT_AS_AT_A_TERMINAL = (
    "import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_DFL); "
    "os.execv(sys.executable, [sys.executable, '-m', 'gpufed.cli', *sys.argv[1:]])"
)


def _subprocess(argv: list[str], *, stdout: int) -> subprocess.Popen[str]:
    """The real command in its own process, this tree's code; stderr captured. Ctrl-C is
    delivered as at a terminal: a suite started in the background of a non-interactive shell
    runs with SIGINT ignored, which the child would inherit (and Python then never raises
    KeyboardInterrupt). A small trampoline restores it rather than a ``preexec_fn``: that makes
    ``subprocess`` fork this process, whose hubs' etcd clients are gRPC's, and gRPC's fork
    handlers can abort the child before it runs the command (``controlplane.processes``)."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.Popen([sys.executable, "-c", _SIGINT_AS_AT_A_TERMINAL, *argv], env=env, text=True,
                            stdout=stdout, stderr=subprocess.PIPE)


@SHARED_HUB
@pytest.mark.parametrize("command", ["token list", "whatif run"])
async def test_output_to_a_closed_pipe_ends_quietly(command: str, hub: Hub, tmp_path: Path) -> None:
    trace = tmp_path / "trace.csv"
    trace.write_text("name,submit_s,duration_s,gpus\njob-1,0,100,1\n")
    argv = {
        "token list": ["token", "list", "--kubeconfig", str(hub.kubeconfig_path)],
        "whatif run": ["whatif", "run", "--fleet", str(demo_fleet()), "--trace", str(trace)],
    }[command]
    read_end, write_end = os.pipe()
    os.close(read_end)  # the reader (`| head -1`) is gone before the first line
    try:
        process = _subprocess(argv, stdout=write_end)
    finally:
        os.close(write_end)
    _, err = await asyncio.to_thread(process.communicate, timeout=120)
    assert "Traceback" not in err and "Broken pipe" not in err
    assert process.returncode == 141  # as a program SIGPIPE ends


def test_ctrl_c_while_waiting_for_the_hub_exits_130(tmp_path: Path) -> None:
    other = ensure_pki(tmp_path / "pki", hosts=[])
    with socket.socket() as silent:  # accepts the connection, never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen(1)
        silent.settimeout(120)
        config = tmp_path / "silent.kubeconfig"
        write_kubeconfig(config, server=f"https://127.0.0.1:{silent.getsockname()[1]}", ca_pem=other.ca_pem,
                         token="abcdef.0123456789abcdef", user="someone")
        process = _subprocess(["get", "pods", "--kubeconfig", str(config)], stdout=subprocess.PIPE)
        connection, _ = silent.accept()  # the command is waiting for the hub now
        with connection:
            process.send_signal(signal.SIGINT)
            out, err = process.communicate(timeout=120)
    assert (process.returncode, out, err) == (130, "", "")


@pytest.mark.parametrize(
    ("argv", "flag", "value"),
    [
        (["waste", "--since", "bogus"], "--since", "bogus"),
        (["waste", "--since", "99999999999h"], "--since", "99999999999h"),
        (["waste", "--from", "yesterday"], "--from", "yesterday"),
        (["waste", "--from", "1h", "--to", "soon"], "--to", "soon"),
        (["logs", "x", "--since", "5x"], "--since", "5x"),
        (["token", "create", "--ttl", "1y"], "--ttl", "1y"),
        (["sim-cluster", "reclaim", "--state-dir", "d", "--nodes", "1", "--notice", "soon"], "--notice", "soon"),
        (["token", "create", "--ttl", "0s"], "--ttl", "0s"),  # was sent as no lifetime: a token that never expires
        (["waste", "--since", "0.5s"], "--since", "0.5s"),
    ],
)
def test_a_malformed_or_empty_duration_is_a_usage_error_naming_its_flag(
    argv: list[str], flag: str, value: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        main(argv)
    assert exited.value.code == 2
    last = capsys.readouterr().err.splitlines()[-1]
    assert f"error: argument {flag}: " in last
    assert f"'{value}'" in last


@pytest.mark.parametrize(
    ("argv", "usage", "message"),
    [
        (["token", "create", "--user", ""], "gpufed token create", "--user needs a name"),  # was: a token
        (["token", "create", "--role", "admin", "--print-join-command"], "gpufed token create",
         "--print-join-command needs --role bootstrap"),
        (["explain", "llm-serving", "-n", "ml"], "gpufed explain",
         "expected KIND/NAME (e.g. deployment/train), got 'llm-serving'"),
        (["waste", "-n", ""], "gpufed waste", "-n/--namespace needs a namespace name"),
    ],
)
def test_flags_that_do_not_go_together_are_a_usage_error(
    argv: list[str], usage: str, message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Exit status 2, the command's usage and argparse's ``error:`` line, before the kubeconfig
    is read (a missing one would be exit status 1)."""
    with pytest.raises(SystemExit) as exited:
        main([*argv, "--kubeconfig", str(tmp_path / "missing")])
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith(f"usage: {usage} ")
    assert err.splitlines()[-1] == f"{usage}: error: {message}"


@pytest.mark.parametrize("command", [["waste"], ["explain", "deploy/x"]])
def test_a_namespace_that_cannot_be_in_a_path_is_refused_before_asking_as_get_does(
    command: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """kubectl's words (as `gpufed get`'s), not the hub's NotFound for a path it does not serve."""
    assert main([*command, "-n", "a/b", "--kubeconfig", str(tmp_path / "missing")]) == 1
    assert capsys.readouterr().err == "error: invalid namespace \"a/b\": [may not contain '/']\n"
