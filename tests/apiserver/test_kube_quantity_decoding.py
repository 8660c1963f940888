"""A quantity that does not parse (``cpu: abc``) fails kube's decoding of the object, before
any validation: Quantity's own ``UnmarshalJSON`` refuses it and the decoder stops there.

kube answers a create or an update with 400 ``Deployment in version "v1" cannot be handled as a
Deployment: quantities must match the regular expression '...'``; a JSON, merge or strategic
merge patch whose result does not decode with 422 ``"" is invalid: patch: Invalid value: ...``
(its patch handler's words). The hub answered 422 ``The Deployment "x" is invalid:
spec.template.spec.containers[0].resources.requests[cpu]: Invalid value: "abc": ...`` to all.
"""

from __future__ import annotations

import copy
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from controlplane.apis.kube.field import go_printed
from controlplane.apis.quantity import FORMAT_WRONG, SUFFIX_WRONG, unparsable_reason
from controlplane.apiserver.openapi import known_fields
from controlplane.apiserver.openapi.known_fields import unknown_fields_of

from .test_kube_validation import Client, claim, core, deployment, hub, hub_kubeconfig  # noqa: F401 (fixtures)
from .test_real_clients import kubectl, needs_kubectl

DEPLOYMENTS = "/apis/apps/v1/namespaces/default/deployments"
CANNOT = 'Deployment in version "v1" cannot be handled as a Deployment: '


def with_cpu(value: Any, obj: dict[str, Any] | None = None) -> dict[str, Any]:
    obj = copy.deepcopy(obj) if obj is not None else deployment()
    obj["spec"]["template"]["spec"]["containers"][0]["resources"] = {"requests": {"cpu": value}}
    return obj


# --- kube's parser, pure ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("abc", FORMAT_WRONG),
        ("1x", FORMAT_WRONG),
        ("10 Gi", FORMAT_WRONG),
        ("1Gb", FORMAT_WRONG),
        ("1.2.3", FORMAT_WRONG),
        ("", FORMAT_WRONG),
        ("1KK", SUFFIX_WRONG),  # suffix characters, but no suffix kube knows
        ("1e", SUFFIX_WRONG),
        ("500m", None),
        ("1.5Gi", None),
        (" 2 ", None),  # UnmarshalJSON trims the spaces
        ("1e3", None),
        ("-1", None),  # parses: validation refuses it, not decoding
    ],
)
def test_the_reason_is_parse_quantitys_own_error(text: str, reason: str | None) -> None:
    assert unparsable_reason(text) == reason


def test_the_decoder_stops_at_the_quantity() -> None:
    """Go's decoder keeps the first type error and goes on, but an ``UnmarshalJSON`` error ends
    the decoding: the quantity's error is the answer even after a value of the wrong type."""
    decode = unknown_fields_of("apps", "v1", "Deployment")
    obj = with_cpu("abc")
    obj["spec"] = {"replicas": "3", **obj["spec"]}
    with pytest.raises(known_fields.CannotUnmarshal, match=f"^{re.escape(FORMAT_WRONG)}$"):
        decode(obj, False)
    assert decode(with_cpu(2), False) == []  # a JSON number is a quantity too


# --- the API ---------------------------------------------------------------------------------


async def test_create_and_update_answer_400_in_every_mode_and_write_nothing(hub: Client) -> None:  # noqa: F811
    for mode in ("Strict", "Warn", "Ignore"):
        response = await hub.post(f"{DEPLOYMENTS}?fieldValidation={mode}", json=with_cpu("abc"))
        assert response.status == 400, await response.text()
        status = await response.json()
        assert status["reason"] == "BadRequest"
        assert status["message"] == CANNOT + FORMAT_WRONG
    assert (await hub.get(f"{DEPLOYMENTS}/x")).status == 404
    created = await hub.post(DEPLOYMENTS, json=with_cpu("500m"))
    assert created.status == 201, await created.text()
    stored = await created.json()
    response = await hub.put(f"{DEPLOYMENTS}/x", json=with_cpu("1KK", stored))
    assert response.status == 400
    assert (await response.json())["message"] == CANNOT + SUFFIX_WRONG
    listed = await hub.get(DEPLOYMENTS)  # the list (and the stored object) are untouched
    assert listed.status == 200
    [item] = (await listed.json())["items"]
    assert item["spec"]["template"]["spec"]["containers"][0]["resources"] == {"requests": {"cpu": "500m"}}


@pytest.mark.parametrize(
    ("plural", "obj", "kind"),
    [
        ("persistentvolumeclaims", core(
            "PersistentVolumeClaim",
            spec={"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "10 Gi"}}},
        ), "PersistentVolumeClaim"),
        ("resourcequotas", core("ResourceQuota", spec={"hard": {"cpu": "lots"}}), "ResourceQuota"),
        ("limitranges", core("LimitRange", spec={"limits": [{"type": "Container", "default": {"cpu": "1x"}}]}), "LimitRange"),
    ],
)
async def test_every_kind_with_quantities_decodes_them(hub: Client, plural: str, obj: Any, kind: str) -> None:  # noqa: F811
    response = await hub.post(f"/api/v1/namespaces/default/{plural}", json=obj)
    assert response.status == 400, await response.text()
    assert (await response.json())["message"] == f'{kind} in version "v1" cannot be handled as a {kind}: {FORMAT_WRONG}'


async def test_a_patch_that_makes_one_answers_kubes_422_on_the_patch(hub: Client) -> None:  # noqa: F811
    assert (await hub.post(DEPLOYMENTS, json=deployment())).status == 201
    containers = [{"name": "main", "resources": {"limits": {"cpu": "abc"}}}]
    strategic = {"spec": {"template": {"spec": {"containers": containers}}}}
    response = await hub.patch(
        f"{DEPLOYMENTS}/x", json=strategic, headers={"Content-Type": "application/strategic-merge-patch+json"}
    )
    assert response.status == 422, await response.text()
    status = await response.json()
    printed = "map[spec:map[template:map[spec:map[containers:[map[name:main resources:map[limits:map[cpu:abc]]]]]]]]"
    assert go_printed(strategic) == printed
    assert status["message"] == f' "" is invalid: patch: Invalid value: "{printed}": {FORMAT_WRONG}'
    assert status["details"] == {
        "causes": [{"reason": "FieldValueInvalid", "message": f'Invalid value: "{printed}": {FORMAT_WRONG}', "field": "patch"}]
    }
    for content_type, body in (
        ("application/merge-patch+json", {"spec": {"template": {"spec": {"containers": containers}}}}),
        ("application/json-patch+json", [
            {"op": "add", "path": "/spec/template/spec/containers/0/resources", "value": {"limits": {"cpu": "abc"}}},
        ]),
    ):
        response = await hub.patch(f"{DEPLOYMENTS}/x", json=body, headers={"Content-Type": content_type})
        assert response.status == 422, content_type
        status = await response.json()
        [cause] = status["details"]["causes"]
        assert cause["field"] == "patch"
        # The value is the patched object's JSON, quoted as Go quotes a string.
        assert cause["message"].startswith('Invalid value: "{\\"apiVersion\\":\\"apps/v1\\"'), cause
        assert '\\"cpu\\":\\"abc\\"' in cause["message"]
        assert cause["message"].endswith(f'": {FORMAT_WRONG}')
    stored = await (await hub.get(f"{DEPLOYMENTS}/x")).json()
    assert stored["spec"]["template"]["spec"]["containers"][0].get("resources") in (None, {})


async def test_a_server_side_apply_of_one_answers_400(hub: Client) -> None:  # noqa: F811
    """kube fails inside its field manager here (an internal error); the hub answers as the
    create does."""
    response = await hub.patch(
        f"{DEPLOYMENTS}/x?fieldManager=ci", data=yaml.safe_dump(with_cpu("abc")),
        headers={"Content-Type": "application/apply-patch+yaml"},
    )
    assert response.status == 400
    assert (await response.json())["message"] == CANNOT + FORMAT_WRONG


@needs_kubectl
async def test_kubectl_shows_kubes_errors(hub_kubeconfig: Path) -> None:  # noqa: F811
    manifest = yaml.safe_dump(with_cpu("abc"))
    code, out, err = await kubectl(hub_kubeconfig, "create", "-f", "-", stdin=manifest)
    assert code != 0, out
    assert f'Error from server (BadRequest): error when creating "STDIN": {CANNOT}{FORMAT_WRONG}' in err, err
    code, _, err = await kubectl(hub_kubeconfig, "apply", "-f", "-", stdin=yaml.safe_dump(deployment()))
    assert code == 0, err
    patch = '{"spec":{"template":{"spec":{"containers":[{"name":"main","resources":{"limits":{"cpu":"abc"}}}]}}}}'
    code, out, err = await kubectl(hub_kubeconfig, "patch", "deployment", "x", "-p", patch)
    assert code != 0, out
    assert err.startswith('The request is invalid: patch: Invalid value: "map[spec:map[template:'), err
    assert err.rstrip().endswith(FORMAT_WRONG), err
