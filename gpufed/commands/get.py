"""`gpufed get KIND[/NAME] [-n NS | -A] [-l SELECTOR] [--clusters c1,c2|all]`.

The same listing on every member, through the hub's cluster proxy, as one table with a
CLUSTER column first. Each member answers with its own server-side table (the columns
``kubectl get`` shows); a member that cannot answer (agent not connected, kind not served) is
reported on stderr and the others are still shown.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from typing import Any

from gpufed.commands.running import run_reporting
from gpufed.hubclient import HubClient, HubError, add_kubeconfig_argument
from gpufed.memberproxy import TABLE_ACCEPT, clusters, proxy_path, resolve


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("target", metavar="KIND[/NAME]", help="e.g. pods, pod/train-0, deployments.apps")
    parser.add_argument("name", nargs="?", help="the object's name (or KIND/NAME)")
    parser.add_argument("-n", "--namespace", default="default")
    parser.add_argument("-A", "--all-namespaces", action="store_true")
    parser.add_argument("-l", "--selector", help="label selector, as kubectl's -l")
    parser.add_argument("--clusters", default="all", help="c1,c2 or all (default all)")
    parser.add_argument("-o", "--output", choices=["wide"], help="wide: every column")
    add_kubeconfig_argument(parser)


async def _table(hub: HubClient, cluster: str, args: argparse.Namespace, kind: str, name: str | None) -> dict[str, Any]:
    resource = await resolve(hub, cluster, kind)
    namespace = None if args.all_namespaces else args.namespace
    path = resource.collection(namespace) + (f"/{name}" if name else "")
    params = {"labelSelector": args.selector} if args.selector and not name else None
    table: dict[str, Any] = await hub.request("GET", proxy_path(cluster, path), params=params, accept=TABLE_ACCEPT)
    return table


def render(tables: list[tuple[str, dict[str, Any]]], *, wide: bool, all_namespaces: bool) -> list[str]:
    """The rows of every cluster's table under one header, CLUSTER (and NAMESPACE) first."""
    if not tables:
        return []
    definitions = tables[0][1].get("columnDefinitions") or []
    shown = [i for i, col in enumerate(definitions) if wide or not col.get("priority")]
    header = ["CLUSTER", *(["NAMESPACE"] if all_namespaces else []), *(str(definitions[i]["name"]).upper() for i in shown)]
    rows = [header]
    for cluster, table in tables:
        for row in table.get("rows") or []:
            cells = row.get("cells") or []
            namespace = ((row.get("object") or {}).get("metadata") or {}).get("namespace", "")
            rows.append([
                cluster, *([namespace] if all_namespaces else []),
                *("" if i >= len(cells) or cells[i] is None else str(cells[i]) for i in shown),
            ])
    if len(rows) == 1:
        return []
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    return ["   ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip() for row in rows]


async def get(args: argparse.Namespace) -> int:
    hub = HubClient.from_kubeconfig(args.kubeconfig)
    kind, _, name = args.target.partition("/")
    name = name or args.name
    names = await clusters(hub, args.clusters)
    answers = await asyncio.gather(*(_table(hub, cluster, args, kind, name) for cluster in names), return_exceptions=True)
    tables: list[tuple[str, dict[str, Any]]] = []
    failed = 0
    for cluster, answer in zip(names, answers, strict=True):
        if isinstance(answer, HubError):
            failed += 1
            print(f"cluster {cluster}: {answer}", file=sys.stderr)
        elif isinstance(answer, BaseException):
            raise answer
        else:
            tables.append((cluster, answer))
    lines = render(tables, wide=args.output == "wide", all_namespaces=args.all_namespaces)
    for line in lines:
        print(line)
    if not lines and not failed:
        where = "any namespace" if args.all_namespaces else f"namespace {args.namespace}"
        print(f"No resources found in {where} on {', '.join(names) or 'no cluster'}.", file=sys.stderr)
    return 1 if failed and failed == len(names) else 0


def run(args: argparse.Namespace) -> int:
    return run_reporting(get(args), (HubError,))
