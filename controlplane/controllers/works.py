"""What one cluster's Work for a binding looks like: its name, labels and rendered manifest.

In: the hub workload (dict), its interpreter, the binding's share for the cluster (replicas, an
alternative GPU shape when the scheduler chose one), the whole split (every cluster's
replicas), the override rules that apply and the cluster's :class:`ClusterView`. Out: the
Work object to create or compare, or an :class:`OverrideError` when an override rule cannot
be applied.

Rendering order follows Karmada's binding controller: the workload without server-owned
fields, then the cluster's replicas (``with_replicas``, after ``with_split`` for a kind whose
copy depends on the whole split: a StatefulSet's part of the partition), then the GPU shape the
scheduler picked for that cluster (``with_gpu_request`` plus the shape's node selector, both
only in the pod templates that request a GPU), then the scheduler's steering away from GPU
models constrained demand needs or off rare large nodes (a preferred node-affinity term after the
user's own, in the same templates, or in every template when none requests a GPU;
``scheduler.gpufed.io/gpu-steering``, scheduler/core/steering.py and rarenodes.py) and its packing
toward nodes already running GPU work (another such term; ``scheduler.gpufed.io/packing-hints``,
scheduler/core/packhints.py), then
Kueue's queue label and suspension as the member wants them (``queue_for_member``: kept for a
member that runs Kueue, stripped otherwise, with a Pod's mark ``kueue.x-k8s.io/managed``) and a
Pod without the hub's Kueue scheduling gate (a member's Kueue gates it anew), then the override
rules, so that an OverridePolicy has the last word. The Work's spec also
carries the policy's ``conflictResolution``, whether dispatching is suspended, and
``preserveResourcesOnDeletion`` (as Karmada's Work does: the agent reads it when the Work is
deleted).

Work names are ``<namespace>-<name>-<kind>``; when that is longer than a label value may
be (63, because the agent labels member objects with the Work's name), it is cut and a
hash of the full name is appended. Pure; no I/O.
"""

from __future__ import annotations

import copy
import hashlib
import json
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from controlplane.admission import objects as admission_objects
from controlplane.admission import pods
from controlplane.apis import constants as c
from controlplane.apis import kueue_jobs
from controlplane.apis import kueue_v1beta1 as kueue
from controlplane.apis.conflictresolution import DEFAULT_CONFLICT_RESOLUTION
from controlplane.apis.gpus import is_gpu_resource
from controlplane.apis.views import BindingView, ManifestStatusView, ObjectView, WorkView
from controlplane.apis.work_v1alpha1 import API_VERSION, WORK_KIND
from controlplane.controllers.workloads import without_server_fields
from controlplane.interpreter import KindInterpreter
from controlplane.interpreter.base import PodTemplateKind, SplitAware
from controlplane.interpreter.customized import CustomizedInterpreter
from controlplane.scheduler.core.packhints import preferred_term as packing_term
from controlplane.scheduler.core.steering import preferred_term
from policies.affinity import ClusterView
from policies.matching import OverrideRule
from policies.overriders import OverrideError, apply_overrides

WORK_NAME_MAX_LENGTH = 63
_HASH_LENGTH = 10

# TODO(constants): move to controlplane/apis/constants.py.
ANNOTATION_GPU_SHAPES = "scheduler.gpufed.io/gpu-shapes"
"""On a binding: JSON ``{cluster: {resources: {res: int}, nodeSelector: {k: v}}}`` for the
clusters where the scheduler chose an alternative GPU shape."""


def cluster_of_namespace(namespace: str) -> str | None:
    if namespace.startswith(c.EXECUTION_NAMESPACE_PREFIX):
        return namespace[len(c.EXECUTION_NAMESPACE_PREFIX) :]
    return None


def work_name(namespace: str, name: str, kind: str) -> str:
    """``<namespace>-<name>-<kind lower>``, cut and hashed to at most 63 characters."""
    full = f"{namespace}-{name}-{kind.lower()}"
    if len(full) <= WORK_NAME_MAX_LENGTH:
        return full
    digest = hashlib.sha256(full.encode()).hexdigest()[:_HASH_LENGTH]
    head = full[: WORK_NAME_MAX_LENGTH - _HASH_LENGTH - 1].rstrip("-.")
    return f"{head}-{digest}"


def work_labels(*, binding_namespace: str, binding: str, cluster: str) -> dict[str, str]:
    return {
        c.LABEL_BINDING: binding,
        c.LABEL_WORK_NAMESPACE: binding_namespace,
        c.LABEL_CLUSTER: cluster,
        c.LABEL_MANAGED_BY: c.MANAGED_BY_VALUE,
    }


def binding_key_of_work(work: Mapping[str, Any]) -> tuple[str, str] | None:
    """(namespace, name) of the binding a Work belongs to, from its labels."""
    labels = WorkView(work).labels
    name, namespace = labels.get(c.LABEL_BINDING), labels.get(c.LABEL_WORK_NAMESPACE)
    if not name or not namespace:
        return None
    return (str(namespace), str(name))


@dataclass(frozen=True, slots=True)
class ChosenShape:
    """An alternative GPU shape the scheduler picked for one cluster."""

    resources: Mapping[str, int]
    node_selector: Mapping[str, str]

    def to_wire(self) -> dict[str, Any]:
        out: dict[str, Any] = {"resources": dict(sorted(self.resources.items()))}
        if self.node_selector:
            out["nodeSelector"] = dict(sorted(self.node_selector.items()))
        return out


def encode_per_cluster(values: Mapping[str, Sequence[str]]) -> str | None:
    """A decision's steering or packing hints as their binding annotation (None: none)."""
    if not values:
        return None
    return json.dumps({name: sorted(values[name]) for name in sorted(values)}, sort_keys=True)


def decode_per_cluster(binding: Mapping[str, Any], annotation: str) -> dict[str, tuple[str, ...]]:
    """Per cluster, the values of the binding's ``annotation`` (:func:`encode_per_cluster`)."""
    raw = BindingView(binding).annotations.get(annotation)
    try:
        data = json.loads(raw) if raw else {}
    except ValueError:
        return {}
    if not isinstance(data, dict):
        return {}
    return {
        str(name): tuple(str(v) for v in values)
        for name, values in data.items()
        if isinstance(values, list) and values
    }


def decode_steering(binding: Mapping[str, Any]) -> dict[str, tuple[str, ...]]:
    """Per cluster, the GPU models its Work steers away from (``scheduler.gpufed.io/gpu-steering``)."""
    return decode_per_cluster(binding, c.ANNOTATION_GPU_STEERING)


def decode_packing(binding: Mapping[str, Any]) -> dict[str, tuple[str, ...]]:
    """Per cluster, the nodes its Work packs toward (``scheduler.gpufed.io/packing-hints``)."""
    return decode_per_cluster(binding, c.ANNOTATION_PACKING_HINTS)


def encode_shapes(shapes: Mapping[str, ChosenShape]) -> str | None:
    if not shapes:
        return None
    return json.dumps({name: shapes[name].to_wire() for name in sorted(shapes)}, sort_keys=True)


def decode_shapes(binding: Mapping[str, Any]) -> dict[str, ChosenShape]:
    raw = BindingView(binding).annotations.get(ANNOTATION_GPU_SHAPES)
    if not raw:
        return {}
    try:
        data = json.loads(raw)
    except ValueError:
        return {}
    out: dict[str, ChosenShape] = {}
    if not isinstance(data, dict):
        return out
    for name, entry in data.items():
        if not isinstance(entry, dict):
            continue
        resources = {str(k): int(v) for k, v in (entry.get("resources") or {}).items()}
        selector = {str(k): str(v) for k, v in (entry.get("nodeSelector") or {}).items()}
        out[str(name)] = ChosenShape(resources, selector)
    return out


@dataclass(frozen=True)
class RenderedManifest:
    manifest: dict[str, Any]
    applied_overrides: tuple[str, ...] = ()
    error: OverrideError | None = None


def _requests_gpu(template: Any) -> bool:
    """Whether a pod template has a container (or init container) requesting or limiting a GPU-like resource."""
    if not isinstance(template, Mapping):
        return False
    spec = ObjectView(template).spec
    for key in ("containers", "initContainers"):
        for container in spec.get(key) or ():
            resources = (container or {}).get("resources") or {}
            names = set(resources.get("requests") or {}) | set(resources.get("limits") or {})
            if any(is_gpu_resource(str(name)) for name in names):
                return True
    return False


def _template_kind(interpreter: KindInterpreter) -> PodTemplateKind | None:
    """Where the kind keeps its pod templates: its built-in interpreter's knowledge, also
    under a ResourceInterpreterCustomization of the kind; None when the hub does not know."""
    if isinstance(interpreter, CustomizedInterpreter):
        return _template_kind(interpreter.base) if interpreter.base is not None else None
    return interpreter if isinstance(interpreter, PodTemplateKind) else None


def _gpu_templates(obj: dict[str, Any], interpreter: KindInterpreter) -> list[bool]:
    """Per pod template of ``obj`` (in ``template_slots`` order), whether it requests a GPU."""
    templates = _template_kind(interpreter)
    if templates is None:
        return []
    return [_requests_gpu(parent.get(key)) for parent, key in templates.template_slots(obj)]


def _gpu_pod_specs(
    obj: dict[str, Any], interpreter: KindInterpreter, gpu_templates: Sequence[bool]
) -> Iterator[dict[str, Any]]:
    """The pod specs (created when absent) of ``obj``'s templates that request a GPU
    (``gpu_templates``, by slot): a CPU-only role (a PyTorchJob Master without a GPU) is left out."""
    templates = _template_kind(interpreter)
    if templates is None:
        return
    for (parent, key), wants_gpu in zip(templates.template_slots(obj), gpu_templates, strict=False):
        template = parent.get(key)
        if wants_gpu and isinstance(template, dict):
            yield template.setdefault("spec", {})


def _add_node_selector(
    obj: dict[str, Any], interpreter: KindInterpreter, selector: Mapping[str, str], *, gpu_templates: Sequence[bool]
) -> None:
    """Merge ``selector`` into the pod templates that request a GPU; a CPU-only role may run on any node."""
    if not selector:
        return
    for spec in _gpu_pod_specs(obj, interpreter, gpu_templates):
        spec["nodeSelector"] = {**(spec.get("nodeSelector") or {}), **selector}


def _add_preferred_term(
    obj: dict[str, Any], interpreter: KindInterpreter, term: Mapping[str, Any], *, gpu_templates: Sequence[bool]
) -> None:
    """Append the preferred node-affinity ``term`` to the pod templates that request a GPU, after the
    user's own terms (kept as they are); a template that already has it is left alone."""
    for spec in _gpu_pod_specs(obj, interpreter, gpu_templates):
        affinity = spec["affinity"] = dict(spec.get("affinity") or {})
        node_affinity = affinity["nodeAffinity"] = dict(affinity.get("nodeAffinity") or {})
        preferred = list(node_affinity.get("preferredDuringSchedulingIgnoredDuringExecution") or [])
        if term not in preferred:
            preferred.append(copy.deepcopy(dict(term)))
        node_affinity["preferredDuringSchedulingIgnoredDuringExecution"] = preferred


def queue_for_member(manifest: dict[str, Any], *, member_runs_kueue: bool) -> None:
    """Two-level admission, in place. A workload queued at the hub (label
    ``kueue.x-k8s.io/queue-name``) keeps the label in a member that runs Kueue, and a job of a
    kind Kueue manages is suspended there, as Kueue wants it created: the member's Kueue admits it
    in its LocalQueue of the same name and unsuspends it. Any other member gets no label (no
    queue there would ever admit it) and the job as the hub admitted it (unsuspended); a Pod
    there loses Kueue's mark ``kueue.x-k8s.io/managed`` too (no Kueue manages it there; a Kueue
    run there for other tenants with ``manageJobsWithoutQueueName`` would stop a marked Pod that
    has no Workload). No member copy carries the hub's finalizers. A Deployment queued by its pod
    template's label alone keeps it there for a member that runs Kueue (whose pod integration
    queues each Pod) and loses it for any other. A job ``managedBy`` Kueue's MultiKueue (a Job,
    JobSet, Kubeflow job, RayJob, RayCluster or TrainJob) loses that field, as Kueue's MultiKueue
    adapters create it in a worker, so the member's own controller of the kind runs it
    (:func:`controlplane.apis.kueue_jobs.for_worker`)."""
    if admission_objects.template_queued(manifest):
        if not member_runs_kueue:
            template_labels = manifest["spec"]["template"]["metadata"]["labels"]
            del template_labels[kueue.LABEL_QUEUE_NAME]
            if not template_labels:
                del manifest["spec"]["template"]["metadata"]["labels"]
        return
    labels = manifest.get("metadata", {}).get("labels")
    if not isinstance(labels, dict) or kueue.LABEL_QUEUE_NAME not in labels:
        return
    kueue_jobs.for_worker(manifest)
    if not member_runs_kueue:
        del labels[kueue.LABEL_QUEUE_NAME]
        if pods.is_pod(manifest):
            labels.pop(kueue.LABEL_MANAGED, None)
        if not labels:
            del manifest["metadata"]["labels"]
        return
    kueue_jobs.set_job_suspend(manifest, True)


def render_manifest(
    workload: Mapping[str, Any],
    *,
    interpreter: KindInterpreter | None,
    replicas: int,
    shape: ChosenShape | None,
    rules: Sequence[OverrideRule],
    cluster: ClusterView,
    member_runs_kueue: bool = False,
    split: Mapping[str, int] | None = None,
    steering: Sequence[str] = (),
    packing: Sequence[str] = (),
) -> RenderedManifest:
    """The workload as ``cluster`` must run it (see the module docstring for the order)."""
    manifest = without_server_fields(workload)
    if interpreter is not None:
        divided = _template_kind(interpreter)
        if split and isinstance(divided, SplitAware):
            manifest = divided.with_split(manifest, cluster=cluster.name, split=split)
        manifest = interpreter.with_replicas(manifest, replicas)
        wanted = shape is not None or steering or packing
        gpu_templates = _gpu_templates(manifest, interpreter) if wanted else []
        if shape is not None:
            manifest = interpreter.with_gpu_request(manifest, dict(shape.resources))
            _add_node_selector(manifest, interpreter, shape.node_selector, gpu_templates=gpu_templates)
        if steering:
            # A workload none of whose templates requests a GPU is steered whole: only rare node
            # steering reaches a replica without GPUs (scheduler/core/rarenodes.py).
            steered = gpu_templates if any(gpu_templates) else [True] * len(gpu_templates)
            _add_preferred_term(manifest, interpreter, preferred_term(steering), gpu_templates=steered)
        if packing:
            _add_preferred_term(manifest, interpreter, packing_term(packing), gpu_templates=gpu_templates)
    queue_for_member(manifest, member_runs_kueue=member_runs_kueue)
    if pods.is_pod(manifest):  # a member's scheduler must not wait for the hub's Kueue
        manifest = pods.without_gate(manifest)
    if not rules:
        return RenderedManifest(manifest)
    result = apply_overrides(manifest, rules, cluster)
    return RenderedManifest(result.manifest, result.applied, result.error)


def build_work(
    *,
    cluster: str,
    name: str,
    binding_namespace: str,
    binding: str,
    manifest: Mapping[str, Any],
    conflict_resolution: str | None,
    suspend_dispatching: bool,
    preserve_resources_on_deletion: bool = False,
    resource_generation: int | None = None,
) -> dict[str, Any]:
    spec: dict[str, Any] = {"workload": {"manifests": [dict(manifest)]}}
    if conflict_resolution and conflict_resolution != DEFAULT_CONFLICT_RESOLUTION:
        # Abort is what a Work without the field means to the agent: a policy stored with its
        # default (``policies.defaulting``) and one stored before it render the same Work.
        spec["conflictResolution"] = str(conflict_resolution)
    if suspend_dispatching:
        spec["suspendDispatching"] = True
    if preserve_resources_on_deletion:
        spec["preserveResourcesOnDeletion"] = True
    metadata: dict[str, Any] = {
        "name": name,
        "namespace": c.execution_namespace(cluster),
        "labels": work_labels(binding_namespace=binding_namespace, binding=binding, cluster=cluster),
    }
    if resource_generation is not None:
        metadata["annotations"] = {c.ANNOTATION_RESOURCE_GENERATION: str(resource_generation)}
    return {"apiVersion": API_VERSION, "kind": WORK_KIND, "metadata": metadata, "spec": spec}


def resource_generation(work: Mapping[str, Any]) -> int | None:
    """The hub workload's generation ``work`` was rendered from (:data:`c.ANNOTATION_RESOURCE_GENERATION`);
    None for a Work written before the hub stamped it."""
    text = ObjectView(work).annotations.get(c.ANNOTATION_RESOURCE_GENERATION)
    return int(text) if isinstance(text, str) and text.isdigit() else None


def preserves(obj: Mapping[str, Any] | None) -> bool:
    """Whether a binding's or a Work's ``spec.preserveResourcesOnDeletion`` is set."""
    return bool(ObjectView(obj).spec.get("preserveResourcesOnDeletion"))


def works_preserve(
    binding: Mapping[str, Any],
    *,
    parents: Sequence[Mapping[str, Any] | None],
    existing: Sequence[Mapping[str, Any]],
) -> bool:
    """The ``preserveResourcesOnDeletion`` a binding's Works carry: the binding's own; for an
    attached binding (``spec.requiredBy``; ``parents`` are the bindings it lists, None when gone)
    whether any parent has it. A preserving parent whose workload is being deleted stays listed
    until its binding is gone; from then until the dependencies controller drops it from
    ``requiredBy`` (having deleted, flag and all, the Works in the clusters only it needed),
    the ``existing`` Works keep the flag they have."""
    if BindingView(binding).spec.get("requiredBy") is None:
        return preserves(binding)
    parent_gone = False
    for parent in parents:
        if parent is None:
            parent_gone = True
        elif preserves(parent):
            return True
    return parent_gone and any(preserves(work) for work in existing)


def work_differs(existing: Mapping[str, Any], desired: Mapping[str, Any]) -> bool:
    """Whether writing ``desired`` over ``existing`` would change anything we own."""
    if existing.get("spec") != desired.get("spec"):
        return True
    for part in ("labels", "annotations"):
        have = ObjectView(existing).metadata.get(part) or {}
        want = ObjectView(desired).metadata.get(part) or {}
        if any(have.get(k) != v for k, v in want.items()):
            return True
    return False


def _main_index(entries: Sequence[Mapping[str, Any]], resource: Mapping[str, Any]) -> int | None:
    for i, entry in enumerate(entries):
        ident = ManifestStatusView(entry).identifier
        if ident.get("kind") == resource.get("kind") and ident.get("name") == resource.get("name"):
            return i
    return 0 if entries else None


def main_manifest(work: Mapping[str, Any], resource: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The manifest status of the workload itself (a Work may one day carry dependencies too)."""
    entries = WorkView(work).manifest_statuses
    index = _main_index(entries, resource)
    return dict(entries[index]) if index is not None else None


def with_main_manifest(work: Mapping[str, Any], resource: Mapping[str, Any], entry: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of ``work`` whose :func:`main_manifest` is ``entry`` (the stored Work unchanged)."""
    entries = list(WorkView(work).manifest_statuses)
    index = _main_index(entries, resource)
    if index is None:
        return dict(work)
    entries[index] = entry
    return {**work, "status": {**(work.get("status") or {}), "manifestStatuses": entries}}


def work_manifest(work: Mapping[str, Any], resource: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The Work's manifest of the workload itself, None when the Work carries none of it."""
    for manifest in WorkView(work).manifests:
        meta = manifest.get("metadata") or {}
        if manifest.get("kind") == resource.get("kind") and meta.get("name") == resource.get("name"):
            return manifest
    return None
