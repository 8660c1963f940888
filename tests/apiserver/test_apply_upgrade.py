"""Client-side apply, then server-side apply: ``kubectl apply --server-side`` takes over the
fields ``kubectl apply`` set (recorded in the last-applied annotation) without a conflict, as
kube-apiserver's field manager does, and keeps the annotation in step with what it applied."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from controlplane.apiserver.objects import ObjectStore
from controlplane.apiserver.patching import ApplyConflict
from controlplane.apiserver.patching.fieldpaths import field_element
from controlplane.apiserver.patching.lastapplied import (
    LAST_APPLIED_ANNOTATION,
    allowed_conflicts,
    apply_upgrading_client_side,
)
from controlplane.gojson import go_json

from .kinds import deployment
from .patching.builders import kind_schema, record_update
from .test_real_clients import kubeconfig, kubectl, needs_kubectl, server_url  # noqa: F401 (fixtures)

NOW = "2026-01-01T00:00:00Z"
LATER = "2026-01-01T00:05:00Z"
REPLICAS = (field_element("spec"), field_element("replicas"))


def client_side_applied(obj: dict[str, Any]) -> dict[str, Any]:
    """``obj`` as ``kubectl apply`` leaves it: the annotation and kubectl-client-side-apply's fields."""
    annotated = json.loads(json.dumps(obj))
    annotated["metadata"]["annotations"] = {LAST_APPLIED_ANNOTATION: go_json(obj, sort_keys=True) + "\n"}
    return record_update(None, annotated, manager="kubectl-client-side-apply", operation="Update", now=NOW)


def managers(obj: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {entry["manager"]: entry for entry in obj["metadata"]["managedFields"]}


def test_kubectl_takes_over_client_side_fields_still_as_applied() -> None:
    live = client_side_applied(deployment("web", replicas=1))
    allowed = allowed_conflicts(live, schema=kind_schema(live))
    assert allowed is not None and REPLICAS in allowed
    applied = deployment("web", replicas=3)
    result = apply_upgrading_client_side(live, applied, schema=kind_schema(live), manager="kubectl", force=False, now=LATER)
    assert result["spec"]["replicas"] == 3
    owned = managers(result)
    assert set(owned) == {"kubectl", "kubectl-client-side-apply"}
    assert "f:replicas" in owned["kubectl"]["fieldsV1"]["f:spec"]
    assert "f:replicas" not in owned["kubectl-client-side-apply"]["fieldsV1"]["f:spec"]
    # The fields both set to the same value stay shared.
    assert "f:selector" in owned["kubectl-client-side-apply"]["fieldsV1"]["f:spec"]
    assert json.loads(result["metadata"]["annotations"][LAST_APPLIED_ANNOTATION]) == applied


def test_a_field_changed_since_the_client_side_apply_still_conflicts() -> None:
    live = client_side_applied(deployment("web", replicas=1))
    live["spec"]["replicas"] = 5  # someone changed it with kubectl-client-side-apply's name
    with pytest.raises(ApplyConflict) as caught:
        apply_upgrading_client_side(live, deployment("web", replicas=3), schema=kind_schema(live), manager="kubectl", force=False, now=LATER)
    assert caught.value.conflicts == [(".spec.replicas", "kubectl-client-side-apply")]


@pytest.mark.parametrize("manager", ["my-tool"])
def test_only_kubectl_gets_the_upgrade(manager: str) -> None:
    live = client_side_applied(deployment("web", replicas=1))
    with pytest.raises(ApplyConflict):
        apply_upgrading_client_side(live, deployment("web", replicas=3), schema=kind_schema(live), manager=manager, force=False, now=LATER)


def test_without_the_annotation_it_conflicts() -> None:
    live = client_side_applied(deployment("web", replicas=1))
    del live["metadata"]["annotations"]
    with pytest.raises(ApplyConflict):
        apply_upgrading_client_side(live, deployment("web", replicas=3), schema=kind_schema(live), manager="kubectl", force=False, now=LATER)


def test_go_json_matches_kubes_encoding() -> None:
    assert go_json({"b": "<&>", "a": [1, "x"]}, sort_keys=True) == '{"a":[1,"x"],"b":"\\u003c\\u0026\\u003e"}'


def test_the_annotation_is_written_as_gos_json_encoder_writes_it() -> None:
    live = client_side_applied(deployment("web", replicas=1))
    applied = deployment("web", replicas=3)
    applied["metadata"]["annotations"] = {"note": "<&>"}
    result = apply_upgrading_client_side(live, applied, schema=kind_schema(live), manager="kubectl", force=False, now=LATER)
    text = result["metadata"]["annotations"][LAST_APPLIED_ANNOTATION]
    # Sorted keys, Go's escapes, no spaces and the encoder's closing newline.
    assert text.startswith('{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"annotations":{"note":"\\u003c\\u0026\\u003e"}')
    assert text.endswith("}}\n")


@needs_kubectl
async def test_kubectl_client_side_then_server_side_apply(kubeconfig: Path, objects: ObjectStore, tmp_path: Path) -> None:  # noqa: F811
    manifest = tmp_path / "web.yaml"
    manifest.write_text(yaml.safe_dump(deployment("web", replicas=1)))
    code, out, err = await kubectl(kubeconfig, "apply", "-f", str(manifest))
    assert code == 0, err
    assert out.strip() == "deployment.apps/web created"

    manifest.write_text(yaml.safe_dump(deployment("web", replicas=3)))
    code, out, err = await kubectl(kubeconfig, "apply", "--server-side", "-f", str(manifest))
    assert code == 0, err
    assert out.strip() == "deployment.apps/web serverside-applied"

    live = await objects.get(objects.registry.require("apps/v1", "Deployment"), namespace="default", name="web")
    assert live["spec"]["replicas"] == 3
    # kubectl's server-side apply takes over what client-side apply set (the server allows it:
    # the values are still as last applied), then kubectl moves the annotation to a manager of
    # its own ("kubectl-last-applied") and folds kubectl-client-side-apply's entry into its
    # own (client-go's csaupgrade) and applies once more. What kube leaves: two appliers.
    entries = {(e["manager"], e["operation"]) for e in live["metadata"]["managedFields"]}
    assert entries == {("kubectl", "Apply"), ("kubectl-last-applied", "Apply")}
    owned = managers(live)
    assert set(owned["kubectl"]["fieldsV1"]) == {"f:spec"}
    assert {"f:replicas", "f:selector", "f:template"} <= set(owned["kubectl"]["fieldsV1"]["f:spec"])
    assert owned["kubectl-last-applied"]["fieldsV1"] == {
        "f:metadata": {"f:annotations": {f"f:{LAST_APPLIED_ANNOTATION}": {}}}
    }
    last = json.loads(live["metadata"]["annotations"][LAST_APPLIED_ANNOTATION])
    assert last["spec"]["replicas"] == 3

    # And back: a client-side apply diffs against what the server-side apply recorded.
    manifest.write_text(yaml.safe_dump(deployment("web", replicas=2)))
    code, out, err = await kubectl(kubeconfig, "apply", "-f", str(manifest))
    assert code == 0, err
    assert out.strip() == "deployment.apps/web configured"
    live = await objects.get(objects.registry.require("apps/v1", "Deployment"), namespace="default", name="web")
    assert live["spec"]["replicas"] == 2
