"""The reports API over HTTP (aiohttp's test client, the hub's real middlewares, tokens and
authorizer, rollups in a MemoryStore): discovery, objects, lists, Tables for kubectl, the
time series, errors, and who may read."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer

from controlplane.apiserver.app import create_app
from controlplane.apiserver.auth.authorizer import RoleAuthorizer
from controlplane.apiserver.auth.tokens import TokenStore
from controlplane.apiserver.identity import Role
from controlplane.apiserver.objects import ObjectStore
from controlplane.hub import hub_registry
from controlplane.reports.accounting import Accumulator
from controlplane.reports.api import ReportSource, waste_report_routes
from controlplane.reports.persistence import RollupStore
from controlplane.storage import MemoryStore

from .builders import at, cluster, fleet, gpu, node, pod

PRICE = 3.0
NOW = at(10)
TABLE = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json"
REPORTS = "/apis/reports.gpufed.io/v1alpha1/wastereports"


def _accumulator() -> Accumulator:
    """Samples at minutes 0..3: one GPU busy (90 %), one idle (5 %), one free, at $3/h."""
    accumulator = Accumulator()
    devices = (gpu(0, pod("train-0", workload="train"), 0.9), gpu(1, pod("infer-0", workload="infer"), 0.05), gpu(2))
    for minute in range(4):
        accumulator.add(fleet(cluster("a", [node("n1", devices)], pricing={"NVIDIA-A100-SXM4-80GB": PRICE}), time=at(minute)))
    return accumulator


class Api:
    def __init__(self, client: TestClient[Any, Any], tokens: dict[str, str]) -> None:
        self.client = client
        self.tokens = tokens

    async def get(self, path: str, *, as_user: str = "viewer", accept: str = "application/json",
                  method: str = "GET") -> tuple[int, Any]:
        headers = {"Accept": accept}
        if as_user:
            headers["Authorization"] = f"Bearer {self.tokens[as_user]}"
        async with self.client.request(method, path, headers=headers) as response:
            return response.status, await response.json()


@pytest.fixture
async def api() -> AsyncIterator[Api]:
    async with MemoryStore() as store:
        await RollupStore(store).save(_accumulator())
        objects = ObjectStore(store, hub_registry())
        tokens = TokenStore(store)
        issued = {
            "admin": (await tokens.create(role=Role.ADMIN, name="admin")).token,
            "viewer": (await tokens.create(role=Role.VIEWER, name="viewer")).token,
            "agent": (await tokens.create(role=Role.AGENT, name="agent", cluster="a")).token,
        }
        app = create_app(
            objects, hub_registry(), authenticator=tokens, authorizer=RoleAuthorizer(),
            extra_routes=waste_report_routes(ReportSource(store), clock=lambda: NOW),
        )
        async with TestClient(TestServer(app)) as client:
            yield Api(client, issued)


async def test_discovery_lists_the_read_only_group(api: Api) -> None:
    status, groups = await api.get("/apis")
    assert status == 200
    assert "reports.gpufed.io" in [g["name"] for g in groups["groups"]]
    status, resources = await api.get("/apis/reports.gpufed.io/v1alpha1")
    assert status == 200
    assert [(r["name"], r["kind"], r["namespaced"], r["verbs"]) for r in resources["resources"]] == [
        ("wastereports", "WasteReport", False, ["get", "list"])
    ]


async def test_by_takes_repeated_and_comma_separated_dimensions_each_once(api: Api) -> None:
    status, obj = await api.get(f"{REPORTS}/last-1h?by=cluster,,model&by=%20cluster&by=namespace")
    assert status == 200
    assert obj["spec"]["by"] == ["cluster", "model", "namespace"]


async def test_a_named_window_ends_at_the_last_complete_minute(api: Api) -> None:
    status, obj = await api.get(f"{REPORTS}/last-1h?by=cluster")
    assert status == 200
    assert (obj["apiVersion"], obj["kind"], obj["metadata"]["name"]) == ("reports.gpufed.io/v1alpha1", "WasteReport", "last-1h")
    assert obj["spec"] == {"since": "1h", "by": ["cluster"], "top": 10}
    report = obj["status"]
    # Three minutes were accounted (samples at 0..3); the window is the hour ending at minute 3.
    assert report["window"]["to"] == "2024-05-01T00:03:00Z"
    assert report["window"]["from"] == "2024-04-30T23:03:00Z"
    assert report["window"]["observed_hours"] == pytest.approx(3 / 60, abs=1e-4)
    hours = report["totals"]["gpu_hours"]
    for state in ("busy", "idle-allocated", "free-spare"):
        assert hours[state] == pytest.approx(3 / 60, abs=1e-4)
    assert report["totals"]["cost_usd"]["idle-allocated"] == pytest.approx(3 / 60 * PRICE, abs=1e-4)
    assert [g["key"] for g in report["groups"]] == [{"cluster": "a"}]
    assert [w["workload"] for w in report["top_idle_workloads"]] == ["Deployment/infer"]


async def test_the_reported_window_asked_again_gives_the_same_numbers(api: Api) -> None:
    _, named = await api.get(f"{REPORTS}/last-2m")
    window = named["status"]["window"]
    _, custom = await api.get(f"{REPORTS}/custom?from={window['from']}&to={window['to']}")
    assert custom["metadata"]["name"] == "custom"
    assert custom["status"]["totals"] == named["status"]["totals"]
    assert custom["status"]["totals"]["gpu_hours"]["busy"] == pytest.approx(2 / 60, abs=1e-4)


async def test_a_series_has_mean_gpus_per_state_per_step(api: Api) -> None:
    _, obj = await api.get(f"{REPORTS}/last-5m?step=1m")
    points = obj["status"]["series"]
    assert [p["from"][11:16] for p in points] == ["23:58", "23:59", "00:00", "00:01", "00:02"]
    observed = [p for p in points if p["observed_hours"] > 0]
    assert len(observed) == 3
    for point in observed:
        assert point["gpus"]["busy"] == pytest.approx(1.0)
        assert point["gpus"]["idle-allocated"] == pytest.approx(1.0)
        assert point["cost_usd"]["busy"] == pytest.approx(PRICE / 60, abs=1e-6)
    assert all(sum(p["gpus"].values()) == 0 for p in points if p["observed_hours"] == 0)


async def test_kubectl_tables_have_one_column_per_state(api: Api) -> None:
    status, listing = await api.get(REPORTS, accept=TABLE)
    assert status == 200 and listing["kind"] == "Table"
    columns = [c["name"] for c in listing["columnDefinitions"]]
    assert columns == [
        "Name", "From", "To", "Observed", "Busy", "Idle-Allocated", "Unmeasured", "Free-Needed", "Free-Fragmented",
        "Free-Spare", "Unavailable", "Waste", "Waste-Cost",
    ]
    assert [row["cells"][0] for row in listing["rows"]] == ["last-1h", "last-24h", "last-7d", "last-30d"]
    status, single = await api.get(f"{REPORTS}/last-1h", accept=TABLE)
    cells = dict(zip(columns, single["rows"][0]["cells"], strict=True))
    assert cells["Busy"] == "0.050"
    assert cells["Free-Needed"] == "0.000"
    assert cells["Waste"] == "33.3%"  # idle-allocated out of busy + idle + spare
    assert cells["Waste-Cost"] == "$0.15"


async def test_metadata_alone_is_answered_as_for_any_resource(api: Api) -> None:
    """client-go's metadata client and the official client's DynamicClient get PartialObjectMetadata."""
    status, listing = await api.get(REPORTS, accept="application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1")
    assert status == 200 and (listing["kind"], listing["apiVersion"]) == ("PartialObjectMetadataList", "meta.k8s.io/v1")
    assert [i["metadata"]["name"] for i in listing["items"]] == ["last-1h", "last-24h", "last-7d", "last-30d"]
    assert {i["kind"] for i in listing["items"]} == {"PartialObjectMetadata"}
    status, single = await api.get(f"{REPORTS}/last-1h", accept="application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1")
    assert status == 200 and single["kind"] == "PartialObjectMetadata" and single["metadata"]["name"] == "last-1h"
    assert "spec" not in single and "status" not in single
    status, refused = await api.get(REPORTS, accept="application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1")
    assert (status, refused["reason"]) == (406, "NotAcceptable")


async def test_lists_without_a_window_return_the_default_windows(api: Api) -> None:
    _, listing = await api.get(REPORTS)
    assert listing["kind"] == "WasteReportList"
    assert [i["metadata"]["name"] for i in listing["items"]] == ["last-1h", "last-24h", "last-7d", "last-30d"]
    _, one = await api.get(f"{REPORTS}?since=90m&by=namespace")
    assert [i["metadata"]["name"] for i in one["items"]] == ["last-1h30m"]
    assert one["items"][0]["status"]["by"] == ["namespace"]


@pytest.mark.parametrize(
    ("path", "code", "field"),
    [
        (f"{REPORTS}/last-1h?by=team", 400, "by"),
        (f"{REPORTS}/last-1h?step=10s", 400, "step"),
        (f"{REPORTS}/last-30d?step=1m", 400, "step"),
        (f"{REPORTS}/last-1h?top=many", 400, "top"),
        (f"{REPORTS}/custom", 400, "from"),
        (f"{REPORTS}/custom?from=yesterday", 400, "from"),
        (f"{REPORTS}/custom?from=2024-05-01T00:02:00Z&to=2024-05-01T00:01:00Z", 400, "to"),
        (f"{REPORTS}/last-1h?from=2024-05-01T00:00:00Z", 400, "from"),
        (f"{REPORTS}?since=1h&from=2024-05-01T00:00:00Z", 400, "since"),
        (f"{REPORTS}/last-fortnight", 404, None),
        # Durations past any date a clock can hold: a 4xx, not an overflow.
        (f"{REPORTS}/last-99999999999999h", 404, None),
        (f"{REPORTS}?since=99999999999999h", 400, "since"),
        (f"{REPORTS}/last-1h?step=99999999999999h", 400, "step"),
        (f"{REPORTS}/last-3650d?to=0001-01-02T00:00:00Z", 400, "to"),
        (f"{REPORTS}/everything", 404, None),
    ],
)
async def test_bad_requests_get_a_status_naming_the_parameter(api: Api, path: str, code: int, field: str | None) -> None:
    status, body = await api.get(path)
    assert status == code, body
    assert body["kind"] == "Status" and body["code"] == code
    if field is not None:
        assert [c["field"] for c in body["details"]["causes"]] == [field]


@pytest.mark.parametrize("method", ["POST", "PUT", "PATCH", "DELETE"])
async def test_reports_are_read_only(api: Api, method: str) -> None:
    for path in (REPORTS, f"{REPORTS}/last-1h"):
        status, body = await api.get(path, method=method, as_user="admin")
        assert status == 405, body
        assert "read-only" in body["message"]


@pytest.mark.parametrize("query", ["watch=true", "watch=yes", "watch"])
async def test_watching_is_refused(api: Api, query: str) -> None:
    status, body = await api.get(f"{REPORTS}?{query}")
    assert status == 405, body


@pytest.mark.parametrize(("user", "code"), [("", 401), ("agent", 403), ("viewer", 200)])
async def test_who_may_read_reports(api: Api, user: str, code: int) -> None:
    status, _ = await api.get(f"{REPORTS}/last-1h", as_user=user)
    assert status == code


async def test_an_empty_hub_reports_zeros_up_to_now() -> None:
    async with MemoryStore() as store:
        objects = ObjectStore(store, hub_registry())
        now = datetime(2024, 6, 1, 12, 0, 30, 500000, tzinfo=UTC)
        app = create_app(objects, hub_registry(), extra_routes=waste_report_routes(ReportSource(store), clock=lambda: now))
        async with TestClient(TestServer(app)) as client, client.get(f"{REPORTS}/last-1h") as response:
            obj = await response.json()
    assert obj["status"]["window"] == {
        "from": "2024-06-01T11:00:00Z", "to": "2024-06-01T12:00:00Z", "observed_hours": 0.0, "unobserved_hours": 0.0,
    }
    assert obj["status"]["totals"]["gpu_hours_total"] == 0
