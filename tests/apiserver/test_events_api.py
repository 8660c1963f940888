"""``events.k8s.io/v1`` Events: kube's core Events under the newer group and field names.

The official client's ``EventsV1Api`` (and client-go's events recorder) got 404: the group was
not served."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from controlplane.apis.kube.convert_events import core_event, events_event

from .test_kube_validation import Client, hub  # noqa: F401 (fixture)
from .test_real_clients import server_url  # noqa: F401 (fixture)

CORE = "/api/v1/namespaces/default/events"
NEW = "/apis/events.k8s.io/v1/namespaces/default/events"
TABLE = "application/json;as=Table;v=v1;g=meta.k8s.io"


def legacy(name: str = "web.1") -> dict[str, Any]:
    return {
        "apiVersion": "v1", "kind": "Event", "metadata": {"name": name, "namespace": "default"},
        "involvedObject": {"kind": "Deployment", "namespace": "default", "name": "web", "apiVersion": "apps/v1"},
        "reason": "Scheduled", "message": "scheduled 2 replicas", "type": "Normal",
        "source": {"component": "gpufed-scheduler"}, "count": 3,
        "firstTimestamp": "2026-01-01T00:00:00Z", "lastTimestamp": "2026-01-01T00:05:00Z",
    }


def test_the_conversion_renames_both_ways() -> None:
    served = events_event(legacy())
    assert served["apiVersion"] == "events.k8s.io/v1"
    assert served["regarding"]["name"] == "web" and served["note"] == "scheduled 2 replicas"
    assert (served["deprecatedSource"], served["deprecatedCount"]) == ({"component": "gpufed-scheduler"}, 3)
    assert served["deprecatedLastTimestamp"] == "2026-01-01T00:05:00Z"
    assert served["eventTime"] is None  # kube's zero MicroTime
    assert core_event(served) == {**legacy(), "eventTime": None}


async def test_one_event_served_under_both_groups(hub: Client) -> None:  # noqa: F811
    created = await hub.post(CORE, json=legacy())
    assert created.status == 201, await created.text()
    read = await (await hub.get(f"{NEW}/web.1")).json()
    assert (read["apiVersion"], read["note"], read["regarding"]["kind"]) == ("events.k8s.io/v1", "scheduled 2 replicas", "Deployment")
    assert "message" not in read and "involvedObject" not in read
    written = {
        "apiVersion": "events.k8s.io/v1", "kind": "Event", "metadata": {"name": "web.2"},
        "eventTime": "2026-01-01T00:06:00.000000Z", "reportingController": "gpufed.io/scheduler",
        "reportingInstance": "hub-0", "action": "Scheduling", "reason": "Scheduled", "type": "Normal",
        "note": "moved", "regarding": {"kind": "Deployment", "namespace": "default", "name": "web"},
    }
    response = await hub.post(NEW, json=written)
    assert response.status == 201, await response.text()
    as_core = await (await hub.get(f"{CORE}/web.2")).json()
    assert (as_core["message"], as_core["reportingComponent"], as_core["involvedObject"]["name"]) == (
        "moved", "gpufed.io/scheduler", "web",
    )
    listed = await (await hub.get(NEW, params={"fieldSelector": "regarding.name=web,reason=Scheduled"})).json()
    assert sorted(i["metadata"]["name"] for i in listed["items"]) == ["web.1", "web.2"]
    table = await (await hub.get(NEW, headers={"Accept": TABLE})).json()
    names = [d["name"] for d in table["columnDefinitions"]]
    rows = {row["cells"][-1]: dict(zip(names, row["cells"], strict=True)) for row in table["rows"]}
    assert (rows["web.1"]["Object"], rows["web.1"]["Message"], rows["web.1"]["Count"]) == (
        "deployment/web", "scheduled 2 replicas", 3,
    )
    merge = {"Content-Type": "application/merge-patch+json"}
    patched = await hub.patch(f"{CORE}/web.1", json={"message": "rescheduled"}, headers=merge)
    assert patched.status == 200, await patched.text()
    assert (await (await hub.get(f"{NEW}/web.1")).json())["note"] == "rescheduled"
    assert (await hub.delete(f"{NEW}/web.2")).status == 200
    assert (await hub.get(f"{CORE}/web.2")).status == 404


def _official_client(url: str) -> list[str]:
    from kubernetes import client

    configuration = client.Configuration()
    configuration.host = url
    with client.ApiClient(configuration) as api_client:
        events = client.EventsV1Api(api_client).list_namespaced_event("default")
        return [event.note for event in events.items]


async def test_the_official_clients_events_api_reads_them(hub: Client) -> None:  # noqa: F811
    """(An Event written through v1 without an eventTime reads back with ``eventTime: null``, as
    from kube, which this client's model refuses: the one here has one.)"""
    stamped = {**legacy(), "eventTime": "2026-01-01T00:05:00.000000Z", "reportingComponent": "gpufed-scheduler",
               "reportingInstance": "hub-0", "action": "Scheduling"}
    assert (await hub.post(CORE, json=stamped)).status == 201
    url = str(hub.make_url(""))
    assert await asyncio.to_thread(_official_client, url) == ["scheduled 2 replicas"]


def _new_event(**changes: Any) -> dict[str, Any]:
    event: dict[str, Any] = {
        "apiVersion": "events.k8s.io/v1", "kind": "Event", "metadata": {"name": "web.3"},
        "eventTime": "2026-01-01T00:06:00.000000Z", "reportingController": "gpufed.io/scheduler",
        "reportingInstance": "hub-0", "action": "Scheduling", "reason": "Scheduled", "type": "Normal",
        "regarding": {"kind": "Deployment", "namespace": "default", "name": "web"},
    }
    event.update(changes)
    return {key: value for key, value in event.items() if value is not None}


@pytest.mark.parametrize(("changes", "causes"), [
    ({"eventTime": None, "type": "Info"}, [
        ("eventTime", "Required value"), ("type", 'Invalid value: "": has invalid value: Info'),
    ]),
    ({"reportingController": None, "reportingInstance": None, "action": None, "reason": None}, [
        ("reportingController", "Required value"),
        ("reportingController", 'Invalid value: "": name part must be non-empty'),
        ("reportingController", 'Invalid value: "": name part must consist of alphanumeric characters, \'-\', \'_\' '
         "or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or "
         "'123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"),
        ("reportingInstance", "Required value"), ("action", "Required value"), ("reason", "Required value"),
    ]),
    ({"note": "n" * 1025, "action": "a" * 129, "series": {"count": 1}}, [
        ("action", 'Invalid value: "": can have at most 128 characters'),
        ("message", 'Invalid value: "": can have at most 1024 characters'),
        ("series.count", 'Invalid value: "": should be at least 2'), ("series.lastObservedTime", "Required value"),
    ]),
    ({"deprecatedCount": 3, "deprecatedSource": {"component": "x"}, "regarding": {"kind": "Node", "name": "n1"}}, [
        ("count", 'Invalid value: "": needs to be unset'), ("source", 'Invalid value: "": needs to be unset'),
    ]),
])
async def test_an_events_v1_create_is_validated_as_kube_validates_it(
    hub: Client, changes: dict[str, Any], causes: list[tuple[str, str]],  # noqa: F811
) -> None:
    """kube's ValidateEventCreate for events.k8s.io/v1 (field paths of its internal type); the
    same Event written through core v1 needs none of it."""
    refused = await hub.post(NEW, json=_new_event(**changes))
    assert refused.status == 422, await refused.text()
    status = await refused.json()
    assert status["message"].startswith('Event.events.k8s.io "web.3" is invalid: ')
    assert [(c["field"], c["message"]) for c in status["details"]["causes"]] == causes
    assert (await hub.post(NEW, json=_new_event())).status == 201


async def _causes(response: Any) -> list[tuple[str, str]]:
    assert response.status == 422, await response.text()
    status = await response.json()
    return [(c["field"], c["message"]) for c in status["details"]["causes"]]


@pytest.mark.parametrize(("changes", "causes"), [
    ({"involvedObject": {"kind": "Pod", "namespace": "other", "name": "p"}}, [
        ("involvedObject.namespace", 'Invalid value: "other": does not match event.namespace'),
    ]),
    ({"involvedObject": {"kind": "Pod", "name": "p"}, "metadata": {"name": "web.1", "namespace": "team"}}, [
        ("involvedObject.namespace", 'Invalid value: "": does not match event.namespace'),
    ]),
    ({"eventTime": "2026-01-01T00:05:00.000000Z", "reason": "r" * 129}, [
        ("reportingController", "Required value"),
        ("reportingController", 'Invalid value: "": name part must be non-empty'),
        ("reportingController", 'Invalid value: "": name part must consist of alphanumeric characters, \'-\', \'_\' '
         "or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or "
         "'123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"),
        ("reportingInstance", "Required value"), ("action", "Required value"),
        ("reason", 'Invalid value: "": can have at most 128 characters'),
    ]),
])
async def test_a_core_v1_event_gets_kubes_legacy_rules(
    hub: Client, changes: dict[str, Any], causes: list[tuple[str, str]],  # noqa: F811
) -> None:
    """kube's ValidateEventCreate for core v1: an Event is about an object of its namespace, and
    one with an eventTime names who reported it; the strict rules of events.k8s.io/v1 (a type
    of Normal or Warning, no count) are not applied."""
    event = {**legacy(), "type": "Info", **changes}
    namespace = event["metadata"]["namespace"]
    refused = await hub.post(f"/api/v1/namespaces/{namespace}/events", json=event)
    assert await _causes(refused) == causes
    assert (await refused.json())["message"].startswith('Event "web.1" is invalid: ')
    assert (await hub.post(CORE, json={**legacy(), "type": "Info"})).status == 201
    merge = {"Content-Type": "application/merge-patch+json"}
    moved = await hub.patch(f"{CORE}/web.1", json={"involvedObject": {"namespace": "other"}}, headers=merge)
    assert await _causes(moved) == [
        ("involvedObject.namespace", 'Invalid value: "other": does not match event.namespace'),
    ]


async def test_an_events_v1_update_changes_only_the_series(hub: Client) -> None:  # noqa: F811
    """kube's ValidateEventUpdate for events.k8s.io/v1: what the Event says is immutable, shown
    as Go prints the internal field; its series may move on (and is validated when it does),
    and the same change through core v1 is allowed."""
    assert (await hub.post(NEW, json=_new_event())).status == 201
    merge = {"Content-Type": "application/merge-patch+json"}
    changed = await hub.patch(f"{NEW}/web.3", headers=merge, json={
        "note": "moved", "type": "Warning", "eventTime": "2026-01-01T00:07:00.500000Z",
        "regarding": {"name": "api"}, "reportingController": "gpufed.io/other",
    })
    assert await _causes(changed) == [
        ("involvedObject", 'Invalid value: core.ObjectReference{Kind:"Deployment", Namespace:"default", '
         'Name:"api", UID:"", APIVersion:"", ResourceVersion:"", FieldPath:""}: field is immutable'),
        ("message", 'Invalid value: "moved": field is immutable'),
        ("type", 'Invalid value: "Warning": field is immutable'),
        ("eventTime", "Invalid value: 2026-01-01 00:07:00.5 +0000 UTC: field is immutable"),
        ("reportingController", 'Invalid value: "gpufed.io/other": field is immutable'),
    ]
    bad_series = await hub.patch(f"{NEW}/web.3", headers=merge, json={"series": {"count": 1}})
    assert await _causes(bad_series) == [
        ("series.count", 'Invalid value: "": should be at least 2'), ("series.lastObservedTime", "Required value"),
    ]
    series = {"count": 2, "lastObservedTime": "2026-01-01T00:08:00.000000Z"}
    counted = await hub.patch(f"{NEW}/web.3", headers=merge, json={"series": series})
    assert counted.status == 200, await counted.text()
    same_instant = await hub.patch(f"{NEW}/web.3", headers=merge, json={"eventTime": "2026-01-01T02:06:00.000000+02:00"})
    assert same_instant.status == 200, await same_instant.text()
    noted = await hub.patch(f"{CORE}/web.3", headers=merge, json={"message": "moved"})
    assert noted.status == 200, await noted.text()
