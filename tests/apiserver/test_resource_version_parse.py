"""``?resourceVersion`` that kube's versioner cannot read (Go's ``strconv.ParseUint`` in base 10)
is a 400 in kube's words on a get, a list (from the watch cache or the store) and a watch, where
kube's watch cache answers the same words as a 500. Python's ``int`` reads more than Go does (a
sign, underscores, spaces, non-ASCII digits): none of that is a resource version."""

from __future__ import annotations

from typing import Any

import pytest
from aiohttp.test_utils import TestClient

CONFIGMAPS = "/api/v1/namespaces/default/configmaps"
SYNTAX = "invalid syntax"


@pytest.mark.parametrize(("value", "why"), [
    ("abc", SYNTAX),
    ("-1", SYNTAX),
    ("+1", SYNTAX),
    ("1_0", SYNTAX),
    (" 1", SYNTAX),
    ("\uff11", SYNTAX),  # a fullwidth 1: a digit to Python, not to Go
    ("18446744073709551616", "value out of range"),  # 2^64
])
@pytest.mark.parametrize("request_of", [
    pytest.param({"path": f"{CONFIGMAPS}/cm"}, id="get"),
    pytest.param({"path": CONFIGMAPS}, id="list"),
    pytest.param({"path": CONFIGMAPS, "limit": "1"}, id="list page"),
    pytest.param({"path": CONFIGMAPS, "watch": "1"}, id="watch"),
])
async def test_an_unreadable_resource_version_is_kubes_400(
    api: TestClient[Any, Any], value: str, why: str, request_of: dict[str, str]
) -> None:
    created = await api.post(CONFIGMAPS, json={"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm"}})
    assert created.status == 201
    params = {k: v for k, v in request_of.items() if k != "path"} | {"resourceVersion": value}
    response = await api.get(request_of["path"], params=params)
    status = await response.json()
    assert (response.status, status["kind"], status["reason"]) == (400, "Status", "BadRequest"), status
    assert status["message"] == f'resourceVersion: Invalid value: "{value}": strconv.ParseUint: parsing "{value}": {why}'
