"""A Secret's ``data`` and a ConfigMap's ``binaryData`` are Go ``[]byte``: kube's decoder reads
them as padded standard base64 and refuses the request (400) with Go's error and offset when one
does not decode, before anything is validated. A Secret's ``stringData`` is a map of strings:
a value of another type is the decoder's 400 too, not merged into ``data``.

Before, an undecodable value was a 422 ``Invalid value: "<secret contents redacted>": illegal
base64 data`` (no offset), and ``stringData: {port: 1}`` was stored as ``data: {port: MQ==}``.
"""

from __future__ import annotations

import base64
from typing import Any

import pytest

from controlplane.apis.kube.gobase64 import CorruptInput, std_decode

from .test_kube_validation import Client, hub  # noqa: F401 (fixture)

SECRETS = "/api/v1/namespaces/default/secrets"
CONFIG_MAPS = "/api/v1/namespaces/default/configmaps"


@pytest.mark.parametrize(
    ("text", "offset"),
    [
        ("!!!", 0),
        ("admin", 4),  # a lone symbol after a whole group
        ("YQ", 0),  # a short group without its padding: where the group began
        ("YQ=", 3),  # "==" expected, the input ends
        ("YQ=x", 2),  # Go names the "=" before the byte that should have been one
        ("YQ==x", 4),  # nothing may follow the padding
        ("a===", 1),
        ("APIKEY_BASE64", 6),
        ("é", 0),
    ],
)
def test_undecodable_base64_fails_at_gos_offset(text: str, offset: int) -> None:
    with pytest.raises(CorruptInput, match=f"^illegal base64 data at input byte {offset}$"):
        std_decode(text)


@pytest.mark.parametrize("data", [b"", b"a", b"ab", b"abc", b"abcd", bytes(range(256))])
def test_padded_base64_decodes_and_line_breaks_are_skipped(data: bytes) -> None:
    encoded = base64.b64encode(data).decode()
    assert std_decode(encoded) == data
    assert std_decode("\r\n".join(encoded[i:i + 4] for i in range(0, len(encoded), 4)) + "\n") == data


def secret(**fields: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"}, **fields}


async def test_a_secret_whose_data_does_not_decode_is_kubes_400(hub: Client) -> None:  # noqa: F811
    # The first bad value in document order is named, as Go's decoder saves its first error.
    response = await hub.post(SECRETS, json=secret(data={"ok": "YQ==", "user": "admin", "pw": "!!"}))
    assert response.status == 400
    assert (await response.json())["message"] == (
        'Secret in version "v1" cannot be handled as a Secret: illegal base64 data at input byte 4'
    )
    assert (await hub.get(f"{SECRETS}/s")).status == 404


async def test_a_config_map_whose_binary_data_does_not_decode_is_kubes_400(hub: Client) -> None:  # noqa: F811
    config_map = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "binaryData": {"b": "YQ"}}
    response = await hub.post(CONFIG_MAPS, json=config_map)
    assert response.status == 400
    assert (await response.json())["message"] == (
        'ConfigMap in version "v1" cannot be handled as a ConfigMap: illegal base64 data at input byte 0'
    )


async def test_a_patch_that_leaves_undecodable_data_is_kubes_422_on_the_patch(hub: Client) -> None:  # noqa: F811
    assert (await hub.post(SECRETS, json=secret(data={"a": "YQ=="}))).status == 201
    response = await hub.patch(
        f"{SECRETS}/s", json={"data": {"a": "!!"}}, headers={"Content-Type": "application/merge-patch+json"}
    )
    assert response.status == 422
    status = await response.json()
    assert status["details"]["causes"][0]["field"] == "patch"
    assert status["details"]["causes"][0]["message"].endswith(": illegal base64 data at input byte 0")
    assert (await (await hub.get(f"{SECRETS}/s")).json())["data"] == {"a": "YQ=="}


async def test_string_data_of_another_type_is_refused_not_merged(hub: Client) -> None:  # noqa: F811
    response = await hub.post(SECRETS, json=secret(stringData={"port": 1}))
    assert response.status == 400
    assert (await response.json())["message"] == (
        'Secret in version "v1" cannot be handled as a Secret: json: cannot unmarshal number into Go struct '
        "field Secret.stringData of type string"
    )
    assert (await hub.get(f"{SECRETS}/s")).status == 404


async def test_string_data_is_merged_into_data_a_null_as_empty(hub: Client) -> None:  # noqa: F811
    response = await hub.post(SECRETS, json=secret(data={"a": "YQ==", "b": "Yg=="}, stringData={"b": "x", "c": None}))
    assert response.status == 201, await response.text()
    stored = await (await hub.get(f"{SECRETS}/s")).json()
    assert stored["data"] == {"a": "YQ==", "b": "eA==", "c": ""}
    assert "stringData" not in stored
    assert stored["type"] == "Opaque"


@pytest.mark.parametrize(
    ("kind", "key", "fields", "error"),
    [
        ("kubernetes.io/dockerconfigjson", ".dockerconfigjson", {"data": {".dockerconfigjson": "bm90anNvbg=="}},
         "not JSON: invalid literal, expected 'null': line 1 column 1 (char 0)"),
        ("kubernetes.io/dockercfg", ".dockercfg", {"stringData": {".dockercfg": "[]"}},
         "json: cannot unmarshal array into Go value of type map[string]interface {}"),
    ],
)
async def test_a_registry_secret_whose_config_is_not_a_json_object_is_kubes_422(
    hub: Client, kind: str, key: str, fields: dict[str, Any], error: str  # noqa: F811
) -> None:
    response = await hub.post(SECRETS, json=secret(type=kind, **fields))
    assert response.status == 422
    status = await response.json()
    assert [(c["field"], c["message"]) for c in status["details"]["causes"]] == [
        (f"data[{key}]", f'Invalid value: "<secret contents redacted>": {error}')
    ]
    config = base64.b64encode(b'{"auths": {"r.io": {"auth": "dTpw"}}}\n').decode()
    wrapped = "\n".join(config[i:i + 8] for i in range(0, len(config), 8))  # Go skips line breaks
    response = await hub.post(SECRETS, json=secret(type=kind, data={key: wrapped}))
    assert response.status == 201, await response.text()


async def test_bytes_are_stored_and_served_as_kube_encodes_them(hub: Client) -> None:  # noqa: F811
    """kube keeps bytes, not the text written: base64 wrapped over lines, or with stray bits
    after its last byte, reads back as plain padded base64."""
    assert (await hub.post(SECRETS, json=secret(data={"a": "YW\r\nJj\nZA==\n", "b": "YR=="}))).status == 201
    assert (await (await hub.get(f"{SECRETS}/s")).json())["data"] == {"a": "YWJjZA==", "b": "YQ=="}
    config_map = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "binaryData": {"b": "YW\nJj"}}
    assert (await hub.post(CONFIG_MAPS, json=config_map)).status == 201
    assert (await (await hub.get(f"{CONFIG_MAPS}/c")).json())["binaryData"] == {"b": "YWJj"}


async def test_a_strategic_merge_patch_names_the_converters_error(hub: Client) -> None:  # noqa: F811
    """kube converts a strategic merge patch's result from a map, whose []byte conversion wraps
    the decoder's error; the patch is printed as Go prints a map."""
    assert (await hub.post(SECRETS, json=secret(data={"a": "YQ=="}))).status == 201
    response = await hub.patch(
        f"{SECRETS}/s", json={"data": {"x": "!!"}}, headers={"Content-Type": "application/strategic-merge-patch+json"}
    )
    assert response.status == 422
    status = await response.json()
    assert [(c["field"], c["message"]) for c in status["details"]["causes"]] == [
        ("patch", 'Invalid value: "map[data:map[x:!!]]": error decoding from json: illegal base64 data at input byte 0')
    ]
