"""The hub's ``/metrics`` text as kube-apiserver writes it: no ``_created`` series on any counter,
histogram or summary, and kube's counters declared without ``_total`` under their declared name on
their ``HELP``, ``TYPE`` and sample lines alike."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.registry import Collector

from controlplane.exposition import DeclaredCounterFamily, render
from controlplane.metrics import HubMetrics


def _family(text: str, name: str) -> list[str]:
    """The lines of family ``name`` (its HELP and TYPE lines and samples, and any other series of it)."""
    return [line for line in text.splitlines() if line.split(" ")[0].split("{")[0].startswith(name)
            or line.startswith((f"# HELP {name}", f"# TYPE {name}"))]


def test_audit_counters_have_no_created_series() -> None:
    metrics = HubMetrics(process_collectors=False)
    metrics.audit.events.inc()
    metrics.audit.lost("log", reason="disk full")
    text = metrics.render().decode()
    assert _family(text, "apiserver_audit_event") == [
        "# HELP apiserver_audit_event_total [ALPHA] Counter of audit events generated and sent to the audit backend.",
        "# TYPE apiserver_audit_event_total counter",
        "apiserver_audit_event_total 1",
    ]
    assert _family(text, "apiserver_audit_error") == [
        "# HELP apiserver_audit_error_total [ALPHA] Counter of audit events that failed to be audited properly. "
        "Plugin identifies the plugin affected by the error.",
        "# TYPE apiserver_audit_error_total counter",
        'apiserver_audit_error_total{plugin="log"} 1',
    ]
    assert _family(text, "apiserver_audit_requests_rejected") == [
        "# HELP apiserver_audit_requests_rejected_total [ALPHA] Counter of apiserver requests rejected due to an error "
        "in audit logging backend.",
        "# TYPE apiserver_audit_requests_rejected_total counter",
        "apiserver_audit_requests_rejected_total 0",
    ]


def test_the_client_certificate_histogram_has_no_created_series() -> None:
    metrics = HubMetrics(process_collectors=False)
    metrics.client_certificate_expiration.observe(5000)
    lines = _family(metrics.render().decode(), "apiserver_client_certificate_expiration_seconds")
    assert lines[:2] == [
        "# HELP apiserver_client_certificate_expiration_seconds [ALPHA] Distribution of the remaining lifetime on the "
        "certificate used to authenticate a request.",
        "# TYPE apiserver_client_certificate_expiration_seconds histogram",
    ]
    assert lines[2:5] == [
        'apiserver_client_certificate_expiration_seconds_bucket{le="0"} 0',
        'apiserver_client_certificate_expiration_seconds_bucket{le="1800"} 0',
        'apiserver_client_certificate_expiration_seconds_bucket{le="3600"} 0',
    ]
    assert lines[-3:] == [
        'apiserver_client_certificate_expiration_seconds_bucket{le="+Inf"} 1',
        "apiserver_client_certificate_expiration_seconds_sum 5000",
        "apiserver_client_certificate_expiration_seconds_count 1",
    ]
    assert len(lines) == 2 + 15 + 2


def test_no_metric_of_the_hub_has_a_created_series() -> None:
    """kube's, Kueue's and client-go's metrics come from the Go client, whose text has no ``_created``:
    the hub's own ``gpufed_*`` counters and histograms follow them."""
    metrics = HubMetrics(process_collectors=False)
    metrics.admission.observe_webhook("w.acme.io", "validating", "CREATE", 0.01, code=200, rejected=False)
    metrics.admission.observe_policy("p", "b", "deny", 0.001, message="no")
    metrics.admission.observe_conversion("crontabs.acme.io", "v1", "v2", 0.01, succeeded=True)
    metrics.observe_scheduling(0.01, result="Success")
    metrics.observe_sample(0.5, ok=True)
    metrics.waste_samples.labels(result="error").inc()
    text = metrics.render().decode()
    assert "gpufed_waste_samples_total{result=\"error\"} 1" in text.splitlines()
    assert "gpufed_scheduling_duration_seconds_count{result=\"Success\"} 1" in text.splitlines()
    assert [line for line in text.splitlines() if "_created" in line] == []


def test_kubes_count_counters_keep_their_declared_name() -> None:
    metrics = HubMetrics(process_collectors=False)
    metrics.admission.observe_rejection("w.acme.io", "validating", "CREATE", "no_error", 403)
    metrics.admission.observe_fail_open("x.acme.io", "admit")
    text = metrics.render().decode()
    assert _family(text, "apiserver_admission_webhook_rejection_count")[1:] == [
        "# TYPE apiserver_admission_webhook_rejection_count counter",
        'apiserver_admission_webhook_rejection_count{error_type="no_error",name="w.acme.io",operation="CREATE",'
        'rejection_code="403",type="validating"} 1',
    ]
    assert _family(text, "apiserver_admission_webhook_fail_open_count") == [
        "# HELP apiserver_admission_webhook_fail_open_count [ALPHA] Admission webhook fail open count, identified by "
        "name and broken out for each admission type (validating or mutating).",
        "# TYPE apiserver_admission_webhook_fail_open_count counter",
        'apiserver_admission_webhook_fail_open_count{name="x.acme.io",type="admit"} 1',
    ]


class _Declared(Collector):
    def collect(self) -> Iterator[DeclaredCounterFamily]:
        family = DeclaredCounterFamily("declared_count", "As declared.")
        family.add_sample("declared_count", {"a": 'x"y'}, 2.0)
        yield family


def test_declared_counters_take_their_place_by_name_among_the_others() -> None:
    registry = CollectorRegistry()
    Counter("before", "Before.", registry=registry).inc()
    registry.register(_Declared())
    Counter("after", "After.", registry=registry)
    assert render(registry).decode().splitlines() == [
        "# HELP after_total After.",
        "# TYPE after_total counter",
        "after_total 0",
        "# HELP before_total Before.",
        "# TYPE before_total counter",
        "before_total 1",
        "# HELP declared_count As declared.",
        "# TYPE declared_count counter",
        'declared_count{a="x\\"y"} 2',
    ]


def test_the_text_is_the_go_clients() -> None:
    """What the Go client's ``Gather`` and expfmt write: families by name, one without series left
    out, series by label values, labels by name with ``le`` last, ``_sum`` before ``_count``, numbers
    in strconv's shortest ``'g'`` form, HELP and label values escaped."""
    registry = CollectorRegistry()
    requests = Counter("zeta_requests", "Line one\nline two \\ end.", ["verb", "code"], registry=registry)
    requests.labels(verb="LIST", code="200").inc(3)
    requests.labels(verb="GET", code="200").inc(1.5)
    requests.labels(verb="GET", code="404").inc()
    Counter("never_observed", "A vector with no series.", ["a"], registry=registry)
    Gauge("big", "Big.", registry=registry).set(123456789)
    Gauge("small", "Small.", registry=registry).set(0.00001)
    Gauge("quoted", "Quoted.", ["path"], registry=registry).labels(path='a"b\\c\nd').set(-0.0)
    latency = Histogram("alpha_seconds", "Latency.", ["verb"], buckets=[0.005, 1, 1e6], registry=registry)
    latency.labels(verb="GET").observe(2.5)
    assert render(registry).decode().splitlines() == [
        "# HELP alpha_seconds Latency.",
        "# TYPE alpha_seconds histogram",
        'alpha_seconds_bucket{verb="GET",le="0.005"} 0',
        'alpha_seconds_bucket{verb="GET",le="1"} 0',
        'alpha_seconds_bucket{verb="GET",le="1e+06"} 1',
        'alpha_seconds_bucket{verb="GET",le="+Inf"} 1',
        'alpha_seconds_sum{verb="GET"} 2.5',
        'alpha_seconds_count{verb="GET"} 1',
        "# HELP big Big.",
        "# TYPE big gauge",
        "big 1.23456789e+08",
        "# HELP quoted Quoted.",
        "# TYPE quoted gauge",
        'quoted{path="a\\"b\\\\c\\nd"} 0',
        "# HELP small Small.",
        "# TYPE small gauge",
        "small 1e-05",
        "# HELP zeta_requests_total Line one\\nline two \\\\ end.",
        "# TYPE zeta_requests_total counter",
        'zeta_requests_total{code="200",verb="GET"} 1.5',
        'zeta_requests_total{code="200",verb="LIST"} 3',
        'zeta_requests_total{code="404",verb="GET"} 1',
    ]


@pytest.mark.parametrize(("message", "error_type"), [
    ("compilation failed: ERROR: <input>:1:7: Syntax error", "compile_error"),
    ("validation failed due to running out of cost budget, no further validation rules will be run", "out_of_budget"),
    ("expression 'object.spec.missing' resulted in error: no such key: missing", "invalid_error"),
    ("every Deployment must carry a team label", "invalid_error"),  # kube's label of a false validation
])
def test_policy_checks_carry_kubes_error_type(message: str, error_type: str) -> None:
    metrics = HubMetrics(process_collectors=False)
    metrics.admission.observe_policy("p", "b", "warn", 0.001, message=message)
    lines = metrics.render().decode().splitlines()
    assert "apiserver_validating_admission_policy_check_total{enforcement_action=\"warn\"," \
        f'error_type="{error_type}",policy="p",policy_binding="b"}} 1' in lines
    assert "apiserver_validating_admission_policy_check_duration_seconds_count{enforcement_action=\"warn\"," \
        f'error_type="{error_type}",policy="p",policy_binding="b"}} 1' in lines
