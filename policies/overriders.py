"""Render a workload for one cluster by applying override rules (Karmada's overriders).

In: a manifest dict, the :class:`~policies.matching.OverrideRule` list from
``collect_override_rules`` (already in application order) and the target :class:`ClusterView`.
Out: an :class:`OverrideResult` holding a *new* manifest (the input is never modified), the
rules applied, and, when a rule cannot be applied (bad JSON pointer, missing path, unparsable
image), an :class:`OverrideError` value the caller turns into a condition; the manifest is then
returned unchanged.

Within a rule, overriders apply in Karmada's order: imageOverrider, commandOverrider,
argsOverrider, labelsOverrider, annotationsOverrider, fieldOverrider, plaintext.

Details that follow Karmada:

* Images parse as the distribution reference grammar without normalisation
  (``reference.Parse``): ``nginx`` has no registry and no implied ``docker.io``; the first
  path component is the *registry* only when it contains ``.`` or ``:`` or is ``localhost``
  (``library/nginx`` has none, ``host:5000/a/b`` has ``host:5000``); a tag wins over a digest
  when both are present (the digest is dropped, as Karmada does). ``add`` appends the value to the component's text, ``replace`` sets it,
  ``remove`` clears it; a Tag value that looks like a digest (``sha256:…``) sets the digest.
* Without ``predicate.path``, imageOverrider rewrites ``containers[*].image`` of the pod
  template(s); commandOverrider/argsOverrider edit the container named ``containerName``
  (``add`` appends, ``remove`` drops every equal item). Pod templates are found for Pod,
  ReplicaSet, Deployment, DaemonSet, StatefulSet (as Karmada) and also Job, CronJob,
  the Kubeflow training jobs (PyTorchJob, TFJob, XGBoostJob, PaddleJob, JAXJob, MPIJob), RayJob
  and RayCluster (gpufed's kinds).
* labels/annotations: ``add`` sets keys (creating the map), ``replace`` and ``remove`` touch
  only keys that exist. Keys are escaped properly (Karmada does not escape ``/`` in keys).
* plaintext follows RFC 6902 as evanphx/json-patch does: ``add`` needs the parent to exist,
  ``remove``/``replace`` need the target to exist; ``-`` appends to an array.
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import yaml

from controlplane.apis.kubeflow import TRAINING_KINDS
from policies.affinity import ClusterView, cluster_matches_affinity
from policies.matching import OverrideRule
from policies.override_models import (
    CommandArgsOverrider,
    FieldOverrider,
    ImageOverrider,
    JSONPatchOperation,
    LabelAnnotationOverrider,
    Overriders,
    PlaintextOverrider,
)


class OverrideFailure(Exception):
    """Raised inside this module only; surfaces to callers as :class:`OverrideError`."""


@dataclass(frozen=True)
class OverrideError:
    """A rule that could not be applied: which one, and why (for a condition message)."""

    source: str
    message: str

    def __str__(self) -> str:
        return f"{self.source}: {self.message}"


@dataclass(frozen=True)
class OverrideResult:
    manifest: dict[str, Any]
    applied: tuple[str, ...] = ()
    error: OverrideError | None = None
    skipped: tuple[str, ...] = field(default=())
    """Rules whose targetCluster did not match this cluster."""

    @property
    def ok(self) -> bool:
        return self.error is None


# ---------------------------------------------------------------------------------------------
# JSON pointer and patch operations
# ---------------------------------------------------------------------------------------------


def parse_pointer(pointer: str) -> list[str]:
    """RFC 6901 tokens of ``pointer`` (``""`` is the whole document)."""
    if pointer == "":
        return []
    if not pointer.startswith("/"):
        raise OverrideFailure(f"{pointer!r} is not a JSON pointer: it must start with '/'")
    tokens = pointer[1:].split("/")
    for token in tokens:
        if re.search(r"~(?![01])", token):
            raise OverrideFailure(f"{pointer!r} is not a JSON pointer: '~' must be followed by 0 or 1")
    return [token.replace("~1", "/").replace("~0", "~") for token in tokens]


def escape_token(token: str) -> str:
    return token.replace("~", "~0").replace("/", "~1")


def _index(token: str, container: list[Any], pointer: str, *, for_add: bool) -> int:
    if for_add and token == "-":
        return len(container)
    if not re.fullmatch(r"0|[1-9][0-9]*", token):
        raise OverrideFailure(f"{pointer}: {token!r} is not an array index")
    index = int(token)
    limit = len(container) if for_add else len(container) - 1
    if index > limit:
        raise OverrideFailure(f"{pointer}: index {index} is out of range (array has {len(container)} items)")
    return index


def _parent(document: Any, tokens: list[str], pointer: str) -> Any:
    node = document
    for depth, token in enumerate(tokens[:-1]):
        where = "/" + "/".join(escape_token(t) for t in tokens[: depth + 1])
        if isinstance(node, dict):
            if token not in node:
                raise OverrideFailure(f"{pointer}: {where} does not exist")
            node = node[token]
        elif isinstance(node, list):
            node = node[_index(token, node, pointer, for_add=False)]
        else:
            raise OverrideFailure(f"{pointer}: {where} is not an object or array")
    return node


def get_at(document: Any, pointer: str) -> Any:
    """The value at ``pointer``; raises :class:`OverrideFailure` when it does not exist."""
    tokens = parse_pointer(pointer)
    if not tokens:
        return document
    parent = _parent(document, tokens, pointer)
    last = tokens[-1]
    if isinstance(parent, dict):
        if last not in parent:
            raise OverrideFailure(f"{pointer} does not exist")
        return parent[last]
    if isinstance(parent, list):
        return parent[_index(last, parent, pointer, for_add=False)]
    raise OverrideFailure(f"{pointer}: parent is not an object or array")


def apply_operation(document: Any, operator: str, pointer: str, value: Any = None) -> Any:
    """Apply one RFC 6902 ``add``/``remove``/``replace`` in place; returns the (new) document."""
    tokens = parse_pointer(pointer)
    if not tokens:
        if operator in ("add", "replace"):
            return copy.deepcopy(value)
        raise OverrideFailure("cannot remove the whole document")
    parent = _parent(document, tokens, pointer)
    last = tokens[-1]
    if isinstance(parent, dict):
        if operator == "add":
            parent[last] = copy.deepcopy(value)
        elif last not in parent:
            raise OverrideFailure(f"{pointer} does not exist, so it cannot be {operator}d")
        elif operator == "replace":
            parent[last] = copy.deepcopy(value)
        else:
            del parent[last]
    elif isinstance(parent, list):
        index = _index(last, parent, pointer, for_add=operator == "add")
        if operator == "add":
            parent.insert(index, copy.deepcopy(value))
        elif operator == "replace":
            parent[index] = copy.deepcopy(value)
        else:
            del parent[index]
    else:
        raise OverrideFailure(f"{pointer}: parent is not an object or array")
    return document


# ---------------------------------------------------------------------------------------------
# Images
# ---------------------------------------------------------------------------------------------

_ALNUM = r"[a-z0-9]+"
_SEPARATOR = r"(?:[._]|__|[-]+)"
_PATH_COMPONENT = _ALNUM + "(?:" + _SEPARATOR + _ALNUM + ")*"
_DOMAIN_COMPONENT = r"(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])"
_DOMAIN = (
    "(?:" + _DOMAIN_COMPONENT + r"(?:\." + _DOMAIN_COMPONENT + r")*|\[[a-fA-F0-9:]+\])(?::[0-9]+)?"
)
_TAG = r"[\w][\w.-]{0,127}"
_DIGEST = r"[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,}"
_NAME = "(?:" + _DOMAIN + "/)?" + _PATH_COMPONENT + "(?:/" + _PATH_COMPONENT + ")*"
_REFERENCE_RE = re.compile("^(" + _NAME + ")(?::(" + _TAG + "))?(?:@(" + _DIGEST + "))?\\Z")
_TAG_RE = re.compile("^" + _TAG + "\\Z")
_DIGEST_RE = re.compile("^" + _DIGEST + "\\Z")
_DIGEST_HEX_LENGTH = {"sha256": 64, "sha384": 96, "sha512": 128}
_NAME_MAX_LENGTH = 255


@dataclass(frozen=True)
class ImageReference:
    """``[registry/]repository[:tag][@digest]`` split the way Karmada's image parser does."""

    registry: str
    repository: str
    tag: str = ""
    digest: str = ""

    @property
    def full_repository(self) -> str:
        return f"{self.registry}/{self.repository}" if self.registry else self.repository

    def __str__(self) -> str:
        if self.tag:
            return f"{self.full_repository}:{self.tag}"
        if self.digest:
            return f"{self.full_repository}@{self.digest}"
        return self.full_repository

    def with_tag_or_digest(self, value: str) -> ImageReference:
        """Karmada's ``SetTagOrDigest``: a tag-looking value sets the tag, a digest sets the digest."""
        if _TAG_RE.match(value):
            return ImageReference(self.registry, self.repository, tag=value)
        if _DIGEST_RE.match(value):
            return ImageReference(self.registry, self.repository, digest=value)
        return self


def parse_image(image: str) -> ImageReference:
    """Parse a container image reference; raises :class:`ValueError` with distribution's messages."""
    if not image:
        raise ValueError("repository name must have at least one component")
    match = _REFERENCE_RE.match(image)
    if match is None:
        if _REFERENCE_RE.match(image.lower()):
            raise ValueError("repository name must be lowercase")
        raise ValueError("invalid reference format")
    name, tag, digest = match.group(1), match.group(2) or "", match.group(3) or ""
    if len(name) > _NAME_MAX_LENGTH:
        raise ValueError(f"repository name must not be more than {_NAME_MAX_LENGTH} characters")
    if digest:
        algorithm, _, hex_part = digest.partition(":")
        expected = _DIGEST_HEX_LENGTH.get(algorithm)
        if expected is None:
            raise ValueError(f"unsupported digest algorithm {algorithm!r}")
        if len(hex_part) != expected:
            raise ValueError("invalid checksum digest length")
    first, _, rest = name.partition("/")
    if rest and (first == "localhost" or "." in first or ":" in first):
        registry, repository = first, rest
    else:
        registry, repository = "", name
    return ImageReference(registry=registry, repository=repository, tag=tag, digest="" if tag else digest)


def override_image(image: str, rule: ImageOverrider) -> str:
    """The image after one imageOverrider (Karmada's ``overrideImage``)."""
    try:
        ref = parse_image(image)
    except ValueError as exc:
        raise OverrideFailure(f"failed to parse image value({image}), error: {exc}") from exc
    value = rule.value or ""
    if rule.component == "Registry":
        registry = {"add": ref.registry + value, "replace": value, "remove": ""}[rule.operator]
        return str(ImageReference(registry, ref.repository, ref.tag, ref.digest))
    if rule.component == "Repository":
        repository = {"add": ref.repository + value, "replace": value, "remove": ""}[rule.operator]
        return str(ImageReference(ref.registry, repository, ref.tag, ref.digest))
    if rule.operator == "add":
        return str(ref.with_tag_or_digest((ref.tag or ref.digest) + value))
    if rule.operator == "replace":
        return str(ref.with_tag_or_digest(value))
    return str(ImageReference(ref.registry, ref.repository))


# ---------------------------------------------------------------------------------------------
# Pod templates
# ---------------------------------------------------------------------------------------------

_TEMPLATE_KINDS = {"ReplicaSet", "Deployment", "DaemonSet", "StatefulSet", "Job"}
_REPLICA_SPEC_KEYS = {kind: training.specs_field for kind, training in TRAINING_KINDS.items()}


def _pod_spec_pointers(manifest: Mapping[str, Any]) -> list[str]:
    """JSON pointers of every pod spec in ``manifest`` for the kinds listed in the module docstring."""
    kind = manifest.get("kind")
    spec = manifest.get("spec")
    if not isinstance(spec, Mapping):
        return []
    if kind == "Pod":
        return ["/spec"]
    if kind in _TEMPLATE_KINDS:
        return ["/spec/template/spec"]
    if kind == "CronJob":
        return ["/spec/jobTemplate/spec/template/spec"]
    if kind in _REPLICA_SPEC_KEYS:
        key = _REPLICA_SPEC_KEYS[str(kind)]
        roles = spec.get(key)
        if isinstance(roles, Mapping):
            return [f"/spec/{key}/{escape_token(role)}/template/spec" for role in roles]
        return []
    if kind in ("RayJob", "RayCluster"):
        prefix = "/spec/rayClusterSpec" if kind == "RayJob" else "/spec"
        cluster = spec.get("rayClusterSpec") if kind == "RayJob" else spec
        if not isinstance(cluster, Mapping):
            return []
        pointers = [f"{prefix}/headGroupSpec/template/spec"] if "headGroupSpec" in cluster else []
        workers = cluster.get("workerGroupSpecs")
        if isinstance(workers, list):
            pointers += [f"{prefix}/workerGroupSpecs/{i}/template/spec" for i in range(len(workers))]
        return pointers
    return []


def _containers(manifest: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """``(pointer, container)`` for every container of every pod spec that exists."""
    found: list[tuple[str, dict[str, Any]]] = []
    for pointer in _pod_spec_pointers(manifest):
        try:
            pod_spec = get_at(manifest, pointer)
        except OverrideFailure:
            continue
        containers = pod_spec.get("containers") if isinstance(pod_spec, dict) else None
        if not isinstance(containers, list):
            continue
        for index, container in enumerate(containers):
            if isinstance(container, dict):
                found.append((f"{pointer}/containers/{index}", container))
    return found


# ---------------------------------------------------------------------------------------------
# Overriders
# ---------------------------------------------------------------------------------------------


def _apply_image(manifest: dict[str, Any], rule: ImageOverrider) -> None:
    if rule.predicate is not None:
        current = get_at(manifest, rule.predicate.path)
        if not isinstance(current, str):
            raise OverrideFailure(f"{rule.predicate.path} is not a string image")
        apply_operation(manifest, "replace", rule.predicate.path, override_image(current, rule))
        return
    for _, container in _containers(manifest):
        image = container.get("image")
        if isinstance(image, str):
            container["image"] = override_image(image, rule)


def _apply_command_args(manifest: dict[str, Any], rule: CommandArgsOverrider, target: str) -> None:
    for _, container in _containers(manifest):
        if container.get("name") != rule.container_name:
            continue
        existing = [str(item) for item in container.get(target) or []]
        if rule.operator == "add":
            container[target] = existing + list(rule.value or [])
        else:
            drop = set(rule.value or [])
            container[target] = [item for item in existing if item not in drop]


def _apply_label_annotation(manifest: dict[str, Any], rule: LabelAnnotationOverrider, key: str) -> None:
    metadata = manifest.setdefault("metadata", {})
    if not isinstance(metadata, dict):
        raise OverrideFailure("/metadata is not an object")
    values = metadata.get(key)
    if rule.operator == "add":
        if not isinstance(values, dict):
            values = {}
            metadata[key] = values
        values.update(rule.value or {})
        return
    if not isinstance(values, dict):
        return
    for name, value in (rule.value or {}).items():
        if name not in values:
            continue
        if rule.operator == "remove":
            del values[name]
        else:
            values[name] = value


def _patch_text(text: str, ops: Sequence[JSONPatchOperation], *, as_yaml: bool, where: str) -> str:
    try:
        document = yaml.safe_load(text) if as_yaml else json.loads(text)
    except (ValueError, yaml.YAMLError) as exc:
        raise OverrideFailure(f"{where} does not hold valid {'YAML' if as_yaml else 'JSON'}: {exc}") from exc
    for op in ops:
        document = apply_operation(document, op.operator, op.sub_path, op.value)
    if as_yaml:
        return str(yaml.safe_dump(document, sort_keys=False))
    return json.dumps(document, separators=(",", ":"))


def _apply_field(manifest: dict[str, Any], rule: FieldOverrider) -> None:
    current = get_at(manifest, rule.field_path)
    if not isinstance(current, str):
        raise OverrideFailure(f"the value at {rule.field_path} is not a string")
    if rule.yaml_ops:
        patched = _patch_text(current, rule.yaml_ops, as_yaml=True, where=rule.field_path)
    else:
        patched = _patch_text(current, rule.json_ops or [], as_yaml=False, where=rule.field_path)
    apply_operation(manifest, "replace", rule.field_path, patched)


def _apply_plaintext(manifest: dict[str, Any], rules: Sequence[PlaintextOverrider]) -> dict[str, Any]:
    document: Any = manifest
    for rule in rules:
        document = apply_operation(document, rule.operator, rule.path, rule.value)
    if not isinstance(document, dict):
        raise OverrideFailure("plaintext overriders must leave an object")
    return document


def apply_overriders(manifest: dict[str, Any], overriders: Overriders) -> dict[str, Any]:
    """Apply one rule's overriders to ``manifest`` in place, in Karmada's order.

    Raises :class:`OverrideFailure`; :func:`apply_overrides` turns it into a value.
    """
    for image_rule in overriders.image_overrider or ():
        _apply_image(manifest, image_rule)
    for command_rule in overriders.command_overrider or ():
        _apply_command_args(manifest, command_rule, "command")
    for args_rule in overriders.args_overrider or ():
        _apply_command_args(manifest, args_rule, "args")
    for label_rule in overriders.labels_overrider or ():
        _apply_label_annotation(manifest, label_rule, "labels")
    for annotation_rule in overriders.annotations_overrider or ():
        _apply_label_annotation(manifest, annotation_rule, "annotations")
    for field_rule in overriders.field_overrider or ():
        _apply_field(manifest, field_rule)
    return _apply_plaintext(manifest, overriders.plaintext or ())


def apply_overrides(
    manifest: Mapping[str, Any], rules: Sequence[OverrideRule], cluster: ClusterView
) -> OverrideResult:
    """Render ``manifest`` for ``cluster``: apply every rule whose ``targetCluster`` matches it."""
    rendered: dict[str, Any] = copy.deepcopy(dict(manifest))
    applied: list[str] = []
    skipped: list[str] = []
    for rule in rules:
        if not cluster_matches_affinity(cluster, rule.target_cluster).fits:
            skipped.append(rule.source)
            continue
        try:
            rendered = apply_overriders(rendered, rule.overriders)
        except OverrideFailure as exc:
            return OverrideResult(
                manifest=copy.deepcopy(dict(manifest)),
                applied=tuple(applied),
                error=OverrideError(source=rule.source, message=str(exc)),
                skipped=tuple(skipped),
            )
        applied.append(rule.source)
    return OverrideResult(manifest=rendered, applied=tuple(applied), skipped=tuple(skipped))
