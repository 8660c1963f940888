"""Create, update and patch options over HTTP, checked as kube-apiserver's handlers check them
(``ValidateCreateOptions``, ``ValidateUpdateOptions``, ``ValidatePatchOptions``): every problem a
cause of one 422 naming the options' kind, after the body's media type and before the body is
decoded; nothing is written."""

from __future__ import annotations

import json
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from controlplane.apis.kube.requestoptions import field_manager_errors
from controlplane.apiserver.app import create_app
from controlplane.apiserver.auth.rbac.reviews import SUBJECT_ACCESS_REVIEWS
from controlplane.apiserver.auth.serviceaccounts import TOKEN_REQUESTS
from controlplane.apiserver.computed import ComputedEndpoint
from controlplane.apiserver.objects import ObjectStore
from controlplane.apiserver.resources import Registry

from .kinds import widget

WIDGETS = "/apis/test.gpufed.io/v1/namespaces/default/widgets"
APPLY = {"Content-Type": "application/apply-patch+yaml"}
MERGE = {"Content-Type": "application/merge-patch+json"}
Client = TestClient[Any, Any]

LONG = "m" * 129
MANAGER_TOO_LONG = ("FieldValueTooLong", "Too long: may not be more than 128 bytes", "fieldManager")
DRY_RUN_MAYBE = ("FieldValueNotSupported", 'Unsupported value: []string{"Maybe"}: supported values: "All"', "dryRun")
LOWER_STRICT = (
    "FieldValueNotSupported", 'Unsupported value: "strict": supported values: "", "Ignore", "Strict", "Warn"', "fieldValidation"
)


async def _invalid(answer: Any, kind: str) -> list[tuple[str, str, str]]:
    """The causes of kube's 422 for ``kind``, its message checked to be their aggregate."""
    assert answer.status == 422, await answer.text()
    status = await answer.json()
    assert (status["reason"], status["details"]["kind"], status["details"]["group"]) == ("Invalid", kind, "meta.k8s.io")
    assert "name" not in status["details"]
    causes = [(c["reason"], c["message"], c["field"]) for c in status["details"]["causes"]]
    parts = [f"{field}: {message}" for _, message, field in causes]
    joined = parts[0] if len(parts) == 1 else "[" + ", ".join(parts) + "]"
    assert status["message"] == f'{kind}.meta.k8s.io "" is invalid: {joined}'
    return causes


async def _names(api: Client) -> list[str]:
    return [item["metadata"]["name"] for item in (await (await api.get(WIDGETS)).json())["items"]]


async def test_an_apply_without_a_field_manager_is_kubes_422(api: Client) -> None:
    answer = await api.patch(f"{WIDGETS}/a", data=json.dumps(widget("a")), headers=APPLY)
    assert await _invalid(answer, "PatchOptions") == [
        ("FieldValueRequired", "Required value: is required for apply patch", "fieldManager")
    ]
    assert await _names(api) == []


async def test_every_bad_patch_option_is_a_cause_of_one_422(api: Client) -> None:
    query = f"fieldManager={LONG}&dryRun=Maybe&fieldValidation=strict"
    answer = await api.patch(f"{WIDGETS}/a?{query}", data=json.dumps(widget("a")), headers=APPLY)
    assert await _invalid(answer, "PatchOptions") == [MANAGER_TOO_LONG, DRY_RUN_MAYBE, LOWER_STRICT]
    assert await _names(api) == []
    assert (await api.post(WIDGETS, json=widget("a"))).status == 201
    answer = await api.patch(f"{WIDGETS}/a?force=true&dryRun=Maybe", data='{"spec":{"size":3}}', headers=MERGE)
    assert await _invalid(answer, "PatchOptions") == [
        ("FieldValueForbidden", "Forbidden: may not be specified for non-apply patch", "force"), DRY_RUN_MAYBE
    ]
    assert (await (await api.get(f"{WIDGETS}/a")).json())["spec"]["size"] == 1


async def test_patch_options_come_before_the_patch_is_decoded(api: Client) -> None:
    assert (await api.post(WIDGETS, json=widget("a"))).status == 201
    answer = await api.patch(f"{WIDGETS}/a?dryRun=Maybe", data="{not json", headers=MERGE)
    assert await _invalid(answer, "PatchOptions") == [DRY_RUN_MAYBE]


@pytest.mark.parametrize(
    ("query", "causes"),
    [
        ("fieldValidation=strict", [LOWER_STRICT]),
        ("dryRun=All&dryRun=x", [
            ("FieldValueNotSupported", 'Unsupported value: []string{"All", "x"}: supported values: "All"', "dryRun")
        ]),
        (f"fieldManager={LONG}&fieldValidation=strict", [MANAGER_TOO_LONG, LOWER_STRICT]),
        # A control character is refused at its byte offset ("é" is two bytes).
        ("fieldManager=%C3%A9%07", [
            ("FieldValueInvalid", 'Invalid value: "é\\a": invalid character U+0007 (at position 2)', "fieldManager")
        ]),
    ],
)
async def test_bad_create_and_update_options_are_kubes_422(
    api: Client, query: str, causes: list[tuple[str, str, str]]
) -> None:
    assert await _invalid(await api.post(f"{WIDGETS}?{query}", json=widget("a")), "CreateOptions") == causes
    assert await _names(api) == []
    assert (await api.post(WIDGETS, json=widget("b"))).status == 201
    replaced = await api.put(f"{WIDGETS}/b?{query}", json=widget("b", size=5))
    assert await _invalid(replaced, "UpdateOptions") == causes
    assert (await (await api.get(f"{WIDGETS}/b")).json())["spec"]["size"] == 1


async def test_create_options_come_after_the_media_type_and_before_decoding(api: Client) -> None:
    unknown = await api.post(f"{WIDGETS}?dryRun=Maybe", data="{}", headers={"Content-Type": "text/plain"})
    assert (unknown.status, (await unknown.json())["message"]) == (415, (
        "the body of the request was in an unknown format - accepted media types include: "
        "application/json, application/yaml, application/vnd.kubernetes.protobuf"
    ))
    undecodable = await api.post(f"{WIDGETS}?dryRun=Maybe", data="{not json", headers={"Content-Type": "application/json"})
    assert await _invalid(undecodable, "CreateOptions") == [DRY_RUN_MAYBE]


@pytest.mark.parametrize("directive", ["", "Ignore", "Strict", "Warn"])
async def test_kubes_options_are_taken(api: Client, directive: str) -> None:
    manager = "é" * 64  # 128 bytes
    created = await api.post(f"{WIDGETS}?fieldValidation={directive}&fieldManager={manager}&dryRun=All", json=widget("a"))
    assert created.status == 201, await created.text()
    assert await _names(api) == []  # a dry run
    applied = await api.patch(f"{WIDGETS}/a?fieldManager={manager}&fieldValidation={directive}",
                              data=json.dumps(widget("a")), headers=APPLY)
    assert applied.status == 201
    assert [e["manager"] for e in (await applied.json())["metadata"]["managedFields"]] == [manager]


@pytest.mark.parametrize(("resource", "path"), [
    (SUBJECT_ACCESS_REVIEWS, "/apis/authorization.k8s.io/v1/subjectaccessreviews"),
    (TOKEN_REQUESTS, "/api/v1/namespaces/default/serviceaccounts/bot/token"),
])
async def test_a_computed_create_checks_its_create_options_first(
    objects: ObjectStore, api_registry: Registry, resource: Any, path: str
) -> None:
    """kube's create handler checks the CreateOptions of every create, a review's or a
    TokenRequest's too, before its storage sees the request; a dry run is the storage's to honour."""
    seen: list[list[str]] = []

    async def handler(request: web.Request) -> web.StreamResponse:
        seen.append(request.query.getall("dryRun", []))
        return web.json_response({}, status=201)

    app = create_app(objects, api_registry, computed=[ComputedEndpoint(resource, handler)])
    async with TestClient(TestServer(app)) as client:
        answer = await client.post(f"{path}?fieldManager={LONG}&dryRun=Maybe&fieldValidation=strict", json={})
        assert await _invalid(answer, "CreateOptions") == [MANAGER_TOO_LONG, DRY_RUN_MAYBE, LOWER_STRICT]
        assert seen == []
        assert (await client.post(f"{path}?dryRun=All&fieldValidation=Strict", json={})).status == 201
        assert seen == [["All"]]


def test_the_field_manager_is_measured_in_bytes() -> None:
    assert field_manager_errors("é" * 64) == []
    assert [e.message for e in field_manager_errors("é" * 65)] == ["Too long: may not be more than 128 bytes"]
    assert field_manager_errors("with spaces, dots. and ünïcode") == []
    assert [e.message for e in field_manager_errors("a\u200bb\tc")] == [
        'Invalid value: "a\\u200bb\\tc": invalid character U+200B (at position 1)',
        'Invalid value: "a\\u200bb\\tc": invalid character U+0009 (at position 5)',
    ]
