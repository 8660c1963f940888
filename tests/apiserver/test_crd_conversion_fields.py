"""Field ownership of writes to a CRD version its conversion webhook converts, as kube's field
manager keeps it (it runs on the object in the request's version): a create, update, patch or
status write in v2 records a managedFields entry of v2, with v2's field names. A real hub and a real
HTTPS conversion webhook, as in :mod:`tests.apiserver.test_crd_conversion_webhook`."""

from __future__ import annotations

import json
from typing import Any

from tests.apiserver import test_crd_conversion_webhook as conversion
from tests.apiserver.test_admission_webhooks import Api
from tests.apiserver.test_crd_conversion_webhook import V1, V2, crontab, served
from tests.webhookserver import WebhookServer

hub, api, server = conversion.hub, conversion.api, conversion.server
MERGE = {"Content-Type": "application/merge-patch+json"}
APPLY = {"Content-Type": "application/apply-patch+yaml"}


def _owners(obj: dict[str, Any]) -> list[tuple[str, str, str, str, Any]]:
    return [(e["manager"], e["operation"], e["apiVersion"], e.get("subresource", ""), e.get("fieldsV1"))
            for e in obj["metadata"].get("managedFields") or []]


async def test_writes_in_v2_record_their_fields_in_v2(api: Api, server: WebhookServer) -> None:
    await served(api, server.client("/convert"))
    code, created, _ = await api.call("POST", f"{V2}?fieldManager=alice", crontab("v2", "a", schedule="1 * * * *"))
    assert code == 201, json.dumps(created)
    v2 = "stable.example.com/v2"
    assert _owners(created) == [("alice", "Update", v2, "", {"f:spec": {"f:schedule": {}}})]
    code, patched, _ = await api.call("PATCH", f"{V2}/a?fieldManager=bob", {"spec": {"replicas": 3}}, **MERGE)
    assert code == 200, json.dumps(patched)
    assert _owners(patched)[1:] == [("bob", "Update", v2, "", {"f:spec": {"f:replicas": {}}})]
    changed = {**patched, "spec": {**patched["spec"], "schedule": "2 * * * *"}}
    code, updated, _ = await api.call("PUT", f"{V2}/a?fieldManager=carol", changed)
    assert code == 200, json.dumps(updated)
    # carol took spec.schedule from alice, whose entry is then empty and goes.
    assert _owners(updated) == [
        ("bob", "Update", v2, "", {"f:spec": {"f:replicas": {}}}),
        ("carol", "Update", v2, "", {"f:spec": {"f:schedule": {}}}),
    ]
    code, written, _ = await api.call("PUT", f"{V2}/a/status?fieldManager=dave", {**updated, "status": {"replicas": 1}})
    assert code == 200, json.dumps(written)
    assert _owners(written)[2:] == [("dave", "Update", v2, "status", {"f:status": {"f:replicas": {}}})]
    # Stored as v1, the entries stay v2's.
    code, stored, _ = await api.call("GET", f"{V1}/a")
    assert (stored["spec"], stored["status"]) == ({"cronSpec": "2 * * * *", "replicas": 3}, {"replicas": 1})
    assert _owners(stored) == _owners(written)
