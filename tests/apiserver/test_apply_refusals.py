"""What kube's field manager refuses in a server-side apply before merging it: an applied object
carrying ``metadata.managedFields`` (400), and one structured-merge-diff cannot type against the
kind's OpenAPI: a scalar of the wrong type, a field the kind does not declare (whatever
``fieldValidation`` says). Built-in kinds and custom resources, over HTTP and with kubectl."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml
from aiohttp.test_utils import TestClient

from controlplane.apiserver.crd.registry import DynamicRegistry
from controlplane.apiserver.crd.types import crd_resource_type
from controlplane.apiserver.kinds.core import core_resources
from controlplane.apiserver.kinds.workloads import workload_resources
from controlplane.apiserver.resources import Registry

from .test_crd_apply import crd, install
from .test_real_clients import kubeconfig, kubectl, needs_kubectl, server_url  # noqa: F401 (fixtures)

Client = TestClient[Any, Any]
APPLY = {"Content-Type": "application/apply-patch+yaml"}
DEPLOYMENTS = "/apis/apps/v1/namespaces/default/deployments"
WIDGETS = "/apis/example.com/v1/namespaces/default/widgets"
TYPED = "failed to create typed patch object"


@pytest.fixture
def api_registry() -> Registry:
    return DynamicRegistry(core_resources(), workload_resources(), [crd_resource_type()])


def deployment(**spec: Any) -> dict[str, Any]:
    labels = {"app": "web"}
    return {
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "namespace": "default"},
        "spec": {"selector": {"matchLabels": labels}, "template": {
            "metadata": {"labels": labels}, "spec": {"containers": [{"name": "c", "image": "i"}]}}, **spec},
    }


async def apply(api: Client, url: str, body: dict[str, Any], query: str = "") -> Any:
    return await api.patch(f"{url}?fieldManager=tester{query}", data=yaml.safe_dump(body), headers=APPLY)


async def refused_with(api: Client, url: str, body: dict[str, Any], query: str = "") -> tuple[int, str, str]:
    answer = await apply(api, url, body, query)
    status = await answer.json()
    return answer.status, status.get("reason", ""), status.get("message", "")


# --- metadata.managedFields ----------------------------------------------------------------


@pytest.mark.parametrize("entries", [[{"manager": "kubectl", "operation": "Apply", "apiVersion": "apps/v1"}], []])
async def test_an_apply_carrying_managed_fields_is_kubes_400(api: Client, entries: list[Any]) -> None:
    """Both when it would create the object and when it changes it; an empty list is set too."""
    body = deployment()
    body["metadata"]["managedFields"] = entries
    assert await refused_with(api, f"{DEPLOYMENTS}/web", body) == (400, "BadRequest", "metadata.managedFields must be nil")
    assert (await api.get(f"{DEPLOYMENTS}/web")).status == 404
    assert (await apply(api, f"{DEPLOYMENTS}/web", deployment())).status == 201
    assert await refused_with(api, f"{DEPLOYMENTS}/web", body) == (400, "BadRequest", "metadata.managedFields must be nil")


async def test_managed_fields_go_cannot_read_as_entries_are_typed_as_any_field(api: Client) -> None:
    """kube's field manager reads a string as no entries; structured-merge-diff then types it."""
    body = deployment()
    body["metadata"]["managedFields"] = "x"
    message = f"{TYPED} (default/web; apps/v1, Kind=Deployment): .metadata.managedFields: expected list, got &{{x}}"
    assert await refused_with(api, f"{DEPLOYMENTS}/web", body) == (422, "Invalid", message)


async def test_an_apply_with_null_managed_fields_is_applied(api: Client) -> None:
    """Go reads ``null`` as no managedFields, as it reads none."""
    body = deployment()
    body["metadata"]["managedFields"] = None
    answer = await apply(api, f"{DEPLOYMENTS}/web", body)
    assert answer.status == 201, await answer.text()
    [entry] = (await answer.json())["metadata"]["managedFields"]
    assert entry["manager"] == "tester"


# --- scalars of the wrong type --------------------------------------------------------------


def _with(path: tuple[str | int, ...], value: Any) -> dict[str, Any]:
    body = deployment()
    node: Any = body
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    return body


_CONTAINER = ("spec", "template", "spec", "containers", 0)


@pytest.mark.parametrize(("body", "detail"), [
    (_with(("spec", "replicas"), "three"), ".spec.replicas: expected numeric (int or float), got string"),
    (_with(("spec", "replicas"), {"n": 3}), ".spec.replicas: expected numeric (int or float), got map[string]interface {}"),
    (_with(("spec", "paused"), "yes"), ".spec.paused: expected boolean, got &{yes}"),
    (_with((*_CONTAINER, "image"), 5), '.spec.template.spec.containers[name="c"].image: expected string, got '
                                       "&value.valueUnstructured{Value:5}"),
    (_with((*_CONTAINER, "image"), {"a": "b"}), '.spec.template.spec.containers[name="c"].image: expected string, got '
                                                '&value.valueUnstructured{Value:map[string]interface {}{"a":"b"}}'),
    # A Quantity (and a time) takes any scalar, but no map or list.
    (_with((*_CONTAINER, "resources"), {"limits": {"cpu": {"n": 1}}}),
     '.spec.template.spec.containers[name="c"].resources.limits.cpu: expected any scalar, got &{map[n:1]}'),
    (_with(("metadata", "labels"), {"app": True}),
     ".metadata.labels.app: expected string, got &value.valueUnstructured{Value:true}"),
])
async def test_a_scalar_of_the_wrong_type_is_smds_error(api: Client, body: dict[str, Any], detail: str) -> None:
    """kube's words (its field manager types the applied object before anything is decoded); the
    hub answers them as the 422 its other typing refusals are."""
    message = f"{TYPED} (default/web; apps/v1, Kind=Deployment): {detail}"
    assert await refused_with(api, f"{DEPLOYMENTS}/web", body) == (422, "Invalid", message)
    assert (await api.get(f"{DEPLOYMENTS}/web")).status == 404


async def test_quantities_and_int_or_strings_take_a_number_or_a_string(api: Client) -> None:
    body = _with((*_CONTAINER, "resources"), {"limits": {"cpu": 2, "memory": "1Gi"}})
    body["spec"]["strategy"] = {"rollingUpdate": {"maxSurge": 1, "maxUnavailable": "25%"}}
    answer = await apply(api, f"{DEPLOYMENTS}/web", body)
    assert answer.status == 201, await answer.text()


# --- fields the kind does not declare ---------------------------------------------------------


@pytest.mark.parametrize("validation", ["Strict", "Warn", "Ignore", ""])
async def test_an_unknown_field_is_refused_whatever_field_validation_says(api: Client, validation: str) -> None:
    """SMD refuses a field its schema does not declare before kube looks at ``fieldValidation``:
    the same answer under each, no warning, nothing stored."""
    body = _with(("spec", "replica"), 3)
    query = f"&fieldValidation={validation}" if validation else ""
    answer = await apply(api, f"{DEPLOYMENTS}/web", body, query)
    status = await answer.json()
    message = f"{TYPED} (default/web; apps/v1, Kind=Deployment): .spec.replica: field not declared in schema"
    assert (answer.status, status["reason"], status["message"]) == (422, "Invalid", message)
    assert "Warning" not in answer.headers
    assert (await api.get(f"{DEPLOYMENTS}/web")).status == 404


# --- custom resources -----------------------------------------------------------------------

WIDGET_SCHEMA: dict[str, Any] = {"type": "object", "properties": {
    "spec": {"type": "object", "properties": {
        "size": {"type": "integer"},
        "port": {"x-kubernetes-int-or-string": True},
        "enabled": {"type": "boolean"},
        "extra": {"type": "object", "x-kubernetes-preserve-unknown-fields": True,
                  "properties": {"level": {"type": "string"}}},
    }},
}}


def widget(**spec: Any) -> dict[str, Any]:
    return {"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w", "namespace": "default"},
            "spec": spec}


@pytest.mark.parametrize(("body", "detail"), [
    (widget(size="big"), ".spec.size: expected numeric (int or float), got string"),
    (widget(enabled=1), ".spec.enabled: expected boolean, got &{1}"),
    (widget(sise=1), ".spec.sise: field not declared in schema"),
    (widget(extra={"level": 3}), ".spec.extra.level: expected string, got &value.valueUnstructured{Value:3}"),
    ({**widget(size=1), "status": {}}, ".status: field not declared in schema"),
    ({**widget(size=1), "metadata": {"name": "w", "namespace": "default", "labelz": {}}},
     ".metadata.labelz: field not declared in schema"),
])
async def test_a_custom_resource_is_typed_by_its_schema(api: Client, body: dict[str, Any], detail: str) -> None:
    await install(api, crd("example.com", "Widget", "widgets", WIDGET_SCHEMA), WIDGETS)
    message = f"{TYPED} (default/w; example.com/v1, Kind=Widget): {detail}"
    assert await refused_with(api, f"{WIDGETS}/w", body, "&fieldValidation=Ignore") == (422, "Invalid", message)


async def test_what_preserve_unknown_fields_keeps_is_applied_and_stored(api: Client) -> None:
    await install(api, crd("example.com", "Widget", "widgets", WIDGET_SCHEMA), WIDGETS)
    body = widget(size=1, port="http", extra={"level": "high", "anything": {"goes": [1, "x"]}})
    answer = await apply(api, f"{WIDGETS}/w", body, "&fieldValidation=Strict")
    assert answer.status == 201, await answer.text()
    assert "Warning" not in answer.headers
    stored = await (await api.get(f"{WIDGETS}/w")).json()
    assert stored["spec"]["extra"] == {"level": "high", "anything": {"goes": [1, "x"]}}


# --- kubectl ----------------------------------------------------------------------------------


@needs_kubectl
async def test_kubectl_apply_server_side_prints_the_refusals(kubeconfig: Path) -> None:  # noqa: F811
    typo = _with(("spec", "replica"), 3)
    code, _, err = await kubectl(kubeconfig, "apply", "--server-side", "-f", "-", stdin=yaml.safe_dump(typo))
    assert code != 0
    assert ".spec.replica: field not declared in schema" in err, err
    wrong = _with(("spec", "replicas"), "three")
    code, _, err = await kubectl(kubeconfig, "apply", "--server-side", "-f", "-", stdin=yaml.safe_dump(wrong))
    assert code != 0
    assert ".spec.replicas: expected numeric (int or float), got string" in err, err
    managed = copy.deepcopy(deployment())
    managed["metadata"]["managedFields"] = [{"manager": "x", "operation": "Apply"}]
    code, _, err = await kubectl(kubeconfig, "apply", "--server-side", "-f", "-", stdin=yaml.safe_dump(managed))
    assert code != 0
    assert "metadata.managedFields must be nil" in err, err
