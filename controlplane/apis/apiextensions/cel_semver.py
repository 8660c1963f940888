"""kube's CEL semver library (k8s.io/apiserver/pkg/cel/library semverlib.go, from 1.33).

``semver(s)`` parses a semantic version as blang/semver v4's ``Parse`` does (an error with its
message when it does not parse), ``semver(s, true)`` after kube's normalization (no leading ``v``,
a missing minor or patch is 0, leading zeros dropped); ``isSemver`` says whether it parses;
``<Semver>.major()``, ``minor()``, ``patch()``; and :func:`compare` orders two versions as
semver.org does (a pre-release before its release, build metadata ignored). A version travels
between calls as a one-key map holding its text without its build metadata, so that ``==`` is
kube's (blang's ``EQ``: ``semver('1.0.0+a') == semver('1.0.0+b')``). Pure: no I/O.
"""

from __future__ import annotations

import re
from typing import Any

_SEMVER_KEY = "kubernetes.io/semver"
_ALPHANUMERIC = re.compile(r"[0-9A-Za-z-]+")


class _Version:
    __slots__ = ("major", "minor", "patch", "pre")

    def __init__(self, major: int, minor: int, patch: int, pre: list[str]) -> None:
        self.major, self.minor, self.patch, self.pre = major, minor, patch, pre


def _number(text: str, what: str) -> int:
    if not text.isdigit() or not text.isascii():
        raise ValueError(f"Invalid character(s) found in {what} number {_go_quote(text)}")
    if len(text) > 1 and text.startswith("0"):
        raise ValueError(f"{what.capitalize()} number must not contain leading zeroes {_go_quote(text)}")
    return int(text)


def _go_quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _parse(text: str) -> _Version:
    """blang/semver v4 ``Parse``, with its messages."""
    if not text:
        raise ValueError("Version string empty")
    parts = text.split(".", 2)
    if len(parts) != 3:
        raise ValueError("No Major.Minor.Patch elements found")
    major, minor = _number(parts[0], "major"), _number(parts[1], "minor")
    patch_text, pre, build = parts[2], [], []
    if "+" in patch_text:
        patch_text, rest = patch_text.split("+", 1)
        build = rest.split(".")
    if "-" in patch_text:
        patch_text, rest = patch_text.split("-", 1)
        pre = rest.split(".")
    patch = _number(patch_text, "patch")
    for item in pre:
        if not item:
            raise ValueError("Prerelease is empty")
        if item.isdigit() and item.isascii():
            if len(item) > 1 and item.startswith("0"):
                raise ValueError(
                    f"Numeric PreRelease version must not contain leading zeroes {_go_quote(item)}"
                )
        elif _ALPHANUMERIC.fullmatch(item) is None:
            raise ValueError(f"Invalid character(s) found in prerelease {_go_quote(item)}")
    for item in build:
        if not item:
            raise ValueError("Build meta data is empty")
        if _ALPHANUMERIC.fullmatch(item) is None:
            raise ValueError(f"Invalid character(s) found in build meta data {_go_quote(item)}")
    return _Version(major, minor, patch, pre)


def _normalized(text: str) -> str:
    """kube's normalizeAndParse, before parsing."""
    parts = text.removeprefix("v").split(".", 2)
    for index, part in enumerate(parts):
        if len(part) > 1:
            part = part.lstrip("0")
            if not part or not part[0].isdigit():
                part = "0" + part
            parts[index] = part
    if len(parts) < 3:
        if any(c in parts[-1] for c in "+-"):
            raise ValueError("short version cannot contain PreRelease/Build meta data")
        parts += ["0"] * (3 - len(parts))
    return ".".join(parts)


def _semver(text: str, normalize: bool = False) -> dict[str, str]:
    if normalize:
        text = _normalized(text)
    _parse(text)
    return {_SEMVER_KEY: text.partition("+")[0]}


def _is_semver(text: str, normalize: bool = False) -> bool:
    try:
        _semver(text, normalize)
    except ValueError:
        return False
    return True


def is_version(value: Any) -> bool:
    """Whether ``value`` is a version (:func:`compare` takes it)."""
    return isinstance(value, dict) and _SEMVER_KEY in value


def _version(value: Any) -> _Version:
    if not is_version(value):
        raise ValueError("no such overload")
    return _parse(value[_SEMVER_KEY])


def _pre_key(item: str) -> tuple[int, int, str]:
    return (0, int(item), "") if item.isdigit() else (1, 0, item)


def compare(a: Any, b: Any) -> int:
    """-1, 0 or 1 as ``a`` is older than, as old as or newer than ``b`` (semver.org's precedence)."""
    left, right = _version(a), _version(b)
    core = (left.major, left.minor, left.patch), (right.major, right.minor, right.patch)
    if core[0] != core[1]:
        return -1 if core[0] < core[1] else 1
    if not left.pre or not right.pre:
        return (not left.pre) - (not right.pre)
    keys = [_pre_key(p) for p in left.pre], [_pre_key(p) for p in right.pre]
    return (keys[0] > keys[1]) - (keys[0] < keys[1])


FUNCTIONS: dict[str, Any] = {
    "semver": _semver,
    "isSemver": _is_semver,
    "major": lambda v: _version(v).major,
    "minor": lambda v: _version(v).minor,
    "patch": lambda v: _version(v).patch,
}
