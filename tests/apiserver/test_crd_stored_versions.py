"""Objects left in an older storage version: a CRD's ``storage: true`` moves from v1 to v2 after
CronTabs were written as v1. As kube, every read converts an object from the apiVersion it is
stored as to the one asked for, the storage version included (a real hub and a real HTTPS
conversion webhook, as in :mod:`tests.apiserver.test_crd_conversion_webhook`); a write stores it as
v2, and ``status.storedVersions`` lists both versions. With ``conversion: None`` an object stored as
v1 read as v2 only has its apiVersion changed (kube's nop converter)."""

from __future__ import annotations

import copy
import json
from typing import Any

from tests.apiserver import test_admission_webhooks as admission_webhooks
from tests.apiserver.test_admission_webhooks import Api
from tests.apiserver.test_crd_conversion_webhook import V1, V2, crd, crontab, served, watching
from tests.controllers.fleet import eventually
from tests.webhookserver import WebhookServer

CRD = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/crontabs.stable.example.com"
APPLIED_V1 = "/apis/stable.example.com/v1/namespaces/applied/crontabs"
APPLIED_V2 = "/apis/stable.example.com/v2/namespaces/applied/crontabs"
GROUP = "stable.example.com"
hub, api, server = admission_webhooks.hub, admission_webhooks.api, admission_webhooks.server


async def _store_as_v2(api: Api) -> None:
    """Move the CRD's storage version to v2 and wait until the hub serves v1 from it."""
    code, current, _ = await api.call("GET", CRD)
    assert code == 200, current
    changed = copy.deepcopy(current)
    for version in changed["spec"]["versions"]:
        version["storage"] = version["name"] == "v2"
    code, updated, _ = await api.call("PUT", CRD, changed)
    assert code == 200, updated

    async def stored_as_v2() -> bool:
        rt = api.hub.objects.registry.get("stable.example.com", "v1", "crontabs") if api.hub.objects else None
        return rt is not None and rt.stored_in_version == "stable.example.com/v2"

    await eventually(stored_as_v2, what="the hub to store crontabs as v2")

    async def controllers_listed_v2() -> bool:
        # The leader's controllers read crontabs as v2 too (their list converts the v1 objects):
        # the reviews counted below are the requests' own once they have.
        context = api.hub.controllers.context if api.hub.controllers is not None else None
        informer = context.workload_informer(f"{GROUP}/v2", "CronTab") if context is not None else None
        return informer is not None and informer.rt.version == "v2" and informer.synced.is_set()

    v2 = api.hub.objects.registry.get(GROUP, "v2", "crontabs") if api.hub.objects else None
    if v2 is not None and v2.custom is not None and v2.custom.conversion_webhook is not None:
        await eventually(controllers_listed_v2, what="the controllers to list crontabs as v2")


async def _stored_versions(api: Api) -> list[str]:
    code, current, _ = await api.call("GET", CRD)
    assert code == 200, current
    return list(current["status"]["storedVersions"])


def _own(reviews: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The conversion reviews of the test's requests, which read the default namespace: a list
    the hub's controllers make on their own (an informer relisting after its watch ended, across
    every namespace) also converts d and e, kept in the namespace ``applied`` for that reason."""
    return [r for r in reviews if all(o["metadata"].get("namespace") != "applied" for o in r["request"]["objects"])]


def _specs(items: list[dict[str, Any]]) -> list[tuple[str, str, dict[str, Any]]]:
    return [(o["metadata"]["name"], o["apiVersion"], o["spec"]) for o in items]


async def test_objects_stored_in_an_older_version_are_converted_on_every_read(api: Api, server: WebhookServer) -> None:
    await served(api, server.client("/convert"))
    for name in ("a", "c"):
        code, created, _ = await api.call("POST", V1, crontab("v1", name, cronSpec="1 * * * *"))
        assert code == 201, created
    # d, in a namespace of its own (out of the lists below), is applied to once stored as v1.
    code, created, _ = await api.call("POST", "/api/v1/namespaces", {"metadata": {"name": "applied"}})
    assert code == 201, created
    for name in ("d", "e"):
        code, created, _ = await api.call("POST", APPLIED_V1, crontab("v1", name, cronSpec="4 * * * *"))
        assert code == 201, created
    await _store_as_v2(api)

    async def both_stored() -> bool:
        return await _stored_versions(api) == ["v1", "v2"]

    await eventually(both_stored, what="storedVersions to list v1 and v2")
    code, created, _ = await api.call("POST", V2, crontab("v2", "b", schedule="2 * * * *"))
    assert code == 201, created
    assert (created["apiVersion"], created["spec"]) == ("stable.example.com/v2", {"schedule": "2 * * * *"})
    server.received["/convert"].clear()

    # a, stored as v1, read as v2 (the storage version now) goes through the webhook.
    code, got, _ = await api.call("GET", f"{V2}/a")
    assert code == 200, got
    assert (got["apiVersion"], got["spec"]) == ("stable.example.com/v2", {"schedule": "1 * * * *"})
    [review] = _own(server.received["/convert"])
    assert review["request"]["desiredAPIVersion"] == "stable.example.com/v2"
    assert [(o["apiVersion"], o["metadata"]["name"]) for o in review["request"]["objects"]] == [
        ("stable.example.com/v1", "a")
    ]
    # Read as v1, it is already in v1: nothing is sent; b (stored as v2) is converted to v1.
    code, got, _ = await api.call("GET", f"{V1}/a")
    assert (code, got["apiVersion"], got["spec"]) == (200, "stable.example.com/v1", {"cronSpec": "1 * * * *"})
    assert "converted-to" not in (got["metadata"].get("labels") or {})
    code, got, _ = await api.call("GET", f"{V1}/b")
    assert (code, got["apiVersion"], got["spec"]) == (200, "stable.example.com/v1", {"cronSpec": "2 * * * *"})
    assert len(_own(server.received["/convert"])) == 2

    # A list of both: each converted from the version it is stored as.
    server.received["/convert"].clear()
    code, listed, _ = await api.call("GET", V2)
    assert code == 200, listed
    assert _specs(listed["items"]) == [
        ("a", "stable.example.com/v2", {"schedule": "1 * * * *"}), ("b", "stable.example.com/v2", {"schedule": "2 * * * *"}),
        ("c", "stable.example.com/v2", {"schedule": "1 * * * *"}),
    ]
    code, listed, _ = await api.call("GET", V1)
    assert code == 200, listed
    assert _specs(listed["items"]) == [
        ("a", "stable.example.com/v1", {"cronSpec": "1 * * * *"}), ("b", "stable.example.com/v1", {"cronSpec": "2 * * * *"}),
        ("c", "stable.example.com/v1", {"cronSpec": "1 * * * *"}),
    ]
    # One review per list, of the objects not stored in the version asked for (kube's batching).
    assert [[o["metadata"]["name"] for o in r["request"]["objects"]] for r in _own(server.received["/convert"])] == [
        ["a", "c"], ["b"]
    ]

    # A watch in v2 from the start: both added in v2.
    async with watching(api, f"{V2}?watch=true&timeoutSeconds=20") as lines:
        events = [json.loads(await lines.readline()) for _ in range(3)]
    assert sorted((e["type"], e["object"]["metadata"]["name"], e["object"]["spec"]["schedule"]) for e in events) == [
        ("ADDED", "a", "1 * * * *"), ("ADDED", "b", "2 * * * *"), ("ADDED", "c", "1 * * * *")
    ]
    async with watching(api, f"{V1}?watch=true&timeoutSeconds=20") as lines:
        events = [json.loads(await lines.readline()) for _ in range(3)]
    assert sorted((e["object"]["metadata"]["name"], e["object"]["apiVersion"], e["object"]["spec"]["cronSpec"]) for e in events) == [
        ("a", "stable.example.com/v1", "1 * * * *"), ("b", "stable.example.com/v1", "2 * * * *"),
        ("c", "stable.example.com/v1", "1 * * * *"),
    ]

    # An update through v2 starts from a converted to v2, and stores it as v2.
    code, got, _ = await api.call("GET", f"{V2}/a")
    got["spec"]["replicas"] = 3
    code, updated, _ = await api.call("PUT", f"{V2}/a", got)
    assert code == 200, updated
    assert updated["spec"] == {"schedule": "1 * * * *", "replicas": 3}
    server.received["/convert"].clear()
    code, got, _ = await api.call("GET", f"{V2}/a")
    assert (code, got["spec"]) == (200, {"schedule": "1 * * * *", "replicas": 3})
    # Stored as v2 now: read as v2 it is sent to no review (the ended v1 watch may still convert its update).
    assert [r for r in server.received["/convert"] if r["request"]["desiredAPIVersion"] != "stable.example.com/v1"] == []
    # Server-side apply in the storage version: served for an object stored in it, and for one
    # still stored as v1 as kube serves it: converted to v2 first, applied there, stored as v2.
    apply = {"Content-Type": "application/apply-patch+yaml"}
    code, applied, _ = await api.call(
        "PATCH", f"{V2}/b?fieldManager=t", {**crontab("v2", "b"), "spec": {"replicas": 4}}, **apply
    )
    assert (code, applied.get("spec")) == (200, {"schedule": "2 * * * *", "replicas": 4}), applied
    code, applied, _ = await api.call(
        "PATCH", f"{APPLIED_V2}/d?fieldManager=t", {**crontab("v2", "d"), "spec": {"replicas": 4}}, **apply
    )
    assert (code, applied.get("spec")) == (200, {"schedule": "4 * * * *", "replicas": 4}), applied
    server.received["/convert"].clear()
    code, got, _ = await api.call("GET", f"{APPLIED_V2}/d")
    assert (code, got["spec"]) == (200, {"schedule": "4 * * * *", "replicas": 4})
    # Stored as v2 now: read as v2 it is sent to no review.
    assert [r for r in server.received["/convert"] if r["request"]["desiredAPIVersion"] != "stable.example.com/v1"] == []
    # A status write to c (still stored as v1) through v2: the rest of it is converted, and it is
    # stored as v2 whole.
    code, got, _ = await api.call("GET", f"{V2}/c")
    code, written, _ = await api.call("PUT", f"{V2}/c/status", {**got, "status": {"replicas": 1}})
    assert code == 200, written
    assert (written["spec"], written["status"]) == ({"schedule": "1 * * * *"}, {"replicas": 1})
    server.received["/convert"].clear()
    code, got, _ = await api.call("GET", f"{V2}/c")
    assert (code, got["spec"], got["status"]) == (200, {"schedule": "1 * * * *"}, {"replicas": 1})
    assert [r for r in server.received["/convert"] if r["request"]["desiredAPIVersion"] != "stable.example.com/v1"] == []
    # A status apply to e (still stored as v1) in v2: applied to it converted to v2, stored as v2 whole.
    code, applied, _ = await api.call(
        "PATCH", f"{APPLIED_V2}/e/status?fieldManager=t", {**crontab("v2", "e"), "status": {"replicas": 2}}, **apply
    )
    assert (code, applied.get("spec"), applied.get("status")) == (200, {"schedule": "4 * * * *"}, {"replicas": 2}), applied
    assert sorted((m["manager"], m["apiVersion"], m.get("subresource") or "") for m in applied["metadata"]["managedFields"]) == [
        ("Python", "stable.example.com/v1", ""), ("t", "stable.example.com/v2", "status")
    ]
    server.received["/convert"].clear()
    code, got, _ = await api.call("GET", f"{APPLIED_V2}/e")
    assert (code, got["spec"], got["status"]) == (200, {"schedule": "4 * * * *"}, {"replicas": 2})
    assert [r for r in server.received["/convert"] if r["request"]["desiredAPIVersion"] != "stable.example.com/v1"] == []
    # Until a migration rewrites every object and trims it, storedVersions keeps v1.
    assert await _stored_versions(api) == ["v1", "v2"]


async def test_with_conversion_none_an_object_stored_as_v1_is_read_as_v2(api: Api) -> None:
    body = crd({})
    body["spec"]["conversion"] = {"strategy": "None"}
    code, created, _ = await api.call("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", body)
    assert code == 201, created

    async def served_v1() -> bool:
        return (await api.call("GET", V1))[0] == 200

    await eventually(served_v1, what="the hub to serve crontabs")
    code, created, _ = await api.call("POST", V1, {**crontab("v1", "a"), "spec": {"replicas": 2}})
    assert code == 201, created
    await _store_as_v2(api)
    code, got, _ = await api.call("GET", f"{V2}/a")
    assert (code, got["apiVersion"], got["spec"]) == (200, "stable.example.com/v2", {"replicas": 2})
    code, listed, _ = await api.call("GET", V2)
    assert _specs(listed["items"]) == [("a", "stable.example.com/v2", {"replicas": 2})]
    code, got, _ = await api.call("GET", f"{V1}/a")
    assert (code, got["apiVersion"], got["spec"]) == (200, "stable.example.com/v1", {"replicas": 2})


async def test_once_storedversions_is_trimmed_the_storage_version_is_read_as_stored(api: Api, server: WebhookServer) -> None:
    await served(api, server.client("/convert"))
    await _store_as_v2(api)

    def v2_converts() -> bool | None:
        rt = api.hub.objects.registry.get("stable.example.com", "v2", "crontabs") if api.hub.objects else None
        return None if rt is None or rt.custom is None else rt.custom.conversion_webhook is not None

    async def converting() -> bool:
        return v2_converts() is True

    await eventually(converting, what="v2 to convert objects stored as v1")
    # A migration rewrote every object as v2 and trims storedVersions: v2 reads are plain again.
    # As a migrator does: read, trim, write back; a 409 (the hub's CRD controller wrote the status in
    # between) means read again.
    async def trimmed() -> bool:
        code, current, _ = await api.call("GET", CRD)
        current["status"]["storedVersions"] = ["v2"]
        code, updated, _ = await api.call("PUT", f"{CRD}/status", current)
        assert code in (200, 409), updated
        return code == 200 and updated["status"]["storedVersions"] == ["v2"]

    await eventually(trimmed, what="storedVersions to be trimmed")

    async def plain() -> bool:
        return v2_converts() is False

    await eventually(plain, what="v2 to be read as stored")


async def test_a_version_objects_may_be_stored_in_stays_until_storedversions_is_trimmed(api: Api) -> None:
    """kube's ValidateCustomResourceDefinitionStoredVersions: a CRD update may not drop a version
    ``status.storedVersions`` lists (objects written as v1 would be unreadable); once a migration
    trims it, v1 may go."""
    body = crd({})
    body["spec"]["conversion"] = {"strategy": "None"}
    code, created, _ = await api.call("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", body)
    assert code == 201, created
    await _store_as_v2(api)

    async def both_stored() -> bool:
        return await _stored_versions(api) == ["v1", "v2"]

    await eventually(both_stored, what="storedVersions to list v1 and v2")
    code, current, _ = await api.call("GET", CRD)
    without_v1 = copy.deepcopy(current)
    without_v1["spec"]["versions"] = [v for v in current["spec"]["versions"] if v["name"] != "v1"]
    code, refused, _ = await api.call("PUT", CRD, without_v1)
    assert (code, refused["details"]["causes"]) == (422, [{
        "reason": "FieldValueInvalid", "field": "status.storedVersions[0]",
        "message": 'Invalid value: "v1": missing from spec.versions; v1 was previously a storage version, and must '
                   "remain in spec.versions until a storage migration ensures no data remains persisted in v1 and "
                   "removes v1 from status.storedVersions",
    }])

    async def trimmed() -> bool:
        code, current, _ = await api.call("GET", CRD)
        current["status"]["storedVersions"] = ["v2"]
        code, updated, _ = await api.call("PUT", f"{CRD}/status", current)
        assert code in (200, 409), updated
        return code == 200

    await eventually(trimmed, what="storedVersions to be trimmed")
    code, current, _ = await api.call("GET", CRD)
    current["spec"]["versions"] = [v for v in current["spec"]["versions"] if v["name"] != "v1"]
    code, updated, _ = await api.call("PUT", CRD, current)
    assert code == 200, updated
