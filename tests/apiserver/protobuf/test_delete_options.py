"""A delete's or a deletecollection's DeleteOptions sent as protobuf (client-go's typed clients
do) behave as the same options sent as JSON; a body that does not decode is kube's 400."""

from __future__ import annotations

from typing import Any

import pytest
from aiohttp.test_utils import TestClient

from controlplane.apiserver.protobuf import MEDIA_TYPE, decode_delete_options

from .builders import envelope, msg, text, vint

CM_PATH = "/api/v1/namespaces/default/configmaps"
PROTOBUF = {"Content-Type": MEDIA_TYPE}


def delete_options(*parts: bytes, api_version: str = "v1") -> bytes:
    """DeleteOptions as client-go writes them: only the fields that are set."""
    return envelope(api_version, "DeleteOptions", b"".join(parts))


@pytest.fixture
def api(collected_hub: TestClient[Any, Any]) -> TestClient[Any, Any]:
    return collected_hub


async def _configmap(api: TestClient[Any, Any], name: str, labels: dict[str, str] | None = None) -> dict[str, Any]:
    answer = await api.post(CM_PATH, json={"apiVersion": "v1", "kind": "ConfigMap",
                                           "metadata": {"name": name, "labels": labels or {}}})
    assert answer.status == 201, await answer.text()
    created: dict[str, Any] = await answer.json()
    return created


def test_every_field_decodes_to_the_json_form() -> None:
    body = delete_options(
        vint(1, 30), msg(2, text(1, "u-1"), text(2, "")), vint(3, 0), text(4, "Background"), text(5, "All"),
        api_version="apps/v1",
    )
    assert decode_delete_options(body) == {
        "apiVersion": "apps/v1", "kind": "DeleteOptions", "gracePeriodSeconds": 30,
        # pointers kept when zero, as Go's JSON would write them
        "preconditions": {"uid": "u-1", "resourceVersion": ""}, "orphanDependents": False,
        "propagationPolicy": "Background", "dryRun": ["All"],
    }


def test_a_field_this_server_does_not_know_is_skipped_as_gos_decoder_does() -> None:
    assert decode_delete_options(delete_options(text(4, "Orphan"), text(42, "from a newer client"))) == {
        "apiVersion": "v1", "kind": "DeleteOptions", "propagationPolicy": "Orphan",
    }


async def test_orphan_as_protobuf_is_the_json_orphan(api: TestClient[Any, Any]) -> None:
    await _configmap(api, "by-json")
    await _configmap(api, "by-proto")
    by_json = await api.delete(f"{CM_PATH}/by-json", json={"apiVersion": "v1", "kind": "DeleteOptions",
                                                           "propagationPolicy": "Orphan"})
    by_proto = await api.delete(f"{CM_PATH}/by-proto", data=delete_options(text(4, "Orphan")), headers=PROTOBUF)
    assert (by_json.status, by_proto.status) == (200, 200), await by_proto.text()
    assert (await by_json.json())["metadata"]["finalizers"] == ["orphan"]
    assert (await by_proto.json())["metadata"]["finalizers"] == ["orphan"]


async def test_dry_run_as_protobuf_keeps_the_object(api: TestClient[Any, Any]) -> None:
    await _configmap(api, "kept")
    answer = await api.delete(f"{CM_PATH}/kept", data=delete_options(text(5, "All")), headers=PROTOBUF)
    assert answer.status == 200, await answer.text()
    assert (await api.get(f"{CM_PATH}/kept")).status == 200


async def test_deletecollection_dry_run_as_protobuf_deletes_nothing(api: TestClient[Any, Any]) -> None:
    for name in ("a", "b"):
        await _configmap(api, name, {"team": "ml"})
    answer = await api.delete(f"{CM_PATH}?labelSelector=team%3Dml", data=delete_options(text(5, "All")), headers=PROTOBUF)
    assert answer.status == 200, await answer.text()
    assert sorted(item["metadata"]["name"] for item in (await answer.json())["items"]) == ["a", "b"]
    assert len((await (await api.get(f"{CM_PATH}?labelSelector=team%3Dml")).json())["items"]) == 2


async def test_a_uid_precondition_that_fails_is_kubes_409(api: TestClient[Any, Any]) -> None:
    created = await _configmap(api, "guarded")
    answer = await api.delete(f"{CM_PATH}/guarded", data=delete_options(msg(2, text(1, "not-the-uid"))), headers=PROTOBUF)
    assert answer.status == 409
    status = await answer.json()
    assert status["reason"] == "Conflict"
    assert "not-the-uid" in status["message"] and created["metadata"]["uid"] in status["message"]
    assert (await api.get(f"{CM_PATH}/guarded")).status == 200
    answer = await api.delete(
        f"{CM_PATH}/guarded", data=delete_options(msg(2, text(1, created["metadata"]["uid"]))), headers=PROTOBUF,
    )
    assert answer.status == 200


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (b'{"kind": "DeleteOptions"}', "provided data does not appear to be a protobuf message, expected prefix [107 56 115 0]"),
        (b"k8s\x00", "empty body"),
        (b"k8s\x00\x0a\x10\x0a", "the protobuf envelope of the request body is malformed: "),
        (delete_options(b"\x22\x09Orp"), "the protobuf body of the DeleteOptions is malformed: "),
        (envelope("v1", "Pod", b""), "decoded object cannot be converted to DeleteOptions: the body is a Pod (v1)"),
    ],
    ids=["no-envelope", "envelope-only", "truncated-envelope", "truncated-options", "not-delete-options"],
)
async def test_a_body_that_does_not_decode_is_kubes_400(api: TestClient[Any, Any], body: bytes, message: str) -> None:
    await _configmap(api, "still-here")
    for path in (f"{CM_PATH}/still-here", CM_PATH):
        answer = await api.delete(path, data=body, headers=PROTOBUF)
        assert answer.status == 400, await answer.text()
        status = await answer.json()
        assert (status["reason"], status["code"]) == ("BadRequest", 400)
        assert status["message"].startswith(message), status["message"]
    assert (await api.get(f"{CM_PATH}/still-here")).status == 200
