"""kube's CertificateSigningRequest rules as pure functions: validation messages, the status and
approval strategies, the client signer's usages and duration, ``kubectl get csr``'s CONDITION."""

from __future__ import annotations

import base64
import copy
import datetime as dt
from typing import Any

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from controlplane.apis.kube import certificates, certificatesigning

NOW = dt.datetime(2026, 3, 1, 10, 0, tzinfo=dt.UTC)


def _request() -> str:
    key = ec.generate_private_key(ec.SECP256R1())
    csr = (x509.CertificateSigningRequestBuilder()
           .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "u")])).sign(key, hashes.SHA256()))
    return base64.b64encode(csr.public_bytes(serialization.Encoding.PEM)).decode()


REQUEST = _request()


def csr(**spec: Any) -> dict[str, Any]:
    return {"metadata": {"name": "x"}, "spec": {
        "request": REQUEST, "signerName": "kubernetes.io/kube-apiserver-client", "usages": ["client auth"], **spec}}


def messages(new: dict[str, Any], old: dict[str, Any] | None = None, check: Any = certificates.validate) -> list[str]:
    return [f"{e.field}: {e.message}" for e in check(new, old)]


@pytest.mark.parametrize(("spec", "expected"), [
    ({}, []),
    ({"usages": []}, ["spec.usages: Required value"]),
    ({"usages": ["client auth", "client auth"]}, ['spec.usages[1]: Duplicate value: "client auth"']),
    ({"usages": ["flying"]}, [f'spec.usages[0]: Unsupported value: "flying": supported values: '
                              f'{", ".join(chr(34) + u + chr(34) for u in certificates.VALID_USAGES)}']),
    ({"signerName": ""}, ["spec.signerName: Required value"]),
    ({"signerName": "example.com"}, [
        "spec.signerName: Invalid value: \"example.com\": must be a fully qualified domain and path of the form "
        "'example.com/signer-name'"]),
    ({"signerName": "example/x"}, [
        'spec.signerName: Invalid value: "example": should be a domain with at least two segments separated by dots']),
    ({"signerName": "kubernetes.io/legacy-unknown"}, [
        'spec.signerName: Invalid value: "kubernetes.io/legacy-unknown": the legacy signerName is not allowed via this API version']),
    ({"expirationSeconds": 599}, [
        "spec.expirationSeconds: Invalid value: 599: may not specify a duration less than 600 seconds (10 minutes)"]),
    ({"expirationSeconds": 600}, []),
    ({"request": base64.b64encode(b"-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n").decode()}, [
        "spec.request: Invalid value: []byte{" + ", ".join(
            f"0x{b:x}" for b in b"-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n"
        ) + "}: PEM block type must be CERTIFICATE REQUEST"]),
])
def test_create_validation(spec: dict[str, Any], expected: list[str]) -> None:
    assert messages(csr(**spec)) == expected


def approved(obj: dict[str, Any], *types: str) -> dict[str, Any]:
    out = copy.deepcopy(obj)
    out["status"] = {"conditions": [{"type": t, "status": "True"} for t in types]}
    return out


def test_only_the_approval_subresource_approves_and_only_the_status_subresource_sets_the_certificate() -> None:
    stored = csr()
    assert messages(approved(stored, "Approved"), stored, certificates.validate_approval) == []
    assert messages(approved(stored, "Approved"), stored, certificates.validate_status) == [
        'status.conditions: Forbidden: updates may not add a condition of type "Approved"']
    assert messages(approved(stored, "Approved", "Denied"), stored, certificates.validate_approval) == [
        'status.conditions[1].type: Invalid value: "Denied": Approved and Denied conditions are mutually exclusive']
    was_approved = approved(stored, "Approved")
    assert messages(approved(stored), was_approved, certificates.validate_approval) == [
        'status.conditions: Forbidden: updates may not remove a condition of type "Approved"']
    assert messages(approved(stored, "Approved", "Approved"), was_approved, certificates.validate_approval) == [
        'status.conditions[1].type: Duplicate value: "Approved"']
    assert messages({**stored, "status": {"conditions": [{"type": "Failed", "status": "False"}]}}, stored,
                    certificates.validate_status) == [
        'status.conditions[0].status: Unsupported value: "False": supported values: "True"']
    issued = {**was_approved, "status": {**was_approved["status"], "certificate": base64.b64encode(b"junk").decode()}}
    assert messages(issued, was_approved, certificates.validate_approval) == [
        "status.certificate: Invalid value: \"<certificate data>\": must contain at least one CERTIFICATE PEM block",
        "status.certificate: Forbidden: updates may not set certificate content",
    ]


def test_the_strategies_keep_what_the_subresource_may_not_change() -> None:
    old = approved(csr(), "Approved")
    old["status"]["conditions"][0]["lastTransitionTime"] = "2026-01-01T00:00:00Z"
    status_write = {**old, "status": {"conditions": [{"type": "Approved", "status": "True", "reason": "Changed"}],
                                      "certificate": "Y2VydA=="}}
    certificates.prepare_status(status_write, old, NOW)
    assert status_write["status"]["conditions"] == [{**old["status"]["conditions"][0], "lastUpdateTime": "2026-03-01T10:00:00Z"}]
    assert status_write["status"]["certificate"] == "Y2VydA=="
    approval_write = {**old, "status": {"conditions": [*old["status"]["conditions"], {"type": "Extra", "status": "True"}],
                                        "certificate": "Y2VydA=="}}
    certificates.prepare_approval(approval_write, old, NOW)
    assert "certificate" not in approval_write["status"]
    assert approval_write["status"]["conditions"][1] == {
        "type": "Extra", "status": "True", "lastUpdateTime": "2026-03-01T10:00:00Z", "lastTransitionTime": "2026-03-01T10:00:00Z"}


@pytest.mark.parametrize(("usages", "problem"), [
    (["client auth"], None),
    (["digital signature", "key encipherment", "client auth"], None),
    (["server auth"], "invalid usage for client certificate: server auth"),
    (["digital signature"], "missing required usage for client certificate: client auth"),
])
def test_client_signer_usages(usages: list[str], problem: str | None) -> None:
    assert certificatesigning.client_usages_problem(usages) == problem


@pytest.mark.parametrize(("seconds", "duration"), [
    (None, dt.timedelta(days=365)),
    (3600, dt.timedelta(hours=1)),
    (10 ** 9, dt.timedelta(days=365)),
    (60, dt.timedelta(minutes=10)),
])
def test_signing_duration(seconds: int | None, duration: dt.timedelta) -> None:
    assert certificatesigning.signing_duration(seconds, certificatesigning.DEFAULT_SIGNING_DURATION) == duration


@pytest.mark.parametrize(("types", "certificate", "shown"), [
    ((), False, "Pending"),
    (("Approved",), False, "Approved"),
    (("Approved",), True, "Approved,Issued"),
    (("Approved", "Failed"), False, "Approved,Failed"),
    (("Denied",), False, "Denied"),
])
def test_printed_condition(types: tuple[str, ...], certificate: bool, shown: str) -> None:
    obj = approved(csr(), *types)
    if certificate:
        obj["status"]["certificate"] = "Y2VydA=="
    assert certificates.printed_condition(obj) == shown


def test_set_requestor_replaces_what_the_request_claims() -> None:
    obj = csr(username="root", groups=["system:masters"])
    obj["status"] = {"conditions": [{"type": "Approved", "status": "True"}]}
    certificates.set_requestor(obj, username="ann", uid="", groups=("dev", "system:authenticated"), extra={})
    assert (obj["spec"]["username"], obj["spec"]["groups"], obj["status"]) == (
        "ann", ["dev", "system:authenticated"], {})
    assert "uid" not in obj["spec"] and "extra" not in obj["spec"]


@pytest.mark.parametrize(
    ("created", "cleaned"),
    [
        ("2026-01-01T00:00:00Z", True),
        ("2026-01-01T00:00:00", True),  # no zone: read as UTC, not a naive time to fail the comparison
        ("2026-01-02T23:00:00Z", False),
        ("yesterday", False),
        (None, False),
    ],
)
def test_a_pending_request_is_cleaned_after_a_day_by_its_creation_time(created: str | None, cleaned: bool) -> None:
    now = dt.datetime(2026, 1, 3, tzinfo=dt.UTC)
    csr = {"metadata": {"name": "a", "creationTimestamp": created}, "spec": {}, "status": {}}
    assert certificatesigning.should_clean(csr, now) is cleaned
