"""What a CustomResourceDefinition's kind adds to a served resource type. Pure: no I/O."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from controlplane.apis.apiextensions.schema import Path
from controlplane.apis.kube.field import FieldError


@dataclass(frozen=True, slots=True)
class ConversionWebhook:
    """Where a CRD's conversion webhook is called (``spec.conversion.webhook`` of strategy Webhook)."""

    #: The CRD's name (``crontabs.stable.example.com``).
    crd: str
    url: str | None
    service: Mapping[str, Any] | None
    ca_bundle: str | None
    #: The ConversionReview versions it takes, in the CRD's order.
    review_versions: tuple[str, ...]
    #: kube's conversion webhook client waits this long for an answer (not configurable).
    timeout_seconds: int = 30


@dataclass(frozen=True, slots=True)
class CustomKind:
    """One served version of a CRD's kind."""

    #: The version's ``openAPIV3Schema`` as written, served as the kind's OpenAPI definition.
    schema: Mapping[str, Any]
    #: Drops the fields the schema does not declare, in place, and returns their paths
    #: (kube's pruning); ``fieldValidation=Strict`` refuses them instead. As kube's decoding, it
    #: also makes an integer sent with a zero fraction (``3.0``) the integer (``3``).
    prune: Callable[[dict[str, Any]], list[Path]]
    #: The apiVersion objects are stored as when it is another version (``conversion: None``):
    #: writes accept either and store it, reads show this version's. Empty: this version's own.
    stored_api_version: str = ""
    #: A write of the status subresource: :attr:`prune` of the object's ``status`` alone (its
    #: other fields are the stored ones, not the request's), and the validation of what such a
    #: write can change, against the stored object (kube's ``statusStrategy``). None: the
    #: kind's own pruning and validation.
    prune_status: Callable[[dict[str, Any]], list[Path]] | None = None
    validate_status: Callable[[dict[str, Any], dict[str, Any] | None], list[FieldError]] | None = None
    #: A version served from objects stored in another one through the CRD's conversion webhook
    #: (or the storage version while objects remain stored in an earlier one): reads and writes in
    #: this version go through it (:mod:`controlplane.apiserver.crd.converting`), each object
    #: converted from the apiVersion it is stored as.
    conversion_webhook: ConversionWebhook | None = None
    #: The ``Warning`` every request in this version gets when the CRD marks it ``deprecated``:
    #: its ``deprecationWarning``, or kube's default text. Empty: not deprecated.
    deprecation_warning: str = ""
    #: The CRD is being deleted: kube refuses to create objects of its kind meanwhile.
    terminating: bool = False
