"""How a command runs its async part: the failures it expects become one line (kubectl's words
for the hub's, ``error: …`` for the rest) and exit status 1; and the flags that long-running
processes (the hub, the agent, a hollow fleet) share: the garbage collector's policy and the
event loop's stall warning."""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Coroutine, Mapping
from typing import TYPE_CHECKING, Any

from controlplane.apis.kube.names import path_segment_errors
from controlplane.gcpolicy import CollectorPolicy
from controlplane.gojson import go_quote
from controlplane.loopwatch import DEFAULT_STALL_WARNING
from gpufed.argtypes import UsageError, seconds_or_off, whole_number
from gpufed.hubclient import HubError

if TYPE_CHECKING:
    from pydantic import ValidationError

Expected = tuple[type[Exception], ...]


def error_line(exc: BaseException) -> str:
    """The line a command that fails with ``exc`` prints on stderr."""
    if isinstance(exc, HubError):
        return exc.line
    return f"error: {file_error(exc) if isinstance(exc, OSError) else exc}"


def report(exc: BaseException) -> int:
    """Print ``exc`` as the command's last line; its exit status (1)."""
    print(error_line(exc), file=sys.stderr)
    return 1


def namespace_problem(namespace: str) -> str | None:
    """What kubectl says, before it asks any server, of a namespace that cannot be a segment of a
    URL path (``invalid namespace "a/b": [may not contain '/']``); None for one that can."""
    problems = path_segment_errors(namespace)
    return f"invalid namespace {go_quote(namespace)}: [{' '.join(problems)}]" if problems else None


def checked_namespace(namespace: str) -> str:
    """``namespace`` (``-n``) of a command that puts it in a URL path, refused before asking the
    hub: a :class:`~gpufed.argtypes.UsageError` when empty, ``ValueError`` with kubectl's words
    (:func:`namespace_problem`) when it cannot be a path segment."""
    if not namespace:
        raise UsageError("-n/--namespace needs a namespace name")
    problem = namespace_problem(namespace)
    if problem is not None:
        raise ValueError(problem)
    return namespace


def first_problem(exc: ValidationError, flags: Mapping[str, str] | None = None) -> str:
    """The first problem pydantic found, as one line (its message without the "Value error, ").

    ``flags`` maps a model's fields to the command-line flags that gave them their values: a
    problem with one of those is told as the flag's, with the value it was given
    (``--heartbeat-interval: must be greater than 0 (got -1)``)."""
    first = exc.errors()[0]
    message = str(first.get("msg", exc)).removeprefix("Value error, ")
    location = first.get("loc", ())
    flag = flags.get(str(location[0])) if flags and location else None
    if flag is None or message.startswith(flag):  # a message of the model's own that names it
        return message
    if message.startswith("Input should be "):
        message = "must be " + message.removeprefix("Input should be ")
    return f"{flag}: {message} (got {_as_given(first.get('input'))})"


def _as_given(value: object) -> str:
    """A flag's value as it was typed: ``-1`` for the float argparse made of it."""
    return f"{value:g}" if isinstance(value, float) else str(value)


def given_flags(args: argparse.Namespace) -> dict[str, str]:
    """``--flag-name`` by the destination of every flag given a value (argparse's own spelling:
    a flag's destination is its name with ``_`` for ``-``)."""
    return {dest: "--" + dest.replace("_", "-") for dest, value in vars(args).items() if value is not None}


def run_reporting(main: Coroutine[Any, Any, int], expected: Expected) -> int:
    """Run ``main`` to its exit status; an ``expected`` error is printed and exits 1 (a
    :class:`~gpufed.argtypes.UsageError` goes on, to exit 2 with the command's usage)."""
    try:
        return asyncio.run(main)
    except UsageError:
        raise
    except expected as exc:
        return report(exc)


def serve_reporting(serving: Coroutine[Any, Any, None], *, host: str, port: int, expected: Expected,
                    hint: str = "") -> int:
    """Serve until ``serving`` returns (a signal); an ``expected`` error, a file or directory that
    cannot be used, or an address that cannot be bound is printed and exits 1."""
    try:
        asyncio.run(serving)
    except expected as exc:
        print(f"error: {exc}{hint}", file=sys.stderr)
        return 1
    except OSError as exc:
        if exc.filename is not None:
            print(f"error: {file_error(exc)}", file=sys.stderr)
            return 1
        print(f"error: cannot serve on {host}:{port}: {exc.strerror or exc}", file=sys.stderr)
        return 1
    return 0


def file_error(exc: OSError) -> str:
    """``PATH: reason`` for a file or directory the command could not use."""
    reason = exc.strerror or str(exc)
    return reason if exc.filename is None else f"{exc.filename}: {reason}"


DEFAULT_GC = CollectorPolicy()


def add_collector_arguments(parser: argparse.ArgumentParser) -> None:
    """``--gc-freeze-interval`` and ``--gc-full-interval`` (:mod:`controlplane.gcpolicy`)."""
    seconds = whole_number(what="whole seconds")
    parser.add_argument("--gc-freeze-interval", type=seconds, default=DEFAULT_GC.freeze_interval,
                        metavar="SECONDS",
                        help="seconds between freezes of the objects that survived Python's garbage collector, so "
                             "that its passes walk only newer ones and do not hold the event loop for seconds when "
                             "the process caches millions of objects (a large fleet or member cluster); 0: Python's "
                             f"default collection (default {DEFAULT_GC.freeze_interval:g})")
    parser.add_argument("--gc-full-interval", type=seconds, default=DEFAULT_GC.full_interval,
                        metavar="SECONDS",
                        help="seconds between full collections over the frozen objects too, which find reference "
                             f"cycles formed among them; 0: never (default {DEFAULT_GC.full_interval:g})")


def collector_policy(args: argparse.Namespace) -> CollectorPolicy:
    return CollectorPolicy(freeze_interval=args.gc_freeze_interval, full_interval=args.gc_full_interval)


def add_loop_stall_argument(parser: argparse.ArgumentParser, *, loop: str, detail: str = "") -> None:
    """``--loop-stall-warning`` (:mod:`controlplane.loopwatch`) of the process ``loop`` names (the
    hub's, the agent's); ``detail`` tells more of what it does there."""
    parser.add_argument("--loop-stall-warning", type=seconds_or_off, default=DEFAULT_STALL_WARNING,
                        metavar="SECONDS",
                        help=f"log each stall of the {loop} event loop at least this long, with the code it was "
                             f"held in{detail}; 0: off (default {DEFAULT_STALL_WARNING:g})")
