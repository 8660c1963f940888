"""certificates.k8s.io/v1 CertificateSigningRequest, as kube serves it: cluster-scoped, short name
``csr``, the ``status`` and ``approval`` subresources with kube's strategies and validation
(:mod:`controlplane.apis.kube.certificates`), the ``spec.signerName`` field selector and kube's
``kubectl get csr`` columns (NAME AGE SIGNERNAME REQUESTOR REQUESTEDDURATION CONDITION).

Who may approve and who may sign is checked by :mod:`controlplane.apiserver.auth.certificates`;
the hub's signer and cleaner run as controllers (:mod:`controlplane.controllers.certificatesigning`).
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from controlplane.apis.durations import human_duration
from controlplane.apis.kube import certificates
from controlplane.apis.kube.fieldlabels import field_path
from controlplane.apiserver import columns as col
from controlplane.apiserver.resources import NameRule, ResourceType, StatusWrite, TableColumn


def _now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


def _requested_duration(obj: dict[str, Any], _now: dt.datetime) -> str:
    seconds = (obj.get("spec") or {}).get("expirationSeconds")
    return human_duration(seconds) if isinstance(seconds, int) else "<none>"


def _signer(obj: dict[str, Any], _now: dt.datetime) -> str:
    return str((obj.get("spec") or {}).get("signerName") or "<none>")


def _requestor(obj: dict[str, Any], _now: dt.datetime) -> str:
    return str((obj.get("spec") or {}).get("username") or "")


CERTIFICATE_SIGNING_REQUEST = ResourceType(
    certificates.GROUP, "v1", "CertificateSigningRequest", "certificatesigningrequests", "certificatesigningrequest",
    namespaced=False, short_names=("csr",), has_status=True, strategic_merge=True,
    name_rule=NameRule.PATH_SEGMENT,
    prepare_update=certificates.keep_spec,
    validate=certificates.validate,
    validate_status=certificates.validate_status,
    status_writes={
        "status": StatusWrite(
            lambda new, old: certificates.prepare_status(new, old, _now()), certificates.validate_status
        ),
        "approval": StatusWrite(
            lambda new, old: certificates.prepare_approval(new, old, _now()), certificates.validate_approval
        ),
    },
    extra_field_selectors={"spec.signerName": field_path("spec.signerName")},
    columns=(
        TableColumn("Age", lambda obj, now: col.age(obj, now),
                    description="CreationTimestamp is a timestamp representing the server time when this object was created."),
        TableColumn("SignerName", _signer, description="signerName indicates the requested signer, and is a qualified name."),
        TableColumn("Requestor", _requestor,
                    description="request contains an x509 certificate signing request encoded in a \"CERTIFICATE REQUEST\" PEM block."),
        TableColumn("RequestedDuration", _requested_duration,
                    description="expirationSeconds is the requested duration of validity of the issued certificate."),
        TableColumn("Condition", lambda obj, _now: certificates.printed_condition(obj),
                    description="conditions applied to the request. Known conditions are \"Approved\", \"Denied\", and \"Failed\"."),
    ),
)
