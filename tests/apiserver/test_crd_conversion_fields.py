"""Field ownership of writes to a CRD version its conversion webhook converts, as kube's field
manager keeps it (it runs on the object in the request's version): a create, update, patch or
status or scale write in v2 records a managedFields entry of v2, with v2's field names. A real hub and a real
HTTPS conversion webhook, as in :mod:`tests.apiserver.test_crd_conversion_webhook`."""

from __future__ import annotations

import json
from typing import Any

from tests.apiserver import test_crd_conversion_webhook as conversion
from tests.apiserver.test_admission_webhooks import Api
from tests.apiserver.test_crd_conversion_webhook import CRDS, V1, V2, crontab, served
from tests.controllers.fleet import eventually
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
    # A custom resource's writer owns the objects it adds, as kube records it: spec itself too.
    assert _owners(created) == [("alice", "Update", v2, "", {"f:spec": {".": {}, "f:schedule": {}}})]
    code, patched, _ = await api.call("PATCH", f"{V2}/a?fieldManager=bob", {"spec": {"replicas": 3}}, **MERGE)
    assert code == 200, json.dumps(patched)
    assert _owners(patched)[1:] == [("bob", "Update", v2, "", {"f:spec": {"f:replicas": {}}})]
    changed = {**patched, "spec": {**patched["spec"], "schedule": "2 * * * *"}}
    code, updated, _ = await api.call("PUT", f"{V2}/a?fieldManager=carol", changed)
    assert code == 200, json.dumps(updated)
    # carol took spec.schedule from alice, who keeps the spec she added.
    assert _owners(updated) == [
        ("alice", "Update", v2, "", {"f:spec": {}}),
        ("bob", "Update", v2, "", {"f:spec": {"f:replicas": {}}}),
        ("carol", "Update", v2, "", {"f:spec": {"f:schedule": {}}}),
    ]
    code, written, _ = await api.call("PUT", f"{V2}/a/status?fieldManager=dave", {**updated, "status": {"replicas": 1}})
    assert code == 200, json.dumps(written)
    assert _owners(written)[3:] == [("dave", "Update", v2, "status", {"f:status": {".": {}, "f:replicas": {}}})]
    # Stored as v1, the entries stay v2's.
    code, stored, _ = await api.call("GET", f"{V1}/a")
    assert (stored["spec"], stored["status"]) == ({"cronSpec": "2 * * * *", "replicas": 3}, {"replicas": 1})
    assert _owners(stored) == _owners(written)


async def test_an_apply_compares_the_entries_of_other_versions_in_theirs(api: Api, server: WebhookServer) -> None:
    """v1's ``spec.cronSpec`` is v2's ``spec.schedule``: an apply of one conflicts with the owner of
    the other, and forced takes it, whichever version each was written in (kube's versionConverter)."""
    await served(api, server.client("/convert"))
    v1, v2 = "stable.example.com/v1", "stable.example.com/v2"
    code, created, _ = await api.call("PATCH", f"{V1}/a?fieldManager=alice", crontab("v1", "a", cronSpec="1 * * * *"), **APPLY)
    assert code == 201, json.dumps(created)
    # In v2 (converted), over alice's v1 entry.
    server.received["/convert"].clear()
    code, status, _ = await api.call("PATCH", f"{V2}/a?fieldManager=bob", crontab("v2", "a", schedule="2 * * * *"), **APPLY)
    assert (code, status.get("message")) == (409, 'Apply failed with 1 conflict: conflict with "alice": .spec.cronSpec'), status
    # The object read in v2, then before and after the apply converted to v1 for the comparison: one review.
    assert [(r["request"]["desiredAPIVersion"], len(r["request"]["objects"])) for r in server.received["/convert"]] == [
        (v2, 1), (v1, 2)
    ]
    code, forced, _ = await api.call(
        "PATCH", f"{V2}/a?fieldManager=bob&force=true", crontab("v2", "a", schedule="2 * * * *"), **APPLY
    )
    assert code == 200, json.dumps(forced)
    assert _owners(forced) == [("bob", "Apply", v2, "", {"f:spec": {"f:schedule": {}}})]
    # In v1 (the storage version), over bob's v2 entry.
    code, status, _ = await api.call("PATCH", f"{V1}/a?fieldManager=carol", crontab("v1", "a", cronSpec="3 * * * *"), **APPLY)
    assert (code, status.get("message")) == (409, 'Apply failed with 1 conflict: conflict with "bob": .spec.schedule'), status
    # An update takes it from him too.
    code, patched, _ = await api.call("PATCH", f"{V1}/a?fieldManager=dave", {"spec": {"cronSpec": "4 * * * *"}}, **MERGE)
    assert code == 200, json.dumps(patched)
    assert _owners(patched) == [("dave", "Update", v1, "", {"f:spec": {"f:cronSpec": {}}})]


async def test_a_write_over_entries_that_do_not_convert(api: Api, server: WebhookServer) -> None:
    """The webhook down, a v1 write over a v2 entry cannot compare it: an apply fails with the
    webhook's error, an update is stored without managedFields (kube's field manager drops them)."""
    await served(api, server.client("/convert"))
    code, created, _ = await api.call("POST", f"{V2}?fieldManager=alice", crontab("v2", "b", schedule="1 * * * *"))
    assert code == 201, json.dumps(created)
    await served(api, {"url": "https://127.0.0.1:1/convert", "caBundle": server.ca_bundle})
    code, status, _ = await api.call("PATCH", f"{V1}/b?fieldManager=bob", crontab("v1", "b", cronSpec="2 * * * *"), **APPLY)
    assert (code, status["message"]) == (500, (
        'conversion webhook for stable.example.com/v1, Kind=CronTab failed: Post "https://127.0.0.1:1/convert?timeout=30s": '
        "dial tcp 127.0.0.1:1: connect: connection refused"
    )), status
    code, patched, _ = await api.call("PATCH", f"{V1}/b?fieldManager=carol", {"spec": {"replicas": 2}}, **MERGE)
    assert (code, patched["spec"]) == (200, {"cronSpec": "1 * * * *", "replicas": 2}), json.dumps(patched)
    assert "managedFields" not in patched["metadata"]


async def test_writes_through_v2s_scale_record_their_fields_in_v2(api: Api, server: WebhookServer) -> None:
    """kube's scale handler records a write of the Scale at the version it was asked through
    (its ``parentGV``), the replicas taken from their owners at any version."""
    await served(api, server.client("/convert"))
    v1, v2 = "stable.example.com/v1", "stable.example.com/v2"
    body = {**crontab("v1", "s", cronSpec="1 * * * *"), "spec": {"cronSpec": "1 * * * *", "replicas": 1}}
    code, created, _ = await api.call("POST", f"{V1}?fieldManager=alice", body)
    assert code == 201, json.dumps(created)
    scale = {"apiVersion": "autoscaling/v1", "kind": "Scale", "metadata": {"name": "s", "namespace": "default"}}
    for replicas in (3, 4):  # the second write keeps one entry
        code, scaled, _ = await api.call("PUT", f"{V2}/s/scale?fieldManager=erin", {**scale, "spec": {"replicas": replicas}})
        assert (code, scaled["spec"]) == (200, {"replicas": replicas}), json.dumps(scaled)
    code, stored, _ = await api.call("GET", f"{V1}/s")
    # kube's scale handler gives a new owner of the replicas no time: its entry sorts first.
    assert _owners(stored) == [
        ("erin", "Update", v2, "scale", {"f:spec": {"f:replicas": {}}}),
        ("alice", "Update", v1, "", {"f:spec": {".": {}, "f:cronSpec": {}}}),
    ]
    assert "time" not in stored["metadata"]["managedFields"][0]
    code, patched, _ = await api.call("PATCH", f"{V2}/s/scale?fieldManager=frank", {"spec": {"replicas": 5}}, **MERGE)
    assert code == 200, json.dumps(patched)
    code, applied, _ = await api.call(
        "PATCH", f"{V2}/s/scale?fieldManager=gina&force=true", {**scale, "spec": {"replicas": 6}}, **APPLY
    )
    assert code == 200, json.dumps(applied)
    code, stored, _ = await api.call("GET", f"{V1}/s")
    assert (stored["spec"], _owners(stored)) == ({"cronSpec": "1 * * * *", "replicas": 6}, [
        ("gina", "Apply", v2, "scale", {"f:spec": {"f:replicas": {}}}),
        ("alice", "Update", v1, "", {"f:spec": {".": {}, "f:cronSpec": {}}}),
    ]), json.dumps(stored)
    # A version without a scale subresource serves none, whatever the storage version has.
    for _ in range(5):  # client-go's RetryOnConflict: the hub's CRD controller writes the CRD's status meanwhile
        code, crd, _ = await api.call("GET", f"{CRDS}/crontabs.stable.example.com")
        assert code == 200, json.dumps(crd)
        del crd["spec"]["versions"][1]["subresources"]["scale"]
        code, changed, _ = await api.call("PUT", f"{CRDS}/crontabs.stable.example.com", crd)
        if code != 409:
            break
    assert code == 200, json.dumps(changed)

    async def unserved() -> bool:
        code, _, _ = await api.call("GET", f"{V2}/s/scale")
        return code == 404

    await eventually(unserved, what="v2's scale subresource gone")
    code, status, _ = await api.call("PUT", f"{V2}/s/scale", {**scale, "spec": {"replicas": 7}})
    assert (code, status["reason"], status["message"]) == (404, "NotFound", "the server could not find the requested resource")
