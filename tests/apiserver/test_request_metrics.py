"""kube-apiserver's ``apiserver_request_total`` and ``apiserver_request_duration_seconds`` on the hub's
``/metrics``: every resource request under kube's labels (``LIST`` for a collection's ``GET``,
``WATCH``, ``APPLY``, ``scope``, ``dry_run``, ``subresource``, ``component``), through the API server
and the hub's request middleware, as a Prometheus scrape reads them."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer
from prometheus_client.parser import text_string_to_metric_families

from controlplane.apiserver.app import create_app
from controlplane.apiserver.objects import ObjectStore
from controlplane.apiserver.resources import Registry
from controlplane.metrics import HubMetrics

from .kinds import deployment

DEPLOYMENTS = "/apis/apps/v1/namespaces/default/deployments"
LABELS = ("verb", "dry_run", "group", "version", "resource", "subresource", "scope", "component")


@pytest.fixture
async def hub_api(objects: ObjectStore, api_registry: Registry) -> AsyncIterator[tuple[TestClient[Any, Any], HubMetrics]]:
    metrics = HubMetrics(process_collectors=False)
    app = create_app(objects, api_registry, extra_routes=metrics.routes(), outer_middlewares=[metrics.middleware()])
    async with TestClient(TestServer(app)) as client:
        yield client, metrics


def _samples(text: str, name: str) -> dict[tuple[str, ...], float]:
    return {
        tuple(sample.labels.get(label, "") for label in (*LABELS, "code")): sample.value
        for family in text_string_to_metric_families(text) for sample in family.samples if sample.name == name
    }


async def test_resource_requests_are_counted_and_timed_under_kubes_labels(
    hub_api: tuple[TestClient[Any, Any], HubMetrics],
) -> None:
    client, _ = hub_api
    assert (await client.post(f"{DEPLOYMENTS}?dryRun=All", json=deployment("web"))).status == 201
    assert (await client.post(DEPLOYMENTS, json=deployment("web"))).status == 201
    assert (await client.post(f"{DEPLOYMENTS}?dryRun=Some", json=deployment("x"))).status == 422
    for _ in range(2):
        assert (await client.get(f"{DEPLOYMENTS}/web")).status == 200
    assert (await client.get(f"{DEPLOYMENTS}/missing")).status == 404
    assert (await client.get(DEPLOYMENTS)).status == 200
    assert (await client.get("/apis/apps/v1/deployments")).status == 200
    applied = "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\nspec:\n  replicas: 2\n"
    answer = await client.patch(f"{DEPLOYMENTS}/web?fieldManager=me&force=true", data=applied,
                                headers={"Content-Type": "application/apply-patch+yaml"})
    assert answer.status == 200, await answer.text()
    answer = await client.patch(f"{DEPLOYMENTS}/web/scale", json={"spec": {"replicas": 3}},
                                headers={"Content-Type": "application/merge-patch+json"})
    assert answer.status == 200, await answer.text()
    async with client.get(DEPLOYMENTS, params={"watch": "true", "timeoutSeconds": "1"}) as watch:
        assert watch.status == 200
        await watch.read()  # it ends after a second, then it is timed
    assert (await client.delete(f"{DEPLOYMENTS}/web")).status == 200
    assert (await client.get("/healthz")).status == 200  # not a resource request: not counted
    text = await (await client.get("/metrics")).text()

    def key(verb: str, scope: str, code: str, *, dry_run: str = "", subresource: str = "") -> tuple[str, ...]:
        return (verb, dry_run, "apps", "v1", "deployments", subresource, scope, "apiserver", code)

    assert _samples(text, "apiserver_request_total") == {
        key("POST", "resource", "201", dry_run="All"): 1.0,
        key("POST", "resource", "201"): 1.0,
        key("POST", "resource", "422", dry_run="invalid"): 1.0,
        key("GET", "resource", "200"): 2.0,
        key("GET", "resource", "404"): 1.0,
        key("LIST", "namespace", "200"): 1.0,
        key("LIST", "cluster", "200"): 1.0,
        key("APPLY", "resource", "200"): 1.0,
        key("PATCH", "resource", "200", subresource="scale"): 1.0,
        key("WATCH", "namespace", "200"): 1.0,
        key("DELETE", "resource", "200"): 1.0,
    }
    # The latency has no code label: the two answers of a GET are one series.
    counts = _samples(text, "apiserver_request_duration_seconds_count")
    assert counts[key("GET", "resource", "")] == 3.0
    assert counts[key("WATCH", "namespace", "")] == 1.0
    buckets = {s.labels["le"] for f in text_string_to_metric_families(text) for s in f.samples
               if s.name == "apiserver_request_duration_seconds_bucket"}
    assert {"0.005", "1.25", "45", "60", "+Inf"} <= buckets
    assert "# HELP apiserver_request_total [STABLE] Counter of apiserver requests broken out" in text


async def test_paths_of_resources_not_served_add_no_series(
    hub_api: tuple[TestClient[Any, Any], HubMetrics],
) -> None:
    """The labels come from the path: requests for made-up resources are counted without them, so
    they cannot grow the metrics without bound."""
    client, _ = hub_api
    for n in range(5):
        assert (await client.get(f"/apis/made.up/v1/things{n}")).status == 404
    assert (await client.get(f"{DEPLOYMENTS}/missing")).status == 404
    text = await (await client.get("/metrics")).text()
    assert 'resource="things' not in text and 'group="made.up"' not in text
    assert _samples(text, "apiserver_request_total") == {
        ("LIST", "", "", "", "", "", "cluster", "apiserver", "404"): 5.0,
        ("GET", "", "apps", "v1", "deployments", "", "resource", "apiserver", "404"): 1.0,
    }


#: kube-apiserver's HELP lines, as its metrics framework renders them: the stability level kube
#: declares for the metric, in brackets, before kube's help text.
KUBE_HELP_LINES = (
    "# HELP apiserver_request_total [STABLE] Counter of apiserver requests broken out for each verb, dry run value, "
    "group, version, resource, scope, component, and HTTP response code.",
    "# HELP apiserver_storage_size_bytes [STABLE] Size of the storage database file physically allocated in bytes.",
    "# HELP apiserver_admission_webhook_admission_duration_seconds [STABLE] Admission webhook latency histogram in "
    "seconds, identified by name and broken out for each operation and API resource and type (validate or admit).",
    "# HELP apiserver_flowcontrol_current_inqueue_requests [BETA] Number of requests currently pending in queues of "
    "the API Priority and Fairness subsystem",
    "# HELP apiserver_flowcontrol_request_wait_duration_seconds [BETA] Length of time a request spent waiting in its "
    "queue",
    "# HELP apiserver_validating_admission_policy_check_total [BETA] Validation admission policy check total, labeled "
    "by policy and further identified by binding and enforcement action taken.",
    "# HELP workqueue_depth [BETA] Current depth of workqueue",
    "# HELP apiserver_flowcontrol_current_limit_seats [ALPHA] current derived number of execution seats available to "
    "each priority level",
    "# HELP apiserver_audit_event_total [ALPHA] Counter of audit events generated and sent to the audit backend.",
    "# HELP apiserver_client_certificate_expiration_seconds [ALPHA] Distribution of the remaining lifetime on the "
    "certificate used to authenticate a request.",
    "# HELP apiserver_crd_conversion_webhook_duration_seconds [ALPHA] CRD webhook conversion duration in seconds",
)


async def test_kubes_metrics_carry_kubes_stability_level_in_their_help(
    hub_api: tuple[TestClient[Any, Any], HubMetrics],
) -> None:
    client, metrics = hub_api
    # A family shows (HELP line included) once it has a series, as the Go client gathers: check
    # the help each family is declared with, and that what is served carries it.
    declared = {}
    for family in metrics.registry.collect():
        declared[family.name] = declared[f"{family.name}_total"] = family.documentation
    assert [line for line in KUBE_HELP_LINES if declared.get(line.split(" ")[2]) != line.split(" ", 3)[3]] == []
    assert (await client.get("/api/v1/namespaces")).status == 200
    lines = set((await (await client.get("/metrics")).text()).splitlines())
    assert KUBE_HELP_LINES[0] in lines
    # The hub's own metrics are not kube's: no stability level.
    assert declared["gpufed_waste_samples_total"] == "Fleet samples taken by the waste accounting, by result (ok, error)."
