"""`gpufed cordon|uncordon CLUSTER` and `gpufed taint CLUSTER key=value:Effect[-] ...`.

Manual control over where new work goes, as `kubectl cordon` and `kubectl taint` do for
nodes. In: a cluster name, taint specs, the hub kubeconfig. Out: the Cluster's
``spec.unschedulable`` and ``spec.taints`` changed by one JSON merge patch that carries the
resourceVersion it was computed from (a concurrent change makes the hub answer Conflict, and
the command re-reads and recomputes), and one line saying what happened.

Cordon sets ``spec.unschedulable`` *and* adds the taint
``cluster.gpufed.io/unschedulable:NoSchedule``, as Kubernetes does for nodes: the scheduler
filters on either, the taint makes the cordon visible in ``kubectl describe`` and lets a
placement name it, and the hub's cluster health monitor keeps the taint in step with
``spec.unschedulable`` when it is changed by other means. Cordon never moves running work
(NoSchedule only); uncordon removes both.

Taint specs: ``key=value:Effect`` or ``key:Effect`` adds (an existing taint with the same key
and effect needs ``--overwrite``); ``key:Effect-`` removes that taint and ``key-`` every taint
with the key. Effects: NoSchedule, PreferNoSchedule, NoExecute. A NoExecute taint evicts
work that does not tolerate it.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from controlplane.apis import constants as c
from controlplane.apis.kube.names import label_value_errors, qualified_name_errors
from controlplane.apis.timestamps import format_time
from gpufed.argtypes import object_name
from gpufed.commands.running import run_reporting
from gpufed.hubclient import HubClient, HubError, add_kubeconfig_argument

CLUSTERS_PATH = f"/apis/{c.CLUSTER_GROUP}/{c.VERSION}/clusters"
MERGE_PATCH = "application/merge-patch+json"
EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")
#: How often a command re-reads and recomputes after losing a race with another writer.
CONFLICT_RETRIES = 5


class TaintSpecError(ValueError):
    """A taint argument that does not parse; the message names it and says what is wrong."""


@dataclass(frozen=True)
class TaintChange:
    """One parsed taint argument: add ``key[=value]:effect``, or remove ``key[:effect]``."""

    key: str
    effect: str | None
    value: str | None = None
    remove: bool = False


def parse_taint_spec(spec: str) -> TaintChange:
    """Parse ``key=value:Effect``, ``key:Effect``, ``key:Effect-`` or ``key-``."""
    text, remove = (spec[:-1], True) if spec.endswith("-") else (spec, False)
    head, colon, effect = text.rpartition(":")
    if not colon:
        head, effect = text, ""
    key, equals, value = head.partition("=")
    problems: list[str] = []
    if not key:
        problems.append("the key is empty")
    else:
        problems.extend(f"key {key!r}: {err}" for err in qualified_name_errors(key))
    if equals:
        if remove:
            problems.append("a removal names key[:Effect]- without a value")
        elif value:
            problems.extend(f"value {value!r}: {err}" for err in label_value_errors(value))
    if effect and effect not in EFFECTS:
        problems.append(f"effect {effect!r} is not one of {', '.join(EFFECTS)}")
    if not effect and not remove:
        problems.append(f"an effect is required (key=value:Effect, Effect one of {', '.join(EFFECTS)})")
    if problems:
        raise TaintSpecError(f"invalid taint spec {spec!r}: " + "; ".join(problems))
    return TaintChange(key=key, effect=effect or None, value=value or None, remove=remove)


def _describe(taint: dict[str, Any]) -> str:
    value = f"={taint['value']}" if taint.get("value") else ""
    return f"{taint.get('key')}{value}:{taint.get('effect')}"


def apply_taint_changes(
    taints: Sequence[dict[str, Any]], changes: Sequence[TaintChange], *, overwrite: bool, now: datetime
) -> list[dict[str, Any]]:
    """``taints`` with ``changes`` applied; raise TaintSpecError as kubectl would refuse.

    A removal of a taint that is not there, or an add over an existing key/effect without
    ``overwrite``, is an error and changes nothing.
    """
    out = [dict(t) for t in taints]
    for change in changes:
        if change.remove:
            kept = [
                t for t in out
                if not (t.get("key") == change.key and (change.effect is None or t.get("effect") == change.effect))
            ]
            if len(kept) == len(out):
                what = f"{change.key}:{change.effect}" if change.effect else change.key
                raise TaintSpecError(f"taint {what!r} not found")
            out = kept
            continue
        new: dict[str, Any] = {"key": change.key, "effect": change.effect, "timeAdded": format_time(now)}
        if change.value:
            new["value"] = change.value
        for index, existing in enumerate(out):
            if existing.get("key") == change.key and existing.get("effect") == change.effect:
                if not overwrite:
                    raise TaintSpecError(
                        f"the cluster already has taint {_describe(existing)}; pass --overwrite to replace it"
                    )
                out[index] = new
                break
        else:
            out.append(new)
    return out


def cordoned_spec(spec: dict[str, Any], *, cordon: bool, now: datetime) -> dict[str, Any]:
    """The ``unschedulable`` and ``taints`` fields a (un)cordon leaves in ``spec``."""
    taints = [t for t in spec.get("taints") or () if t.get("key") != c.TAINT_CORDONED]
    if cordon:
        previous = next((t for t in spec.get("taints") or () if t.get("key") == c.TAINT_CORDONED
                         and t.get("effect") == "NoSchedule"), None)
        taints.append(previous or {"key": c.TAINT_CORDONED, "effect": "NoSchedule",
                                   "timeAdded": format_time(now)})
    return {"unschedulable": True if cordon else None, "taints": taints or None}


def _spec_patch(current: dict[str, Any], wanted: dict[str, Any]) -> dict[str, Any]:
    """A merge patch for the changed spec fields (None removes a field)."""
    return {key: value for key, value in wanted.items() if current.get(key) != value}


def _http_status(exc: HubError) -> int | None:
    return exc.status


def add_arguments(parser: argparse.ArgumentParser) -> None:
    # One module serves three subcommands; argparse names the one being built in ``prog``.
    action = parser.prog.split()[-1]
    add_kubeconfig_argument(parser)
    parser.add_argument("cluster", type=object_name, metavar="CLUSTER", help="the member cluster's name")
    if action == "taint":
        parser.add_argument(
            "taints", nargs="+", metavar="KEY[=VALUE]:EFFECT[-]",
            help="add key=value:Effect (Effect: NoSchedule, PreferNoSchedule, NoExecute); "
                 "remove with key:Effect- or key-",
        )
        parser.add_argument("--overwrite", action="store_true",
                            help="replace a taint that has the same key and effect")
    parser.set_defaults(cordon_action=action)


def run(args: argparse.Namespace) -> int:
    return run_reporting(_edit_and_say(args), (HubError, TaintSpecError))


async def _edit_and_say(args: argparse.Namespace) -> int:
    print(await edit_cluster(args))
    return 0


async def edit_cluster(args: argparse.Namespace) -> str:
    """Do what ``args`` ask (cordon, uncordon or taint); return the line to print."""
    action: str = args.cordon_action
    changes = [parse_taint_spec(spec) for spec in args.taints] if action == "taint" else []
    client = HubClient.from_kubeconfig(args.kubeconfig)
    path = f"{CLUSTERS_PATH}/{args.cluster}"
    for _attempt in range(CONFLICT_RETRIES):
        try:
            cluster = await client.request("GET", path)
        except HubError as exc:
            if _http_status(exc) == 404:
                raise HubError(f'cluster "{args.cluster}" not found') from exc
            raise
        spec: dict[str, Any] = cluster.get("spec") or {}
        now = datetime.now(UTC)
        if action == "taint":
            taints = apply_taint_changes(spec.get("taints") or [], changes, overwrite=args.overwrite, now=now)
            wanted = {"taints": taints or None}
            done = "untainted" if all(ch.remove for ch in changes) else "tainted"
            if any(ch.remove for ch in changes) and not all(ch.remove for ch in changes):
                done = "modified"
        else:
            cordon = action == "cordon"
            if bool(spec.get("unschedulable")) == cordon and (
                any(t.get("key") == c.TAINT_CORDONED for t in spec.get("taints") or ()) == cordon
            ):
                return f"cluster/{args.cluster} already {action}ed"
            wanted = cordoned_spec(spec, cordon=cordon, now=now)
            done = f"{action}ed"
        patch = {
            "metadata": {"resourceVersion": cluster["metadata"]["resourceVersion"]},
            "spec": _spec_patch(spec, wanted),
        }
        try:
            await client.request("PATCH", path, body=patch, content_type=MERGE_PATCH)
        except HubError as exc:
            status = _http_status(exc)
            if status == 409:
                continue  # someone else changed the cluster: re-read and recompute
            if status == 404:
                raise HubError(f'cluster "{args.cluster}" not found') from exc
            raise
        return f"cluster/{args.cluster} {done}"
    raise HubError(f'cluster "{args.cluster}" kept changing; try again')
