"""kube-apiserver's validation of built-in kinds, per group and kind.

A validator gets the object to be stored and, on update, the stored one, and returns
kube's field errors (none: valid). Metadata (names, labels, annotations) is checked by
the API server for every kind and is not repeated here. The rules themselves live by
API group: :mod:`.validate_core` (with :mod:`.validate_pod` for pod specs and templates),
:mod:`.validate_apps`, :mod:`.validate_batch`, :mod:`.validate_groups`, :mod:`.validate_networking`
(Ingress, IngressClass, NetworkPolicy), :mod:`.validate_discovery` (EndpointSlice), :mod:`.validate_dra` (resource.k8s.io's DRA kinds), :mod:`.validate_events`
(Events), :mod:`.validate_admin` (LimitRange, ResourceQuota,
ServiceAccount) and :mod:`.admissionregistration` (the webhook configurations); a write of the status subresource, by :mod:`.validate_status` (:func:`for_status`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from controlplane.apis.kube import (
    admissionpolicy,
    admissionregistration,
    namespaces,
    validate_admin,
    validate_apps,
    validate_batch,
    validate_core,
    validate_discovery,
    validate_dra,
    validate_events,
    validate_groups,
    validate_networking,
    validate_status,
)
from controlplane.apis.kube.field import FieldError

#: (new object, stored object on update or None) → field errors.
Validator = Callable[[dict[str, Any], dict[str, Any] | None], list[FieldError]]

_VALIDATORS: dict[tuple[str, str], Validator] = {
    ("", "Namespace"): namespaces.validate_namespace,
    ("", "Pod"): validate_core.validate_pod,
    ("", "Service"): validate_core.validate_service,
    ("", "ConfigMap"): validate_core.validate_config_map,
    ("", "Secret"): validate_core.validate_secret,
    ("", "PersistentVolumeClaim"): validate_core.validate_persistent_volume_claim,
    ("", "LimitRange"): validate_admin.validate_limit_range,
    ("", "ResourceQuota"): validate_admin.validate_resource_quota,
    ("", "ServiceAccount"): validate_admin.validate_service_account,
    ("apps", "Deployment"): validate_apps.validate_deployment,
    ("apps", "ReplicaSet"): validate_apps.validate_replica_set,
    ("apps", "StatefulSet"): validate_apps.validate_stateful_set,
    ("apps", "DaemonSet"): validate_apps.validate_daemon_set,
    ("apps", "ControllerRevision"): validate_apps.validate_controller_revision,
    ("batch", "Job"): validate_batch.validate_job,
    ("batch", "CronJob"): validate_batch.validate_cron_job,
    ("policy", "PodDisruptionBudget"): validate_groups.validate_pod_disruption_budget,
    ("scheduling.k8s.io", "PriorityClass"): validate_groups.validate_priority_class,
    ("storage.k8s.io", "StorageClass"): validate_groups.validate_storage_class,
    ("autoscaling", "HorizontalPodAutoscaler"): validate_groups.validate_horizontal_pod_autoscaler,
    ("networking.k8s.io", "Ingress"): validate_networking.validate_ingress,
    ("networking.k8s.io", "IngressClass"): validate_networking.validate_ingress_class,
    ("networking.k8s.io", "NetworkPolicy"): validate_networking.validate_network_policy,
    ("discovery.k8s.io", "EndpointSlice"): validate_discovery.validate_endpoint_slice,
    ("node.k8s.io", "RuntimeClass"): validate_groups.validate_runtime_class,
    ("resource.k8s.io", "DeviceClass"): validate_dra.validate_device_class,
    ("resource.k8s.io", "ResourceClaim"): validate_dra.validate_resource_claim,
    ("resource.k8s.io", "ResourceClaimTemplate"): validate_dra.validate_resource_claim_template,
    ("resource.k8s.io", "ResourceSlice"): validate_dra.validate_resource_slice,
    ("", "Event"): validate_events.validate_core_event,
    ("events.k8s.io", "Event"): validate_events.validate_events_event,
    ("admissionregistration.k8s.io", "ValidatingWebhookConfiguration"):
        admissionregistration.validate_validating_webhook_configuration,
    ("admissionregistration.k8s.io", "MutatingWebhookConfiguration"):
        admissionregistration.validate_mutating_webhook_configuration,
    ("admissionregistration.k8s.io", "ValidatingAdmissionPolicy"): admissionpolicy.validate_validating_admission_policy,
    ("admissionregistration.k8s.io", "ValidatingAdmissionPolicyBinding"):
        admissionpolicy.validate_validating_admission_policy_binding,
}


def ratcheted(validator: Validator) -> Validator:
    """``validator``, except that an update is refused only for errors the stored object does
    not have already. kube never stores an object its validation refuses; the hub may hold
    one stored before its kind was validated, and must still be able to write its status,
    metadata and finalizers (and delete it) without a fix to unrelated fields first."""

    def validate(new: dict[str, Any], old: dict[str, Any] | None) -> list[FieldError]:
        errors = validator(new, old)
        if old is None or not errors:
            return errors
        existing = set(validator(old, None))
        return [error for error in errors if error not in existing]

    return validate


def for_kind(group: str, kind: str) -> Validator | None:
    """The validator of ``kind`` in API group ``group`` (``""`` for core), if kube has one."""
    validator = _VALIDATORS.get((group, kind))
    return ratcheted(validator) if validator is not None else None


def for_status(group: str, kind: str) -> Validator | None:
    """The validator of a write of ``kind``'s status subresource (kube's status strategy), if kube
    has one; ratcheted as :func:`for_kind`."""
    validator = validate_status.for_kind(group, kind)
    return ratcheted(validator) if validator is not None else None
