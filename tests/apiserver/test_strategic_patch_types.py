"""A strategic merge patch that leaves a value of the wrong type answers kube's own words.

kube turns the map a strategic merge patch leaves into the kind with its unstructured converter,
not with the JSON decoder a JSON or merge patch goes through, so the 422 on ``patch`` ends with
the converter's error (``cannot restore slice from map``, ``unrecognized type: int32``) where
the hub answered the JSON decoder's (``json: cannot unmarshal object into Go struct field ...``).
A ControllerRevision's ``data`` changed by any patch is immutable, printed as kube prints its
internal ``*runtime.Unknown``."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from controlplane.apiserver.openapi import known_fields
from controlplane.apiserver.openapi.known_fields import unknown_fields_of

from .test_kube_validation import Client, deployment, hub, hub_kubeconfig  # noqa: F401 (fixtures)
from .test_real_clients import kubectl, needs_kubectl

DEPLOYMENTS = "/apis/apps/v1/namespaces/default/deployments"
REVISIONS = "/apis/apps/v1/namespaces/default/controllerrevisions"
STRATEGIC = {"Content-Type": "application/strategic-merge-patch+json"}
MERGE = {"Content-Type": "application/merge-patch+json"}


@pytest.mark.parametrize(
    ("change", "converted"),
    [
        (lambda o: o["spec"]["template"]["spec"].update(containers={}), "cannot restore slice from map"),
        (lambda o: o["spec"]["template"]["spec"].update(containers="c"), "cannot restore slice from string"),
        (lambda o: o["spec"].update(template="oops"), "cannot restore struct from: string"),
        (lambda o: o["spec"].update(selector=[1]), "cannot restore struct from: slice"),
        (lambda o: o["metadata"].update(labels=["a"]), "cannot restore map from slice"),
        (lambda o: o["spec"].update(replicas="3"), "unrecognized type: int32"),
        (lambda o: o["spec"].update(replicas=True), "unrecognized type: int32"),
        (lambda o: o["spec"].update(replicas=1.5), "cannot convert float64 to int32"),
        (lambda o: o["spec"].update(paused="yes"), "unrecognized type: bool"),
        (lambda o: o["metadata"].update(labels={"app": 1}), "cannot convert int64 to string"),
        (lambda o: o["metadata"].update(labels={"app": 1.5}), "unrecognized type: string"),
        # The converter wraps an int64 too large for an int32 without an error: not its words.
        (lambda o: o["spec"].update(replicas=3_000_000_000), None),
    ],
)
def test_the_converters_words_for_a_value_of_the_wrong_type(change: Any, converted: str | None) -> None:
    obj = deployment()
    change(obj)
    with pytest.raises(known_fields.CannotUnmarshal) as caught:
        unknown_fields_of("apps", "v1", "Deployment")(obj, False)
    assert caught.value.converted == converted


async def test_a_strategic_merge_patch_answers_the_converters_error(hub: Client) -> None:  # noqa: F811
    assert (await hub.post(DEPLOYMENTS, json=deployment())).status == 201
    patch = {"spec": {"template": {"spec": {"containers": {}}}}}
    response = await hub.patch(f"{DEPLOYMENTS}/x", json=patch, headers=STRATEGIC)
    assert response.status == 422
    status = await response.json()
    value = 'Invalid value: "map[spec:map[template:map[spec:map[containers:map[]]]]]": cannot restore slice from map'
    assert status["message"] == f' "" is invalid: patch: {value}'
    assert status["details"] == {"causes": [{"reason": "FieldValueInvalid", "message": value, "field": "patch"}]}

    response = await hub.patch(f"{DEPLOYMENTS}/x", json={"spec": {"replicas": "3"}}, headers=STRATEGIC)
    assert (await response.json())["message"] == (
        ' "" is invalid: patch: Invalid value: "map[spec:map[replicas:3]]": unrecognized type: int32'
    )
    # A merge patch is decoded as JSON, in the JSON decoder's words, as kube does.
    response = await hub.patch(f"{DEPLOYMENTS}/x", json=patch, headers=MERGE)
    assert response.status == 422
    assert (await response.json())["message"].endswith(
        ": json: cannot unmarshal object into Go struct field PodSpec.spec.template.spec.containers of type []v1.Container"
    )


@needs_kubectl
async def test_kubectl_patch_prints_kubes_error(hub_kubeconfig: Path) -> None:  # noqa: F811
    code, _, err = await kubectl(hub_kubeconfig, "create", "deployment", "x", "--image=nginx")
    assert code == 0, err
    code, out, err = await kubectl(
        hub_kubeconfig, "patch", "deploy", "x", "-p", '{"spec":{"template":{"spec":{"containers":{}}}}}'
    )
    assert code != 0, out
    assert (
        'The request is invalid: patch: Invalid value: "map[spec:map[template:map[spec:map[containers:map[]]]]]": '
        "cannot restore slice from map"
    ) in err, err


@pytest.mark.parametrize("headers", [STRATEGIC, MERGE])
async def test_a_controller_revisions_data_changed_is_printed_as_kube_prints_it(
    hub: Client, headers: dict[str, str]  # noqa: F811
) -> None:
    revision = {"apiVersion": "apps/v1", "kind": "ControllerRevision", "metadata": {"name": "r"}, "revision": 1, "data": {"a": 1}}
    assert (await hub.post(REVISIONS, json=revision)).status == 201
    response = await hub.patch(f"{REVISIONS}/r", json={"data": [1]}, headers=headers)
    assert response.status == 422
    status = await response.json()
    # [1] is the bytes 0x5b 0x31 0x5d.
    unknown = (
        'runtime.Unknown{TypeMeta:runtime.TypeMeta{APIVersion:"", Kind:""}, Raw:[]uint8{0x5b, 0x31, 0x5d}, '
        'ContentEncoding:"", ContentType:"application/json"}'
    )
    assert status["message"] == f'ControllerRevision.apps "r" is invalid: data: Invalid value: {unknown}: field is immutable'
    response = await hub.patch(f"{REVISIONS}/r", json={"data": {"b": "<"}}, headers=headers)
    message = (await response.json())["message"]
    # Go's json.Marshal: keys sorted, "<" escaped.
    raw = ", ".join(f"0x{b:x}" for b in b'{"a":1,"b":"\\u003c"}')
    assert re.search(re.escape(f"Raw:[]uint8{{{raw}}}"), message), message
    unchanged = await hub.patch(f"{REVISIONS}/r", json={"metadata": {"labels": {"k": "v"}}}, headers=headers)
    assert unchanged.status == 200


async def test_a_field_left_out_of_retain_keys_is_kubes_bad_request(hub: Client) -> None:  # noqa: F811
    # kube's strategic merge refuses a patch setting a field its `$retainKeys` does not list with
    # ErrBadPatchFormatForRetainKeys, which the apiserver answers as a plain 400.
    obj = deployment()
    obj["spec"]["template"]["spec"]["volumes"] = [{"name": "v", "emptyDir": {}}]
    assert (await hub.post(DEPLOYMENTS, json=obj)).status == 201
    volume = {"$retainKeys": ["name"], "name": "v", "configMap": {"name": "cm"}}
    patch = {"spec": {"template": {"spec": {"volumes": [volume]}}}}
    response = await hub.patch(f"{DEPLOYMENTS}/x", json=patch, headers=STRATEGIC)
    assert response.status == 400
    status = await response.json()
    assert (status["reason"], status["message"]) == ("BadRequest", "invalid patch format of retainKeys")
    assert "'configMap' is in the patch but not in `$retainKeys`" in status["details"]["causes"][0]["message"]
    # The fields the patch sets all listed: the volume source is switched, nothing refused.
    volume["$retainKeys"] = ["name", "configMap"]
    assert (await hub.patch(f"{DEPLOYMENTS}/x", json=patch, headers=STRATEGIC)).status == 200
