"""Kueue's ProvisioningRequestConfig (``kueue.x-k8s.io``, cluster-scoped, v1beta2 and v1beta1 with the
same fields): the parameters an AdmissionCheck of the ``kueue.x-k8s.io/provisioning-request``
controller names, for the ProvisioningRequests Kueue asks the cluster autoscaler for.

Served so that Kueue's provisioning setups apply unchanged, with the schema of Kueue's
``provisioningrequestconfig_types.go`` (its kubebuilder markers) and its CRD defaults
(:func:`defaults`). The hub runs no provisioning controller: such a check stays ``Pending`` until
something sets its state, as for any check whose controller is absent.
"""

from __future__ import annotations

from typing import Annotated, Any, Final, Literal

from pydantic import Field

from controlplane.apis.kube.objects import child, set_nil_default
from controlplane.apis.kueue_queue_policy import DNS_SUBDOMAIN
from controlplane.apis.kueue_v1beta1 import API_VERSION as V1BETA1
from controlplane.apis.meta import LISTED_AS_SET, ObjectMeta, SpecModel, listed_by, served_default

_LABEL_KEY: Final = (
    r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$"
)
#: Kueue's defaults of ``spec.retryStrategy`` (the whole block when absent, each field when unset).
RETRY_DEFAULTS: Final = {"backoffLimitCount": 3, "backoffBaseSeconds": 60, "backoffMaxSeconds": 1800}


class RetryStrategy(SpecModel):
    backoff_limit_count: int | None = Field(
        default=None, ge=-(2**31), le=2**31 - 1, json_schema_extra=served_default(RETRY_DEFAULTS["backoffLimitCount"])
    )
    """How often a failed ProvisioningRequest is retried before the workload is deactivated
    (default 3; 0 turns retries off)."""
    backoff_base_seconds: int | None = Field(
        default=None, ge=-(2**31), le=2**31 - 1, json_schema_extra=served_default(RETRY_DEFAULTS["backoffBaseSeconds"])
    )
    """The base of the exponential backoff between retries, in seconds (default 60)."""
    backoff_max_seconds: int | None = Field(
        default=None, ge=-(2**31), le=2**31 - 1, json_schema_extra=served_default(RETRY_DEFAULTS["backoffMaxSeconds"])
    )
    """The longest backoff between retries, in seconds (default 1800)."""


class NodeSelectorUpdate(SpecModel):
    key: str = Field(min_length=1, max_length=317, pattern=_LABEL_KEY)
    """The node selector key set on the provisioned pod sets."""
    value_from_provisioning_class_detail: str = Field(min_length=1, max_length=32768)
    """The key of the ProvisioningRequest's status.provisioningClassDetails whose value is used."""


class PodSetUpdates(SpecModel):
    node_selector: list[NodeSelectorUpdate] | None = Field(default=None, max_length=8, json_schema_extra=listed_by("key"))
    """Node selector entries that target the provisioned nodes (keys unique)."""


class ProvisioningRequestConfigSpec(SpecModel):
    provisioning_class_name: str = Field(min_length=1, max_length=253, pattern=DNS_SUBDOMAIN)
    """The provisioning mode (a ProvisioningRequest's provisioningClassName), e.g.
    check-capacity.autoscaling.x-k8s.io."""
    parameters: dict[str, Annotated[str, Field(max_length=255)]] | None = Field(default=None, max_length=100)
    """Other parameters the provisioning class may need (values up to 255 characters)."""
    managed_resources: list[str] | None = Field(default=None, max_length=100, json_schema_extra=LISTED_AS_SET)
    """The resources the autoscaler manages; only pod sets requesting one of them are provisioned
    (empty: all)."""
    retry_strategy: RetryStrategy | None = Field(default=None, json_schema_extra=served_default(RETRY_DEFAULTS))
    """How a failed ProvisioningRequest is retried."""
    pod_set_updates: PodSetUpdates | None = None
    """Updates of the workload's pod sets that target the provisioned nodes."""
    pod_set_merge_policy: Literal["IdenticalPodTemplates", "IdenticalWorkloadSchedulingRequirements"] | None = None
    """How pod sets are merged before they are passed to the cluster autoscaler."""


class ProvisioningRequestConfig(SpecModel):
    """Parameters of Kueue's provisioning admission checks (Kueue's ProvisioningRequestConfig)."""

    api_version: Literal["kueue.x-k8s.io/v1beta1"] = V1BETA1
    kind: Literal["ProvisioningRequestConfig"] = "ProvisioningRequestConfig"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: ProvisioningRequestConfigSpec | None = None
    """The provisioning class, its parameters and the retry strategy."""


class ProvisioningRequestConfigV1beta2(ProvisioningRequestConfig):
    """Parameters of Kueue's provisioning admission checks (Kueue's ProvisioningRequestConfig)."""

    api_version: Literal["kueue.x-k8s.io/v1beta2"] = "kueue.x-k8s.io/v1beta2"  # type: ignore[assignment]


def defaults(obj: dict[str, Any]) -> None:
    """Kueue's CRD defaults: a ``retryStrategy`` of 3 retries, 60 s base and 1800 s at most, as a
    whole block when absent and field by field when partly given."""
    spec = child(obj, "spec")
    if spec is None:
        return
    set_nil_default(spec, "retryStrategy", {})
    strategy = child(spec, "retryStrategy")
    if strategy is None:
        return
    for field, value in RETRY_DEFAULTS.items():
        set_nil_default(strategy, field, value)
