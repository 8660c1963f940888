"""`gpufed get KIND[/NAME] [-n NS | -A] [-l SELECTOR] [--clusters c1,c2|all] [-o wide|json|yaml|name]`.

The same listing on every member, through the hub's cluster proxy, as one table with a
CLUSTER column first. Each member answers with its own server-side table (the columns
``kubectl get`` shows); a member that cannot answer (agent not connected, kind not served) is
reported on stderr and the others are still shown. ``-o json|yaml`` prints the members' objects
as one ``v1 List`` (a named object found on one cluster alone: the object), each annotated
``gpufed.io/cluster`` with the member it came from; ``-o name`` prints ``CLUSTER KIND/NAME``
lines, the second field as kubectl's ``-o name`` writes it.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from typing import Any

import yaml

from controlplane.apis.kube.selectors import SelectorError, parse_label_selector
from gpufed.commands.running import namespace_problem, run_reporting
from gpufed.hubclient import (
    HubClient,
    HubError,
    add_chunk_size_argument,
    add_kubeconfig_argument,
    add_namespace_argument,
)
from gpufed.memberproxy import TABLE_ACCEPT, Resource, clusters, proxy_path, resolve

#: The annotation ``-o json|yaml`` puts on each object: the member cluster it was read from.
CLUSTER_ANNOTATION = "gpufed.io/cluster"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("target", metavar="KIND[/NAME]", help="e.g. pods, pod/train-0, deployments.apps")
    parser.add_argument("name", nargs="?", help="the object's name (or KIND/NAME)")
    add_namespace_argument(parser)
    parser.add_argument("-A", "--all-namespaces", action="store_true")
    parser.add_argument("-l", "--selector", help="label selector, as kubectl's -l")
    parser.add_argument("--clusters", default="all", help="c1,c2 or all (default all)")
    parser.add_argument(
        "-o", "--output", choices=["wide", "json", "yaml", "name"],
        help="wide: every column; json|yaml: the objects as one List, each annotated gpufed.io/cluster; "
        "name: CLUSTER KIND/NAME lines",
    )
    add_chunk_size_argument(parser)
    add_kubeconfig_argument(parser)


async def _read(
    hub: HubClient, cluster: str, args: argparse.Namespace, kind: str, name: str | None, *, accept: str
) -> tuple[Resource, dict[str, Any]]:
    """The member's answer to the listing (or the named object), as a table or as objects."""
    resource = await resolve(hub, cluster, kind)
    namespace = None if args.all_namespaces else args.namespace
    path = resource.collection(namespace) + (f"/{name}" if name else "")
    params = {"labelSelector": args.selector} if args.selector else None
    if name:
        answer: dict[str, Any] = await hub.request("GET", proxy_path(cluster, path), accept=accept)
    else:
        answer = await hub.read_list(proxy_path(cluster, path), params=params, accept=accept)
    return resource, answer


def objects_of(cluster: str, resource: Resource, answer: dict[str, Any]) -> list[dict[str, Any]]:
    """The objects of one member's answer (a list's items or one object), each with its
    ``apiVersion`` and ``kind`` (a list's items carry neither) and the cluster annotation."""
    api_version = resource.path.removeprefix("/apis/").removeprefix("/api/")
    items = answer.get("items") if "items" in answer else [answer]
    found = []
    for item in items or []:
        obj = {"apiVersion": api_version, "kind": resource.kind, **item}
        metadata = obj["metadata"] = dict(obj.get("metadata") or {})
        metadata["annotations"] = {**(metadata.get("annotations") or {}), CLUSTER_ANNOTATION: cluster}
        found.append(obj)
    return found


def name_lines(found: list[tuple[str, Resource, dict[str, Any]]]) -> list[str]:
    """``CLUSTER KIND/NAME`` per object, KIND as kubectl's ``-o name`` writes it (``pod``,
    ``deployment.apps``)."""
    lines = []
    for cluster, resource, obj in found:
        group = resource.path.removeprefix("/apis/").partition("/")[0] if resource.path.startswith("/apis/") else ""
        kind = resource.kind.lower() + (f".{group}" if group else "")
        lines.append(f"{cluster} {kind}/{obj['metadata']['name']}")
    return lines


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


def refusal(args: argparse.Namespace, *, name: str | None) -> str | None:
    """What kubectl says, before it asks any server, of a namespace that cannot be a segment of a
    URL path (with ``error: `` for a named object only, as kubectl prints it) or a label selector
    that does not parse; checked once here rather than answered by every member."""
    problem = None if args.all_namespaces else namespace_problem(args.namespace)
    if problem is not None:
        return f"{'error: ' if name else ''}{problem}"
    if args.selector and not name:
        try:
            parse_label_selector(args.selector)
        except SelectorError as exc:
            return f"error: {exc.message}"
    return None


async def get(args: argparse.Namespace) -> int:
    kind, _, name = args.target.partition("/")
    name = name or args.name
    refused = refusal(args, name=name)
    if refused is not None:
        print(refused, file=sys.stderr)
        return 1
    hub = HubClient.from_kubeconfig(args.kubeconfig)
    hub.chunk_size = args.chunk_size
    names = await clusters(hub, args.clusters)
    as_table = args.output in (None, "wide")
    accept = TABLE_ACCEPT if as_table else "application/json"
    answers = await asyncio.gather(
        *(_read(hub, cluster, args, kind, name, accept=accept) for cluster in names), return_exceptions=True
    )
    read: list[tuple[str, Resource, dict[str, Any]]] = []
    failed = 0
    for cluster, answer in zip(names, answers, strict=True):
        if isinstance(answer, HubError):
            failed += 1
            print(f"cluster {cluster}: {answer}", file=sys.stderr)
        elif isinstance(answer, BaseException):
            raise answer
        else:
            read.append((cluster, *answer))
    if as_table:
        lines = render([(c, table) for c, _, table in read], wide=args.output == "wide", all_namespaces=args.all_namespaces)
        found = bool(lines)
    else:
        objects = [(c, resource, obj) for c, resource, answer in read for obj in objects_of(c, resource, answer)]
        found = bool(objects) or (not name and args.output != "name")  # an empty List is an answer
        if args.output == "name":
            lines = name_lines(objects)
        elif found:
            lines = [_serialized([obj for _, _, obj in objects], single=bool(name) and len(objects) == 1, yaml_out=args.output == "yaml")]
        else:
            lines = []
    for line in lines:
        print(line)
    if not found and not failed:
        where = "any namespace" if args.all_namespaces else f"namespace {args.namespace}"
        print(f"No resources found in {where} on {', '.join(names) or 'no cluster'}.", file=sys.stderr)
    return 1 if failed and failed == len(names) else 0


def _serialized(objects: list[dict[str, Any]], *, single: bool, yaml_out: bool) -> str:
    """The objects as kubectl prints them: one object alone, several as a ``v1 List``."""
    document = objects[0] if single else {"apiVersion": "v1", "kind": "List", "items": objects, "metadata": {"resourceVersion": ""}}
    if yaml_out:
        return str(yaml.safe_dump(document, sort_keys=False, default_flow_style=False)).rstrip("\n")
    return json.dumps(document, indent=4)


def run(args: argparse.Namespace) -> int:
    return run_reporting(get(args), (HubError,))
