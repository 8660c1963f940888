"""`gpufed explain KIND/NAME [-n NS]`: why a workload runs where it runs.

Reads the workload and its ResourceBinding (``<name>-<kind>``) from the hub and prints the
policy that claimed it, its replicas and per-replica request, the Scheduled and
FullyApplied conditions, then one block per cluster: chosen or rejected, replicas, tier,
price, and every reason the scheduler recorded (affinity, taint, "insufficient
nvidia.com/mig-3g.40gb: need 4, 1 free", tier, price); then its pods per cluster (READY,
STATUS and RESTARTS as ``kubectl get pods`` shows them, node, GPU request, the GPU devices DCGM
says each holds), which the hub reads
through the cluster proxy with the caller's rights, and the command that follows their logs. A workload no policy claims prints
its ``Propagated`` condition instead, and when no policy selects it, the resourceSelector a
policy needs to claim it. A TrainJob whose policy lists alternative GPU shapes says why none is tried.
A workload queued with Kueue's label gets a queue block
(:mod:`gpufed.commands.explainqueue`): why it waits, its position, or the flavor it was admitted in.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Mapping
from typing import Any

from controlplane.apis import spot
from controlplane.apis.constants import (
    ANNOTATION_GPU_STEERING,
    ANNOTATION_MOVES,
    ANNOTATION_PACKING_HINTS,
    ANNOTATION_REBALANCE,
)
from controlplane.apis.explanations import RARE_NODES, SHARE_REMAINDER, expanded
from controlplane.apis.spot import recorded_reclaims
from controlplane.apis.timestamps import format_time
from controlplane.apis.trainer import is_train_job
from controlplane.apis.trainer_runtime import NO_ALTERNATIVE_SHAPES
from gpufed.argtypes import UsageError
from gpufed.commands.explainqueue import queue_section
from gpufed.commands.running import checked_namespace, run_reporting
from gpufed.hubclient import HubClient, HubError, add_kubeconfig_argument, add_namespace_argument

BINDINGS_PATH = "/apis/work.gpufed.io/v1alpha1/namespaces/{namespace}/resourcebindings/{name}"
NO_POLICY_MATCHED = "NoPolicyMatched"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("target", metavar="KIND/NAME", help="e.g. deployment/train, pytorchjob/bert")
    add_namespace_argument(parser, what="the workload's namespace")
    add_kubeconfig_argument(parser)


def run(args: argparse.Namespace) -> int:
    return run_reporting(_explain(args), (HubError, ValueError))


async def _explain(args: argparse.Namespace) -> int:
    print(await _run(args))
    return 0


def resolve_kind(text: str) -> tuple[str, str, str]:
    """(apiVersion, Kind, plural) of a kind typed as kubectl accepts it (kind, plural, short name)."""
    from controlplane.apiserver.kinds import builtin_kind_resources, gpu_workload_resources
    from controlplane.apiserver.kinds.core import core_resources
    from controlplane.apiserver.kinds.workloads import workload_resources
    from controlplane.apiserver.resources import Registry

    wanted = text.lower()
    group = ""
    if "." in wanted:
        wanted, group = wanted.split(".", 1)
    for rt in Registry(core_resources(), workload_resources(), builtin_kind_resources(), gpu_workload_resources()):
        names = {rt.kind.lower(), rt.plural, rt.singular, *rt.short_names}
        if wanted in names and (not group or rt.group == group):
            return rt.api_version, rt.kind, rt.plural
    raise ValueError(f'the server doesn\'t have a resource type "{text}"')


def parse_target(target: str) -> tuple[str, str]:
    kind, sep, name = target.partition("/")
    if not sep or not kind or not name:
        raise UsageError(f"expected KIND/NAME (e.g. deployment/train), got {target!r}")
    return kind, name


async def _run(args: argparse.Namespace) -> str:
    from controlplane.apis.work_v1alpha1 import binding_name

    kind_text, name = parse_target(args.target)
    checked_namespace(args.namespace)
    api_version, kind, plural = resolve_kind(kind_text)
    base = f"/api/{api_version}" if "/" not in api_version else f"/apis/{api_version}"
    client = HubClient.from_kubeconfig(args.kubeconfig)
    # A missing workload is the hub's own NotFound, as kubectl shows it.
    workload = await client.request("GET", f"{base}/namespaces/{args.namespace}/{plural}/{name}")
    path = BINDINGS_PATH.format(namespace=args.namespace, name=binding_name(name, kind))
    binding = await client.get_or_none(path)
    text = render_explanation(workload, binding)
    queue = await queue_section(client, workload)
    if queue:
        text = "\n".join([text, "", *queue])
    if binding is None:
        return text
    return "\n".join([text, "", *await pods_section(client, path, f"{kind_text.lower()}/{name}", args.namespace)])


async def pods_section(client: HubClient, binding_path: str, target: str, namespace: str) -> list[str]:
    """The workload's pods per cluster (the hub reads them through the cluster proxy), and how
    to follow their logs."""
    from controlplane.apis.podview import render_pod_list

    try:
        answer = await client.request("GET", binding_path + "/pods")
    except HubError as exc:
        return [f"{'Pods:':<13}not shown: {exc}"]
    lines = render_pod_list(answer)
    if not lines:
        return [f"{'Pods:':<13}none yet"]
    return ["Pods:", *lines, f"{'Logs:':<13}gpufed logs {target} -n {namespace} --all-pods -f"]


def _condition(obj: Mapping[str, Any] | None, ctype: str) -> Mapping[str, Any] | None:
    for cond in ((obj or {}).get("status") or {}).get("conditions") or ():
        if cond.get("type") == ctype:
            return dict(cond)
    return None


def _condition_line(label: str, cond: Mapping[str, Any] | None, *, lead: str = "") -> str:
    if cond is None:
        return f"{label:<13}(not yet)"
    return f"{label:<13}{lead}{cond.get('status')} ({cond.get('reason')}): {cond.get('message') or ''}".rstrip()


def _division(placement: Mapping[str, Any] | None) -> str:
    scheduling = (placement or {}).get("replicaScheduling")
    if not scheduling:
        return "Duplicated"
    kind = scheduling.get("replicaSchedulingType") or "Duplicated"
    preference = scheduling.get("replicaDivisionPreference")
    return f"{kind}/{preference}" if preference else str(kind)


def _price(value: Any) -> str:
    return f"{float(value):.2f}" if value is not None else "-"


def _resources(requirements: Mapping[str, Any] | None) -> str:
    request = (requirements or {}).get("resourceRequest") or {}
    return ", ".join(f"{k}={v}" for k, v in sorted(request.items())) or "(no requests)"


def _request_lines(spec: Mapping[str, Any]) -> list[str]:
    """What one pod asks for: per role when the workload has several (an MPIJob's launcher and
    workers, a RayJob's head and worker groups ask for different things), else per replica."""
    components = [c for c in spec.get("components") or () if isinstance(c, Mapping)]
    if len(components) > 1:
        rows = [
            f"{c.get('name')} x{c.get('replicas', 0)}: {_resources(c.get('replicaRequirements'))}" for c in components
        ]
        return [f"{'Per role:' if i == 0 else '':<13}{row}" for i, row in enumerate(rows)]
    if not (spec.get("replicaRequirements") or {}).get("resourceRequest"):
        return []
    return [f"{'Per replica:':<13}{_resources(spec.get('replicaRequirements'))}"]


def _shape_lines(workload: Mapping[str, Any], spec: Mapping[str, Any]) -> list[str]:
    """Why the policy's alternative GPU shapes are not tried, for a kind the scheduler gives none (a TrainJob)."""
    alternatives = (spec.get("gpuShapes") or {}).get("alternatives") or ()
    if not alternatives or not is_train_job(workload):
        return []
    return [f"{'GPU shapes:':<13}the policy's {len(alternatives)} alternative(s) are {NO_ALTERNATIVE_SHAPES}"]


def _no_policy_hint(workload: Mapping[str, Any]) -> str:
    """What to do about a workload no policy selects: the selector a policy needs to claim it."""
    meta = workload.get("metadata") or {}
    kind = str(workload.get("kind"))
    return (
        f"{'Next:':<13}no PropagationPolicy selects {kind.lower()}/{meta.get('name')}; create one in namespace "
        f"{meta.get('namespace')} (or a ClusterPropagationPolicy) with a resourceSelector "
        f"{{apiVersion: {workload.get('apiVersion')}, kind: {kind}, name: {meta.get('name')}}} "
        "(examples in policies/examples/)"
    )


def _move_lines(binding: Mapping[str, Any]) -> list[str]:
    """The move back to a cheaper tier under way, and the last one finished (binding annotations)."""
    annotations = (binding.get("metadata") or {}).get("annotations") or {}
    lines: list[str] = []
    try:
        moving = json.loads(annotations.get(ANNOTATION_REBALANCE) or "null")
        done = json.loads(annotations.get(ANNOTATION_MOVES) or "[]")
    except ValueError:
        return lines
    if isinstance(moving, dict):
        lines.append(
            f"{'Moving:':<13}{moving.get('replicas')} replica(s) {moving.get('source')} \u2192 {moving.get('target')}: "
            f"added in {moving.get('target')}, removed from {moving.get('source')} once ready"
        )
    last = done[-1] if isinstance(done, list) and done else None
    if isinstance(last, dict):
        lines.append(f"{'Last move:':<13}{last.get('message')} (at {last.get('time')})")
    return lines


def _per_cluster(binding: Mapping[str, Any], annotation: str) -> list[tuple[str, list[str]]]:
    """The binding's ``{cluster: [value, ...]}`` annotation (steering, packing hints), by cluster."""
    annotations = (binding.get("metadata") or {}).get("annotations") or {}
    try:
        found = json.loads(annotations.get(annotation) or "{}")
    except ValueError:
        return []
    if not isinstance(found, dict):
        return []
    return [
        (str(cluster), [str(v) for v in values])
        for cluster, values in sorted(found.items())
        if isinstance(values, list) and values
    ]


def _steering_lines(binding: Mapping[str, Any], explanation: list[dict[str, Any]]) -> list[str]:
    """Per cluster whose Work steers replicas away from GPU models (binding annotation), which models;
    per cluster whose Work packs them toward nodes already running GPU work, which nodes, and why: whole
    nodes kept free, or, for a share of a GPU (the cluster's reasons in ``explanation`` say so), whole
    GPUs kept whole."""
    rare = _saying(explanation, RARE_NODES)
    steered = [
        f"{'Steering:':<13}in {cluster}, nodes other than {', '.join(models)} preferred (a preferred "
        "node-affinity term in the Work: "
        + (
            "replicas that accept only those models need them, or their nodes alone hold recent larger replicas)"
            if cluster in rare
            else "replicas that accept only those models need them)"
        )
        for cluster, models in _per_cluster(binding, ANNOTATION_GPU_STEERING)
    ]
    shares = _saying(explanation, SHARE_REMAINDER)
    packed = [
        f"{'Packing:':<13}in {cluster}, {len(hosts)} node(s) whose shared GPUs have the tightest free remainder "
        f"that holds the share preferred: {_first(hosts)} (a preferred node-affinity term in the Work, so the "
        "share fills a GPU already shared instead of breaking a whole one)"
        if cluster in shares
        else f"{'Packing:':<13}in {cluster}, {len(hosts)} node(s) already running GPU work preferred: "
        f"{_first(hosts)} (a preferred node-affinity term in the Work, so whole nodes stay free)"
        for cluster, hosts in _per_cluster(binding, ANNOTATION_PACKING_HINTS)
    ]
    return steered + packed


def _saying(explanation: list[dict[str, Any]], words: str) -> set[str]:
    """The clusters of ``explanation`` one of whose reasons says ``words``."""
    return {
        str(entry.get("cluster"))
        for entry in explanation
        if any(words in str(reason) for reason in entry.get("reasons") or ())
    }


def _first(names: list[str], shown: int = 3) -> str:
    return ", ".join(names[:shown]) + (f" and {len(names) - shown} more" if len(names) > shown else "")


def render_explanation(workload: Mapping[str, Any], binding: Mapping[str, Any] | None) -> str:
    """The text ``gpufed explain`` prints for ``workload`` and its binding (None when it has none)."""
    meta = workload.get("metadata") or {}
    title = f"{workload.get('kind')} {meta.get('namespace')}/{meta.get('name')}"
    lines = [title]
    if binding is None:
        propagated = _condition(workload, "Propagated")
        if propagated is None:
            lines.append("Not propagated yet: the hub has not looked at it (are the controllers running?).")
        else:
            lines.append(_condition_line("Propagated:", propagated))
            if propagated.get("reason") == NO_POLICY_MATCHED:
                lines.append(_no_policy_hint(workload))
        return "\n".join(lines)
    spec = binding.get("spec") or {}
    policy = spec.get("policy") or {}
    scope = f"{policy.get('namespace')}/" if policy.get("namespace") else ""
    lines.append(f"{'Policy:':<13}{policy.get('kind')} {scope}{policy.get('name')}")
    gang = " (gang: placed whole or not at all)" if spec.get("gang") else ""
    lines.append(f"{'Replicas:':<13}{spec.get('replicas', 0)}, {_division(spec.get('placement'))}{gang}")
    lines.extend(_request_lines(spec))
    lines.extend(_shape_lines(workload, spec))
    lines.append(_condition_line("Scheduled:", _condition(binding, "Scheduled")))
    lines.append(_condition_line("Applied:", _condition(binding, "FullyApplied")))
    priority = _condition(binding, "SchedulePriorityResolved")
    if priority is not None:
        value = (spec.get("schedulePriority") or {}).get("priority", 0)
        lines.append(_condition_line("Priority:", priority, lead=f"{value}, "))
    dependencies = _condition(binding, "DependenciesPropagated")
    if dependencies is not None:
        lines.append(_condition_line("Depends on:", dependencies))
    reclaims = recorded_reclaims(binding)
    if reclaims:
        latest = reclaims[-1]
        count = spot.parse_annotation(
            ((binding.get("metadata") or {}).get("annotations") or {}).get(spot.ANNOTATION_SPOT_RECLAIMS)
        ).get("count", len(reclaims))
        lines.append(f"{'Spot:':<13}{count} reclaim(s) survived; the latest took {latest.replicas} replica(s) "
                     f"from {latest.cluster} at {format_time(latest.time)}")
    lines.extend(_move_lines(binding))
    explanation = expanded(((binding.get("status") or {}).get("explanation")) or [])
    lines.extend(_steering_lines(binding, explanation))
    if not explanation:
        lines.append("No per-cluster explanation yet.")
        return "\n".join(lines)
    explanation.sort(key=lambda e: (not e.get("chosen"), e.get("tier") or 0, str(e.get("cluster"))))
    rows = [("CLUSTER", "CHOSEN", "REPLICAS", "TIER", "$/GPU-H", "WHY")]
    for entry in explanation:
        reasons = list(entry.get("reasons") or ["-"])
        rows.append(
            (
                str(entry.get("cluster")),
                "yes" if entry.get("chosen") else "no",
                str(entry.get("replicas", 0)),
                str(entry.get("tier")) if entry.get("tier") is not None else "-",
                _price(entry.get("pricePerGpuHour")),
                reasons[0],
            )
        )
        rows.extend(("", "", "", "", "", reason) for reason in reasons[1:])
    widths = [max(len(row[i]) for row in rows) for i in range(5)]
    lines.append("")
    for row in rows:
        lines.append("  ".join(cell.ljust(width) for cell, width in zip(row[:5], widths, strict=True)) + "  " + row[5])
    return "\n".join(lines)
