"""`gpufed token create|list|revoke`: manage hub tokens; print an agent's join command."""

from __future__ import annotations

import argparse
import shlex
from collections.abc import Iterable, Mapping
from typing import Any

from controlplane.apis.constants import BOOTSTRAP_TOKEN_ENV, TOKENS_PATH
from controlplane.apiserver.tls import ca_hash
from gpufed.argtypes import UsageError, object_name, positive_duration
from gpufed.commands.running import run_reporting
from gpufed.hubclient import HubClient, HubError, add_kubeconfig_argument


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="token_command", metavar="ACTION")
    sub.required = True
    create = sub.add_parser("create", help="create a token (default: a one-time bootstrap token for an agent)")
    add_kubeconfig_argument(create)
    create.add_argument(
        "--role", default=None, choices=["bootstrap", "admin", "viewer", "agent", "user"],
        help="admin: in group system:masters (cluster-admin); viewer: bound to view; user: what RBAC "
        "bindings of its name and groups grant (default: user with --user, else bootstrap)",
    )
    create.add_argument("--name", default="", help="who or what the token is for (shown by `token list`)")
    create.add_argument("--user", default=None, help="the user name RBAC bindings name (a user token)")
    create.add_argument("--group", action="append", default=[], dest="groups",
                        help="a group of the user, for RBAC bindings (repeatable)")
    create.add_argument(
        "--cluster",
        help="the cluster the token is for: required for an agent token; for a bootstrap token, the only "
        "cluster it may join - and the way to let a cluster that has already joined join again",
    )
    create.add_argument("--ttl", type=positive_duration, default=None, help="lifetime, e.g. 30m, 1h, 7d (bootstrap default: 1h)")
    create.add_argument("--print-join-command", action="store_true",
                        help="print the full `gpufed agent ...` command that joins a member cluster")
    create.set_defaults(usage_error=create.error)  # a usage error shows `gpufed token create`'s usage
    lst = sub.add_parser("list", help="list tokens (never their secrets)")
    add_kubeconfig_argument(lst)
    revoke = sub.add_parser("revoke", help="revoke a token by id")
    add_kubeconfig_argument(revoke)
    revoke.add_argument("token_id", type=object_name, metavar="ID")


def one_time_text(spec: Mapping[str, Any], status: Mapping[str, Any]) -> str:
    """The ONE-TIME column: whether a token is spent by its single use. Reusable tokens (admin,
    viewer, agent) are never spent, however much they are used, so they read "no", not "used: false"."""
    if not spec.get("oneTime"):
        return "no"
    if not status.get("used"):
        return "yes, unspent"
    joined = status.get("usedFor")
    return f"yes, spent (joined {joined})" if joined else "yes, spent"


def token_rows(items: Iterable[Mapping[str, Any]]) -> list[tuple[str, ...]]:
    """``gpufed token list``'s table (header first) from the hub's Token documents."""
    rows: list[tuple[str, ...]] = [("ID", "ROLE", "NAME", "GROUPS", "CLUSTER", "EXPIRES", "ONE-TIME")]
    for item in items:
        spec = item.get("spec") or {}
        status = item.get("status") or {}
        rows.append((
            str((item.get("metadata") or {}).get("name", "")), str(spec.get("role", "")), str(spec.get("name", "")),
            ",".join(spec.get("groups") or []), str(spec.get("cluster") or ""), str(spec.get("expires") or "never"), one_time_text(spec, status),
        ))
    return rows


def join_command(*, hub_url: str, ca_hash: str, token: str, cluster: str | None = None) -> str:
    """The exact shell line that joins a member cluster's agent to the hub.

    The token goes in the agent's environment (``GPUFED_BOOTSTRAP_TOKEN=... gpufed agent``),
    never on its command line, where any user of the machine could read it in ``ps``.
    A token scoped to a cluster names it too.
    """
    argv = ["gpufed", "agent", "--hub", hub_url, "--hub-ca-hash", ca_hash]
    if cluster is not None:
        argv += ["--cluster-name", cluster]
    return f"{BOOTSTRAP_TOKEN_ENV}={shlex.quote(token)} {shlex.join(argv)}"


def run(args: argparse.Namespace) -> int:
    return run_reporting(_run(args), (HubError, ValueError))


async def _run(args: argparse.Namespace) -> int:
    if args.token_command == "create":
        if args.user is not None and not args.user.strip():
            raise UsageError("--user needs a name")
        role = args.role or ("user" if args.user or args.groups else "bootstrap")
        if args.print_join_command and role != "bootstrap":
            raise UsageError("--print-join-command needs --role bootstrap")
        if (args.user or args.groups) and role != "user":
            raise UsageError("--user and --group make a user token; they cannot be used with --role " + role)
        if role == "user" and not (args.user or args.name):
            raise UsageError("a user token needs --user NAME")
        body: dict[str, object] = {"role": role, "name": args.user or args.name or f"{role}-token"}
        if args.groups:
            body["groups"] = args.groups
        if args.cluster:
            body["cluster"] = args.cluster
        if args.ttl is not None:
            body["ttlSeconds"] = int(args.ttl.total_seconds())
        client = HubClient.from_kubeconfig(args.kubeconfig)  # after the usage checks: they come first
        created = await client.request("POST", TOKENS_PATH, body=body)
        token = created["token"]
        if args.print_join_command:
            print(join_command(
                hub_url=client.server, ca_hash=ca_hash(client.credentials.ca_pem), token=token, cluster=args.cluster,
            ))
        else:
            print(token)
        return 0
    client = HubClient.from_kubeconfig(args.kubeconfig)
    if args.token_command == "list":
        listing = await client.read_list(TOKENS_PATH)
        rows = token_rows(listing.get("items", []))
        widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
        for row in rows:
            print("   ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip())
        return 0
    await client.request("DELETE", f"{TOKENS_PATH}/{args.token_id}")
    print(f"token {args.token_id} revoked")
    return 0
