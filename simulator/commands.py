"""The commands a simulated container runs for ``exec``. Pure: no I/O.

A small, fixed command set — enough to show exec working through the hub: ``echo``,
``hostname``, ``env``, ``cat`` (a few files, or stdin), ``nvidia-smi -L`` (the pod's simulated
GPUs and MIG instances), ``stty size`` (the terminal's rows and columns, with a tty),
``true``, ``false``, ``exit N`` and ``sh -c`` of a script made of those, joined with ``;``,
``&&`` or ``||``. Anything else exits 127 with the shell's message.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

NOT_FOUND = 127


@dataclass(frozen=True, slots=True)
class GpuView:
    """A device the pod holds, as nvidia-smi inside it lists it."""

    model: str
    uuid: str
    #: MIG instances on that GPU held by the pod: (profile, UUID).
    mig: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True, slots=True)
class Container:
    """What a command can see of its container."""

    pod: str
    namespace: str
    container: str
    env: Mapping[str, str] = field(default_factory=dict)
    gpus: tuple[GpuView, ...] = ()
    #: The terminal's (rows, columns) when the exec has a tty; None without one.
    terminal: tuple[int, int] | None = None


@dataclass(slots=True)
class Result:
    stdout: str = ""
    stderr: str = ""
    exit_code: int = 0
    #: The script ended with ``exit`` (the rest is not run).
    exited: bool = False


def environment(container: Container) -> dict[str, str]:
    env = {
        "PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
        "HOSTNAME": container.pod,
        "KUBERNETES_SERVICE_HOST": "10.96.0.1",
        "KUBERNETES_SERVICE_PORT": "443",
    }
    if container.gpus:
        env["NVIDIA_VISIBLE_DEVICES"] = ",".join(
            uuid for gpu in container.gpus for uuid in ([u for _, u in gpu.mig] or [gpu.uuid])
        )
    env.update(container.env)
    return env


def files(container: Container) -> dict[str, str]:
    return {
        "/etc/hostname": container.pod + "\n",
        "/etc/os-release": 'NAME="Ubuntu"\nVERSION_ID="22.04"\nID=ubuntu\n',
        "/var/run/secrets/kubernetes.io/serviceaccount/namespace": container.namespace,
    }


def nvidia_smi_list(gpus: Sequence[GpuView]) -> Result:
    if not gpus:
        return Result(stdout="No devices were found\n", exit_code=6)
    lines: list[str] = []
    for index, gpu in enumerate(gpus):
        lines.append(f"GPU {index}: {gpu.model} (UUID: {gpu.uuid})")
        lines.extend(f"  MIG {profile:<12} Device {n:>2}: (UUID: {uuid})" for n, (profile, uuid) in enumerate(gpu.mig))
    return Result(stdout="\n".join(lines) + "\n")


def reads_stdin(argv: Sequence[str]) -> bool:
    """Whether the command copies its stdin (``cat`` without files)."""
    return list(argv) in (["cat"], ["cat", "-"])


def reads_terminal(argv: Sequence[str]) -> bool:
    """Whether the command reports the terminal's size (``stty size``)."""
    return list(argv) == ["stty", "size"]


def run(argv: Sequence[str], container: Container, *, stdin: str = "") -> Result:
    """Run one command line (``argv`` as exec passes it)."""
    if not argv:
        return Result(stderr="exec: no command given\n", exit_code=NOT_FOUND)
    name, args = argv[0].rsplit("/", 1)[-1], list(argv[1:])
    if name in ("sh", "bash") and args[:1] == ["-c"] and len(args) > 1:
        return run_script(args[1], container, stdin=stdin)
    if name == "echo":
        newline = args[:1] != ["-n"]
        return Result(stdout=" ".join(args[0 if newline else 1:]) + ("\n" if newline else ""))
    if name == "hostname":
        return Result(stdout=container.pod + "\n")
    if name == "env":
        return Result(stdout="".join(f"{k}={v}\n" for k, v in environment(container).items()))
    if name == "cat":
        return _cat(args, container, stdin)
    if name == "nvidia-smi":
        return nvidia_smi_list(container.gpus)
    if name == "stty" and args == ["size"]:
        if container.terminal is None:
            return Result(stderr="stty: 'standard input': Inappropriate ioctl for device\n", exit_code=1)
        return Result(stdout=f"{container.terminal[0]} {container.terminal[1]}\n")
    if name in ("true", "false"):
        return Result(exit_code=0 if name == "true" else 1)
    if name == "exit":
        return _exit(args)
    return Result(stderr=f"exec: \"{argv[0]}\": executable file not found in $PATH\n", exit_code=NOT_FOUND)


def run_script(script: str, container: Container, *, stdin: str = "") -> Result:
    """``sh -c SCRIPT`` for scripts of the commands above joined with ``;``, ``&&``, ``||``."""
    lexer = shlex.shlex(script, posix=True, punctuation_chars=";&|")
    lexer.whitespace_split = True
    try:
        tokens = list(lexer)
    except ValueError as exc:
        return Result(stderr=f"sh: syntax error: {exc}\n", exit_code=2)
    total = Result()
    command: list[str] = []
    joiner = ";"
    for token in [*tokens, ";"]:
        if token not in (";", "&&", "||"):
            command.append(token)
            continue
        if command and (joiner == ";" or (joiner == "&&") == (total.exit_code == 0)):
            result = run(command, container, stdin=stdin)
            total.stdout += result.stdout
            total.stderr += result.stderr
            total.exit_code = result.exit_code
            if result.exited:
                total.exited = True
                return total
            if result.exit_code == NOT_FOUND and result.stderr.startswith("exec:"):
                total.stderr = total.stderr.replace(result.stderr, f"sh: 1: {command[0]}: not found\n")
        command, joiner = [], token
    return total


def _cat(args: list[str], container: Container, stdin: str) -> Result:
    if not args or args == ["-"]:
        return Result(stdout=stdin)
    known = files(container)
    out = Result()
    for path in args:
        if path in known:
            out.stdout += known[path]
        else:
            out.stderr += f"cat: {path}: No such file or directory\n"
            out.exit_code = 1
    return out


def _exit(args: list[str]) -> Result:
    try:
        code = int(args[0]) if args else 0
    except ValueError:
        return Result(stderr=f"sh: exit: Illegal number: {args[0]}\n", exit_code=2, exited=True)
    return Result(exit_code=code % 256, exited=True)
