"""A CRD with ``conversion: Webhook``: a real hub (embedded etcd, HTTPS, tokens) and a real HTTPS
conversion webhook started by the test, its CA in the CRD's ``caBundle``. CronTabs stored as v1
(``spec.cronSpec``) are read as v2 (``spec.schedule``) by get, list (one review for the list) and
watch; a v2 write is converted to v1 before it is stored, and its answer back to v2. A webhook that
is down or answers wrongly fails the request with kube's error, and a write then stores nothing."""

from __future__ import annotations

import copy
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import aiohttp
import pytest

from controlplane.apiserver.kubeconfig import load_kubeconfig
from controlplane.apiserver.tls import client_ssl_context
from tests import hubmetrics
from tests.apiserver import test_admission_webhooks as admission_webhooks
from tests.apiserver.test_admission_webhooks import Api
from tests.controllers.fleet import eventually
from tests.webhookserver import WebhookServer

CRDS = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
V1 = "/apis/stable.example.com/v1/namespaces/default/crontabs"
V2 = "/apis/stable.example.com/v2/namespaces/default/crontabs"
GVK = "stable.example.com/v1, Kind=CronTab"
# The admission webhook tests' fixtures: a real hub, its admin's API, the test's HTTPS webhook server.
hub, api, server = admission_webhooks.hub, admission_webhooks.api, admission_webhooks.server


def _version(name: str, field: str, *, storage: bool) -> dict[str, Any]:
    return {
        "name": name, "served": True, "storage": storage,
        "schema": {"openAPIV3Schema": {"type": "object", "properties": {
            "spec": {"type": "object", "properties": {
                field: {"type": "string", "maxLength": 20}, "replicas": {"type": "integer"},
            }},
            "status": {"type": "object", "properties": {"replicas": {"type": "integer"}}},
        }}},
        "subresources": {
            "status": {}, "scale": {"specReplicasPath": ".spec.replicas", "statusReplicasPath": ".status.replicas"},
        },
        "additionalPrinterColumns": [{"name": "Schedule", "type": "string", "jsonPath": f".spec.{field}"}],
    }


def crd(client: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "crontabs.stable.example.com"},
        "spec": {
            "group": "stable.example.com", "scope": "Namespaced",
            "names": {"plural": "crontabs", "singular": "crontab", "kind": "CronTab"},
            "versions": [_version("v1", "cronSpec", storage=True), _version("v2", "schedule", storage=False)],
            "conversion": {"strategy": "Webhook", "webhook": {"conversionReviewVersions": ["v1"], "clientConfig": client}},
        },
    }


def crontab(version: str, name: str, **spec: str) -> dict[str, Any]:
    return {"apiVersion": f"stable.example.com/{version}", "kind": "CronTab", "metadata": {"name": name}, "spec": spec}


async def served(api: Api, client: dict[str, Any]) -> None:
    """Create (or point at ``client``) the CRD and wait until the hub converts through ``client``.
    The hub's CRD controller writes a CRD's status (``NamesAccepted``, ``Established``) when it gets
    to it, as kube's do, so an update made from an older read is a 409: retried from a fresh read,
    as client-go's ``RetryOnConflict`` does."""
    for _ in range(5):
        code, current, _ = await api.call("GET", f"{CRDS}/crontabs.stable.example.com")
        if code == 404:
            code, written, _ = await api.call("POST", CRDS, crd(client))
            assert code == 201, written
            break
        changed = copy.deepcopy(current)
        changed["spec"]["conversion"]["webhook"]["clientConfig"] = client
        code, written, _ = await api.call("PUT", f"{CRDS}/crontabs.stable.example.com", changed)
        if code != 409:
            break
    assert code in (200, 201), written

    async def converting() -> bool:
        rt = api.hub.objects.registry.get("stable.example.com", "v2", "crontabs") if api.hub.objects else None
        webhook = rt.custom.conversion_webhook if rt is not None and rt.custom is not None else None
        return webhook is not None and webhook.url == client.get("url")

    await eventually(converting, what="the hub to serve v2 through the webhook")


async def test_objects_stored_as_v1_are_read_and_written_as_v2(api: Api, server: WebhookServer) -> None:
    await served(api, server.client("/convert"))
    converted_before = await _conversions(api)
    for name, spec in (("a", "*/1 * * * *"), ("b", "*/2 * * * *")):
        code, created, _ = await api.call("POST", V1, crontab("v1", name, cronSpec=spec))
        assert code == 201, created
        assert created["apiVersion"] == "stable.example.com/v1"
    assert server.received["/convert"] == []  # the storage version is never converted

    code, got, _ = await api.call("GET", f"{V2}/a")
    assert code == 200, json.dumps(got)
    assert (got["apiVersion"], got["spec"], got["metadata"]["labels"]) == (
        "stable.example.com/v2", {"schedule": "*/1 * * * *"}, {"converted-to": "v2"}
    )
    [review] = server.received["/convert"]
    assert review["apiVersion"] == "apiextensions.k8s.io/v1"
    assert review["request"]["desiredAPIVersion"] == "stable.example.com/v2"
    assert [o["metadata"]["name"] for o in review["request"]["objects"]] == ["a"]

    code, listed, _ = await api.call("GET", V2)
    assert code == 200, listed
    assert (listed["apiVersion"], listed["kind"]) == ("stable.example.com/v2", "CronTabList")
    assert [(o["metadata"]["name"], o["spec"]) for o in listed["items"]] == [
        ("a", {"schedule": "*/1 * * * *"}), ("b", {"schedule": "*/2 * * * *"})
    ]
    # One review for the whole list, as kube batches it.
    assert [len(r["request"]["objects"]) for r in server.received["/convert"]] == [1, 2]
    code, rows, _ = await api.call("GET", V2, Accept="application/json;as=Table;v=v1;g=meta.k8s.io")
    assert [row["cells"][:2] for row in rows["rows"]] == [["a", "*/1 * * * *"], ["b", "*/2 * * * *"]]

    # A v2 write goes to storage as v1; its answer is v2.
    code, created, _ = await api.call("POST", V2, crontab("v2", "c", schedule="0 0 * * *"))
    assert code == 201, created
    assert (created["apiVersion"], created["spec"]) == ("stable.example.com/v2", {"schedule": "0 0 * * *"})
    code, stored, _ = await api.call("GET", f"{V1}/c")
    assert (stored["apiVersion"], stored["spec"]) == ("stable.example.com/v1", {"cronSpec": "0 0 * * *"})
    code, patched, _ = await api.call(
        "PATCH", f"{V2}/c", {"spec": {"schedule": "5 5 * * *"}}, **{"Content-Type": "application/merge-patch+json"}
    )
    assert code == 200, patched
    assert patched["spec"] == {"schedule": "5 5 * * *"}
    code, stored, _ = await api.call("GET", f"{V1}/c")
    assert stored["spec"] == {"cronSpec": "5 5 * * *"}
    stored_v2 = {**patched, "spec": {"schedule": "6 6 * * *"}}
    code, updated, _ = await api.call("PUT", f"{V2}/c", stored_v2)
    assert code == 200, updated
    code, stored, _ = await api.call("GET", f"{V1}/c")
    assert stored["spec"] == {"cronSpec": "6 6 * * *"}
    # A v2 write is checked by v2's schema first: its errors name v2's fields.
    code, status, _ = await api.call("POST", V2, crontab("v2", "long", schedule="0 0 1 1 * " * 4))
    assert (code, [c["field"] for c in status["details"]["causes"]]) == (422, ["spec.schedule"]), status
    code, status, _ = await api.call("POST", f"{V2}?fieldValidation=Strict", crontab("v2", "odd", schedule="1 * * * *", odd="x"))
    assert (code, status["message"]) == (
        400, 'CronTab in version "v2" cannot be handled as a CronTab: strict decoding error: unknown field "spec.odd"'
    ), status
    # The scale subresource is v2's, read and set on the object in v2.
    scale = {"apiVersion": "autoscaling/v1", "kind": "Scale", "metadata": {"name": "c", "namespace": "default"},
             "spec": {"replicas": 3}}
    code, scaled, _ = await api.call("PUT", f"{V2}/c/scale", scale)
    assert (code, scaled["spec"]) == (200, {"replicas": 3}), scaled
    code, stored, _ = await api.call("GET", f"{V1}/c")
    assert stored["spec"] == {"cronSpec": "6 6 * * *", "replicas": 3}
    # So is the status subresource, written in v2.
    code, current, _ = await api.call("GET", f"{V2}/c")
    code, written, _ = await api.call("PUT", f"{V2}/c/status", {**current, "status": {"replicas": 2}})
    assert (code, written["apiVersion"], written["status"]) == (200, "stable.example.com/v2", {"replicas": 2}), written
    code, stored, _ = await api.call("GET", f"{V1}/c")
    assert stored["status"] == {"replicas": 2}
    # A delete answers with what it deleted, in v2.
    code, deleted, _ = await api.call("DELETE", f"{V2}/c")
    assert (code, deleted["apiVersion"], deleted["spec"]) == (
        200, "stable.example.com/v2", {"schedule": "6 6 * * *", "replicas": 3}
    )
    code, gone, _ = await api.call("DELETE", V2)
    assert code == 200, gone
    assert [(o["apiVersion"], o["metadata"]["name"]) for o in gone["items"]] == [
        ("stable.example.com/v2", "a"), ("stable.example.com/v2", "b")
    ]
    code, listed, _ = await api.call("GET", V1)
    assert listed["items"] == []
    # Each conversion is on the hub's metrics under kube's name, by CRD and versions.
    # (The hub's metrics are the process's: what this test added.)
    counts = await _conversions(api)
    added = {key: value - converted_before.get(key, 0.0) for key, value in counts.items()}
    assert {key: value for key, value in added.items() if value} == {
        # get (2), lists (2), create, patch (2), update (2), status update (2), deletes (2), and the
        # scale write (2: the object read in v2, whose Scale is v2's, and its answer; the other
        # versions' managedFields entries are not converted, kube's scale handler maps their replicas)
        ("crontabs.stable.example.com", "v1", "v2", "true"): 15.0,
        # create, patch, update, status update, scale write
        ("crontabs.stable.example.com", "v2", "v1", "true"): 5.0,
    }


async def _conversions(api: Api) -> dict[tuple[str, ...], float]:
    """The hub's conversion counts, by CRD, versions and outcome."""
    counts = await hubmetrics.samples(api.hub, "apiserver_crd_conversion_webhook_duration_seconds_count")
    return {(labels["crd_name"], labels["from_version"], labels["to_version"], labels["succeeded"]): value
            for labels, value in counts}


APPLY = {"Content-Type": "application/apply-patch+yaml"}


def _owners(obj: dict[str, Any]) -> list[tuple[str, str, str, Any]]:
    return [(e["manager"], e["operation"], e["apiVersion"], e.get("fieldsV1")) for e in obj["metadata"]["managedFields"]]


async def test_server_side_apply_in_v2_is_made_in_v2_and_stored_as_v1(api: Api, server: WebhookServer) -> None:
    """As kube's apply handler: the object is read in the request's version (converted), the
    configuration merged there, and the result converted to the storage version and stored."""
    await served(api, server.client("/convert"))
    # Absent: the apply creates it (201), stored as v1; the applier's entry is v2's.
    code, created, _ = await api.call("PATCH", f"{V2}/ssa?fieldManager=alice", crontab("v2", "ssa", schedule="1 1 * * *"), **APPLY)
    assert (code, created["apiVersion"], created["spec"]) == (201, "stable.example.com/v2", {"schedule": "1 1 * * *"}), created
    assert _owners(created) == [("alice", "Apply", "stable.example.com/v2", {"f:spec": {"f:schedule": {}}})]
    code, stored, _ = await api.call("GET", f"{V1}/ssa")
    assert (stored["apiVersion"], stored["spec"]) == ("stable.example.com/v1", {"cronSpec": "1 1 * * *"})
    assert _owners(stored) == _owners(created)
    # Applied again with a changed field and a new one: the stored object follows.
    again = {**crontab("v2", "ssa"), "spec": {"schedule": "2 2 * * *", "replicas": 2}}
    code, applied, _ = await api.call("PATCH", f"{V2}/ssa?fieldManager=alice", again, **APPLY)
    assert (code, applied["spec"]) == (200, {"schedule": "2 2 * * *", "replicas": 2}), applied
    code, stored, _ = await api.call("GET", f"{V1}/ssa")
    assert stored["spec"] == {"cronSpec": "2 2 * * *", "replicas": 2}
    # Another manager's apply of a field alice owns is kube's conflict, and changes nothing.
    other = crontab("v2", "ssa", schedule="3 3 * * *")
    code, status, _ = await api.call("PATCH", f"{V2}/ssa?fieldManager=bob", other, **APPLY)
    assert (code, status["reason"], status["message"]) == (
        409, "Conflict", 'Apply failed with 1 conflict: conflict with "alice": .spec.schedule'
    ), status
    assert status["details"]["causes"] == [
        {"reason": "FieldManagerConflict", "message": 'conflict with "alice"', "field": ".spec.schedule"}
    ]
    code, stored, _ = await api.call("GET", f"{V1}/ssa")
    assert stored["spec"] == {"cronSpec": "2 2 * * *", "replicas": 2}
    # Forced, bob takes it.
    code, forced, _ = await api.call("PATCH", f"{V2}/ssa?fieldManager=bob&force=true", other, **APPLY)
    assert (code, forced["spec"]) == (200, {"schedule": "3 3 * * *", "replicas": 2}), forced
    assert [(m, op, v) for m, op, v, _ in _owners(forced)] == [
        ("alice", "Apply", "stable.example.com/v2"), ("bob", "Apply", "stable.example.com/v2")
    ]
    assert [f for *_, f in _owners(forced)] == [{"f:spec": {"f:replicas": {}}}, {"f:spec": {"f:schedule": {}}}]
    code, stored, _ = await api.call("GET", f"{V1}/ssa")
    assert stored["spec"] == {"cronSpec": "3 3 * * *", "replicas": 2}
    # The configuration is checked by v2's schema: its errors name v2's fields.
    long = crontab("v2", "ssa", schedule="0 0 1 1 * " * 4)
    code, status, _ = await api.call("PATCH", f"{V2}/ssa?fieldManager=bob", long, **APPLY)
    assert (code, [c["field"] for c in status["details"]["causes"]]) == (422, ["spec.schedule"]), status
    # A status apply in v2 is made in v2 too: it merges and owns the status only.
    code, applied, _ = await api.call(
        "PATCH", f"{V2}/ssa/status?fieldManager=carol", {**crontab("v2", "ssa"), "status": {"replicas": 1}}, **APPLY
    )
    assert (code, applied.get("spec"), applied.get("status")) == (200, {"schedule": "3 3 * * *", "replicas": 2}, {"replicas": 1}), applied
    assert _owners(applied)[2:] == [("carol", "Apply", "stable.example.com/v2", {"f:status": {"f:replicas": {}}})]
    assert applied["metadata"]["managedFields"][2]["subresource"] == "status"
    code, stored, _ = await api.call("GET", f"{V1}/ssa")
    assert (stored["spec"], stored["status"]) == ({"cronSpec": "3 3 * * *", "replicas": 2}, {"replicas": 1})
    # Through status, an apply creates nothing (kube's 404).
    code, status, _ = await api.call(
        "PATCH", f"{V2}/absent/status?fieldManager=carol", {**crontab("v2", "absent"), "status": {"replicas": 1}}, **APPLY
    )
    assert code == 404, status


@asynccontextmanager
async def watching(api: Api, path: str) -> AsyncIterator[aiohttp.StreamReader]:
    """The lines of a watch of ``path`` on the hub, as its admin."""
    credentials = load_kubeconfig(api.hub.kubeconfig_path)
    connector = aiohttp.TCPConnector(ssl=client_ssl_context(credentials.ca_pem))
    async with aiohttp.ClientSession(connector=connector) as session, session.get(
        f"{api.hub.url}{path}", headers={"Authorization": f"Bearer {credentials.token}"}
    ) as response:
        assert response.status == 200
        yield response.content


async def test_a_watch_in_v2_sends_converted_events(api: Api, server: WebhookServer) -> None:
    await served(api, server.client("/convert"))
    code, created, _ = await api.call("POST", V1, crontab("v1", "a", cronSpec="1 * * * *"))
    assert code == 201, created
    async with watching(api, f"{V2}?watch=true&timeoutSeconds=20") as lines:
        first = json.loads(await lines.readline())
        code, _, _ = await api.call("POST", V1, crontab("v1", "b", cronSpec="2 * * * *"))
        assert code == 201
        second = json.loads(await lines.readline())
    assert [(e["type"], e["object"]["apiVersion"], e["object"]["spec"]) for e in (first, second)] == [
        ("ADDED", "stable.example.com/v2", {"schedule": "1 * * * *"}),
        ("ADDED", "stable.example.com/v2", {"schedule": "2 * * * *"}),
    ]


async def test_a_watch_whose_conversion_fails_ends_with_kubes_error(api: Api, server: WebhookServer) -> None:
    await served(api, server.client("/convert-fail"))
    code, created, _ = await api.call("POST", V1, crontab("v1", "a", cronSpec="1 * * * *"))
    assert code == 201, created
    async with watching(api, f"{V2}?watch=true&timeoutSeconds=20") as lines:
        event = json.loads(await lines.readline())
        rest = await lines.read()
    assert (event["type"], event["object"]["code"], event["object"]["message"]) == (
        "ERROR", 500, f"conversion webhook for {GVK} failed: cronSpec cannot be parsed"
    )
    assert rest == b""  # the watch ended there


@pytest.mark.parametrize(
    ("path", "message"),
    [
        ("/convert-fail", f"conversion webhook for {GVK} failed: cronSpec cannot be parsed"),
        ("/convert-wrong-uid", f'conversion webhook for {GVK} failed: expected response.uid="'),
        ("/convert-renamed", f"conversion webhook for {GVK} returned invalid object: must have the same name: a != a-renamed"),
    ],
)
async def test_a_wrong_answer_fails_the_request_with_kubes_error(
    api: Api, server: WebhookServer, path: str, message: str
) -> None:
    await served(api, server.client("/convert"))
    code, created, _ = await api.call("POST", V1, crontab("v1", "a", cronSpec="1 * * * *"))
    assert code == 201, created
    await served(api, server.client(path))
    code, status, _ = await api.call("GET", f"{V2}/a")
    assert code == 500, status
    assert status["message"].startswith(message), status
    assert "reason" not in status  # kube's error is no API status: no reason
    # Nothing is written by a write whose conversion fails.
    code, status, _ = await api.call("POST", V2, crontab("v2", "b", schedule="2 * * * *"))
    assert code == 500, status
    code, _, _ = await api.call("GET", f"{V1}/b")
    assert code == 404


async def test_a_list_answer_with_too_few_objects_and_a_webhook_that_is_down(api: Api, server: WebhookServer) -> None:
    await served(api, server.client("/convert-short"))
    for name in ("a", "b"):
        code, created, _ = await api.call("POST", V1, crontab("v1", name, cronSpec="1 * * * *"))
        assert code == 201, created
    code, status, _ = await api.call("GET", V2)
    assert (code, status["message"]) == (
        500, "conversion webhook for stable.example.com/v1, Kind=CronTabList returned 1 objects, expected 2"
    )
    down = {"url": "https://127.0.0.1:1/convert", "caBundle": server.ca_bundle}
    await served(api, down)
    code, status, _ = await api.call("GET", f"{V2}/a")
    assert (code, status["message"]) == (
        500, f'conversion webhook for {GVK} failed: Post "https://127.0.0.1:1/convert?timeout=30s": '
        "dial tcp 127.0.0.1:1: connect: connection refused",
    )
    # The storage version is served without the webhook.
    code, got, _ = await api.call("GET", f"{V1}/a")
    assert code == 200, json.dumps(got)


async def test_bad_options_on_a_converted_version_are_kubes_422_before_the_object_is_read(
    api: Api, server: WebhookServer
) -> None:
    """kube's update and apply handlers check their options before storage is read: a missing
    object asked for with options kube refuses is their 422, not a 404."""
    await served(api, server.client("/convert"))
    code, status, _ = await api.call("PUT", f"{V2}/absent?dryRun=Maybe", crontab("v2", "absent", schedule="1 * * * *"))
    assert (code, status["details"]["kind"], status["details"]["causes"][0]["field"]) == (422, "UpdateOptions", "dryRun")
    code, status, _ = await api.call(
        "PATCH", f"{V2}/absent?fieldManager=a&fieldValidation=strict", crontab("v2", "absent"),
        **{"Content-Type": "application/apply-patch+yaml"},
    )
    assert (code, status["details"]["kind"], status["details"]["causes"][0]["field"]) == (
        422, "PatchOptions", "fieldValidation"
    )
    code, status, _ = await api.call("PUT", f"{V2}/absent", crontab("v2", "absent", schedule="1 * * * *"))
    assert (code, status["reason"]) == (404, "NotFound")
    assert server.received["/convert"] == []
