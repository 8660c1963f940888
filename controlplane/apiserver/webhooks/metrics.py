"""Admission webhook, ValidatingAdmissionPolicy and CRD conversion webhook metrics, under kube-apiserver's names (no
``gpufed_`` prefix, so kube's dashboards and alerts read them as they are):

* ``apiserver_admission_webhook_admission_duration_seconds{name,type,operation,rejected}`` --
  each webhook call, ``type`` ``validating`` or ``admit`` (kube's buckets, 5 ms to 25 s);
* ``apiserver_admission_webhook_request_total{name,type,operation,code,rejected}`` -- each
  call by its HTTP code (200 answered; the denial's code; 0 for an invalid answer; 503 for a
  call that failed before an answer, as kube's client reports it);
* ``apiserver_admission_webhook_rejection_count{name,type,operation,error_type,rejection_code}``
  -- writes a webhook refused: ``no_error`` (it denied), ``calling_webhook_error`` (its call
  failed under ``failurePolicy: Fail``), ``apiserver_internal_error`` (anything else);
* ``apiserver_admission_webhook_fail_open_count{name,type}`` -- failed calls ignored under
  ``failurePolicy: Ignore``;
* ``apiserver_validating_admission_policy_check_total{policy,policy_binding,error_type,enforcement_action}``
  and ``..._check_duration_seconds`` -- as kube's dispatcher counts: each failed validation once
  per action its binding took (``deny``, ``warn``, ``audit``; an audit annotation's error under
  ``failurePolicy: Fail`` as ``deny``), and each validation whose error was ignored under
  ``failurePolicy: Ignore`` as ``allow``; a validation that passed is not counted. ``error_type``
  is kube's, read from the decision's message (:func:`policy_error_type`);
* ``apiserver_crd_conversion_webhook_duration_seconds{crd_name,from_version,to_version,succeeded}``
  -- each conversion of objects between two versions of a CRD through its webhook (kube's buckets:
  1 ms doubling 15 times).
"""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import Metric

from controlplane.exposition import DeclaredCounterFamily
from controlplane.metricstability import Stability, kube_help

_WEBHOOK_BUCKETS = (0.005, 0.025, 0.1, 0.5, 1.0, 2.5, 10.0, 25.0)
_POLICY_BUCKETS = (0.0000005, 0.001, 0.01, 0.1, 1.0)
_POLICY_LABELS = ["policy", "policy_binding", "error_type", "enforcement_action"]
_CONVERSION_BUCKETS = tuple(0.001 * 2**i for i in range(15))

#: kube's ``WebhookRejectionErrorType`` values.
CALLING_WEBHOOK_ERROR = "calling_webhook_error"
APISERVER_INTERNAL_ERROR = "apiserver_internal_error"
NO_ERROR = "no_error"

#: kube's ``ValidationErrorType`` values (``policy/validating/metrics``); ``no_error`` as above.
COMPILE_ERROR = "compile_error"
OUT_OF_BUDGET = "out_of_budget"
INVALID_ERROR = "invalid_error"


def policy_error_type(message: str) -> str:
    """kube's ``ErrorType`` of a policy decision that did not plainly admit, from its message: a
    failed validation that evaluated to false is an ``invalid_error`` too, as kube labels it."""
    if message.startswith("compilation"):
        return COMPILE_ERROR
    if message.startswith("validation failed due to running out of cost budget"):
        return OUT_OF_BUDGET
    return INVALID_ERROR


class AdmissionMetrics:
    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        registry = registry if registry is not None else CollectorRegistry()
        self.webhook_duration = Histogram(
            "apiserver_admission_webhook_admission_duration_seconds",
            kube_help(
                Stability.STABLE,
                "Admission webhook latency histogram in seconds, identified by name and broken out for each "
                "operation and API resource and type (validate or admit).",
            ),
            ["name", "type", "operation", "rejected"], buckets=_WEBHOOK_BUCKETS, registry=registry,
        )
        self.webhook_requests = Counter(
            "apiserver_admission_webhook_request",
            kube_help(
                Stability.ALPHA,
                "Admission webhook request total, identified by name and broken out for each admission type "
                "(validating or mutating) and operation. Additional labels specify whether the request was "
                "rejected or not and an HTTP status code. Codes greater than 600 are truncated to 600, to keep "
                "the metrics cardinality bounded.",
            ),
            ["name", "type", "operation", "code", "rejected"], registry=registry,
        )
        # kube's two counters named ``..._count`` carry no ``_total`` suffix, which prometheus_client's
        # Counter would add: they are collected as declared counters (controlplane.exposition).
        self.webhook_rejections = _PlainCounter(
            "apiserver_admission_webhook_rejection_count",
            kube_help(
                Stability.ALPHA,
                "Admission webhook rejection count, identified by name and broken out for each admission type "
                "(validating or admit) and operation. Additional labels specify an error type "
                "(calling_webhook_error or apiserver_internal_error if an error occurred; no_error otherwise) and "
                "optionally a non-zero rejection code if the webhook rejects the request with an HTTP status code "
                "(honored by the apiserver when the code is greater or equal to 400). Codes greater than 600 are "
                "truncated to 600, to keep the metrics cardinality bounded.",
            ),
            ("name", "type", "operation", "error_type", "rejection_code"),
        )
        self.webhook_fail_open = _PlainCounter(
            "apiserver_admission_webhook_fail_open_count",
            kube_help(
                Stability.ALPHA,
                "Admission webhook fail open count, identified by name and broken out for each admission type "
                "(validating or mutating).",
            ),
            ("name", "type"),
        )
        registry.register(self.webhook_rejections)
        registry.register(self.webhook_fail_open)
        self.policy_checks = Counter(
            "apiserver_validating_admission_policy_check",
            kube_help(
                Stability.BETA,
                "Validation admission policy check total, labeled by policy and further identified by binding and "
                "enforcement action taken.",
            ),
            _POLICY_LABELS, registry=registry,
        )
        self.policy_duration = Histogram(
            "apiserver_validating_admission_policy_check_duration_seconds",
            kube_help(
                Stability.BETA,
                "Validation admission latency for individual validation expressions in seconds, labeled by policy "
                "and further including binding and enforcement action taken.",
            ),
            _POLICY_LABELS, buckets=_POLICY_BUCKETS, registry=registry,
        )

        self.crd_conversion_duration = Histogram(
            "apiserver_crd_conversion_webhook_duration_seconds",
            kube_help(Stability.ALPHA, "CRD webhook conversion duration in seconds"),
            ["crd_name", "from_version", "to_version", "succeeded"], buckets=_CONVERSION_BUCKETS, registry=registry,
        )

    def observe_conversion(self, crd: str, from_version: str, to_version: str, seconds: float, *, succeeded: bool) -> None:
        self.crd_conversion_duration.labels(
            crd, from_version, to_version, "true" if succeeded else "false"
        ).observe(max(seconds, 0.0))

    def observe_webhook(
        self, name: str, step: str, operation: str, seconds: float, *, code: int, rejected: bool
    ) -> None:
        """One call of webhook ``name`` (``step``: ``validating`` or ``admit``), as kube's ``ObserveWebhook``."""
        flag = "true" if rejected else "false"
        self.webhook_requests.labels(name, step, operation, str(min(code, 600)), flag).inc()
        self.webhook_duration.labels(name, step, operation, flag).observe(max(seconds, 0.0))

    def observe_rejection(self, name: str, step: str, operation: str, error_type: str, code: int) -> None:
        self.webhook_rejections.inc(name, step, operation, error_type, str(min(code, 600)))

    def observe_fail_open(self, name: str, step: str) -> None:
        self.webhook_fail_open.inc(name, step)

    def observe_policy(self, policy: str, binding: str, action: str, seconds: float, *, message: str) -> None:
        """One decision of a binding's evaluation that took ``action`` (``allow``, ``deny``, ``warn``,
        ``audit``); its ``message`` gives kube's ``error_type``."""
        error_type = policy_error_type(message)
        self.policy_checks.labels(policy, binding, error_type, action).inc()
        self.policy_duration.labels(policy, binding, error_type, action).observe(max(seconds, 0.0))


class _PlainCounter:
    """A labelled counter served under its name as declared (no ``_total`` appended)."""

    def __init__(self, name: str, documentation: str, labels: tuple[str, ...]) -> None:
        self._name, self._documentation, self._labels = name, documentation, labels
        self._values: dict[tuple[str, ...], float] = {}

    def inc(self, *values: str) -> None:
        self._values[values] = self._values.get(values, 0.0) + 1.0

    def value(self, *values: str) -> float:
        return self._values.get(values, 0.0)

    def describe(self) -> Iterator[Metric]:
        yield DeclaredCounterFamily(self._name, self._documentation)

    def collect(self) -> Iterator[Metric]:
        family = DeclaredCounterFamily(self._name, self._documentation)
        for values, count in list(self._values.items()):
            family.add_sample(self._name, dict(zip(self._labels, values, strict=True)), count)
        yield family
