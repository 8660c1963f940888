"""kube's validation of a CRD's ``spec.conversion`` (strategy None or Webhook), table-driven."""

from __future__ import annotations

import base64
import copy
from typing import Any

import pytest

from controlplane.apis.apiextensions.crd import default_crd, validate_crd, webhook_conversion

CA = base64.b64encode(
    b"-----BEGIN CERTIFICATE-----\nMIIBQjCB6aADAgECAgEBMAoGCCqGSM49BAMCMA8xDTALBgNVBAMMBHRlc3QwHhcN\n-----END CERTIFICATE-----\n"
).decode()
CRD: dict[str, Any] = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": "crontabs.stable.example.com"},
    "spec": {
        "group": "stable.example.com",
        "scope": "Namespaced",
        "names": {"plural": "crontabs", "kind": "CronTab"},
        "versions": [
            {"name": name, "served": True, "storage": name == "v1",
             "schema": {"openAPIV3Schema": {"type": "object", "properties": {"spec": {"type": "object"}}}}}
            for name in ("v1", "v2")
        ],
        "conversion": {
            "strategy": "Webhook",
            "webhook": {"conversionReviewVersions": ["v1"], "clientConfig": {"url": "https://convert.example.com/crontabs", "caBundle": CA}},
        },
    },
}


def _errors(change: Any, *, old: dict[str, Any] | None = None) -> list[tuple[str, str]]:
    crd = copy.deepcopy(CRD)
    change(crd)
    default_crd(crd)
    return [(e.field, e.message) for e in validate_crd(crd, old=old)]


def _hook(crd: dict[str, Any]) -> dict[str, Any]:
    return crd["spec"]["conversion"]["webhook"]  # type: ignore[no-any-return]


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (lambda c: None, []),
        (lambda c: _hook(c)["clientConfig"].update(url=None, service={"name": "convert", "namespace": "default", "path": "/v1"}), []),
        (lambda c: c["spec"]["conversion"].update(strategy="Magic"),
         [("spec.conversion.strategy", 'Unsupported value: "Magic": supported values: "None", "Webhook"'),
          ("spec.conversion.webhookClientConfig", "Forbidden: should not be set when strategy is not set to Webhook"),
          ("spec.conversion.conversionReviewVersions", "Forbidden: should not be set when strategy is not set to Webhook")]),
        (lambda c: c["spec"]["conversion"].pop("webhook"),
         [("spec.conversion.webhookClientConfig", "Required value: required when strategy is set to Webhook"),
          ("spec.conversion.conversionReviewVersions", "Required value")]),
        (lambda c: _hook(c).update(conversionReviewVersions=["v2", "v2"]),
         [("spec.conversion.conversionReviewVersions[1]", 'Invalid value: "v2": duplicate version'),
          ("spec.conversion.conversionReviewVersions", 'Invalid value: []string{"v2", "v2"}: must include at least one of v1, v1beta1')]),
        (lambda c: _hook(c)["clientConfig"].update(service={"name": "convert", "namespace": "default"}),
         [("spec.conversion.webhookClientConfig", "Required value: exactly one of url or service is required")]),
        (lambda c: _hook(c)["clientConfig"].update(url="http://u:p@convert.example.com/x?a=b#f"),
         [("spec.conversion.webhookClientConfig.url", 'Invalid value: "http": \'https\' is the only allowed URL scheme; desired format: https://host[/path]'),
          ("spec.conversion.webhookClientConfig.url", 'Invalid value: "u:p": user information is not permitted in the URL'),
          ("spec.conversion.webhookClientConfig.url", 'Invalid value: "f": fragments are not permitted in the URL'),
          ("spec.conversion.webhookClientConfig.url", 'Invalid value: "a=b": query parameters are not permitted in the URL')]),
        (lambda c: _hook(c)["clientConfig"].update(url=None, service={"name": "", "namespace": "default", "port": 70000, "path": "/a//b/"}),
         [("spec.conversion.webhookClientConfig.service.name", "Required value: service name is required"),
          ("spec.conversion.webhookClientConfig.service.port", "Invalid value: 70000: port is not valid: must be between 1 and 65535, inclusive"),
          ("spec.conversion.webhookClientConfig.service.path", 'Invalid value: "/a//b/": segment[1] may not be empty')]),
        # kube takes a CA bundle with no certificate on create (the CRD is then not established).
        (lambda c: _hook(c)["clientConfig"].update(caBundle=base64.b64encode(b"no").decode()), []),
        (lambda c: c["spec"]["conversion"].update(strategy="None"),
         [("spec.conversion.webhookClientConfig", "Forbidden: should not be set when strategy is not set to Webhook"),
          ("spec.conversion.conversionReviewVersions", "Forbidden: should not be set when strategy is not set to Webhook")]),
        (lambda c: c["spec"].update(preserveUnknownFields=True),
         [("spec.preserveUnknownFields", "Invalid value: true: must be false"),
          ("spec.conversion.strategy", 'Invalid value: "Webhook": must be None if spec.preserveUnknownFields is true')]),
    ],
)
def test_conversion_is_validated_with_kubes_messages(change: Any, expected: list[tuple[str, str]]) -> None:
    assert _errors(change) == expected


def test_an_established_crd_takes_no_invalid_ca_bundle() -> None:
    stored = copy.deepcopy(CRD)
    stored["status"] = {"conditions": [{"type": "Established", "status": "True"}]}

    def invalid(crd: dict[str, Any]) -> None:
        _hook(crd)["clientConfig"]["caBundle"] = base64.b64encode(b"no").decode()

    assert _errors(invalid, old=stored) == [(
        "spec.conversion.webhookClientConfig.caBundle",
        "Invalid value: []byte{0x6e, 0x6f}: unable to load root certificates: unable to parse bytes as PEM block",
    )]
    stored["status"] = {}
    assert _errors(invalid, old=stored) == []


def test_an_update_keeps_what_the_stored_crd_already_had() -> None:
    bad_bundle = base64.b64encode(b"no").decode()
    stored = copy.deepcopy(CRD)
    _hook(stored).update(conversionReviewVersions=["v9"])
    _hook(stored)["clientConfig"]["caBundle"] = bad_bundle
    stored["status"] = {"conditions": [{"type": "Established", "status": "True"}]}

    def same_problems(crd: dict[str, Any]) -> None:
        _hook(crd).update(conversionReviewVersions=["v9"])
        _hook(crd)["clientConfig"]["caBundle"] = bad_bundle

    assert _errors(same_problems, old=stored) == []
    fixed = copy.deepcopy(stored)
    _hook(fixed).update(conversionReviewVersions=["v1"])
    _hook(fixed)["clientConfig"]["caBundle"] = CA
    assert [field for field, _ in _errors(same_problems, old=fixed)] == [
        "spec.conversion.webhookClientConfig.caBundle", "spec.conversion.conversionReviewVersions",
    ]


def test_defaults_and_the_webhook_of_a_crd() -> None:
    crd = copy.deepcopy(CRD)
    _hook(crd)["clientConfig"] = {"service": {"name": "convert", "namespace": "default"}}
    default_crd(crd)
    assert _hook(crd)["clientConfig"]["service"]["port"] == 443
    assert webhook_conversion(crd) is _hook(crd)
    crd["spec"]["conversion"] = {"strategy": "None"}
    assert webhook_conversion(crd) is None
