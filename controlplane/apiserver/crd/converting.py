"""Converting custom resources between versions through their CRD's conversion webhook, as kube's
``webhookConverter`` (apiextensions-apiserver ``pkg/apiserver/conversion/webhook_converter.go``) does.

In: objects, the version they are wanted in, the CRD's :class:`ConversionWebhook` and the hub's
webhook client. Out: the objects in that version. The objects already in it are not sent; the others
go in ONE ``ConversionReview`` (``apiextensions.k8s.io/v1``, or ``v1beta1`` when that is the first
version the CRD lists that the hub speaks). The answer is checked as kube checks it: the review's
uid, ``result.status: Success``, as many objects as were sent, each in the desired apiVersion with
its kind, name, namespace and uid unchanged; of its metadata only labels and annotations are taken
(kube's ``restoreObjectMeta``). Any failure is :class:`ConversionFailed`: kube's 500 whose message
names the objects' group/version/kind and what went wrong; nothing is written with it.
"""

from __future__ import annotations

import copy
import uuid
from typing import Any

import orjson

from controlplane.apis.apiextensions.kind import ConversionWebhook
from controlplane.apis.kube import field
from controlplane.apis.kube.names import qualified_name_errors
from controlplane.apis.kube.validate_pod import labels_errors
from controlplane.apiserver import errors
from controlplane.apiserver.webhooks.calling import CallFailed, WebhookClient

REVIEW_GROUP = "apiextensions.k8s.io"


class ConversionFailed(errors.ApiError):
    """kube answers a failed conversion with an error that is no API status: a 500 without a reason."""

    code = 500

    def to_status(self) -> dict[str, Any]:
        status = super().to_status()
        status.pop("reason", None)
        return status


def group_version_kind(api_version: str, kind: str) -> str:
    """A GroupVersionKind as kube prints it: ``stable.example.com/v1, Kind=CronTab``."""
    return f"{api_version}, Kind={kind}"


def review_version(webhook: ConversionWebhook) -> str | None:
    """The ConversionReview version sent: the first of the CRD's that the hub speaks."""
    return next((v for v in webhook.review_versions if v in ("v1", "v1beta1")), None)


def review_request(objects: list[dict[str, Any]], desired: str, *, uid: str, version: str) -> dict[str, Any]:
    return {
        "apiVersion": f"{REVIEW_GROUP}/{version}", "kind": "ConversionReview",
        "request": {"uid": uid, "desiredAPIVersion": desired, "objects": objects},
    }


async def convert(
    client: WebhookClient,
    webhook: ConversionWebhook,
    objects: list[dict[str, Any]],
    desired: str,
    *,
    what: str,
    is_list: bool = False,
) -> list[dict[str, Any]]:
    """``objects`` in ``desired`` (those already in it as they are, the others converted by the
    webhook in one review). ``what``: the input's GroupVersionKind as kube names it in errors (a
    list's ``...Kind=CronTabList``); ``is_list``: word the errors as kube does for a list."""
    sent = [obj for obj in objects if obj.get("apiVersion") != desired]
    if not sent:
        return objects
    version = review_version(webhook)
    if version is None:
        raise ConversionFailed("no supported conversion review versions")
    uid = str(uuid.uuid4())
    body = orjson.dumps(review_request(sent, desired, uid=uid, version=version))
    try:
        raw = await client.post(webhook, body)
    except CallFailed as exc:
        raise ConversionFailed(f"conversion webhook for {what} failed: {exc}") from None
    try:
        converted = converted_objects(raw, uid=uid, version=version)
    except ValueError as exc:
        raise ConversionFailed(f"conversion webhook for {what} failed: {exc}") from None
    if len(converted) != len(sent):
        raise ConversionFailed(f"conversion webhook for {what} returned {len(converted)} objects, expected {len(sent)}")
    checked = [checked_object(original, answer, desired, what=what, index=i, is_list=is_list) for i, (original, answer) in enumerate(zip(sent, converted, strict=True))]
    answers = iter(checked)
    return [obj if obj.get("apiVersion") == desired else next(answers) for obj in objects]


def converted_objects(raw: bytes, *, uid: str, version: str) -> list[Any]:
    """The ``convertedObjects`` of a webhook's answer (kube's ``getConvertedObjectsFromResponse``);
    ValueError with kube's reason when the answer is not a successful review for ``uid``."""
    try:
        review = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise ValueError(f"couldn't get version/kind; json parse error: {exc}") from None
    if not isinstance(review, dict):
        raise ValueError("couldn't get version/kind; json parse error: the answer is not an object")
    expected = f"{REVIEW_GROUP}/{version}"
    if version == "v1" and (review.get("apiVersion"), review.get("kind")) != (expected, "ConversionReview"):
        got = group_version_kind(str(review.get("apiVersion") or ""), str(review.get("kind") or ""))
        raise ValueError(f"expected webhook response of {group_version_kind(expected, 'ConversionReview')}, got {got}")
    response = review.get("response")
    if not isinstance(response, dict):
        raise ValueError("no response provided")
    if version == "v1" and response.get("uid") != uid:
        raise ValueError(f'expected response.uid="{uid}", got "{response.get("uid") or ""}"')
    result = field.mapping(response.get("result"))
    if result.get("status") != "Success":
        if result.get("message"):
            raise ValueError(str(result["message"]))
        raise ValueError(f"response.result.status was '{result.get('status') or ''}', not 'Success'")
    return field.items(response.get("convertedObjects"))


def checked_object(
    original: dict[str, Any], answer: Any, desired: str, *, what: str, index: int, is_list: bool
) -> dict[str, Any]:
    """One converted object checked against the one sent, with the sent metadata but for labels and
    annotations (kube's ``validateConvertedObject`` and ``restoreObjectMeta``)."""
    # kube counts a list's objects from 1 in these messages (its index moves on first), a single one from 0.
    at = f"at index {index + 1 if is_list else index}"
    invalid = f"conversion webhook for {what} returned invalid {'converted ' if is_list else ''}object {at}"
    if not isinstance(answer, dict):
        raise ConversionFailed(f"{invalid}: the object is not a JSON object")
    if answer.get("apiVersion") != desired:
        raise ConversionFailed(
            f"{invalid}: invalid groupVersion (expected {desired}, received {answer.get('apiVersion') or ''})"
        )
    if answer.get("kind") != original.get("kind"):
        raise ConversionFailed(f"{invalid}: invalid kind (expected {original.get('kind')}, received {answer.get('kind') or ''})")
    sent, got = field.mapping(original.get("metadata")), answer.get("metadata")
    invalid_object = f"conversion webhook for {what} returned invalid object" + (f" {at}" if is_list else "")
    for key, name in (("name", "name"), ("namespace", "namespace"), ("uid", "UID")):
        before, after = sent.get(key) or "", field.mapping(got).get(key) or ""
        if before != after:
            raise ConversionFailed(f"{invalid_object}: must have the same {name}: {before} != {after}")
    bad_meta = f"conversion webhook for {what} returned invalid metadata" + (f" in object {at}" if is_list else "")
    if got is None:
        raise ConversionFailed(f"{bad_meta}: missing metadata in converted object")
    if not isinstance(got, dict):
        raise ConversionFailed(f"{bad_meta}: invalid metadata of type {type(got).__name__} in converted object")
    out = dict(answer)
    out["metadata"] = _restored_metadata(sent, got, bad_meta)
    return out


def _restored_metadata(sent: dict[str, Any], got: dict[str, Any], bad_meta: str) -> dict[str, Any]:
    metadata = copy.deepcopy(sent)
    for key in ("labels", "annotations"):
        value = got.get(key)
        if value is None:
            metadata.pop(key, None)
            continue
        if not isinstance(value, dict):
            raise ConversionFailed(f"{bad_meta}: invalid metadata.{key} of type {type(value).__name__} in converted object")
        for name, item in value.items():
            if not isinstance(item, str):
                raise ConversionFailed(f"{bad_meta}: metadata.{key}[{name}] must be a string in converted object")
        if value != (sent.get(key) or {}):
            found = labels_errors(value, "metadata.labels") if key == "labels" else [
                field.invalid("metadata.annotation", name, message) for name in value for message in qualified_name_errors(name)
            ]
            if found:
                shown = [f"{e.field}: {e.message}" for e in found]
                raise ConversionFailed(f"{bad_meta}: {shown[0] if len(shown) == 1 else '[' + ', '.join(shown) + ']'}")
        metadata[key] = value
    return metadata
