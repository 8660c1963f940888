"""A large write to a CRD version its conversion webhook converts runs its pure steps in a worker
thread, as any large write does (:mod:`tests.apiserver.test_large_writes`): the merge of a patch made
in the request's version, the copy and the checks of the object there, its managedFields record. A
real hub and a real HTTPS conversion webhook, as in :mod:`tests.apiserver.test_crd_conversion_webhook`."""

from __future__ import annotations

import json
from typing import Any

import pytest

from controlplane.apiserver.crd import converted
from controlplane.apiserver.offloading import INLINE_WRITE_BYTES
from tests.apiserver import test_crd_conversion_webhook as conversion
from tests.apiserver.test_admission_webhooks import Api
from tests.apiserver.test_crd_conversion_webhook import V1, V2, crontab, served
from tests.apiserver.test_large_writes import _watch
from tests.webhookserver import WebhookServer

hub, api, server = conversion.hub, conversion.api, conversion.server
MERGE = {"Content-Type": "application/merge-patch+json"}
STEPS = ("apply_patch", "checked_body", "checked_in_version", "record_update")


async def test_a_large_patch_in_a_converted_version_is_computed_off_the_loop(
    api: Api, server: WebhookServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    await served(api, server.client("/convert"))
    code, created, _ = await api.call(
        "POST", f"{V2}?fieldManager=alice", crontab("v2", "a", schedule="1 * * * *")
    )
    assert code == 201, json.dumps(created)
    seen: dict[str, list[bool]] = {step: _watch(monkeypatch, step, converted) for step in STEPS}
    big = "x" * INLINE_WRITE_BYTES

    code, patched, _ = await api.call(
        "PATCH", f"{V2}/a?fieldManager=bob", {"metadata": {"annotations": {"big": big}}}, **MERGE
    )

    assert code == 200, json.dumps(patched)[:500]
    assert (patched["spec"], patched["metadata"]["annotations"]["big"]) == ({"schedule": "1 * * * *"}, big)
    assert seen == {step: [True] for step in STEPS}
    code, stored, _ = await api.call("GET", f"{V1}/a")
    assert (stored["spec"], stored["metadata"]["annotations"]["big"]) == ({"cronSpec": "1 * * * *"}, big)

    # A small patch of the large object too; a small patch of a small object inline.
    code, patched, _ = await api.call("PATCH", f"{V2}/a", {"spec": {"replicas": 2}}, **MERGE)
    assert code == 200, json.dumps(patched)[:500]
    code, small, _ = await api.call("POST", V2, crontab("v2", "b", schedule="2 * * * *"))
    assert code == 201, json.dumps(small)
    code, patched, _ = await api.call("PATCH", f"{V2}/b?fieldManager=bob", {"spec": {"replicas": 3}}, **MERGE)
    assert code == 200, json.dumps(patched)
    # The large object's patches, then b's create and patch (a create merges no patch).
    expected = {step: [True, True, False, False] for step in STEPS}
    expected["apply_patch"] = [True, True, False]
    assert seen == expected


async def test_a_large_create_and_update_in_a_converted_version_are_checked_off_the_loop(
    api: Api, server: WebhookServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    await served(api, server.client("/convert"))
    seen: dict[str, list[bool]] = {step: _watch(monkeypatch, step, converted) for step in STEPS[1:]}
    body: dict[str, Any] = crontab("v2", "a", schedule="1 * * * *")
    body["metadata"]["annotations"] = {"big": "x" * INLINE_WRITE_BYTES}

    code, created, _ = await api.call("POST", f"{V2}?fieldManager=alice", body)
    assert code == 201, json.dumps(created)[:500]
    created["spec"]["schedule"] = "2 * * * *"
    code, updated, _ = await api.call("PUT", f"{V2}/a?fieldManager=alice", created)

    assert code == 200, json.dumps(updated)[:500]
    assert updated["spec"] == {"schedule": "2 * * * *"}
    assert seen == {step: [True, True] for step in STEPS[1:]}
