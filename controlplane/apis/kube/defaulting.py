"""kube-apiserver's defaulting of built-in kinds (``SetDefaults_*``), per group and kind.

A defaulter fills, in place, the fields kube would set on an object that omits them, and
writes every resource quantity in kube's canonical form. :func:`for_kind` is applied on
every create and update; :func:`for_reading` to objects read back from storage (kube
defaults what it decodes from etcd too), so objects stored before a default existed are
served with it. The two differ only where kube's strategy acts at create time (a Job's
generated selector, a new Pod's status).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from controlplane.apis.kube import admissionpolicy, admissionregistration
from controlplane.apis.kube import defaults_apps as apps
from controlplane.apis.kube import defaults_batch as batch
from controlplane.apis.kube import defaults_core as core
from controlplane.apis.kube import defaults_groups as groups

#: Fills unset fields of one object in place.
Defaulter = Callable[[dict[str, Any]], None]

_DEFAULTERS: dict[tuple[str, str], Defaulter] = {
    ("", "Pod"): core.pod,
    ("", "PodTemplate"): core.pod_template,
    ("", "ReplicationController"): core.replication_controller,
    ("", "Service"): core.service,
    ("", "PersistentVolumeClaim"): core.persistent_volume_claim,
    ("", "PersistentVolume"): core.persistent_volume,
    ("", "Secret"): core.secret,
    ("", "Namespace"): core.namespace,
    ("", "Node"): core.node,
    ("", "LimitRange"): core.limit_range,
    ("", "ResourceQuota"): core.resource_quota,
    ("scheduling.k8s.io", "PriorityClass"): core.priority_class,
    ("apps", "Deployment"): apps.deployment,
    ("apps", "StatefulSet"): apps.stateful_set,
    ("apps", "DaemonSet"): apps.daemon_set,
    ("apps", "ReplicaSet"): apps.replica_set,
    ("batch", "Job"): batch.job,
    ("batch", "CronJob"): batch.cron_job,
    ("networking.k8s.io", "NetworkPolicy"): groups.network_policy,
    ("discovery.k8s.io", "EndpointSlice"): groups.endpoint_slice,
    ("node.k8s.io", "RuntimeClass"): groups.runtime_class,
    ("storage.k8s.io", "StorageClass"): groups.storage_class,
    ("resource.k8s.io", "ResourceClaim"): groups.resource_claim,
    ("resource.k8s.io", "ResourceClaimTemplate"): groups.resource_claim_template,
    ("autoscaling", "HorizontalPodAutoscaler"): groups.horizontal_pod_autoscaler,
    ("policy", "PodDisruptionBudget"): groups.pod_disruption_budget,
    ("admissionregistration.k8s.io", "ValidatingWebhookConfiguration"):
        admissionregistration.validating_webhook_configuration,
    ("admissionregistration.k8s.io", "MutatingWebhookConfiguration"):
        admissionregistration.mutating_webhook_configuration,
    ("admissionregistration.k8s.io", "ValidatingAdmissionPolicy"): admissionpolicy.validating_admission_policy,
    ("admissionregistration.k8s.io", "ValidatingAdmissionPolicyBinding"): admissionpolicy.validating_admission_policy_binding,
}

_READERS: dict[tuple[str, str], Defaulter] = {
    **_DEFAULTERS,
    ("", "Pod"): core.pod_on_read,
    ("batch", "Job"): batch.job_on_read,
}


def for_kind(group: str, kind: str) -> Defaulter | None:
    """The defaulter of ``kind`` in API group ``group`` (``""`` for core), if kube has one."""
    return _DEFAULTERS.get((group, kind))


def for_reading(group: str, kind: str) -> Defaulter | None:
    """What kube's decoding from storage does to ``kind``: its defaults, without create-time steps."""
    return _READERS.get((group, kind))


def defaulted_kinds() -> list[tuple[str, str]]:
    """Every (group, kind) kube defaults, sorted."""
    return sorted(_DEFAULTERS)
