"""The ``scale`` subresource of a CRD version its conversion webhook serves, as kube's ``ScaleREST``
serves it: the version's own ``subresources.scale`` paths, read and set on the object converted to
that version. Here the storage version v1 has no scale subresource and v2 has one with a
``labelSelectorPath``. A real hub and a real HTTPS conversion webhook, as in
:mod:`tests.apiserver.test_crd_conversion_webhook`."""

from __future__ import annotations

import json
from typing import Any

import pytest

from controlplane.apiserver import errors
from controlplane.apiserver.crd.scaling import custom_scale
from tests.apiserver import test_crd_conversion_webhook as conversion
from tests.apiserver.test_admission_webhooks import Api
from tests.apiserver.test_crd_conversion_webhook import CRDS, V1, V2, crontab
from tests.controllers.fleet import eventually
from tests.webhookserver import WebhookServer

hub, api, server = conversion.hub, conversion.api, conversion.server
MERGE = {"Content-Type": "application/merge-patch+json"}
APPLY = {"Content-Type": "application/apply-patch+yaml"}
V1_GROUP, V2_GROUP = "stable.example.com/v1", "stable.example.com/v2"


async def _served(api: Api, server: WebhookServer) -> None:
    """The CronTab CRD with a scale subresource in v2 only, its selector at ``.status.selector``."""
    crd = conversion.crd(server.client("/convert"))
    v1, v2 = crd["spec"]["versions"]
    del v1["subresources"]["scale"]
    v2["subresources"]["scale"]["labelSelectorPath"] = ".status.selector"
    for version in (v1, v2):
        version["schema"]["openAPIV3Schema"]["properties"]["status"]["properties"]["selector"] = {"type": "string"}
    code, created, _ = await api.call("POST", CRDS, crd)
    assert code == 201, created

    async def converting() -> bool:
        rt = api.hub.objects.registry.get("stable.example.com", "v2", "crontabs") if api.hub.objects else None
        return rt is not None and rt.custom is not None and rt.custom.conversion_webhook is not None

    await eventually(converting, what="the hub to serve v2 through the webhook")


def _scale(name: str, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "autoscaling/v1", "kind": "Scale", "metadata": {"name": name, "namespace": "default"}, "spec": spec}


async def test_v2s_scale_is_read_and_set_through_v2s_paths(api: Api, server: WebhookServer) -> None:
    await _served(api, server)
    body = {**crontab("v1", "s"), "spec": {"cronSpec": "1 * * * *", "replicas": 2}}
    code, created, _ = await api.call("POST", f"{V1}?fieldManager=alice", body)
    assert code == 201, json.dumps(created)
    code, written, _ = await api.call("PUT", f"{V1}/s/status", {**created, "status": {"replicas": 1, "selector": "app=s"}})
    assert code == 200, json.dumps(written)
    code, status, _ = await api.call("GET", f"{V1}/s/scale")
    assert code == 404, json.dumps(status)  # v1 has no scale subresource

    server.received["/convert"].clear()
    code, scale, _ = await api.call("GET", f"{V2}/s/scale")
    assert (code, scale["spec"], scale["status"]) == (200, {"replicas": 2}, {"replicas": 1, "selector": "app=s"}), json.dumps(scale)
    assert [r["request"]["desiredAPIVersion"] for r in server.received["/convert"]] == [V2_GROUP]

    # A write: the object read in v2, its replicas set there, converted to v1 and stored, the
    # answer read in v2. alice's v1 entry is not converted: its replicas field is mapped by version.
    server.received["/convert"].clear()
    code, scaled, _ = await api.call("PUT", f"{V2}/s/scale?fieldManager=erin", _scale("s", replicas=5))
    assert (code, scaled["spec"], scaled["status"]["selector"]) == (200, {"replicas": 5}, "app=s"), json.dumps(scaled)
    assert [(r["request"]["desiredAPIVersion"], len(r["request"]["objects"])) for r in server.received["/convert"]] == [
        (V2_GROUP, 1), (V1_GROUP, 1), (V2_GROUP, 1)
    ]
    code, stored, _ = await api.call("GET", f"{V1}/s")
    assert stored["spec"] == {"cronSpec": "1 * * * *", "replicas": 5}, json.dumps(stored)
    owners = [(e["manager"], e["apiVersion"], e.get("subresource", ""), e["fieldsV1"]) for e in stored["metadata"]["managedFields"]]
    # erin owns v2's replicas field; alice's v1 entry, of a version without a scale subresource,
    # keeps what it has (kube's scale handler finds no replicas path there).
    assert [o for o in owners if o[0] != "Python"] == [
        ("erin", V2_GROUP, "scale", {"f:spec": {"f:replicas": {}}}),
        ("alice", V1_GROUP, "", {"f:spec": {".": {}, "f:cronSpec": {}, "f:replicas": {}}}),
    ]
    code, patched, _ = await api.call("PATCH", f"{V2}/s/scale?fieldManager=frank", {"spec": {"replicas": 6}}, **MERGE)
    assert (code, patched["spec"]) == (200, {"replicas": 6}), json.dumps(patched)
    # As kube's ValidatePatchOptions: no patch but an apply may carry force, false or not.
    for path in (f"{V2}/s/scale", f"{V2}/s"):
        code, refused, _ = await api.call("PATCH", f"{path}?force=false", {"spec": {"replicas": 9}}, **MERGE)
        assert (code, refused["details"]["causes"][0]["field"]) == (422, "force"), json.dumps(refused)
    code, applied, _ = await api.call(
        "PATCH", f"{V2}/s/scale?fieldManager=gina&force=true", _scale("s", replicas=7), **APPLY
    )
    assert (code, applied["spec"]) == (200, {"replicas": 7}), json.dumps(applied)
    code, stored, _ = await api.call("GET", f"{V2}/s")
    assert stored["spec"] == {"schedule": "1 * * * *", "replicas": 7}, json.dumps(stored)


async def test_an_object_without_replicas(api: Api, server: WebhookServer) -> None:
    """kube's answers for an object whose spec replicas field is absent: a read is its 500, a patch
    that sets none its 400; a Scale written sets them."""
    await _served(api, server)
    code, created, _ = await api.call("POST", V1, crontab("v1", "e", cronSpec="1 * * * *"))
    assert code == 201, json.dumps(created)
    code, status, _ = await api.call("GET", f"{V2}/e/scale")
    assert (code, status["reason"], status["message"]) == (
        500, "InternalError", 'Internal error occurred: the spec replicas field ".spec.replicas" does not exist'
    ), json.dumps(status)
    code, status, _ = await api.call("PATCH", f"{V2}/e/scale", {"metadata": {"labels": {"a": "b"}}}, **MERGE)
    assert (code, status["reason"], status["message"]) == (
        400, "BadRequest", 'the spec replicas field ".spec.replicas" cannot be empty'
    ), json.dumps(status)
    code, scaled, _ = await api.call("PUT", f"{V2}/e/scale", _scale("e", replicas=1))
    assert (code, scaled["spec"], scaled["status"]) == (200, {"replicas": 1}, {"replicas": 0}), json.dumps(scaled)


async def test_scale_fields_of_another_type(api: Api, server: WebhookServer) -> None:
    """A value of another type at a scale path is kube's accessor error (``unstructured.NestedInt64``)."""
    await _served(api, server)
    assert api.hub.objects is not None
    rt = api.hub.objects.registry.get("stable.example.com", "v2", "crontabs")
    assert rt is not None
    meta = {"name": "w", "namespace": "default"}
    for obj, message in (
        ({"metadata": meta, "spec": {"replicas": "3"}}, ".spec.replicas accessor error: 3 is of the type string, expected int64"),
        ({"metadata": meta, "spec": {"replicas": 1.5}}, ".spec.replicas accessor error: 1.5 is of the type float64, expected int64"),
        ({"metadata": meta, "spec": "x"}, ".spec.replicas accessor error: x is of the type string, expected map[string]interface{}"),
        ({"metadata": meta, "spec": {"replicas": 1}, "status": {"selector": {"a": "b"}}},
         ".status.selector accessor error: map[a:b] is of the type map[string]interface {}, expected string"),
    ):
        with pytest.raises(errors.ServerError) as raised:
            custom_scale(rt, obj)
        assert (raised.value.code, raised.value.message, raised.value.to_status().get("reason")) == (500, message, None)
    scale, found = custom_scale(rt, {"metadata": meta, "spec": {"replicas": 1}})
    assert (scale["spec"], scale["status"], found) == ({"replicas": 1}, {"replicas": 0}, True)
