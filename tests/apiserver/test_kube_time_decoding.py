"""A built-in kind's timestamps are decoded as kube's ``metav1.Time`` and ``MicroTime`` decode
them, and stored as they marshal.

kube parses a ``Time`` with Go's ``time.Parse(time.RFC3339, ...)`` and writes it back in UTC to
the second; a ``MicroTime`` (an Event's ``eventTime``, a Lease's ``acquireTime`` and
``renewTime``) must be exactly ``RFC3339Micro`` and comes back in UTC with six digits. A string
Go cannot parse fails the decoding: 400 ``Pod in version "v1" cannot be handled as a Pod:
parsing time "yesterday" as "2006-01-02T15:04:05Z07:00": cannot parse "yesterday" as "2006"``,
a patch whose result does not decode kube's patch handler's 422. The hub stored any string,
after which ``kubectl describe`` and ``kubectl events`` and the official client's typed reads
failed on the object (or on the whole namespace).
"""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

from controlplane.apis.kube.gotime import TimeParseError, kube_time
from controlplane.apiserver.openapi import known_fields
from controlplane.apiserver.openapi.known_fields import unknown_fields_of

from .test_kube_validation import Client, hub  # noqa: F401 (fixture)
from .test_real_clients import kubeconfig, kubectl, needs_kubectl, server_url  # noqa: F401 (fixtures)

PODS = "/api/v1/namespaces/default/pods"
EVENTS = "/api/v1/namespaces/default/events"
LEASES = "/apis/coordination.k8s.io/v1/namespaces/default/leases"
TIME = '"2006-01-02T15:04:05Z07:00"'
MICRO = '"2006-01-02T15:04:05.000000Z07:00"'

# --- Go's parser, pure -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "micro", "stored"),
    [
        ("2026-12-07T17:01:43Z", False, "2026-12-07T17:01:43Z"),
        ("2026-12-07T19:01:43+02:00", False, "2026-12-07T17:01:43Z"),
        ("2026-12-07T17:01:43.999Z", False, "2026-12-07T17:01:43Z"),  # a fraction is parsed, then not written
        ("2026-12-07T17:01:43,5-01:30", False, "2026-12-07T18:31:43Z"),
        ("2026-12-07T7:01:43Z", False, "2026-12-07T07:01:43Z"),  # Go's hour takes one digit
        ("2026-12-07T19:01:43.285900+02:00", True, "2026-12-07T17:01:43.285900Z"),
        ("0001-01-01T00:00:00Z", False, None),  # the zero time is written null
        ("0001-01-01T00:00:00.000000Z", True, None),
        ("0001-01-01T00:30:00+01:00", False, "0000-12-31T23:30:00Z"),
        ("9999-12-31T23:30:00-01:00", False, "10000-01-01T00:30:00Z"),
        ("2024-02-29T00:00:00Z", False, "2024-02-29T00:00:00Z"),
    ],
)
def test_what_go_parses_is_written_in_utc(text: str, micro: bool, stored: str | None) -> None:
    assert kube_time(text, micro=micro) == stored


@pytest.mark.parametrize(
    ("text", "micro", "error"),
    [
        ("yesterday", False, f'as {TIME}: cannot parse "yesterday" as "2006"'),
        ("", False, f'as {TIME}: cannot parse "" as "2006"'),
        ("2026-12-07 17:01:43Z", False, f'as {TIME}: cannot parse " 17:01:43Z" as "T"'),
        ("2026-12-07T17:01:43", False, f'as {TIME}: cannot parse "" as "Z07:00"'),
        ("2026-12-07T17:01:43z", False, f'as {TIME}: cannot parse "z" as "Z07:00"'),
        ("2026-12-7T17:01:43Z", False, f'as {TIME}: cannot parse "7T17:01:43Z" as "02"'),
        ("2026-12-07T17:01:43Z ", False, ': extra text: " "'),
        ("2026-13-07T17:01:43Z", False, ": month out of range"),
        ("2026-02-29T17:01:43Z", False, ": day out of range"),
        ("2026-12-07T24:01:43Z", False, ": hour out of range"),
        ("2026-12-07T17:01:60Z", False, ": second out of range"),
        ("2026-12-07T17:01:43+25:00", False, ": time zone offset hour out of range"),
        ("2026-12-07T17:01:43+25:61", False, ": time zone offset minute out of range"),  # Go names the last
        ("2026-12-07T17:05:21.589287", True, f'as {MICRO}: cannot parse "" as "Z07:00"'),  # a naive datetime
        ("2026-12-07T17:01:43Z", True, f'as {MICRO}: cannot parse "Z" as ".000000"'),
        ("2026-12-07T17:01:43.123Z", True, f'as {MICRO}: cannot parse ".123Z" as ".000000"'),
        ("2026-12-07T17:01:43.1234567Z", True, f'as {MICRO}: cannot parse "7Z" as "Z07:00"'),
        ("été", False, f'as {TIME}: cannot parse "\\xc3\\xa9t\\xc3\\xa9" as "2006"'),
    ],
)
def test_what_go_refuses_is_its_parse_error(text: str, micro: bool, error: str) -> None:
    """``parsing time "<text>" as "<layout>": cannot parse "<rest>" as "<element>"``, or
    ``parsing time "<text>": <what> out of range``; a byte that is not printable ASCII quoted ``\\xNN``."""
    quoted = '"' + "".join(chr(b) if 0x20 <= b < 0x80 else f"\\x{b:02x}" for b in text.encode()) + '"'
    with pytest.raises(TimeParseError) as raised:
        kube_time(text, micro=micro)
    assert str(raised.value) == f"parsing time {quoted}{'' if error.startswith(':') else ' '}{error}"


def test_the_decoder_rewrites_each_timestamp_in_place() -> None:
    decode = unknown_fields_of("", "v1", "Pod")
    pod: dict[str, Any] = {
        "metadata": {"name": "p", "managedFields": [{"manager": "m", "time": "2026-12-07T19:01:43+02:00"}]},
        "status": {
            "startTime": "2026-12-07T19:01:43.5+02:00",
            "conditions": [{"type": "Ready", "lastTransitionTime": "2026-12-07T17:01:43Z"}],
        },
    }
    assert decode(pod, False) == []
    assert pod["metadata"]["managedFields"][0]["time"] == "2026-12-07T17:01:43Z"
    assert pod["status"]["startTime"] == "2026-12-07T17:01:43Z"
    lease = {"spec": {"renewTime": "2026-12-07T19:01:43.285900+02:00", "acquireTime": None}}
    assert unknown_fields_of("coordination.k8s.io", "v1", "Lease")(lease, False) == []
    assert lease["spec"] == {"renewTime": "2026-12-07T17:01:43.285900Z", "acquireTime": None}


def test_a_timestamp_of_another_type_ends_the_decoding() -> None:
    """Time's UnmarshalJSON unmarshals a string and answers that error, without a field, ending
    the decoding there: a value of the wrong type met before (``priority: "x"``) is not the answer."""
    decode = unknown_fields_of("", "v1", "Pod")
    with pytest.raises(
        known_fields.CannotUnmarshal, match=r"^json: cannot unmarshal number into Go value of type string$"
    ):
        decode({"spec": {"priority": "x"}, "status": {"startTime": 5}}, False)


# --- the API ---------------------------------------------------------------------------------


def pod(**status: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "pt"},
        "spec": {"containers": [{"name": "main", "image": "nginx"}]},
    }
    if status:
        body["status"] = status
    return body


async def test_a_bad_time_is_refused_on_create_update_and_patch(hub: Client) -> None:  # noqa: F811
    cannot = 'Pod in version "v1" cannot be handled as a Pod: '
    error = f'parsing time "yesterday" as {TIME}: cannot parse "yesterday" as "2006"'
    response = await hub.post(PODS, json=pod(startTime="yesterday"))
    assert response.status == 400, await response.text()
    status = await response.json()
    assert (status["reason"], status["message"]) == ("BadRequest", cannot + error)
    created = await hub.post(PODS, json=pod())
    assert created.status == 201, await created.text()
    stored = await created.json()
    stored["status"] = {"startTime": "yesterday"}
    for path in (f"{PODS}/pt", f"{PODS}/pt/status"):
        response = await hub.put(path, json=stored)
        assert response.status == 400, path
        assert (await response.json())["message"] == cannot + error
    response = await hub.patch(
        f"{PODS}/pt/status",
        json={"status": {"startTime": "yesterday"}},
        headers={"Content-Type": "application/merge-patch+json"},
    )
    assert response.status == 422, await response.text()
    [cause] = (await response.json())["details"]["causes"]
    assert cause["field"] == "patch"
    assert cause["message"].startswith('Invalid value: "{\\"apiVersion\\":\\"v1\\"')
    assert cause["message"].endswith(f'": {error}')
    response = await hub.patch(
        f"{PODS}/pt/status",
        json={"status": {"startTime": "2026-12-07T19:01:43+02:00"}},
        headers={"Content-Type": "application/merge-patch+json"},
    )
    assert response.status == 200, await response.text()
    assert (await response.json())["status"]["startTime"] == "2026-12-07T17:01:43Z"
    read = await (await hub.get(f"{PODS}/pt")).json()
    assert read["status"]["startTime"] == "2026-12-07T17:01:43Z"


async def test_an_events_times_are_kubes(hub: Client) -> None:  # noqa: F811
    event = {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": "e1"},
        "reason": "Started",
        "involvedObject": {"kind": "Pod", "namespace": "default", "name": "pt"},
        "reportingComponent": "tests",
        "reportingInstance": "tests-0",
        "action": "Start",
        "lastTimestamp": "2026-12-07T19:01:43+02:00",
        "eventTime": "2026-12-07T17:05:21.589287",
    }
    response = await hub.post(EVENTS, json=event)
    assert response.status == 400, await response.text()
    assert (await response.json())["message"] == (
        'Event in version "v1" cannot be handled as a Event: parsing time "2026-12-07T17:05:21.589287" as '
        f'{MICRO}: cannot parse "" as "Z07:00"'
    )
    event["eventTime"] = "2026-12-07T19:05:21.2859+02:00"
    response = await hub.post(EVENTS, json=event)
    assert response.status == 400
    assert (await response.json())["message"].endswith('cannot parse ".2859+02:00" as ".000000"')
    event["eventTime"] = "2026-12-07T19:05:21.285900+02:00"
    response = await hub.post(EVENTS, json=event)
    assert response.status == 201, await response.text()
    stored = await (await hub.get(f"{EVENTS}/e1")).json()
    assert (stored["eventTime"], stored["lastTimestamp"]) == (
        "2026-12-07T17:05:21.285900Z",
        "2026-12-07T17:01:43Z",
    )
    served = await (await hub.get("/apis/events.k8s.io/v1/namespaces/default/events/e1")).json()
    assert served["eventTime"] == "2026-12-07T17:05:21.285900Z"


def _official_client(url: str) -> dict[str, Any]:
    """An Event with the naive ``datetime.now()`` the official client's users write, then an
    aware one; a Lease renewed with a time at an offset."""
    from kubernetes import client
    from kubernetes.client.rest import ApiException

    configuration = client.Configuration()
    configuration.host = url
    moment = datetime(2026, 12, 7, 17, 5, 21, 589287)
    with client.ApiClient(configuration) as api_client:
        core, coordination = client.CoreV1Api(api_client), client.CoordinationV1Api(api_client)

        def event(name: str, at: datetime) -> Any:
            return client.CoreV1Event(
                metadata=client.V1ObjectMeta(name=name),
                reason="Started",
                message="started",
                type="Normal",
                involved_object=client.V1ObjectReference(kind="Pod", namespace="default", name="pt"),
                event_time=at,
                reporting_component="tests",
                reporting_instance="tests-0",
                action="Start",
            )

        try:
            core.create_namespaced_event("default", event("naive", moment))
            naive = ""
        except ApiException as exc:
            naive = f"{exc.status} {exc.body}"
        core.create_namespaced_event("default", event("aware", moment.replace(tzinfo=UTC)))
        read = core.read_namespaced_event("aware", "default")
        east = timezone(timedelta(hours=2))
        lease = client.V1Lease(
            metadata=client.V1ObjectMeta(name="member-1"),
            spec=client.V1LeaseSpec(
                holder_identity="agent",
                lease_duration_seconds=40,
                renew_time=moment.replace(tzinfo=east),
                acquire_time=moment.replace(tzinfo=east),
            ),
        )
        coordination.create_namespaced_lease("default", lease)
        raw = coordination.read_namespaced_lease("member-1", "default", _preload_content=False)
        return {"naive": naive, "event time": read.event_time, "lease": json.loads(raw.data)["spec"]}


@needs_kubectl
async def test_the_official_client_and_kubectl_events(server_url: str, kubeconfig: Path) -> None:  # noqa: F811
    result = await asyncio.to_thread(_official_client, server_url)
    assert result["naive"].startswith("400 "), result
    assert (
        'parsing time \\"2026-12-07T17:05:21.589287\\" as \\"2006-01-02T15:04:05.000000Z07:00\\"'
        in result["naive"]
    )
    assert result["event time"] == datetime(2026, 12, 7, 17, 5, 21, 589287, tzinfo=UTC)
    assert (result["lease"]["renewTime"], result["lease"]["acquireTime"]) == (
        "2026-12-07T15:05:21.589287Z",
        "2026-12-07T15:05:21.589287Z",
    )
    code, out, err = await kubectl(kubeconfig, "events", "-n", "default")
    assert code == 0, err
    assert "started" in out, out


async def test_server_owned_times_are_decoded_then_replaced(hub: Client) -> None:  # noqa: F811
    """kube decodes the body before it sets ``creationTimestamp`` and keeps ``deletionTimestamp``:
    one Go cannot parse is a 400, one it can is replaced by the server's."""
    cannot = 'Pod in version "v1" cannot be handled as a Pod: '
    body = pod()
    body["metadata"]["creationTimestamp"] = "yesterday"
    response = await hub.post(PODS, json=body)
    assert response.status == 400, await response.text()
    assert (await response.json())[
        "message"
    ] == cannot + f'parsing time "yesterday" as {TIME}: cannot parse "yesterday" as "2006"'
    body["metadata"]["creationTimestamp"] = "2020-01-01T00:00:00+02:00"
    body["metadata"]["deletionTimestamp"] = "2020-01-01T00:00:00Z"
    response = await hub.post(PODS, json=body)
    assert response.status == 201, await response.text()
    stored = await response.json()
    assert (
        not stored["metadata"]["creationTimestamp"].startswith("2020")
        and "deletionTimestamp" not in stored["metadata"]
    )
    stored["metadata"]["deletionTimestamp"] = 7
    response = await hub.put(f"{PODS}/pt", json=stored)
    assert response.status == 400, await response.text()
    assert (await response.json())[
        "message"
    ] == cannot + "json: cannot unmarshal number into Go value of type string"
