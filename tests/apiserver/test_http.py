"""The HTTP API through aiohttp's test client: discovery, OpenAPI, CRUD, Status shapes,
patches, Tables, watch streams and authentication."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
import yaml
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from controlplane.apiserver import errors
from controlplane.apiserver.app import create_app
from controlplane.apiserver.auth.rbac.authorizing import HubAuthorizer
from controlplane.apiserver.auth.rbac.index import RbacIndex
from controlplane.apiserver.auth.rbac.policy import default_policy_index
from controlplane.apiserver.identity import Decision, RequestAttributes, Role, UserInfo
from controlplane.apiserver.objects import ObjectStore, reading
from controlplane.apiserver.resources import Registry

from .kinds import deployment, widget

pytestmark = pytest.mark.waiting

Client = TestClient[Any, Any]
DEPLOYMENTS = "/apis/apps/v1/namespaces/default/deployments"
WIDGETS = "/apis/test.gpufed.io/v1/namespaces/default/widgets"
TABLE = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json"


def assert_status(body: dict[str, Any], *, code: int, reason: str) -> None:
    assert body["kind"] == "Status"
    assert body["apiVersion"] == "v1"
    assert body["status"] == "Failure"
    assert body["code"] == code
    assert body["reason"] == reason
    assert body["message"]


# --- discovery and OpenAPI ----------------------------------------------------------------


async def test_discovery_documents(api: Client) -> None:
    version = await (await api.get("/version")).json()
    assert (version["major"], version["minor"]) == ("1", "32")
    assert (await (await api.get("/api")).json())["versions"] == ["v1"]

    core = await (await api.get("/api/v1")).json()
    assert core["kind"] == "APIResourceList" and core["groupVersion"] == "v1"
    pods = next(r for r in core["resources"] if r["name"] == "pods")
    assert pods["namespaced"] and pods["kind"] == "Pod" and pods["shortNames"] == ["po"]
    assert set(pods["verbs"]) >= {"get", "list", "watch", "create", "update", "patch", "delete"}
    assert any(r["name"] == "pods/status" for r in core["resources"])

    groups = await (await api.get("/apis")).json()
    assert groups["kind"] == "APIGroupList"
    by_name = {g["name"]: g for g in groups["groups"]}
    assert by_name["apps"]["preferredVersion"] == {"groupVersion": "apps/v1", "version": "v1"}
    assert "" not in by_name

    apps = await (await api.get("/apis/apps/v1")).json()
    names = {r["name"] for r in apps["resources"]}
    assert {"deployments", "deployments/status", "deployments/scale", "statefulsets"} <= names
    group = await (await api.get("/apis/apps")).json()
    assert group["kind"] == "APIGroup" and group["name"] == "apps"
    missing = await api.get("/apis/nope.io/v1")
    assert missing.status == 404
    assert_status(await missing.json(), code=404, reason="NotFound")


async def test_openapi_v3_lets_kubectl_validate_on_the_server(api: Client) -> None:
    index = await (await api.get("/openapi/v3")).json()
    url = index["paths"]["apis/test.gpufed.io/v1"]["serverRelativeURL"]
    assert url.startswith("/openapi/v3/apis/test.gpufed.io/v1?hash=")
    document = await (await api.get(url)).json()
    item = document["paths"]["/apis/test.gpufed.io/v1/namespaces/{namespace}/widgets/{name}"]
    patch = item["patch"]
    assert patch["x-kubernetes-group-version-kind"] == {"group": "test.gpufed.io", "version": "v1", "kind": "Widget"}
    assert "fieldValidation" in {p["name"] for p in patch["parameters"]}
    assert "application/strategic-merge-patch+json" not in patch["requestBody"]["content"]
    schema = document["components"]["schemas"]["io.gpufed.test.v1.Widget"]
    assert schema["x-kubernetes-group-version-kind"] == [{"group": "test.gpufed.io", "version": "v1", "kind": "Widget"}]
    assert "$defs" not in json.dumps(document)

    apps = await (await api.get(index["paths"]["apis/apps/v1"]["serverRelativeURL"])).json()
    deploy_patch = apps["paths"]["/apis/apps/v1/namespaces/{namespace}/deployments/{name}"]["patch"]
    assert "application/strategic-merge-patch+json" in deploy_patch["requestBody"]["content"]


async def test_health_endpoints(api: Client) -> None:
    for path in ("/healthz", "/livez", "/readyz", "/readyz/etcd", "/livez/ping"):
        response = await api.get(path)
        assert response.status == 200
        assert await response.text() == "ok"


async def test_health_endpoints_answer_in_kubes_format(api: Client, objects: ObjectStore,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """As kube-apiserver's ``pkg/server/healthz``: a line per check with ``?verbose``, every check
    listed on a failure (reasons withheld), ``?exclude``, one check by its path. ``/livez`` has no
    etcd check: a hub whose store is down stays alive and is taken out of service (``/readyz``)."""
    verbose = await api.get("/readyz", params={"verbose": ""})
    assert (verbose.status, await verbose.text()) == (
        200, "[+]ping ok\n[+]log ok\n[+]etcd ok\n[+]shutdown ok\nreadyz check passed\n"
    )
    excluded = await api.get("/readyz", params={"verbose": "", "exclude": ["etcd", "nope"]})
    assert await excluded.text() == (
        "[+]ping ok\n[+]log ok\n[+]etcd excluded: ok\n[+]shutdown ok\n"
        'warn: some health checks cannot be excluded: no matches for "nope"\nreadyz check passed\n'
    )
    assert (await api.get("/readyz/nope")).status == 404

    async def unreachable() -> int:
        raise ConnectionError("etcd at 10.0.0.7:2379 refused the connection")

    monkeypatch.setattr(objects.store, "current_revision", unreachable)
    ready = await api.get("/readyz")
    body = await ready.text()
    assert (ready.status, body) == (
        500, "[+]ping ok\n[+]log ok\n[-]etcd failed: reason withheld\n[+]shutdown ok\nreadyz check failed\n"
    )
    single = await api.get("/readyz/etcd")
    assert single.status == 500 and "10.0.0.7" not in await single.text()
    assert (await api.get("/healthz")).status == 500
    alive = await api.get("/livez", params={"verbose": ""})
    assert (alive.status, await alive.text()) == (200, "[+]ping ok\n[+]log ok\nlivez check passed\n")
    assert (await api.get("/readyz", params={"exclude": "etcd"})).status == 200

    # kube's /metrics/slis: each check an endpoint ran, by endpoint (not one excluded, not a single
    # check's own path), its last result as 1 or 0 and the results counted.
    slis = await api.get("/metrics/slis")
    assert (slis.status, slis.content_type) == (200, "text/plain")
    assert await slis.text() == (
        "# HELP kubernetes_healthcheck [STABLE] This metric records the result of a single healthcheck.\n"
        "# TYPE kubernetes_healthcheck gauge\n"
        'kubernetes_healthcheck{name="etcd",type="healthz"} 0\n'
        'kubernetes_healthcheck{name="etcd",type="readyz"} 0\n'
        'kubernetes_healthcheck{name="log",type="healthz"} 1\n'
        'kubernetes_healthcheck{name="log",type="livez"} 1\n'
        'kubernetes_healthcheck{name="log",type="readyz"} 1\n'
        'kubernetes_healthcheck{name="ping",type="healthz"} 1\n'
        'kubernetes_healthcheck{name="ping",type="livez"} 1\n'
        'kubernetes_healthcheck{name="ping",type="readyz"} 1\n'
        'kubernetes_healthcheck{name="shutdown",type="readyz"} 1\n'
        "# HELP kubernetes_healthchecks_total [STABLE] This metric records the results of all healthcheck.\n"
        "# TYPE kubernetes_healthchecks_total counter\n"
        'kubernetes_healthchecks_total{name="etcd",status="error",type="healthz"} 1\n'
        'kubernetes_healthchecks_total{name="etcd",status="error",type="readyz"} 1\n'
        'kubernetes_healthchecks_total{name="etcd",status="success",type="readyz"} 1\n'
        'kubernetes_healthchecks_total{name="log",status="success",type="healthz"} 1\n'
        'kubernetes_healthchecks_total{name="log",status="success",type="livez"} 1\n'
        'kubernetes_healthchecks_total{name="log",status="success",type="readyz"} 4\n'
        'kubernetes_healthchecks_total{name="ping",status="success",type="healthz"} 1\n'
        'kubernetes_healthchecks_total{name="ping",status="success",type="livez"} 1\n'
        'kubernetes_healthchecks_total{name="ping",status="success",type="readyz"} 4\n'
        'kubernetes_healthchecks_total{name="shutdown",status="success",type="readyz"} 4\n'
    )


# --- CRUD and errors ------------------------------------------------------------------------


async def test_create_get_update_delete(api: Client) -> None:
    created = await api.post(DEPLOYMENTS, json=deployment("web"))
    assert created.status == 201
    body = await created.json()
    fetched = await (await api.get(f"{DEPLOYMENTS}/web")).json()
    assert fetched == body

    body["spec"]["replicas"] = 4
    updated = await api.put(f"{DEPLOYMENTS}/web", json=body)
    assert updated.status == 200
    assert (await updated.json())["metadata"]["generation"] == 2

    stale = await api.put(f"{DEPLOYMENTS}/web", json=body)
    assert stale.status == 409
    status = await stale.json()
    assert_status(status, code=409, reason="Conflict")
    assert status["details"] == {"name": "web", "group": "apps", "kind": "deployments"}

    again = await api.post(DEPLOYMENTS, json=deployment("web"))
    assert_status(await again.json(), code=409, reason="AlreadyExists")

    deleted = await api.delete(f"{DEPLOYMENTS}/web", json={"propagationPolicy": "Background"})
    assert deleted.status == 200
    assert (await deleted.json())["status"] == "Success"
    gone = await api.get(f"{DEPLOYMENTS}/web")
    assert gone.status == 404
    assert (await gone.json())["message"] == 'deployments.apps "web" not found'


async def test_yaml_body_and_namespace_rules(api: Client) -> None:
    manifest = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\ndata: {a: b}\n"
    created = await api.post(
        "/api/v1/namespaces/default/configmaps", data=manifest, headers={"Content-Type": "application/yaml"}
    )
    assert created.status == 201
    assert (await created.json())["metadata"]["namespace"] == "default"
    elsewhere = await api.post("/api/v1/namespaces/nope/configmaps", json={"metadata": {"name": "c"}})
    status = await elsewhere.json()
    assert_status(status, code=404, reason="NotFound")
    assert status["message"] == 'namespaces "nope" not found'
    mismatch = await api.post(
        "/api/v1/namespaces/default/configmaps", json={"metadata": {"name": "d", "namespace": "other"}}
    )
    assert_status(await mismatch.json(), code=400, reason="BadRequest")


@pytest.mark.parametrize(
    ("method", "path", "headers", "data", "code", "reason"),
    [
        ("GET", "/nope", {}, None, 404, "NotFound"),
        ("GET", "/apis/apps/v1/namespaces/default/things", {}, None, 404, "NotFound"),
        ("GET", "/api/v1/namespaces/default/nodes", {}, None, 404, "NotFound"),
        ("POST", f"{DEPLOYMENTS}/web", {"Content-Type": "application/json"}, "{}", 405, "MethodNotAllowed"),
        ("POST", DEPLOYMENTS, {"Content-Type": "application/json"}, "{not json", 400, "BadRequest"),
        ("POST", DEPLOYMENTS, {"Content-Type": "application/yaml"}, "a: [", 400, "BadRequest"),
        ("POST", DEPLOYMENTS, {"Content-Type": "application/vnd.kubernetes.protobuf"}, "k8s", 415, "UnsupportedMediaType"),
        ("PATCH", f"{DEPLOYMENTS}/web", {"Content-Type": "text/plain"}, "{}", 415, "UnsupportedMediaType"),
        ("PATCH", f"{WIDGETS}/w", {"Content-Type": "application/strategic-merge-patch+json"}, "{}", 415,
         "UnsupportedMediaType"),
        ("GET", f"{DEPLOYMENTS}?labelSelector=a%20in", {}, None, 400, "BadRequest"),
        ("GET", f"{DEPLOYMENTS}?fieldSelector=spec.foo%3D1", {}, None, 400, "BadRequest"),
        ("GET", f"{DEPLOYMENTS}?limit=abc", {}, None, 400, "BadRequest"),
        ("POST", f"{DEPLOYMENTS}?dryRun=Maybe", {"Content-Type": "application/json"}, "{}", 422, "Invalid"),
    ],
)
async def test_errors_are_status_objects(
    api: Client, method: str, path: str, headers: dict[str, str], data: str | None, code: int, reason: str
) -> None:
    response = await api.request(method, path, headers=headers, data=data)
    assert response.status == code
    assert response.headers["Content-Type"].startswith("application/json")
    assert_status(await response.json(), code=code, reason=reason)


async def test_a_body_without_a_content_type_is_json_and_octet_stream_is_415(api: Client) -> None:
    """kube reads a create's body sent without a Content-Type as JSON, and refuses one that says
    ``application/octet-stream`` as a type it does not decode (aiohttp reports octet-stream for
    both, so the hub read the second as JSON)."""
    body = json.dumps(deployment("untyped")).encode()
    created = await api.post(DEPLOYMENTS, data=body, skip_auto_headers=["Content-Type"])
    assert created.status == 201, await created.text()
    refused = await api.post(DEPLOYMENTS, data=json.dumps(deployment("octet")).encode(),
                             headers={"Content-Type": "application/octet-stream"})
    assert_status(await refused.json(), code=415, reason="UnsupportedMediaType")
    assert (await api.get(f"{DEPLOYMENTS}/octet")).status == 404


@pytest.mark.parametrize(
    ("query", "message"),
    [
        ("labelSelector=a%20in", 'unable to parse requirement: found end of input in selector "a in"'),
        ("watch=1&labelSelector=a%20b", "unable to parse requirement: found 'b', expected: in, notin, =, ==, !=, gt, lt"),
        ("fieldSelector=spec.foo%3D1", '"spec.foo" is not a known field selector: only "metadata.name", "metadata.namespace"'),
        ("watch=1&fieldSelector=a", "invalid selector: 'a'; can't understand 'a'"),
    ],
)
async def test_a_selector_that_does_not_parse_is_kubes_400_in_the_parsers_words(
    api: Client, objects: ObjectStore, api_registry: Registry, query: str, message: str
) -> None:
    response = await api.get(f"{DEPLOYMENTS}?{query}")
    status = await response.json()
    assert_status(status, code=400, reason="BadRequest")
    assert status["message"] == message
    # An in-process caller handing the object layer the same text gets the same error.
    rt = api_registry.require("apps/v1", "Deployment")
    selectors = dict(part.split("=", 1) for part in query.replace("%20", " ").replace("%3D", "=").split("&"))
    with pytest.raises(errors.BadRequest) as caught:
        await objects.list(rt, namespace="default", label_selector=selectors.get("labelSelector"),
                           field_selector=selectors.get("fieldSelector"))
    assert caught.value.message == message


async def test_unexpected_exception_is_a_generic_500(objects: ObjectStore, api_registry: Registry) -> None:
    async def broken(_request: web.Request) -> web.Response:
        raise RuntimeError("secret internals")

    app = create_app(objects, api_registry, extra_routes=[web.get("/broken", broken)])
    async with TestClient(TestServer(app)) as client:
        response = await client.get("/broken")
        body = await response.json()
    assert response.status == 500
    assert_status(body, code=500, reason="InternalError")
    assert "secret internals" not in body["message"]


async def test_validation_over_http(api: Client) -> None:
    invalid = await api.post(WIDGETS, json=widget("w", size=-2))
    status = await invalid.json()
    assert_status(status, code=422, reason="Invalid")
    assert status["details"]["causes"][0]["field"] == "spec.size"
    assert status["details"]["kind"] == "Widget"

    strict = await api.post(f"{WIDGETS}?fieldValidation=Strict", json=widget("w", foo=1))
    assert (await strict.json())["message"] == (
        'Widget in version "v1" cannot be handled as a Widget: strict decoding error: unknown field "spec.foo"'
    )

    warned = await api.post(WIDGETS, json=widget("w", foo=1))  # the default is Warn
    assert warned.status == 201
    assert warned.headers.getall("Warning") == ['299 - "unknown field \\"spec.foo\\""']
    assert "foo" not in (await warned.json())["spec"]


async def test_status_subresource_over_http(api: Client) -> None:
    await api.post(WIDGETS, json=widget("w", size=1))
    patched = await api.patch(
        f"{WIDGETS}/w/status", data=json.dumps({"status": {"phase": "Ready"}, "spec": {"size": 50}}),
        headers={"Content-Type": "application/merge-patch+json"},
    )
    body = await patched.json()
    assert body["status"] == {"phase": "Ready"} and body["spec"]["size"] == 1
    assert (await (await api.get(f"{WIDGETS}/w/status")).json())["status"] == {"phase": "Ready"}
    assert (await api.delete(f"{WIDGETS}/w/status")).status == 405
    assert (await api.get(f"{WIDGETS}/w/bogus")).status == 404


async def test_patch_types_over_http(api: Client) -> None:
    await api.post(DEPLOYMENTS, json=deployment("web"))
    merged = await api.patch(
        f"{DEPLOYMENTS}/web", data='{"spec":{"replicas":3}}', headers={"Content-Type": "application/merge-patch+json"}
    )
    assert (await merged.json())["spec"]["replicas"] == 3
    jsonpatched = await api.patch(
        f"{DEPLOYMENTS}/web", data='[{"op":"add","path":"/metadata/labels","value":{"x":"y"}}]',
        headers={"Content-Type": "application/json-patch+json"},
    )
    assert (await jsonpatched.json())["metadata"]["labels"] == {"x": "y"}
    scaled = await api.patch(
        f"{DEPLOYMENTS}/web/scale", data='{"spec":{"replicas":9}}', headers={"Content-Type": "application/merge-patch+json"}
    )
    assert (await scaled.json())["kind"] == "Scale"
    assert (await (await api.get(f"{DEPLOYMENTS}/web")).json())["spec"]["replicas"] == 9


async def test_list_pagination_and_selectors(api: Client) -> None:
    for index in range(5):
        await api.post(DEPLOYMENTS, json=deployment(f"d{index}", labels={"i": str(index)}))
    first = await (await api.get(f"{DEPLOYMENTS}?limit=2")).json()
    assert first["kind"] == "DeploymentList" and first["apiVersion"] == "apps/v1"
    assert [i["metadata"]["name"] for i in first["items"]] == ["d0", "d1"]
    assert first["metadata"]["continue"] and first["metadata"]["remainingItemCount"] == 3
    second = await (await api.get(DEPLOYMENTS, params={"limit": "2", "continue": first["metadata"]["continue"]})).json()
    assert [i["metadata"]["name"] for i in second["items"]] == ["d2", "d3"]
    assert second["metadata"]["remainingItemCount"] == 1
    as_table = await (await api.get(DEPLOYMENTS, params={"limit": "4"}, headers={"Accept": TABLE})).json()
    assert as_table["metadata"]["remainingItemCount"] == 1
    filtered = await (await api.get(DEPLOYMENTS, params={"limit": "1", "labelSelector": "i"})).json()
    assert filtered["metadata"]["continue"] and "remainingItemCount" not in filtered["metadata"]
    assert second["metadata"]["resourceVersion"] == first["metadata"]["resourceVersion"]
    selected = await (await api.get("/apis/apps/v1/deployments", params={"labelSelector": "i in (1,3)"})).json()
    assert [i["metadata"]["name"] for i in selected["items"]] == ["d1", "d3"]
    assert all(i["metadata"]["resourceVersion"] for i in selected["items"])
    removed = await (await api.delete(DEPLOYMENTS, params={"labelSelector": "i=4"})).json()
    assert [i["metadata"]["name"] for i in removed["items"]] == ["d4"]


async def test_a_large_list_is_streamed_in_pieces_and_a_small_one_is_not(api: Client) -> None:
    """A list over STREAMED_LIST_BYTES goes out chunked, encoded a piece at a time, instead of
    as one body the hub builds in memory next to the objects."""
    from controlplane.apiserver.handlers import STREAMED_LIST_BYTES

    blob = "x" * (64 * 1024)
    count = STREAMED_LIST_BYTES // len(blob) + 4
    for index in range(count):
        body = deployment(f"big{index:02d}")
        body["metadata"]["annotations"] = {"blob": blob}
        assert (await api.post(DEPLOYMENTS, json=body)).status == 201
    streamed = await api.get(DEPLOYMENTS)
    assert streamed.headers.get("Transfer-Encoding") == "chunked" and "Content-Length" not in streamed.headers
    listed = await streamed.json()
    assert listed["kind"] == "DeploymentList" and listed["metadata"]["resourceVersion"]
    assert [i["metadata"]["name"] for i in listed["items"]] == [f"big{index:02d}" for index in range(count)]
    assert all(i["metadata"]["annotations"]["blob"] == blob for i in listed["items"])

    small = await api.get(DEPLOYMENTS, params={"limit": "2"})
    assert small.headers.get("Content-Length") and len((await small.json())["items"]) == 2


# --- tables ---------------------------------------------------------------------------------


async def test_table_responses(api: Client) -> None:
    await api.post(DEPLOYMENTS, json=deployment("web", replicas=3))
    listed = await api.get(DEPLOYMENTS, headers={"Accept": TABLE})
    body = await listed.json()
    assert body["kind"] == "Table" and body["apiVersion"] == "meta.k8s.io/v1"
    columns = [c["name"] for c in body["columnDefinitions"]]
    assert columns[:5] == ["Name", "Ready", "Up-to-date", "Available", "Age"]
    assert body["columnDefinitions"][5]["priority"] == 1
    row = body["rows"][0]
    assert row["cells"][:4] == ["web", "0/3", 0, 0]
    assert row["object"]["kind"] == "PartialObjectMetadata"
    assert row["object"]["metadata"]["name"] == "web"

    full = await (await api.get(DEPLOYMENTS, params={"includeObject": "Object"}, headers={"Accept": TABLE})).json()
    assert full["rows"][0]["object"]["kind"] == "Deployment"
    one = await (await api.get(f"{DEPLOYMENTS}/web", headers={"Accept": TABLE})).json()
    assert one["kind"] == "Table" and len(one["rows"]) == 1

    widgets = await (await api.get(WIDGETS, headers={"Accept": TABLE})).json()
    assert [c["name"] for c in widgets["columnDefinitions"]] == ["Name", "Size", "Color"]


async def test_a_table_asked_in_v1beta1_is_a_v1beta1_table(api: Client) -> None:
    """As kube's asTable: the Table, and its rows' PartialObjectMetadata, are of the version asked."""
    await api.post(DEPLOYMENTS, json=deployment("web", replicas=1))
    beta = "application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json"
    for path in (DEPLOYMENTS, f"{DEPLOYMENTS}/web"):
        response = await api.get(path, headers={"Accept": beta})
        body = await response.json()
        assert body["kind"] == "Table" and body["apiVersion"] == "meta.k8s.io/v1beta1"
        assert body["rows"][0]["object"]["apiVersion"] == "meta.k8s.io/v1beta1"
        assert response.headers["Content-Type"] == "application/json;as=Table;v=v1beta1;g=meta.k8s.io"


async def test_a_scale_as_a_table_is_kubes_desired_and_available(api: Client) -> None:
    """``kubectl get deployment web --subresource=scale`` prints kube's Scale printer: NAME,
    DESIRED (spec.replicas), AVAILABLE (status.replicas), AGE; JSON stays the Scale itself."""
    await api.post(DEPLOYMENTS, json=deployment("web", replicas=3))
    await api.patch(f"{DEPLOYMENTS}/web/status", data='{"status":{"replicas":2}}',
                    headers={"Content-Type": "application/merge-patch+json"})
    scale = await (await api.get(f"{DEPLOYMENTS}/web/scale", headers={"Accept": TABLE})).json()
    assert scale["kind"] == "Table"
    assert [c["name"] for c in scale["columnDefinitions"]] == ["Name", "Desired", "Available", "Age"]
    assert scale["rows"][0]["cells"][:3] == ["web", 3, 2]
    assert scale["rows"][0]["object"]["metadata"]["name"] == "web"
    plain = await (await api.get(f"{DEPLOYMENTS}/web/scale")).json()
    assert (plain["kind"], plain["spec"]["replicas"]) == ("Scale", 3)


# --- watch ------------------------------------------------------------------------------------


async def _read_events(response: Any, count: int, *, seconds: float = 10.0) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = []
    async with asyncio.timeout(seconds):
        while len(events) < count:
            line = await response.content.readline()
            if not line:
                break
            events.append(json.loads(line))
    return events


async def test_watch_stream(api: Client) -> None:
    await api.post(DEPLOYMENTS, json=deployment("a"))
    response = await api.get(DEPLOYMENTS, params={"watch": "true", "resourceVersion": "0"})
    assert response.status == 200
    first = await _read_events(response, 1)
    await api.patch(f"{DEPLOYMENTS}/a", data='{"spec":{"replicas":2}}',
                    headers={"Content-Type": "application/merge-patch+json"})
    await api.delete(f"{DEPLOYMENTS}/a")
    rest = await _read_events(response, 2)
    response.close()
    assert [(e["type"], e["object"]["metadata"]["name"]) for e in first + rest] == [
        ("ADDED", "a"), ("MODIFIED", "a"), ("DELETED", "a"),
    ]


async def test_watch_bookmarks_tables_and_timeout(api: Client) -> None:
    created = await (await api.post(DEPLOYMENTS, json=deployment("a"))).json()
    rv = created["metadata"]["resourceVersion"]
    response = await api.get(
        DEPLOYMENTS, params={"watch": "1", "resourceVersion": rv, "allowWatchBookmarks": "true"}
    )
    later = (await (await api.post(DEPLOYMENTS, json=deployment("b"))).json())["metadata"]["resourceVersion"]
    added, bookmark = await _read_events(response, 2)
    response.close()
    assert added["type"] == "ADDED"
    assert bookmark["type"] == "BOOKMARK"
    assert bookmark["object"]["metadata"]["resourceVersion"] == later

    tables = await api.get(DEPLOYMENTS, params={"watch": "true", "timeoutSeconds": "1"}, headers={"Accept": TABLE})
    events = await _read_events(tables, 5)  # the stream ends after timeoutSeconds
    assert [e["type"] for e in events] == ["ADDED", "ADDED"]
    assert [e["object"]["kind"] for e in events] == ["Table", "Table"]
    assert [e["object"]["rows"][0]["cells"][0] for e in events] == ["a", "b"]


async def test_watch_from_compacted_revision_sends_410(api: Client, objects: ObjectStore) -> None:
    for index in range(3):
        await api.post(DEPLOYMENTS, json=deployment(f"d{index}"))
    await objects.store.compact(await objects.store.current_revision())
    response = await api.get(DEPLOYMENTS, params={"watch": "true", "resourceVersion": "1"})
    events = await _read_events(response, 1)
    assert events[0]["type"] == "ERROR"
    assert events[0]["object"]["code"] == 410
    assert events[0]["object"]["reason"] == "Expired"


async def test_lists_at_a_resource_version_answer_as_kubes_store_does(
    api: Client, objects: ObjectStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An exact list (``resourceVersionMatch=Exact``, or kube's legacy form: a ``limit`` and no
    match) of a compacted revision is 410 ``The resourceVersion for the provided list is too old.``;
    a list not older than a revision the store has not reached is kube's 504 ``Too large resource
    version`` (the hub served its current list)."""
    monkeypatch.setattr(reading, "FRESH_WAIT_SECONDS", 0.05)  # no write comes: test_fresh_reads waits
    for index in range(3):
        await api.post(DEPLOYMENTS, json=deployment(f"d{index}"))
    current = await objects.store.current_revision()
    await objects.store.compact(current)
    for params in ({"resourceVersion": "1", "resourceVersionMatch": "Exact"}, {"resourceVersion": "1", "limit": "1"}):
        response = await api.get(DEPLOYMENTS, params=params)
        assert response.status == 410, params
        status = await response.json()
        assert (status["reason"], status["message"]) == ("Expired", "The resourceVersion for the provided list is too old.")
    future = str(current + 1000)
    for params in ({"resourceVersion": future}, {"resourceVersion": future, "resourceVersionMatch": "NotOlderThan"},
                   {"resourceVersion": future, "limit": "1"}):
        response = await api.get(DEPLOYMENTS, params=params)
        assert response.status == 504, params
        status = await response.json()
        assert status["reason"] == "Timeout"
        assert status["message"] == f"Timeout: Too large resource version: {future}, current: {current}"
        assert status["details"] == {
            "causes": [{"reason": "ResourceVersionTooLarge", "message": "Too large resource version"}],
            "retryAfterSeconds": 1,
        }
    at_current = await api.get(DEPLOYMENTS, params={"resourceVersion": str(current), "limit": "2"})
    listed = await at_current.json()
    assert [item["metadata"]["name"] for item in listed["items"]] == ["d0", "d1"]
    assert listed["metadata"]["resourceVersion"] == str(current)


async def test_a_get_at_a_resource_version_answers_as_kubes_cache_does(
    api: Client, objects: ObjectStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A get at a resourceVersion reads an object not older than it: one the store has not reached
    is kube's 504 ``Too large resource version`` (before a missing object's 404); one that does not
    parse is the list's 400; ``0`` or an older one reads the object."""
    monkeypatch.setattr(reading, "FRESH_WAIT_SECONDS", 0.05)  # no write comes: test_fresh_reads waits
    await api.post(DEPLOYMENTS, json=deployment("d"))
    current = await objects.store.current_revision()
    for path in ("d", "missing", "d/scale"):
        for accept in ({}, {"Accept": TABLE}):
            ahead = await api.get(f"{DEPLOYMENTS}/{path}", params={"resourceVersion": str(current + 5)}, headers=accept)
            assert ahead.status == 504
            assert (await ahead.json())["message"] == f"Timeout: Too large resource version: {current + 5}, current: {current}"
    bad = await api.get(f"{DEPLOYMENTS}/d", params={"resourceVersion": "abc"})
    assert bad.status == 400
    assert (await bad.json())["message"] == (
        'resourceVersion: Invalid value: "abc": strconv.ParseUint: parsing "abc": invalid syntax')
    for at in ("0", "1", str(current)):
        read = await api.get(f"{DEPLOYMENTS}/d", params={"resourceVersion": at})
        assert read.status == 200 and (await read.json())["metadata"]["name"] == "d"


async def test_a_resource_is_written_in_the_media_type_the_client_prefers(api: Client) -> None:
    """``Accept: application/yaml`` got JSON, ``Accept: text/plain`` got JSON too (kube: 406)."""
    created = await (await api.post(DEPLOYMENTS, json=deployment("y"))).json()
    yaml_accept = {"Accept": "application/yaml"}
    response = await api.get(f"{DEPLOYMENTS}/y", headers=yaml_accept)
    assert (response.status, response.content_type) == (200, "application/yaml")
    assert yaml.safe_load(await response.text()) == created
    listed = await api.get(DEPLOYMENTS, headers={"Accept": "application/json;q=0.5, application/yaml"})
    assert listed.content_type == "application/yaml"
    assert [i["metadata"]["name"] for i in yaml.safe_load(await listed.text())["items"]] == ["y"]
    missing = await api.get(f"{DEPLOYMENTS}/nope", headers=yaml_accept)
    assert (missing.status, missing.content_type) == (404, "application/yaml")
    assert yaml.safe_load(await missing.text())["reason"] == "NotFound"
    for accept in ("text/html,application/xhtml+xml,*/*;q=0.8", "application/vnd.kubernetes.protobuf,application/json"):
        response = await api.get(f"{DEPLOYMENTS}/y", headers={"Accept": accept})
        assert (response.status, response.content_type) == (200, "application/json"), accept
    # Indented for a person (kube's isPrettyPrint): ?pretty=true, or curl, Wget and browsers unasked.
    for params, agent in (({"pretty": "true"}, "kubectl/v1.32"), ({}, "curl/8.5.0"), ({}, "Mozilla/5.0 (X11)")):
        response = await api.get(f"{DEPLOYMENTS}/y", params=params, headers={"User-Agent": agent})
        assert (await response.text()).startswith('{\n  "'), (params, agent)
        assert await response.json() == created
    for params, agent in (({"pretty": "false"}, "curl/8.5.0"), ({}, "kubectl/v1.32")):
        response = await api.get(f"{DEPLOYMENTS}/y", params=params, headers={"User-Agent": agent})
        assert (await response.text()).startswith('{"'), (params, agent)
    refused = await api.get(f"{DEPLOYMENTS}/y", headers={"Accept": "text/plain"})
    assert refused.status == 406
    assert await refused.json() == {
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": "only the following media types are accepted: application/json, application/yaml, "
                   "application/vnd.kubernetes.protobuf",
        "reason": "NotAcceptable", "code": 406,
    }


async def test_a_custom_resource_asked_in_protobuf_alone_is_kubes_406(api: Client) -> None:
    """kube's CRD handler serves JSON and YAML only: protobuf alone is 406 NotAcceptable naming what
    its serializer offers; a fallback after protobuf is answered; a built-in kind still answers."""
    await api.post(WIDGETS, json=widget("w"))
    await api.post(DEPLOYMENTS, json=deployment("d"))
    only = {"Accept": "application/vnd.kubernetes.protobuf"}
    for method, path in (("GET", f"{WIDGETS}/w"), ("GET", WIDGETS), ("DELETE", f"{WIDGETS}/w")):
        refused = await api.request(method, path, headers=only)
        assert refused.status == 406, (method, path)
        assert await refused.json() == {
            "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": "only the following media types are accepted: application/json, application/yaml, "
                       "application/vnd.kubernetes.protobuf",
            "reason": "NotAcceptable", "code": 406,
        }
    assert (await api.get(f"{WIDGETS}/w")).status == 200  # the DELETE refused deleted nothing
    fallback = await api.get(f"{WIDGETS}/w", headers={"Accept": "application/vnd.kubernetes.protobuf,application/json"})
    assert (fallback.status, fallback.content_type) == (200, "application/json")
    assert (await fallback.json())["metadata"]["name"] == "w"
    in_yaml = await api.get(WIDGETS, headers={"Accept": "application/vnd.kubernetes.protobuf,application/yaml"})
    assert (in_yaml.status, in_yaml.content_type) == (200, "application/yaml")
    assert (await api.get(f"{DEPLOYMENTS}/d", headers=only)).status == 200


async def test_a_custom_resource_passes_protobuf_over_for_the_conversion_asked_next(api: Client) -> None:
    """kube's CRD handler cannot write a custom resource in protobuf, so a conversion asked in the
    next clause (kubectl get's Table, a metadata client's PartialObjectMetadata) is the one made; a
    built-in kind answers the protobuf clause, the object itself."""
    await api.post(WIDGETS, json=widget("w"))
    await api.post(DEPLOYMENTS, json=deployment("d"))
    protobuf = "application/vnd.kubernetes.protobuf"
    as_table = {"Accept": f"{protobuf}, application/json;as=Table;v=v1;g=meta.k8s.io"}
    for path in (f"{WIDGETS}/w", WIDGETS):
        answered = await api.get(path, headers=as_table)
        assert answered.headers["Content-Type"] == "application/json;as=Table;v=v1;g=meta.k8s.io", path
        body = await answered.json()
        assert (body["kind"], [r["cells"][0] for r in body["rows"]]) == ("Table", ["w"]), path
    as_metadata = {"Accept": f"{protobuf},application/json;as=PartialObjectMetadataList;v=v1;g=meta.k8s.io"}
    listed = await (await api.get(WIDGETS, headers=as_metadata)).json()
    assert (listed["kind"], [i["metadata"]["name"] for i in listed["items"]]) == ("PartialObjectMetadataList", ["w"])
    assert (await (await api.get(f"{DEPLOYMENTS}/d", headers=as_table)).json())["kind"] == "Deployment"


# --- authentication and authorization ---------------------------------------------------------


class _Tokens:
    async def authenticate(self, token: str) -> UserInfo | None:
        return {"admin-token": UserInfo("alice", Role.ADMIN), "viewer-token": UserInfo("bob", Role.VIEWER)}.get(token)


class _ReadOnlyForViewers:
    def authorize(self, attributes: RequestAttributes) -> Decision:
        if attributes.user.role is Role.VIEWER and attributes.verb not in ("get", "list", "watch"):
            return Decision(False, f'User "{attributes.user.name}" may only read, not {attributes.verb}')
        return Decision(True)


async def test_authentication_and_authorization(objects: ObjectStore, api_registry: Registry) -> None:
    app = create_app(objects, api_registry, authenticator=_Tokens(), authorizer=_ReadOnlyForViewers())
    async with TestClient(TestServer(app)) as client:
        assert (await client.get("/readyz")).status == 200
        # create_app asks only the public-info paths as system:anonymous by default (the hub adds the
        # monitoring paths, kube's 403 for system:anonymous): one check needs credentials here.
        assert (await client.get("/readyz/etcd")).status == 401
        assert (await client.get("/readyz/etcd", headers={"Authorization": "Bearer viewer-token"})).status == 200
        anonymous = await client.get("/api/v1/namespaces")
        assert anonymous.status == 401
        assert_status(await anonymous.json(), code=401, reason="Unauthorized")
        wrong = await client.get("/version", headers={"Authorization": "Bearer nope"})
        assert wrong.status == 401, "a token that fails is 401 even where an anonymous request is allowed"
        viewer = {"Authorization": "Bearer viewer-token"}
        assert (await client.get("/api/v1/namespaces", headers=viewer)).status == 200
        denied = await client.post(DEPLOYMENTS, json=deployment("web"), headers=viewer)
        assert denied.status == 403
        status = await denied.json()
        assert_status(status, code=403, reason="Forbidden")
        assert status["message"] == 'User "bob" may only read, not create'
        admin = {"Authorization": "Bearer admin-token"}
        assert (await client.post(DEPLOYMENTS, json=deployment("web"), headers=admin)).status == 201


@pytest.mark.parametrize("path", ["/version", "/version/", "/healthz", "/livez", "/readyz"])
async def test_public_info_is_for_anonymous_requests_as_rbac_allows(
    objects: ObjectStore, api_registry: Registry, path: str
) -> None:
    """kube's ``system:public-info-viewer`` binding lets ``system:unauthenticated`` read
    ``/version`` and the health checks; without the binding the anonymous request is 403 with
    kube's message (a kubelet's probe then fails, as against kube-apiserver)."""
    with_policy = create_app(objects, api_registry, authenticator=_Tokens(),
                             authorizer=HubAuthorizer(default_policy_index()))
    async with TestClient(TestServer(with_policy)) as client:
        response = await client.get(path)
        assert response.status == 200
        assert "gitVersion" in await response.json() if path.startswith("/version") else await response.text() == "ok"
        assert (await client.get(path, headers={"Authorization": "Bearer nope"})).status == 401
        assert (await client.get("/api/v1/namespaces")).status == 401, "anonymous only for public info"
        assert (await client.get("/apis")).status == 401
    without_binding = create_app(objects, api_registry, authenticator=_Tokens(), authorizer=HubAuthorizer(RbacIndex()))
    async with TestClient(TestServer(without_binding)) as client:
        denied = await client.get(path)
        assert denied.status == 403
        status = await denied.json()
        assert_status(status, code=403, reason="Forbidden")
        assert status["message"] == f'forbidden: User "system:anonymous" cannot get path "{path}"'
