"""kube's CertificateSigningRequest (certificates.k8s.io/v1): its validation and its strategies.

As ``pkg/apis/certificates/validation`` and ``pkg/registry/certificates/certificates/strategy.go``:

- a create clears the status and takes ``spec.username``/``uid``/``groups``/``extra`` from the
  requesting user, never from the request (:func:`set_requestor`);
- an update of the main resource keeps the stored spec and status (a CSR changes only through
  its ``status`` and ``approval`` subresources);
- a ``status`` write keeps the spec and the Approved/Denied conditions (:func:`prepare_status`),
  an ``approval`` write takes only the conditions (:func:`prepare_approval`); both fill the
  conditions' missing ``lastUpdateTime``/``lastTransitionTime``;
- validation (:func:`validate`, :func:`validate_status`, :func:`validate_approval`): the request is
  a signed PEM ``CERTIFICATE REQUEST``, usages are kube's, the signerName is ``domain/path``,
  ``expirationSeconds`` at least 600, Approved/Denied/Failed only ``True``, Approved and Denied
  exclusive, such a condition never removed; only the approval subresource adds or changes
  Approved/Denied, only the status subresource sets ``status.certificate``, once.

In: objects as dicts. Out: field errors, or the object changed in place. Pure: no I/O.
"""

from __future__ import annotations

import base64
import binascii
import datetime as dt
import re
from collections.abc import Iterable, Iterator, Mapping
from typing import Final

from cryptography import x509
from cryptography.hazmat.primitives.asymmetric import ed25519, rsa

from controlplane.apis.kube import field, names
from controlplane.apis.kube.field import FieldError, GoValue
from controlplane.apis.kube.gobase64 import CorruptInput, std_decode
from controlplane.apis.timestamps import format_time
from controlplane.apis.untyped import Obj
from controlplane.gojson import go_quote

GROUP: Final = "certificates.k8s.io"
KUBE_APISERVER_CLIENT: Final = "kubernetes.io/kube-apiserver-client"
KUBE_APISERVER_CLIENT_KUBELET: Final = "kubernetes.io/kube-apiserver-client-kubelet"
KUBELET_SERVING: Final = "kubernetes.io/kubelet-serving"
LEGACY_UNKNOWN: Final = "kubernetes.io/legacy-unknown"

APPROVED: Final = "Approved"
DENIED: Final = "Denied"
FAILED: Final = "Failed"
_TRUE_ONLY: Final = (APPROVED, DENIED, FAILED)
_ALL_STATUSES: Final = ("False", "True", "Unknown")

#: kube's ``allValidUsages``, sorted as ``sets.String.List()`` prints them.
VALID_USAGES: Final = tuple(sorted((
    "signing", "digital signature", "content commitment", "key encipherment", "key agreement",
    "data encipherment", "cert sign", "crl sign", "encipher only", "decipher only", "any", "server auth",
    "client auth", "code signing", "email protection", "s/mime", "ipsec end system", "ipsec tunnel",
    "ipsec user", "timestamping", "ocsp signing", "microsoft sgc", "netscape sgc",
)))

_DNS1123_SUBDOMAIN_MAX: Final = 253
_DNS1123_LABEL_MAX: Final = 63


def _spec(obj: Obj) -> Obj:
    return field.mapping(obj.get("spec"))


def _status(obj: Obj) -> Obj:
    return field.mapping(obj.get("status"))


def conditions(obj: Obj) -> list[Obj]:
    return [c for c in _status(obj).get("conditions") or [] if isinstance(c, dict)]


def has_condition(obj: Obj, condition_type: str) -> bool:
    return any(c.get("type") == condition_type for c in conditions(obj))


def request_bytes(obj: Obj) -> bytes:
    """``spec.request`` as bytes (its JSON is base64; a value that is not was refused as it was decoded)."""
    try:
        return std_decode(str(_spec(obj).get("request") or ""))
    except CorruptInput:
        return b""


def certificate_bytes(obj: Obj) -> bytes:
    try:
        return std_decode(str(_status(obj).get("certificate") or ""))
    except CorruptInput:
        return b""


def parse_request(pem: bytes) -> x509.CertificateSigningRequest:
    """kube's ``ParseCSR`` and ``CheckSignature``: the first PEM block, which must be a signed
    ``CERTIFICATE REQUEST``; ValueError with kube's words otherwise."""
    block = _first_pem_block(pem)
    if block is None or block[0] != "CERTIFICATE REQUEST":
        raise ValueError("PEM block type must be CERTIFICATE REQUEST")
    try:
        request = x509.load_der_x509_csr(block[1])
    except ValueError as exc:
        raise ValueError(f"x509: malformed certificate request: {exc}") from None
    if not request.is_signature_valid:
        raise ValueError(_signature_failure(request.public_key()))
    return request


def _signature_failure(key: object) -> str:
    """Go's ``CheckSignature`` words for a signature that does not verify with ``key``."""
    if isinstance(key, rsa.RSAPublicKey):
        return "crypto/rsa: verification error"
    if isinstance(key, ed25519.Ed25519PublicKey):
        return "x509: Ed25519 verification failure"
    return "x509: ECDSA verification failure"


_PEM_BLOCK: Final = re.compile(
    rb"-----BEGIN ([^\r\n-]*)-----\r?\n(.*?)-----END \1-----", re.DOTALL
)


def _pem_blocks(data: bytes) -> Iterator[tuple[str, bytes, bool]]:
    """Go's ``pem.Decode`` in turn: each block's type, its bytes and whether it has headers."""
    for match in _PEM_BLOCK.finditer(data):
        body = match.group(2)
        headers = b":" in body.split(b"\n\n")[0] if b"\n\n" in body else False
        lines = body.split(b"\n\n", 1)[-1] if headers else body
        try:
            der = base64.b64decode(b"".join(lines.split()), validate=True)
        except binascii.Error:
            continue
        yield match.group(1).decode("ascii", "replace"), der, headers


def _first_pem_block(data: bytes) -> tuple[str, bytes] | None:
    for label, der, _headers in _pem_blocks(data):
        return label, der
    return None


def _certificate_problem(pem: bytes) -> str | None:
    """kube's ``validateCertificate`` of ``status.certificate``: why it is refused, or None."""
    if not pem:
        return None
    blocks = 0
    for label, der, headers in _pem_blocks(pem):
        if label != "CERTIFICATE":
            return f"only CERTIFICATE PEM blocks are allowed, found {go_quote(label)}"
        if headers:
            return "no PEM block headers are permitted"
        blocks += 1
        try:
            x509.load_der_x509_certificate(der)
        except ValueError as exc:
            return f"x509: malformed certificate: {exc}"
    return None if blocks else "must contain at least one CERTIFICATE PEM block"


def signer_name_errors(path: str, signer: str) -> list[FieldError]:
    """kube's ``ValidateSignerName``."""
    if not signer:
        return [field.required(path)]
    segments = signer.split("/")
    if len(segments) != 2:
        return [field.invalid(path, signer, "must be a fully qualified domain and path of the form 'example.com/signer-name'")]
    errors: list[FieldError] = []
    domain, rest = segments
    if len(domain) > _DNS1123_SUBDOMAIN_MAX:
        errors.append(field.too_long(path, _DNS1123_SUBDOMAIN_MAX))
    labels = domain.split(".")
    for label in labels:
        problems = names.dns_label_errors(label)
        if problems:
            errors += [field.invalid(path, domain, f"validating label {go_quote(label)}: {p}") for p in problems]
            break
    if len(labels) < 2:
        errors.append(field.invalid(path, domain, "should be a domain with at least two segments separated by dots"))
    for label in rest.split("."):
        problems = names.dns_subdomain_errors(label)
        if problems:
            errors += [field.invalid(path, rest, f"validating label {go_quote(label)}: {p}") for p in problems]
            break
    longest = _DNS1123_SUBDOMAIN_MAX + (_DNS1123_SUBDOMAIN_MAX + _DNS1123_LABEL_MAX + 1) + 1
    if len(signer) > longest:
        errors.append(field.too_long(path, longest))
    return errors


def _go_bytes(data: bytes) -> GoValue:
    """Go's ``%#v`` of a ``[]byte``, as kube prints a bad ``spec.request``."""
    return GoValue("[]byte{" + ", ".join(f"0x{b:x}" for b in data) + "}")


def _validate_object(obj: Obj, old: Obj | None) -> list[FieldError]:
    """``validateCertificateSigningRequest`` with the options kube derives from the stored object."""
    spec = _spec(obj)
    errors: list[FieldError] = []
    request = request_bytes(obj)
    try:
        parse_request(request)
    except ValueError as exc:
        errors.append(field.invalid("spec.request", _go_bytes(request), str(exc)))
    usages = [str(u) for u in spec.get("usages") or []]
    old_usages = [str(u) for u in _spec(old).get("usages") or []] if old is not None else []
    if not usages:
        errors.append(field.required("spec.usages"))
    if not any(u not in VALID_USAGES for u in old_usages):
        errors += [field.not_supported(f"spec.usages[{i}]", u, VALID_USAGES)
                   for i, u in enumerate(usages) if u not in VALID_USAGES]
    if len(set(old_usages)) == len(old_usages):
        errors += [field.duplicate(f"spec.usages[{i}]", u) for i, u in enumerate(usages) if u in usages[:i]]
    signer = str(spec.get("signerName") or "")
    legacy_stored = old is not None and _spec(old).get("signerName") == LEGACY_UNKNOWN
    if signer == LEGACY_UNKNOWN and not legacy_stored:
        errors.append(field.invalid("spec.signerName", signer, "the legacy signerName is not allowed via this API version"))
    else:
        errors += signer_name_errors("spec.signerName", signer)
    seconds = spec.get("expirationSeconds")
    if isinstance(seconds, int) and seconds < 600:
        errors.append(field.invalid("spec.expirationSeconds", seconds, "may not specify a duration less than 600 seconds (10 minutes)"))
    errors += _condition_errors(obj, old)
    certificate = certificate_bytes(obj)
    arbitrary = old is not None and (
        certificate == certificate_bytes(old) or _certificate_problem(certificate_bytes(old)) is not None
    )
    problem = None if arbitrary else _certificate_problem(certificate)
    if problem is not None:
        errors.append(field.invalid("status.certificate", "<certificate data>", problem))
    return errors


def _condition_errors(obj: Obj, old: Obj | None) -> list[FieldError]:
    stored = conditions(old) if old is not None else []
    stored_types = [str(c.get("type") or "") for c in stored]
    allow_both = APPROVED in stored_types and DENIED in stored_types
    allow_duplicates = len(set(stored_types)) != len(stored_types)
    allow_empty = "" in stored_types
    errors: list[FieldError] = []
    seen: set[str] = set()
    approved = denied = False
    for i, condition in enumerate(conditions(obj)):
        path = f"status.conditions[{i}]"
        kind, status = str(condition.get("type") or ""), str(condition.get("status") or "")
        if not allow_empty and not kind:
            errors.append(field.required(f"{path}.type"))
        allowed = ("True",) if kind in _TRUE_ONLY else _ALL_STATUSES
        if not status:
            errors.append(field.required(f"{path}.status"))
        elif status not in allowed:
            errors.append(field.not_supported(f"{path}.status", status, allowed))
        if not allow_both:
            if kind == APPROVED:
                approved = True
                if denied:
                    errors.append(field.invalid(f"{path}.type", kind, "Approved and Denied conditions are mutually exclusive"))
            elif kind == DENIED:
                denied = True
                if approved:
                    errors.append(field.invalid(f"{path}.type", kind, "Approved and Denied conditions are mutually exclusive"))
        if not allow_duplicates:
            if kind in seen:
                errors.append(field.duplicate(f"{path}.type", kind))
            seen.add(kind)
    return errors


def _of_type(obj: Obj, condition_type: str) -> list[Obj]:
    return [c for c in conditions(obj) if c.get("type") == condition_type]


def _validate_update(new: Obj, old: Obj, *, approval: bool, certificate: bool) -> list[FieldError]:
    """``validateCertificateSigningRequestUpdate`` (metadata is checked for every kind elsewhere)."""
    errors = _validate_object(new, old)
    for kind in (APPROVED, DENIED, FAILED):
        if len(_of_type(new, kind)) < len(_of_type(old, kind)):
            errors.append(field.forbidden("status.conditions", f"updates may not remove a condition of type {go_quote(kind)}"))
    if not approval:
        for kind in (APPROVED, DENIED):
            before, after = _of_type(old, kind), _of_type(new, kind)
            if len(after) > len(before):
                errors.append(field.forbidden("status.conditions", f"updates may not add a condition of type {go_quote(kind)}"))
            elif len(after) == len(before) and after != before:
                errors.append(field.forbidden("status.conditions", f"updates may not modify a condition of type {go_quote(kind)}"))
    if certificate_bytes(new) != certificate_bytes(old):
        if not certificate:
            errors.append(field.forbidden("status.certificate", "updates may not set certificate content"))
        elif certificate_bytes(old):
            errors.append(field.forbidden("status.certificate", "updates may not modify existing certificate content"))
    return errors


def validate(new: Obj, old: Obj | None) -> list[FieldError]:
    """A create (``old`` None) or an update of the main resource."""
    if old is None:
        return _validate_object(new, None)
    return _validate_update(new, old, approval=False, certificate=False)


def validate_status(new: Obj, old: Obj | None) -> list[FieldError]:
    """A write of the ``status`` subresource: the signer's certificate or Failed condition."""
    return _validate_object(new, None) if old is None else _validate_update(new, old, approval=False, certificate=True)


def validate_approval(new: Obj, old: Obj | None) -> list[FieldError]:
    """A write of the ``approval`` subresource: Approved or Denied."""
    return _validate_object(new, None) if old is None else _validate_update(new, old, approval=True, certificate=False)


# --- strategies -----------------------------------------------------------------------


def set_requestor(obj: Obj, *, username: str, uid: str, groups: Iterable[str],
                  extra: Mapping[str, Iterable[str]]) -> None:
    """``PrepareForCreate``: the requestor is the user who creates the CSR; no status."""
    spec = obj.setdefault("spec", {})
    for key in ("username", "uid", "groups", "extra"):
        spec.pop(key, None)
    if username:
        spec["username"] = username
    if uid:
        spec["uid"] = uid
    if groups:
        spec["groups"] = list(groups)
    if extra:
        spec["extra"] = {k: list(v) for k, v in extra.items()}
    obj["status"] = {}


def keep_spec(new: Obj, old: Obj) -> None:
    """The main resource's ``PrepareForUpdate``: the spec is immutable (the status is kept anyway)."""
    if "spec" in old:
        new["spec"] = old["spec"]


def _stamp_conditions(new: Obj, old: Obj, now: dt.datetime) -> None:
    """``populateConditionTimestamps``."""
    moment = format_time(now)
    for condition in conditions(new):
        if not condition.get("lastUpdateTime"):
            condition["lastUpdateTime"] = moment
        if not condition.get("lastTransitionTime"):
            condition["lastTransitionTime"] = next(
                (c["lastTransitionTime"] for c in conditions(old)
                 if c.get("type") == condition.get("type") and c.get("status") == condition.get("status")
                 and c.get("lastTransitionTime")),
                moment,
            )


def prepare_status(new: Obj, old: Obj, now: dt.datetime) -> None:
    """The status strategy: the stored Approved and Denied conditions stay as they were (when the
    write has as many of each; otherwise validation refuses it)."""
    status = new.get("status")
    if isinstance(status, dict) and isinstance(status.get("conditions"), list):
        status["conditions"] = [dict(c) if isinstance(c, dict) else c for c in status["conditions"]]
        for kind in (APPROVED, DENIED):
            stored = [c for c in conditions(old) if c.get("type") == kind]
            slots = [i for i, c in enumerate(status["conditions"]) if isinstance(c, dict) and c.get("type") == kind]
            if len(stored) == len(slots):
                for slot, condition in zip(slots, stored, strict=True):
                    status["conditions"][slot] = dict(condition)
    _stamp_conditions(new, old, now)


def prepare_approval(new: Obj, old: Obj, now: dt.datetime) -> None:
    """The approval strategy: only the conditions change."""
    given = _status(new).get("conditions")
    status = dict(_status(old))
    if given:
        status["conditions"] = [dict(c) if isinstance(c, dict) else c for c in given]
    else:
        status.pop("conditions", None)
    new["status"] = status
    _stamp_conditions(new, old, now)


def printed_condition(obj: Obj) -> str:
    """``kubectl get csr``'s CONDITION: Denied, Approved or Pending, then ``,Failed`` and ``,Issued``."""
    kinds = {c.get("type") for c in conditions(obj)}
    text = DENIED if DENIED in kinds else APPROVED if APPROVED in kinds else "Pending"
    if FAILED in kinds:
        text += ",Failed"
    if _status(obj).get("certificate"):
        text += ",Issued"
    return text
