"""The AdmissionReview a webhook is sent and what its answer means, as kube builds and reads them.

In: a :class:`~controlplane.apiserver.admission.WebhookRequest`, the user, a uid. Out: the request
body (kube's ``CreateV1AdmissionReview``; ``admission.k8s.io/v1beta1`` for a webhook that accepts
only that) and, from the webhook's answer, a :class:`Verdict` (kube's ``VerifyAdmissionResponse``),
or :class:`InvalidResponse` with kube's reason. A denial becomes kube's Status
(``webhookerrors.ToStatusErr``): :func:`denial`. Pure: no I/O.
"""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass
from typing import Any

import orjson

from controlplane.apis.kube import field
from controlplane.apiserver import errors
from controlplane.apiserver.admission import Operation, WebhookRequest
from controlplane.apiserver.identity import UserInfo, user_info_document
from controlplane.apiserver.resources import ResourceType
from controlplane.apiserver.webhooks.policies import Binding, Decision, Policy

#: Warnings kube's recorder keeps: each item cut to 256 characters, 4096 in all.
WARNING_ITEM_CHARS = 256
WARNING_TOTAL_CHARS = 4096

_OPTIONS_KIND = {Operation.CREATE: "CreateOptions", Operation.UPDATE: "UpdateOptions", Operation.DELETE: "DeleteOptions"}


class InvalidResponse(Exception):
    """The webhook answered, but not with a valid AdmissionReview (kube's reason as the message)."""


@dataclass(frozen=True, slots=True)
class Verdict:
    allowed: bool
    status: dict[str, Any] | None
    patch: list[Any] | None
    warnings: tuple[str, ...]


def review_version(accepted: tuple[str, ...]) -> str:
    """The AdmissionReview version sent: the first of the webhook's that the hub speaks."""
    return next((v for v in accepted if v in ("v1", "v1beta1")), "v1")


def review_request(
    request: WebhookRequest, *, user: UserInfo, uid: str, version: str, options: dict[str, Any] | None = None
) -> dict[str, Any]:
    """kube's AdmissionReview for ``request``: its ``kind`` and ``resource`` those the webhook's rule
    matched, ``requestKind`` and ``requestResource`` those the write was made through (the same but
    for an equivalent match)."""
    rt = request.resource
    kind, resource = _kind_and_resource(rt, request.subresource)
    body: dict[str, Any] = {"uid": uid, "kind": kind, "resource": resource}
    if request.subresource:
        body["subResource"] = request.subresource
    body["requestKind"], body["requestResource"] = (
        (kind, resource) if request.requested is None else _kind_and_resource(request.requested, request.subresource)
    )
    if request.subresource:
        body["requestSubResource"] = request.subresource
    # The namespace of a Namespace is its own name, as kube's request attributes have it.
    namespace = request.name if (rt.group, rt.plural) == ("", "namespaces") else request.namespace
    if request.name:
        body["name"] = request.name
    if namespace:
        body["namespace"] = namespace
    body["operation"] = str(request.operation)
    body["userInfo"] = user_info_document(user)
    body["object"] = request.obj
    body["oldObject"] = request.old
    body["dryRun"] = request.dry_run
    body["options"] = {
        "kind": _OPTIONS_KIND[request.operation], "apiVersion": "meta.k8s.io/v1",
        **({"dryRun": ["All"]} if request.dry_run else {}), **(options or {}),
    }
    return {"kind": "AdmissionReview", "apiVersion": f"admission.k8s.io/{version}", "request": body}


def _kind_and_resource(rt: ResourceType, subresource: str | None) -> tuple[dict[str, str], dict[str, str]]:
    kind = {"group": rt.group, "version": rt.version, "kind": rt.kind}
    if subresource == "scale":
        kind = {"group": "autoscaling", "version": "v1", "kind": "Scale"}
    return kind, {"group": rt.group, "version": rt.version, "resource": rt.plural}


def verdict(raw: bytes, *, uid: str, version: str, mutating: bool) -> Verdict:
    """The webhook's answer read as kube's ``VerifyAdmissionResponse`` reads it."""
    try:
        review = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise InvalidResponse(f"couldn't decode the response: {exc}") from None
    if not isinstance(review, dict):
        raise InvalidResponse("the response is not an AdmissionReview object")
    response = review.get("response")
    if not isinstance(response, dict):
        raise InvalidResponse("webhook response was absent")
    if version == "v1":
        if response.get("uid") != uid:
            raise InvalidResponse(f'expected response.uid="{uid}", got "{response.get("uid") or ""}"')
        got = f"{review.get('apiVersion') or ''}, Kind={review.get('kind') or ''}"
        if got != "admission.k8s.io/v1, Kind=AdmissionReview":
            raise InvalidResponse(f"expected webhook response of admission.k8s.io/v1, Kind=AdmissionReview, got {got}")
    patch_raw, patch_type = response.get("patch"), response.get("patchType")
    patch: list[Any] | None = None
    if mutating:
        if patch_raw and patch_type is None:
            raise InvalidResponse("webhook returned response.patch but not response.patchType")
        if not patch_raw and patch_type is not None:
            raise InvalidResponse("webhook returned response.patchType but not response.patch")
        if patch_type is not None and patch_type != "JSONPatch":
            raise InvalidResponse(f'webhook returned invalid response.patchType of "{patch_type}"')
        if patch_raw:
            patch = _json_patch(patch_raw)
    elif version == "v1":
        if patch_raw:
            raise InvalidResponse("validating webhook may not return response.patch")
        if patch_type is not None:
            raise InvalidResponse("validating webhook may not return response.patchType")
    status = response.get("status")
    warnings = response.get("warnings")
    return Verdict(
        allowed=response.get("allowed") is True,
        status=status if isinstance(status, dict) else None,
        patch=patch,
        warnings=_bounded_warnings(warnings if isinstance(warnings, list) else []),
    )


def _json_patch(raw: Any) -> list[Any]:
    """The base64 JSON patch of a response, decoded (kube: an undecodable one is an internal error)."""
    try:
        decoded = orjson.loads(base64.b64decode(str(raw), validate=True))
    except (binascii.Error, ValueError, orjson.JSONDecodeError) as exc:
        raise errors.InternalError(f"Internal error occurred: {exc}") from None
    if not isinstance(decoded, list):
        raise errors.InternalError("Internal error occurred: json: cannot unmarshal object into Go value of type jsonpatch.Patch")
    return decoded


def _bounded_warnings(items: list[Any]) -> tuple[str, ...]:
    out: list[str] = []
    total = 0
    for item in items:
        text = " ".join(str(item).split())  # no control characters in a header
        if not text:
            continue
        if len(text) > WARNING_ITEM_CHARS:
            text = text[: WARNING_ITEM_CHARS - 3] + "..."
        total += len(text)
        if total > WARNING_TOTAL_CHARS:
            break
        out.append(text)
    return tuple(out)


def denial(webhook: str, status: dict[str, Any] | None) -> errors.WebhookDenied:
    """kube's ``ToStatusErr``: the webhook's Status, its message prefixed with who denied, its code
    400 at the least."""
    status = status or {}
    message, reason = status.get("message"), status.get("reason")
    code = status.get("code")
    details = status.get("details")
    return errors.WebhookDenied(
        webhook,
        str(message) if message else None,
        code=code if isinstance(code, int) and not isinstance(code, bool) else 400,
        reason=str(reason) if reason else None,
        details=details if isinstance(details, dict) else None,
    )


def request_variable(request: WebhookRequest, *, user: UserInfo) -> dict[str, Any]:
    """An admission policy's CEL ``request``: the AdmissionReview's request without its objects
    (those are ``object`` and ``oldObject``)."""
    body: dict[str, Any] = review_request(request, user=user, uid="", version="v1")["request"]
    del body["object"], body["oldObject"]
    return body


def forbidden(request: WebhookRequest, message: str, *, causes: list[errors.Cause] | None = None) -> errors.ApiError:
    """kube's ``admission.NewForbidden``: ``<resource> "<name>" is forbidden: <message>``."""
    rt = request.resource
    name = request.name or str(field.mapping(field.mapping(request.obj).get("metadata")).get("generateName") or "")
    return errors.Forbidden(
        f'{errors.qualified_resource(rt.plural, rt.group)} "{name}" is forbidden: {message}',
        target=errors.Target(name=name, group=rt.group, kind=rt.plural),
        causes=causes,
    )


_POLICY_CODES = {"Unauthorized": 401, "Forbidden": 403, "RequestEntityTooLarge": 413}


def policy_denial(request: WebhookRequest, policy: Policy, binding: Binding, decision: Decision) -> errors.ApiError:
    """kube's refusal by a ValidatingAdmissionPolicy: ``admission.NewForbidden``'s message with the
    decision's reason (``Invalid`` unless the validation set one) and the code of that reason."""
    message = f"ValidatingAdmissionPolicy '{policy.name}' with binding '{binding.name}' denied request: {decision.message}"
    error = forbidden(request, message, causes=[errors.Cause("", message)])
    error.reason = errors.StatusReason(decision.reason)
    error.code = _POLICY_CODES.get(decision.reason, 422)
    return error
