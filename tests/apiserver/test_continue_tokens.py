"""A malformed continue token is kube's 400 ``invalid continue token: continue key is not valid...``
in the words of the step that failed (Go's base64 and JSON errors included), over HTTP as a
client sees it; a token from a page still resumes the list, and a negative revision (kube's
"the latest") lists the current state."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest
from aiohttp.test_utils import TestClient

from controlplane.apiserver import errors
from controlplane.apiserver.objects import ObjectStore, continuation

from .kinds import deployment

Client = TestClient[Any, Any]
DEPLOYMENTS = "/apis/apps/v1/namespaces/default/deployments"
NOT_VALID = "invalid continue token: continue key is not valid"
INCONSISTENT = (
    "The provided continue parameter is too old to display a consistent list result. You can start a new list "
    "without the continue parameter, or use the continue token in this response to retrieve the remainder of "
    "the results. Continuing with the provided token results in an inconsistent list - objects that were "
    "created, modified, or deleted between the time the first chunk was returned and now may show up in the list."
)


def _token(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


MALFORMED = [
    ("abc=", f"{NOT_VALID}: illegal base64 data at input byte 3"),
    ("abcde", f"{NOT_VALID}: illegal base64 data at input byte 4"),
    # Not JSON: Go's syntax errors, as encoding/json words them.
    ("not-a-token", f"{NOT_VALID}: invalid character '\\u009e' looking for beginning of value"),
    (_token(b'{"v" 1}'), f"{NOT_VALID}: invalid character '1' after object key"),
    (_token(b'{"v":"meta.k8s.io/v1","rv":5'), f"{NOT_VALID}: unexpected end of JSON input"),
    (_token(b'{"v":"meta.k8s.io/v1","rv":5,}'), f"{NOT_VALID}: invalid character '}}' looking for beginning of object key string"),
    (_token(b'{"rv":5 "start":"a"}'), f"{NOT_VALID}: invalid character '\"' after object key:value pair"),
    (_token(b'{"rv":1.}'), f"{NOT_VALID}: invalid character '}}' after decimal point in numeric literal"),
    (_token(b'{"v":tru'), f"{NOT_VALID}: invalid character ' ' in literal true (expecting 'e')"),
    (_token(b'{"v":"\\x"}'), f"{NOT_VALID}: invalid character 'x' in string escape code"),
    (_token(b'{"v":"\x01"}'), f"{NOT_VALID}: invalid character '\\x01' in string literal"),
    (_token(b"[1 2]"), f"{NOT_VALID}: invalid character '2' after array element"),
    (_token(b"{} {}"), f"{NOT_VALID}: invalid character '{{' after top-level value"),
    (_token(b"NaN"), f"{NOT_VALID}: invalid character 'N' looking for beginning of value"),
    # Valid JSON deeper than Python's recursion: only the token's fields' kinds matter.
    (_token(b'{"start":' + b"[" * 2000 + b"]" * 2000 + b"}"),
     f"{NOT_VALID}: json: cannot unmarshal array into Go struct field continueToken.start of type string"),
    (_token(b"[1]"), f"{NOT_VALID}: json: cannot unmarshal array into Go value of type storage.continueToken"),
    (_token(b'{"v":"meta.k8s.io/v1","rv":"5","start":"a"}'),
     f"{NOT_VALID}: json: cannot unmarshal string into Go struct field continueToken.rv of type int64"),
    (_token(b'{"v":"meta.k8s.io/v1","rv":1.5,"start":"a"}'),
     f"{NOT_VALID}: json: cannot unmarshal number 1.5 into Go struct field continueToken.rv of type int64"),
    (_token(b'{"v":"meta.k8s.io/v1","rv":99999999999999999999,"start":"a"}'),
     f"{NOT_VALID}: json: cannot unmarshal number 99999999999999999999 into Go struct field continueToken.rv of type int64"),
    (_token(b'{"v":"meta.k8s.io/v1","rv":0,"start":"a"}'),
     f"{NOT_VALID}: incorrect encoded start resourceVersion (version meta.k8s.io/v1)"),
    (_token(b'{"v":"meta.k8s.io/v1","rv":5,"start":""}'), f"{NOT_VALID}: encoded start key empty (version meta.k8s.io/v1)"),
    (_token(b'{"v":"meta.k8s.io/v1","rv":5,"start":"../kube-system/x"}'), f"{NOT_VALID}: ../kube-system/x"),
    (_token(b'{"v":"meta.k8s.io/v2","rv":5,"start":"a"}'),
     f"{NOT_VALID}: server does not recognize this encoded version meta.k8s.io/v2"),
]


def test_json_nested_deeper_than_go_allows_is_gos_syntax_error() -> None:
    # Longer than a request line may be: only the decoder sees it.
    with pytest.raises(errors.BadRequest) as caught:
        continuation.decode(_token(b"[" * 10001), "/registry/deployments/")
    assert caught.value.message == f"{NOT_VALID}: invalid character '[' exceeded max depth"


@pytest.mark.parametrize(("token", "message"), MALFORMED)
async def test_a_malformed_continue_token_is_kubes_400(api: Client, token: str, message: str) -> None:
    answer = await api.get(DEPLOYMENTS, params={"limit": "1", "continue": token})
    assert answer.status == 400
    status = await answer.json()
    assert (status["reason"], status["message"]) == ("BadRequest", message)


async def test_a_token_resumes_and_a_resource_version_beside_it_is_refused(api: Client) -> None:
    for name in ("a", "b", "c"):
        assert (await api.post(DEPLOYMENTS, json=deployment(name))).status == 201
    first = await (await api.get(DEPLOYMENTS, params={"limit": "1"})).json()
    token = first["metadata"]["continue"]
    rest = await (await api.get(DEPLOYMENTS, params={"continue": token, "resourceVersion": "0"})).json()
    assert [item["metadata"]["name"] for item in rest["items"]] == ["b", "c"]
    refused = await api.get(DEPLOYMENTS, params={"continue": token, "resourceVersion": first["metadata"]["resourceVersion"]})
    assert refused.status == 400
    assert (await refused.json())["message"] == "specifying resource version is not allowed when using continue"
    latest = _token(b'{"v":"meta.k8s.io/v1","rv":-1,"start":"a"}')
    assert (await api.post(DEPLOYMENTS, json=deployment("d"))).status == 201
    now = await (await api.get(DEPLOYMENTS, params={"continue": latest})).json()
    assert [item["metadata"]["name"] for item in now["items"]] == ["b", "c", "d"]


async def test_a_compacted_token_is_kubes_410_with_a_token_that_goes_on_at_the_latest(
    api: Client, objects: ObjectStore
) -> None:
    """kube's store answers a token whose revision is compacted away with 410 Expired, its
    ``inconsistentContinue`` message and, in the Status's ``metadata.continue``, a token that
    resumes after the same key at the latest revision (so a client may read the rest)."""
    for name in ("a", "b", "c"):
        assert (await api.post(DEPLOYMENTS, json=deployment(name))).status == 201
    first = await (await api.get(DEPLOYMENTS, params={"limit": "1"})).json()
    assert (await api.post(DEPLOYMENTS, json=deployment("d"))).status == 201
    await objects.store.compact(await objects.store.current_revision())
    expired = await api.get(DEPLOYMENTS, params={"limit": "1", "continue": first["metadata"]["continue"]})
    assert expired.status == 410
    status = await expired.json()
    assert (status["reason"], status["message"]) == ("Expired", INCONSISTENT)
    token = status["metadata"]["continue"]
    assert json.loads(base64.urlsafe_b64decode(token + "==")) == {"v": "meta.k8s.io/v1", "rv": -1, "start": "a"}
    rest = await (await api.get(DEPLOYMENTS, params={"continue": token})).json()
    assert [item["metadata"]["name"] for item in rest["items"]] == ["b", "c", "d"]
