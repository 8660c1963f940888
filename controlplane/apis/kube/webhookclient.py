"""How a webhook is reached: kube's validation of a webhook client configuration (``url`` xor
``service``, the CA bundle) and of the review versions a webhook takes, shared by admission webhook
configurations (:mod:`.admissionregistration`) and CRD conversion webhooks
(:mod:`controlplane.apis.apiextensions.crd`). kube's ``apiserver/pkg/util/webhook/validation.go``
with its messages. Pure: no I/O.
"""

from __future__ import annotations

import base64
import binascii
import re
from typing import Any
from urllib.parse import urlsplit

from controlplane.apis.kube import field
from controlplane.apis.kube.field import FieldError, GoValue, go_strings
from controlplane.apis.kube.names import dns_1035_errors, dns_subdomain_errors, port_number_errors
from controlplane.apis.untyped import Obj

#: The versions of AdmissionReview and ConversionReview this server sends.
ACCEPTED_REVIEW_VERSIONS = ("v1", "v1beta1")
_URL_FORM = "; desired format: https://host[/path]"
_PEM_BLOCK = re.compile(rb"-----BEGIN ([A-Z0-9 ]+)-----\r?\n(.*?)-----END \1-----", re.DOTALL)
#: What kube's client says of a CA bundle with no certificate in it.
CA_BUNDLE_UNPARSABLE = "unable to load root certificates: unable to parse bytes as PEM block"


def client_config_errors(config: Obj, path: str) -> list[FieldError]:
    """Exactly one of ``url`` (https, no user, fragment or query) and ``service``."""
    url, service = config.get("url"), config.get("service")
    if (url is None) == (service is None):
        return [field.required(path, "exactly one of url or service is required")]
    if url is not None:
        return url_errors(str(url), f"{path}.url")
    return service_errors(field.mapping(service), f"{path}.service")


def url_errors(url: str, path: str) -> list[FieldError]:
    """``ValidateWebhookURL`` with https forced."""
    try:
        parts = urlsplit(url)
        host = parts.netloc.rpartition("@")[2]
    except ValueError as exc:
        return [field.required(path, f"url must be a valid URL: {exc}{_URL_FORM}")]
    errors: list[FieldError] = []
    if parts.scheme != "https":
        errors.append(field.invalid(path, parts.scheme, "'https' is the only allowed URL scheme" + _URL_FORM))
    if not host:
        errors.append(field.invalid(path, host, "host must be specified" + _URL_FORM))
    if "@" in parts.netloc:
        errors.append(field.invalid(path, parts.netloc.rpartition("@")[0], "user information is not permitted in the URL"))
    if parts.fragment:
        errors.append(field.invalid(path, parts.fragment, "fragments are not permitted in the URL"))
    if parts.query:
        errors.append(field.invalid(path, parts.query, "query parameters are not permitted in the URL"))
    return errors


def service_errors(service: Obj, path: str) -> list[FieldError]:
    """``ValidateWebhookService``."""
    errors: list[FieldError] = []
    if not service.get("name"):
        errors.append(field.required(f"{path}.name", "service name is required"))
    if not service.get("namespace"):
        errors.append(field.required(f"{path}.namespace", "service namespace is required"))
    port = service.get("port", 443)
    if isinstance(port, int) and port_number_errors(port):
        errors.append(field.invalid(f"{path}.port", port, "port is not valid: " + ", ".join(port_number_errors(port))))
    url_path = service.get("path")
    if not isinstance(url_path, str) or url_path in ("", "/"):
        return errors
    if url_path == "//":
        return [*errors, field.invalid(f"{path}.path", url_path, "segment[0] may not be empty")]
    if not url_path.startswith("/"):
        errors.append(field.invalid(f"{path}.path", url_path, "must start with a '/'"))
    steps = url_path[1:].removesuffix("/").split("/")
    for i, step in enumerate(steps):
        if not step:
            errors.append(field.invalid(f"{path}.path", url_path, f"segment[{i}] may not be empty"))
        for message in dns_subdomain_errors(step) if step else []:
            errors.append(field.invalid(f"{path}.path", url_path, f"segment[{i}]: {message}"))
    return errors


def ca_bundle_pem(ca_bundle: str) -> str | None:
    """The PEM certificates of a ``caBundle`` (base64 of PEM, as the API carries bytes), or None
    when it holds no certificate kube's client could load."""
    try:
        raw = base64.b64decode(ca_bundle, validate=True)
    except (binascii.Error, ValueError):
        return None
    blocks = [m for m in _PEM_BLOCK.finditer(raw) if m.group(1) == b"CERTIFICATE"]
    if not blocks:
        return None
    try:
        return b"\n".join(m.group(0) for m in blocks).decode("ascii")
    except UnicodeDecodeError:
        return None


def ca_bundle_errors(ca_bundle: Any, path: str) -> list[FieldError]:
    """``ValidateCABundle``: a non-empty bundle must hold a certificate (the value shown as kube
    prints the bytes)."""
    if not isinstance(ca_bundle, str) or not ca_bundle or ca_bundle_pem(ca_bundle) is not None:
        return []
    try:
        raw = base64.b64decode(ca_bundle, validate=True)
    except (binascii.Error, ValueError):
        raw = ca_bundle.encode()
    shown = GoValue("[]byte{" + ", ".join(f"0x{b:x}" for b in raw) + "}")
    return [field.invalid(path, shown, CA_BUNDLE_UNPARSABLE)]


def review_versions_errors(
    versions: Any, path: str, *, required_detail: str = "", require_recognized: bool = True,
    accepted: tuple[str, ...] = ACCEPTED_REVIEW_VERSIONS,
) -> list[FieldError]:
    """``validateAdmissionReviewVersions``/``validateConversionReviewVersions``: unique DNS-1035
    names (Required with ``required_detail`` when empty), at least one this server sends unless
    ``require_recognized`` is off (``accepted``: the versions this server sends)."""
    versions = field.items(versions)
    shown = ", ".join(accepted)
    if not versions:
        return [field.required(path, required_detail)]
    errors: list[FieldError] = []
    seen: set[str] = set()
    for i, version in enumerate(versions):
        version = str(version)
        if version in seen:
            errors.append(field.invalid(f"{path}[{i}]", version, "duplicate version"))
            continue
        seen.add(version)
        errors += [field.invalid(f"{path}[{i}]", version, message) for message in dns_1035_errors(version)]
    if require_recognized and not seen & set(accepted):
        errors.append(field.invalid(path, go_strings(versions), f"must include at least one of {shown}"))
    return errors
