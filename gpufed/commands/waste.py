"""`gpufed waste`: where the fleet's GPU-hours went, in hours and dollars, and what to do about it.

Reads the hub's read-only ``reports.gpufed.io/v1alpha1`` WasteReport (the same numbers as
``kubectl get wastereports`` and the dashboard) and prints it as a table (default), the JSON
contract of :mod:`controlplane.reports.report` (``-o json``) or CSV (``-o csv``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import quote

from controlplane.apis.timestamps import format_time
from gpufed.argtypes import UsageError, positive_duration, time_or_duration, whole_number
from gpufed.commands.running import checked_namespace
from gpufed.commands.running import report as report_error
from gpufed.hubclient import HubClient, HubError, add_kubeconfig_argument
from gpufed.timeparse import parse_time

DIMENSIONS = ("cluster", "model", "profile", "namespace", "workload", "clusterqueue")
OUTPUTS = ("table", "json", "csv")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_kubeconfig_argument(parser)
    window = parser.add_mutually_exclusive_group()
    window.add_argument("--since", type=_window, default=None, metavar="DURATION",
                        help="report the window of this length ending at the last complete bucket of the hub's "
                             "accounting (a minute by default), e.g. 1h, 24h, 7d (default 24h)")
    window.add_argument("--from", dest="start", type=time_or_duration, metavar="TIME",
                        help="window start: RFC 3339 (2024-05-01T00:00:00Z) or a duration ago (48h)")
    parser.add_argument("--to", dest="end", type=time_or_duration, metavar="TIME",
                        help="window end with --from: RFC 3339 or a duration ago (default: the end of the last "
                             "complete bucket, as --since)")
    parser.add_argument("--by", action="append", default=[], type=_dimension_list, metavar="DIMENSION",
                        help=f"group by {', '.join(DIMENSIONS)} (comma-separated or repeated)")
    parser.add_argument("-o", "--output", choices=OUTPUTS, default="table", help="output format (default table)")
    parser.add_argument("--top", type=_top, default=10, metavar="N",
                        help="how many idle workloads to list, 0-1000 (default 10)")
    parser.add_argument("-n", "--namespace", default=None,
                        help="only this namespace's GPU time (what a team bound to view/edit/admin there may read)")


def _top(text: str) -> int:
    """``--top``: the server's range (0 to ``MAX_TOP``), refused before asking it."""
    from controlplane.reports.resource import MAX_TOP

    return whole_number(0, what="a number of workloads", maximum=MAX_TOP)(text)


def _window(text: str) -> timedelta:
    """``--since``: a duration of 1s up to the server's longest window (``MAX_DURATION``)."""
    from controlplane.reports.resource import MAX_DURATION

    value = positive_duration(text)
    if value > MAX_DURATION:
        raise argparse.ArgumentTypeError(f"must be at most {MAX_DURATION.days}d, not {text!r}")
    return value


def _dimension_list(text: str) -> str:
    """One ``--by`` value: dimensions, comma-separated, each one of :data:`DIMENSIONS`."""
    from controlplane.reports.resource import comma_separated

    for part in comma_separated([text]):
        if part not in DIMENSIONS:
            raise argparse.ArgumentTypeError(f"{part!r} is not one of {', '.join(DIMENSIONS)}")
    return text



def request_path(args: argparse.Namespace, *, now: datetime) -> tuple[str, dict[str, str]]:
    """The WasteReport path and query parameters for the command line (:class:`UsageError` when
    the flags do not go together)."""
    from controlplane.reports.resource import (
        COLLECTION_PATH,
        CUSTOM,
        comma_separated,
        format_duration,
        namespaced_collection_path,
    )

    namespace = getattr(args, "namespace", None)
    if namespace is None:
        collection = COLLECTION_PATH
    else:
        collection = namespaced_collection_path(checked_namespace(namespace))
    params: dict[str, str] = {"top": str(args.top)}
    by = comma_separated(args.by)
    if by:
        params["by"] = ",".join(by)
    if args.end is not None and args.start is None:
        raise UsageError("--to needs --from")
    if args.start is not None:
        params["from"] = format_time(parse_time(args.start, now=now))
        if args.end is not None:
            params["to"] = format_time(parse_time(args.end, now=now))
        return f"{collection}/{CUSTOM}", params
    since = args.since or timedelta(hours=24)
    return f"{collection}/last-{quote(format_duration(since))}", params


async def _fetch(client: HubClient, path: str, params: dict[str, str]) -> Any:
    return await client.request("GET", path, params=params)


def run(args: argparse.Namespace) -> int:
    from controlplane.reports.report import render
    from controlplane.reports.resource import report_from_json

    try:
        path, params = request_path(args, now=datetime.now(UTC))
        client = HubClient.from_kubeconfig(args.kubeconfig)
        obj = asyncio.run(_fetch(client, path, params))
    except UsageError:
        raise
    except (ValueError, HubError) as exc:
        return report_error(exc)
    status = obj.get("status") if isinstance(obj, dict) else None
    if not isinstance(status, dict):
        print("error: the hub answered with something that is not a WasteReport", file=sys.stderr)
        return 1
    if args.output == "json":
        sys.stdout.write(json.dumps(status, indent=2) + "\n")
        return 0
    try:
        report = report_from_json(status)
    except ValueError as exc:
        return report_error(exc)
    sys.stdout.write(render(report, args.output, top=args.top))
    return 0
