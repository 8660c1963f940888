"""A request body that does not decode gets kube-apiserver's 400 in the words of its verb and
content type, over HTTP as a client sees it: a create's or an update's (a subresource's too) is
``the object provided is unrecognized (must be of type <Kind>): ...`` with Go's JSON error (or
go-yaml's) and kube's summary of the body; a patch's is worded by its patch type's decoder."""

from __future__ import annotations

from typing import Any

import pytest
from aiohttp.test_utils import TestClient

from .kinds import deployment
from .test_hostile_requests import alias_bomb

Client = TestClient[Any, Any]
CONFIGMAPS = "/api/v1/namespaces/default/configmaps"
DEPLOYMENTS = "/apis/apps/v1/namespaces/default/deployments"
JSON = {"Content-Type": "application/json"}
YAML = {"Content-Type": "application/yaml"}
UNRECOGNIZED = "the object provided is unrecognized (must be of type {}): "
PARSE = "couldn't get version/kind; json parse error: "
TYPE_META = 'struct { APIVersion string "json:\\"apiVersion,omitempty\\""; Kind string "json:\\"kind,omitempty\\"" }'


async def _refused(answer: Any) -> str:
    status = await answer.json()
    assert (answer.status, status["kind"], status["reason"], status["code"]) == (400, "Status", "BadRequest", 400)
    return str(status["message"])


@pytest.mark.parametrize(
    ("body", "headers", "message"),
    [
        (b"{bad json", JSON, f"{PARSE}invalid character 'b' looking for beginning of object key string ({{bad json)"),
        (b'{"metadata": {"name": "c"}, "data": {"a": 1,}}', JSON,
         f"{PARSE}invalid character '}}' looking for beginning of object key string "
         '({"metadata": {"name": "c"}, "d ...)'),
        (b"xyz", JSON, f"{PARSE}invalid character 'x' looking for beginning of value (78797a)"),
        (b'{"metadata": {"name": "c"}', JSON, f"{PARSE}unexpected end of JSON input ({{\"metadata\": {{\"name\": \"c\"}})"),
        (b"", JSON, f"{PARSE}unexpected end of JSON input (<empty>)"),
        (b"[1, 2]", JSON, f"{PARSE}json: cannot unmarshal array into Go value of type {TYPE_META} (5b312c20325d)"),
        (b'"a string"', JSON, f"{PARSE}json: cannot unmarshal string into Go value of type {TYPE_META} (226120737472696e6722)"),
        (b'{"kind": 7}', JSON, f'{PARSE}json: cannot unmarshal number into Go struct field .kind of type string ({{"kind": 7}})'),
        (b'{"apiVersion": true, "kind": 7}', JSON,
         f'{PARSE}json: cannot unmarshal bool into Go struct field .apiVersion of type string ({{"apiVersion": true, "kind": 7 ...)'),
        (b"metadata: x\n name: c\n", YAML,
         "yaml: line 2: mapping values are not allowed in this context (6d657461646174613a20780a206e616d653a20630a)"),
        (b"metadata: {name: c\n", YAML, "yaml: line 1: did not find expected ',' or '}' (6d657461646174613a207b6e616d653a20630a)"),
        (b"- a\n- b\n", YAML, f"{PARSE}json: cannot unmarshal array into Go value of type {TYPE_META} (2d20610a2d20620a)"),
    ],
    ids=["not-json", "trailing-comma", "not-an-object-start", "cut-short", "empty", "array", "string", "kind-number", "first-of-two",
         "yaml-mapping-in-scalar", "yaml-unclosed-flow", "yaml-sequence"],
)
async def test_a_create_or_update_of_a_body_that_does_not_decode_is_kubes_400(
    api: Client, body: bytes, headers: dict[str, str], message: str
) -> None:
    created = await api.post(CONFIGMAPS, data=body, headers=headers)
    assert await _refused(created) == UNRECOGNIZED.format("ConfigMap") + message
    replaced = await api.put(f"{CONFIGMAPS}/c", data=body, headers=headers)
    assert await _refused(replaced) == UNRECOGNIZED.format("ConfigMap") + message


async def test_a_subresource_update_names_its_own_kind(api: Client) -> None:
    assert (await api.post(DEPLOYMENTS, json=deployment("web"))).status == 201
    status = await api.put(f"{DEPLOYMENTS}/web/status", data=b"{x", headers=JSON)
    assert await _refused(status) == UNRECOGNIZED.format("Deployment") + f"{PARSE}invalid character 'x' looking for beginning of object key string ({{x)"
    scale = await api.put(f"{DEPLOYMENTS}/web/scale", data=b"{x", headers=JSON)
    assert await _refused(scale) == UNRECOGNIZED.format("Scale") + f"{PARSE}invalid character 'x' looking for beginning of object key string ({{x)"


async def test_a_body_whose_strings_are_not_utf8_is_read_as_go_reads_it(api: Client) -> None:
    created = await api.post(CONFIGMAPS, data=b'{"metadata": {"name": "c"}, "data": {"a": "b\xffc"}}', headers=JSON)
    assert created.status == 201, await created.text()
    assert (await created.json())["data"] == {"a": "b\ufffdc"}


async def test_a_yaml_body_of_several_documents_is_read_to_its_first_as_kube_reads_it(api: Client) -> None:
    """kube's YAML serializer (sigs.k8s.io/yaml's YAMLToJSON, go-yaml's Unmarshal) reads the first
    document alone: the others are neither written nor parsed, a broken one or an alias bomb too."""
    second = b"---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: two}\n"
    for tail in (second, second + b"---\na: [\n", b"---\n" + alias_bomb(levels=9)):
        body = b"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: one}\ndata: {a: b}\n" + tail
        created = await api.post(CONFIGMAPS, data=body, headers=YAML)
        assert created.status == 201, await created.text()
        assert (await created.json())["data"] == {"a": "b"}
        assert (await api.delete(f"{CONFIGMAPS}/one")).status == 200
    assert (await api.get(f"{CONFIGMAPS}/two")).status == 404


async def test_an_alias_to_no_anchor_is_go_yamls_unknown_anchor(api: Client) -> None:
    body = b"metadata: {name: c}\ndata: {a: *nowhere}\n"
    created = await api.post(CONFIGMAPS, data=body, headers=YAML)
    assert await _refused(created) == UNRECOGNIZED.format("ConfigMap") + f"yaml: unknown anchor 'nowhere' referenced ({body[:30].hex()} ...)"


MERGE = "application/merge-patch+json"
JSON_PATCH = "application/json-patch+json"
STRATEGIC = "application/strategic-merge-patch+json"
APPLY = "application/apply-patch+yaml"


@pytest.mark.parametrize(
    ("content_type", "query", "body", "message"),
    [
        (MERGE, "", b"{bad", "error decoding patch: invalid character 'b' looking for beginning of object key string"),
        (MERGE, "?fieldValidation=Strict", b'{"a":1', "error decoding patch: unexpected end of JSON input"),
        (MERGE, "?fieldValidation=Ignore", b"{bad", "Invalid JSON Patch"),
        (JSON_PATCH, "", b"[{]", "error decoding patch: invalid character ']' looking for beginning of object key string"),
        (JSON_PATCH, "?fieldValidation=Ignore", b"[{]", "invalid character ']' looking for beginning of object key string"),
        (STRATEGIC, "", b"{bad", "invalid character 'b' looking for beginning of object key string"),
        (STRATEGIC, "?fieldValidation=Ignore", b"nope", "invalid character 'o' in literal null (expecting 'u')"),
        (APPLY, "?fieldManager=m", b"metadata: {name: web\n",
         "error decoding YAML: error converting YAML to JSON: yaml: line 1: did not find expected ',' or '}'"),
        (APPLY, "?fieldManager=m", b"a:\n  b: c\n d: e\n",
         "error decoding YAML: error converting YAML to JSON: yaml: line 2: did not find expected key"),
    ],
    ids=["merge", "merge-strict", "merge-ignore", "json-patch", "json-patch-ignore", "strategic", "strategic-ignore",
         "apply", "apply-parser-line"],
)
async def test_a_patch_that_does_not_decode_is_worded_by_its_patch_type(
    api: Client, content_type: str, query: str, body: bytes, message: str
) -> None:
    assert (await api.post(DEPLOYMENTS, json=deployment("web"))).status == 201
    for path in (f"{DEPLOYMENTS}/web", f"{DEPLOYMENTS}/web/status", f"{DEPLOYMENTS}/web/scale"):
        patched = await api.patch(path + query, data=body, headers={"Content-Type": content_type})
        assert await _refused(patched) == message, path


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (b"{bad", f"{PARSE}invalid character 'b' looking for beginning of object key string"),
        (b" ", f"{PARSE}unexpected end of JSON input"),
        (b'["Background"]', f"{PARSE}json: cannot unmarshal array into Go value of type {TYPE_META}"),
    ],
)
async def test_a_delete_whose_options_do_not_decode_is_a_400_in_the_decoders_words(
    api: Client, body: bytes, message: str
) -> None:
    # kube answers the serializer's error alone (a 400 since kubernetes#133358).
    assert (await api.post(CONFIGMAPS, json={"metadata": {"name": "c"}})).status == 201
    deleted = await api.delete(f"{CONFIGMAPS}/c", data=body, headers=JSON)
    assert await _refused(deleted) == message
    assert (await api.get(f"{CONFIGMAPS}/c")).status == 200


@pytest.mark.parametrize("content_type", [MERGE, JSON_PATCH, STRATEGIC])
async def test_a_malformed_patch_of_a_missing_object_is_its_404_first(api: Client, content_type: str) -> None:
    # kube decodes these patches against the stored object, which it reads first.
    for path in (f"{DEPLOYMENTS}/gone", f"{DEPLOYMENTS}/gone/status", f"{DEPLOYMENTS}/gone/scale"):
        patched = await api.patch(path, data=b"{bad", headers={"Content-Type": content_type})
        status = await patched.json()
        assert (patched.status, status["reason"], status["message"]) == (
            404, "NotFound", 'deployments.apps "gone" not found'
        ), path


async def test_a_malformed_apply_of_a_missing_object_is_refused_as_it_would_create_it(api: Client) -> None:
    applied = await api.patch(f"{DEPLOYMENTS}/gone?fieldManager=m", data=b"a: [", headers={"Content-Type": APPLY})
    assert await _refused(applied) == (
        "error decoding YAML: error converting YAML to JSON: yaml: line 1: did not find expected node content"
    )
