"""kube's APIService rules as pure functions: validation messages word for word, the port default,
the Available condition of a local APIService, and ``kubectl get apiservices``' SERVICE and
AVAILABLE cells."""

from __future__ import annotations

import base64
import copy
import datetime as dt
from typing import Any

import pytest

from controlplane.apis.kube import apiregistration

NOW = dt.datetime(2026, 3, 1, 10, 0, tzinfo=dt.UTC)


def service(name: str = "v1beta1.metrics.example.com", **spec: Any) -> dict[str, Any]:
    base = {"group": "metrics.example.com", "version": "v1beta1", "groupPriorityMinimum": 100, "versionPriority": 100,
            "service": {"namespace": "ext", "name": "metrics", "port": 443}, "insecureSkipTLSVerify": True}
    return {"metadata": {"name": name}, "spec": {**base, **spec}}


def local(name: str = "v1.apps", **spec: Any) -> dict[str, Any]:
    return {"metadata": {"name": name}, "spec": {
        "group": "apps", "version": "v1", "groupPriorityMinimum": 17800, "versionPriority": 15, **spec}}


def messages(obj: dict[str, Any]) -> list[str]:
    return [f"{e.field}: {e.message}" for e in apiregistration.validate(obj, None)]


CA = base64.b64encode(b"-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n").decode()


@pytest.mark.parametrize(("obj", "expected"), [
    (service(), []),
    (local(), []),
    (local("v1.", group="", version="v1"), []),
    (service(name="v1.metrics.example.com"),
     ['metadata.name: Invalid value: "v1.metrics.example.com": must be `spec.version+"."+spec.group`: "v1beta1.metrics.example.com"']),
    (local("v2.", group="", version="v2"),
     ['spec.group: Required value: only v1 may have an empty group and it better be legacy kube']),
    (local("v1.Apps", group="Apps"),
     ['spec.group: Invalid value: "Apps": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric '
      "characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used "
      "for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"]),
    (local("1.apps", version="1"),
     ['spec.version: Invalid value: "1": a DNS-1035 label must consist of lower case alphanumeric characters or '
      "'-', start with an alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or "
      "'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')"]),
    (local(groupPriorityMinimum=0), ["spec.groupPriorityMinimum: Invalid value: 0: must be positive and less than 20000"]),
    (local(groupPriorityMinimum=20001),
     ["spec.groupPriorityMinimum: Invalid value: 20001: must be positive and less than 20000"]),
    (local(versionPriority=1001), ["spec.versionPriority: Invalid value: 1001: must be positive and less than 1000"]),
    (local(versionPriority=None), ["spec.versionPriority: Invalid value: 0: must be positive and less than 1000"]),
    (local(caBundle=CA), ['spec.caBundle: Invalid value: "59 bytes": local APIServices may not have a caBundle']),
    (local(insecureSkipTLSVerify=True),
     ["spec.insecureSkipTLSVerify: Invalid value: true: local APIServices may not have insecureSkipTLSVerify"]),
    (service(service={"port": 443}),
     ["spec.service.namespace: Required value", "spec.service.name: Required value"]),
    (service(service={"namespace": "ext", "name": "metrics", "port": 70000}),
     ["spec.service.port: Invalid value: 70000: port is not valid: must be between 1 and 65535, inclusive"]),
    (service(caBundle=CA), ["spec.insecureSkipTLSVerify: Invalid value: true: may not be true if caBundle is present"]),
])
def test_validation_speaks_kubes_words(obj: dict[str, Any], expected: list[str]) -> None:
    assert messages(obj) == expected


def test_a_bad_path_segment_name_is_not_also_reported_as_the_wrong_name() -> None:
    # The name rule (kube's IsValidPathSegmentName) answers for it; the version.group check stays quiet.
    assert messages(local("v1/apps")) == []


def test_status_conditions_are_true_false_or_unknown() -> None:
    obj = local()
    obj["status"] = {"conditions": [{"type": "Available", "status": "Maybe"}]}
    assert [f"{e.field}: {e.message}" for e in apiregistration.validate_status(obj, None)] == [
        'status.conditions[0].status: Unsupported value: "Maybe": supported values: "True", "False", "Unknown"'
    ]


def test_the_service_port_defaults_to_443() -> None:
    obj = service(service={"namespace": "ext", "name": "metrics"})
    apiregistration.defaults(obj)
    assert obj["spec"]["service"]["port"] == 443


def test_a_local_apiservice_is_available_from_its_creation() -> None:
    obj = local()
    apiregistration.prepare(obj, NOW)
    assert obj["status"]["conditions"] == [{
        "type": "Available", "status": "True", "reason": "Local", "message": "Local APIServices are always available",
        "lastTransitionTime": "2026-03-01T10:00:00Z",
    }]
    aggregated = service()
    apiregistration.prepare(aggregated, NOW)
    assert "status" not in aggregated


def test_the_transition_time_moves_only_with_the_status() -> None:
    obj = service()
    assert apiregistration.set_available(obj, status="False", reason="ServiceNotFound", message="a", now=NOW)
    later = NOW + dt.timedelta(minutes=1)
    assert apiregistration.set_available(obj, status="False", reason="MissingEndpoints", message="b", now=later)
    assert apiregistration.available_condition(obj)["lastTransitionTime"] == "2026-03-01T10:00:00Z"  # type: ignore[index]
    same = copy.deepcopy(obj)
    assert not apiregistration.set_available(same, status="False", reason="MissingEndpoints", message="b", now=later)
    assert apiregistration.set_available(obj, status="True", reason="Passed", message="all checks passed", now=later)
    assert apiregistration.available_condition(obj)["lastTransitionTime"] == "2026-03-01T10:01:00Z"  # type: ignore[index]


@pytest.mark.parametrize(("obj", "service_cell", "available_cell"), [
    (local(), "Local", "Unknown"),
    ({**local(), "status": {"conditions": [{"type": "Available", "status": "True", "reason": "Local"}]}}, "Local", "True"),
    ({**service(), "status": {"conditions": [{"type": "Available", "status": "False", "reason": "FailedDiscoveryCheck"}]}},
     "ext/metrics", "False (FailedDiscoveryCheck)"),
    ({**service(), "status": {"conditions": [{"type": "Available", "status": "Unknown"}]}}, "ext/metrics", "Unknown"),
])
def test_kubectl_columns(obj: dict[str, Any], service_cell: str, available_cell: str) -> None:
    assert apiregistration.printed_service(obj) == service_cell
    assert apiregistration.printed_available(obj) == available_cell
