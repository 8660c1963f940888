"""Overriders: image parsing and rewriting, command/args, labels/annotations, field, plaintext."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
import yaml

from policies.affinity import ClusterView
from policies.matching import OverrideRule, collect_override_rules
from policies.models import ClusterAffinity
from policies.override_models import ImageOverrider, OverridePolicy, Overriders
from policies.overriders import ImageReference, apply_overrides, override_image, parse_image

DIGEST = "sha256:50d858e0985ecc7f60418aaf0cc5ab587f42c2570a884095a9e8ccacd0f6545c"
MEMBER1 = ClusterView(name="member1", provider="onprem")
MEMBER2 = ClusterView(name="member2", provider="aws")


@pytest.mark.parametrize(
    ("image", "expected"),
    [
        ("nginx", ImageReference("", "nginx")),
        ("pause", ImageReference("", "pause")),
        ("nginx:1.25", ImageReference("", "nginx", tag="1.25")),
        ("library/nginx", ImageReference("", "library/nginx")),
        ("subpath/imagename:v1.0.0", ImageReference("", "subpath/imagename", tag="v1.0.0")),
        ("docker.io/library/nginx:1.25", ImageReference("docker.io", "library/nginx", tag="1.25")),
        ("fictional.registry.example/imagename:v1.0.0", ImageReference("fictional.registry.example", "imagename", tag="v1.0.0")),
        ("host:5000/a/b@" + DIGEST, ImageReference("host:5000", "a/b", digest=DIGEST)),
        ("10.10.10.10:10443/subpath/imagename", ImageReference("10.10.10.10:10443", "subpath/imagename")),
        ("localhost/app:dev", ImageReference("localhost", "app", tag="dev")),
        ("nginx:1.25@" + DIGEST, ImageReference("", "nginx", tag="1.25")),
        ("[::1]:5000/app", ImageReference("[::1]:5000", "app")),
    ],
)
def test_parse_image(image: str, expected: ImageReference) -> None:
    parsed = parse_image(image)
    assert parsed == expected
    if "@" not in image or "@" in str(parsed):
        assert str(parsed) == image


@pytest.mark.parametrize(
    ("image", "message"),
    [
        ("", "at least one component"),
        ("Nginx", "must be lowercase"),
        ("nginx:bad tag", "invalid reference format"),
        ("nginx@sha256:abc", "invalid reference format"),
        ("nginx@sha256:" + "a" * 40, "invalid checksum digest length"),
        ("nginx@md5:" + "a" * 32, "unsupported digest algorithm"),
        ("a" * 256, "not be more than 255"),
    ],
)
def test_parse_image_errors(image: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_image(image)


@pytest.mark.parametrize(
    ("image", "component", "operator", "value", "expected"),
    [
        ("nginx:1.25", "Registry", "add", "registry.io", "registry.io/nginx:1.25"),
        ("docker.io/library/nginx:1.25", "Registry", "replace", "mirror.local:5000", "mirror.local:5000/library/nginx:1.25"),
        ("docker.io/library/nginx:1.25", "Registry", "add", "-mirror", "docker.io-mirror/library/nginx:1.25"),
        ("docker.io/library/nginx:1.25", "Registry", "remove", None, "library/nginx:1.25"),
        ("gcr.io/kube-apiserver:v1.19.0", "Repository", "replace", "kube-controller-manager", "gcr.io/kube-controller-manager:v1.19.0"),
        ("gcr.io/app:v1", "Repository", "add", "-gpu", "gcr.io/app-gpu:v1"),
        ("nginx:1.25", "Tag", "replace", "1.26", "nginx:1.26"),
        ("nginx:1.25", "Tag", "add", "-cuda12", "nginx:1.25-cuda12"),
        ("nginx:1.25", "Tag", "remove", None, "nginx"),
        ("nginx", "Tag", "replace", DIGEST, "nginx@" + DIGEST),
        ("host:5000/a/b@" + DIGEST, "Tag", "replace", "v2", "host:5000/a/b:v2"),
        ("host:5000/a/b@" + DIGEST, "Tag", "remove", None, "host:5000/a/b"),
        ("nginx:1.25", "Tag", "replace", "not a tag!", "nginx:1.25"),
        # An empty value is accepted, as Karmada accepts it: replacing the registry drops it.
        ("docker.io/library/nginx:1.25", "Registry", "replace", None, "library/nginx:1.25"),
        ("docker.io/library/nginx:1.25", "Registry", "add", "", "docker.io/library/nginx:1.25"),
    ],
)
def test_override_image(image: str, component: str, operator: str, value: str | None, expected: str) -> None:
    rule = ImageOverrider.model_validate({"component": component, "operator": operator, "value": value})
    assert override_image(image, rule) == expected


def _deployment() -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "myapp", "namespace": "default", "labels": {"app": "myapp"},
                     "annotations": {"obsolete": "yes", "keep": "1"}},
        "spec": {
            "replicas": 2,
            "template": {"spec": {
                "nodeSelector": {"disk": "ssd"},
                "containers": [
                    {"name": "myapp", "image": "docker.io/library/nginx:1.25", "command": ["nginx"],
                     "args": ["--debug", "-g", "daemon off;"]},
                    {"name": "sidecar", "image": "busybox"},
                ],
            }},
        },
    }


def _rules(overriders: dict[str, Any], target: dict[str, Any] | None = None) -> list[OverrideRule]:
    return [OverrideRule(
        policy_kind="OverridePolicy", policy_name="p", policy_namespace="default", rule_index=0,
        target_cluster=None if target is None else ClusterAffinity.model_validate(target),
        overriders=Overriders.model_validate(overriders),
    )]


def _pointer(document: Any, *path: Any) -> Any:
    for part in path:
        document = document[part]
    return document


@pytest.mark.parametrize(
    ("overriders", "path", "expected"),
    [
        ({"imageOverrider": [{"component": "Registry", "operator": "replace", "value": "mirror.io"}]},
         ("spec", "template", "spec", "containers"),
         [{"name": "myapp", "image": "mirror.io/library/nginx:1.25", "command": ["nginx"],
           "args": ["--debug", "-g", "daemon off;"]},
          {"name": "sidecar", "image": "mirror.io/busybox"}]),
        ({"imageOverrider": [{"predicate": {"path": "/spec/template/spec/containers/1/image"},
                              "component": "Tag", "operator": "add", "value": "1.36"}]},
         ("spec", "template", "spec", "containers", 1, "image"), "busybox:1.36"),
        ({"commandOverrider": [{"containerName": "myapp", "operator": "add", "value": ["-c", "/etc/n.conf"]}]},
         ("spec", "template", "spec", "containers", 0, "command"), ["nginx", "-c", "/etc/n.conf"]),
        ({"commandOverrider": [{"containerName": "sidecar", "operator": "add", "value": ["sleep"]}]},
         ("spec", "template", "spec", "containers", 1, "command"), ["sleep"]),
        ({"argsOverrider": [{"containerName": "myapp", "operator": "remove", "value": ["--debug", "absent"]}]},
         ("spec", "template", "spec", "containers", 0, "args"), ["-g", "daemon off;"]),
        ({"labelsOverrider": [{"operator": "add", "value": {"app.kubernetes.io/part-of": "shop"}}]},
         ("metadata", "labels"), {"app": "myapp", "app.kubernetes.io/part-of": "shop"}),
        ({"labelsOverrider": [{"operator": "replace", "value": {"app": "x", "absent": "y"}}]},
         ("metadata", "labels"), {"app": "x"}),
        ({"annotationsOverrider": [{"operator": "remove", "value": {"obsolete": "", "absent": ""}}]},
         ("metadata", "annotations"), {"keep": "1"}),
        ({"plaintext": [{"path": "/spec/replicas", "operator": "replace", "value": 5}]}, ("spec", "replicas"), 5),
        ({"plaintext": [{"path": "/spec/template/spec/nodeSelector", "operator": "remove"}]},
         ("spec", "template", "spec"), {"containers": _deployment()["spec"]["template"]["spec"]["containers"]}),
        ({"plaintext": [{"path": "/spec/template/spec/tolerations", "operator": "add",
                         "value": [{"key": "gpu", "operator": "Exists"}]}]},
         ("spec", "template", "spec", "tolerations"), [{"key": "gpu", "operator": "Exists"}]),
        ({"plaintext": [{"path": "/spec/template/spec/containers/-", "operator": "add", "value": {"name": "x"}}]},
         ("spec", "template", "spec", "containers", 2), {"name": "x"}),
        ({"plaintext": [{"path": "/metadata/labels/a~1b", "operator": "add", "value": "c"}]},
         ("metadata", "labels", "a/b"), "c"),
        # Order: image first, then plaintext (a plaintext image replace wins over the image overrider).
        ({"plaintext": [{"path": "/spec/template/spec/containers/0/image", "operator": "replace", "value": "final"}],
          "imageOverrider": [{"component": "Tag", "operator": "replace", "value": "9"}]},
         ("spec", "template", "spec", "containers", 0, "image"), "final"),
    ],
)
def test_overriders(overriders: dict[str, Any], path: tuple[Any, ...], expected: Any) -> None:
    manifest = _deployment()
    original = copy.deepcopy(manifest)
    result = apply_overrides(manifest, _rules(overriders), MEMBER1)
    assert result.ok, result.error
    assert _pointer(result.manifest, *path) == expected
    assert manifest == original
    assert result.applied == ("OverridePolicy/default/p#0",)


def test_a_container_name_no_container_has_changes_nothing() -> None:
    """Karmada's CRD takes any ``containerName``, "" among them: it names no container, so the
    rule applies and changes nothing."""
    for name in ("", "absent"):
        overriders = {"commandOverrider": [{"containerName": name, "operator": "add", "value": ["sleep"]}],
                      "argsOverrider": [{"containerName": name, "operator": "remove", "value": ["--debug"]}]}
        result = apply_overrides(_deployment(), _rules(overriders), MEMBER1)
        assert result.ok, result.error
        assert result.manifest == _deployment()
        assert result.applied == ("OverridePolicy/default/p#0",)


@pytest.mark.parametrize(
    ("overriders", "message"),
    [
        ({"plaintext": [{"path": "/spec/missing/field", "operator": "add", "value": 1}]}, "/spec/missing does not exist"),
        ({"plaintext": [{"path": "/spec/template/spec/affinity", "operator": "replace", "value": {}}]},
         "does not exist, so it cannot be replaced"),
        ({"plaintext": [{"path": "/spec/template/spec/containers/7", "operator": "remove"}]}, "out of range"),
        ({"plaintext": [{"path": "/spec/template/spec/containers/x/image", "operator": "replace", "value": "a"}]},
         "'x' is not an array index"),
        ({"plaintext": [{"path": "/metadata/labels/a~2", "operator": "add", "value": "c"}]}, "'~' must be followed by 0 or 1"),
        ({"imageOverrider": [{"predicate": {"path": "/spec/template/spec/containers/5/image"},
                              "component": "Tag", "operator": "remove"}]}, "out of range"),
        ({"imageOverrider": [{"predicate": {"path": "/spec/replicas"}, "component": "Tag", "operator": "remove"}]},
         "is not a string image"),
        # "" is a JSON pointer (the whole object), so Karmada's CRD and webhook take it; it holds no
        # image and no string, so the override fails when applied.
        ({"imageOverrider": [{"predicate": {"path": ""}, "component": "Tag", "operator": "remove"}]},
         "is not a string image"),
        ({"fieldOverrider": [{"fieldPath": "", "yaml": [{"subPath": "/a", "operator": "remove"}]}]},
         "is not a string"),
    ],
)
def test_override_errors_are_values(overriders: dict[str, Any], message: str) -> None:
    manifest = _deployment()
    result = apply_overrides(manifest, _rules(overriders), MEMBER1)
    assert not result.ok and result.error is not None
    assert message in result.error.message
    assert result.error.source == "OverridePolicy/default/p#0"
    assert result.manifest == _deployment()


def test_unparsable_image_is_an_error_value() -> None:
    manifest = _deployment()
    manifest["spec"]["template"]["spec"]["containers"][1]["image"] = "Bad Image"
    result = apply_overrides(manifest, _rules({"imageOverrider": [{"component": "Tag", "operator": "remove"}]}), MEMBER1)
    assert result.error is not None and "failed to parse image value(Bad Image)" in result.error.message


def test_target_cluster_filters_rules() -> None:
    rules = _rules({"plaintext": [{"path": "/spec/replicas", "operator": "replace", "value": 9}]},
                   target={"clusterNames": ["member1"]})
    assert apply_overrides(_deployment(), rules, MEMBER1).manifest["spec"]["replicas"] == 9
    other = apply_overrides(_deployment(), rules, MEMBER2)
    assert other.manifest["spec"]["replicas"] == 2
    assert other.skipped == ("OverridePolicy/default/p#0",) and other.applied == ()


@pytest.mark.parametrize(
    ("manifest", "path"),
    [
        ({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j"},
          "spec": {"template": {"spec": {"containers": [{"name": "c", "image": "train:1"}]}}}},
         ("spec", "template", "spec", "containers", 0, "image")),
        ({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
          "spec": {"containers": [{"name": "c", "image": "train:1"}]}},
         ("spec", "containers", 0, "image")),
        ({"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "metadata": {"name": "t"},
          "spec": {"pytorchReplicaSpecs": {
              "Master": {"template": {"spec": {"containers": [{"name": "pytorch", "image": "train:1"}]}}},
              "Worker": {"template": {"spec": {"containers": [{"name": "pytorch", "image": "train:1"}]}}}}}},
         ("spec", "pytorchReplicaSpecs", "Worker", "template", "spec", "containers", 0, "image")),
        ({"apiVersion": "ray.io/v1", "kind": "RayJob", "metadata": {"name": "r"},
          "spec": {"rayClusterSpec": {
              "headGroupSpec": {"template": {"spec": {"containers": [{"name": "head", "image": "train:1"}]}}},
              "workerGroupSpecs": [{"template": {"spec": {"containers": [{"name": "w", "image": "train:1"}]}}}]}}},
         ("spec", "rayClusterSpec", "workerGroupSpecs", 0, "template", "spec", "containers", 0, "image")),
    ],
)
def test_image_overrider_finds_pod_templates_of_gpu_kinds(manifest: dict[str, Any], path: tuple[Any, ...]) -> None:
    rules = _rules({"imageOverrider": [{"component": "Registry", "operator": "add", "value": "registry.local"}]})
    result = apply_overrides(manifest, rules, MEMBER1)
    assert _pointer(result.manifest, *path) == "registry.local/train:1"


@pytest.mark.parametrize("as_yaml", [True, False])
def test_field_overrider(as_yaml: bool) -> None:
    config = {"server": {"port": 80, "host": "a"}}
    text = yaml.safe_dump(config) if as_yaml else json.dumps(config)
    manifest = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"config": text}}
    ops = [{"subPath": "/server/port", "operator": "replace", "value": 8080},
           {"subPath": "/server/host", "operator": "remove"}]
    rules = _rules({"fieldOverrider": [{"fieldPath": "/data/config", ("yaml" if as_yaml else "json"): ops}]})
    result = apply_overrides(manifest, rules, MEMBER1)
    assert result.ok, result.error
    rendered = result.manifest["data"]["config"]
    assert (yaml.safe_load(rendered) if as_yaml else json.loads(rendered)) == {"server": {"port": 8080}}


def test_policies_apply_in_collected_order() -> None:
    general = OverridePolicy.model_validate({"metadata": {"name": "general", "namespace": "default"}, "spec": {
        "resourceSelectors": [{"apiVersion": "apps/v1", "kind": "Deployment"}],
        "overrideRules": [{"overriders": {"plaintext": [{"path": "/spec/replicas", "operator": "replace", "value": 1}]}}]}})
    specific = OverridePolicy.model_validate({"metadata": {"name": "aaa-specific", "namespace": "default"}, "spec": {
        "resourceSelectors": [{"apiVersion": "apps/v1", "kind": "Deployment", "name": "myapp"}],
        "overrideRules": [{"overriders": {"plaintext": [{"path": "/spec/replicas", "operator": "replace", "value": 7}]}}]}})
    rules = collect_override_rules(_deployment(), [specific, general])
    result = apply_overrides(_deployment(), rules, MEMBER1)
    assert result.manifest["spec"]["replicas"] == 7
    assert result.applied == ("OverridePolicy/default/general#0", "OverridePolicy/default/aaa-specific#0")
