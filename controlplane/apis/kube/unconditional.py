"""Which kinds take an update without ``metadata.resourceVersion`` (kube's
``AllowUnconditionalUpdate``), and which an update of a missing object creates (kube's
``AllowCreateOnUpdate``).

An update (a PUT, or a patch whose result has no resourceVersion) that names none, or ``0``, is
unconditional in kube-apiserver only where the kind's registry strategy allows it: the store then
writes over whatever revision it reads. Where the strategy does not, the store refuses it with a
422 naming the resourceVersion (``leases.coordination.k8s.io "l" is invalid:
metadata.resourceVersion: Invalid value: 0x0: must be specified for an update``). Most built-in
kinds allow it; these do not, read from their strategies (each status strategy,
where the kind has one, answers as its main one): the admission webhook configurations,
ValidatingAdmissionPolicy and its binding, Lease, RuntimeClass, PodDisruptionBudget, the
aggregator's APIService and apiextensions' CustomResourceDefinition. Every custom resource
refuses it too (apiextensions' strategy for custom resources), which the object layer checks
for itself; so do the kinds the hub serves as its own that a real cluster serves from a
CustomResourceDefinition (:data:`CUSTOM_RESOURCE_GROUPS`: Karmada's, Kueue's, JobSet,
LeaderWorkerSet, the MCS API's, Kubeflow's and KubeRay's).

A PUT of an object that does not exist is kube's 404, but for the few built-in kinds whose
strategy creates it then (:data:`CREATE_ON_UPDATE`): Endpoints, Event (both groups), LimitRange,
Service, Lease, RuntimeClass and RBAC's four kinds. No custom resource is created so.

In: a group and kind. Out: a boolean. Pure: no I/O.
"""

from __future__ import annotations

from typing import Final

#: (group, kind) of kube's built-in kinds the hub serves whose strategy refuses an unconditional update.
CONDITIONAL_ONLY: Final[frozenset[tuple[str, str]]] = frozenset({
    ("admissionregistration.k8s.io", "MutatingWebhookConfiguration"),
    ("admissionregistration.k8s.io", "ValidatingAdmissionPolicy"),
    ("admissionregistration.k8s.io", "ValidatingAdmissionPolicyBinding"),
    ("admissionregistration.k8s.io", "ValidatingWebhookConfiguration"),
    ("apiextensions.k8s.io", "CustomResourceDefinition"),
    ("apiregistration.k8s.io", "APIService"),
    ("coordination.k8s.io", "Lease"),
    ("node.k8s.io", "RuntimeClass"),
    ("policy", "PodDisruptionBudget"),
})

#: (group, kind) of kube's built-in kinds the hub serves whose strategy says
#: ``AllowCreateOnUpdate() bool { return true }``: a PUT of a missing one creates it.
CREATE_ON_UPDATE: Final[frozenset[tuple[str, str]]] = frozenset({
    ("", "Endpoints"),
    ("", "Event"),
    ("", "LimitRange"),
    ("", "Service"),
    ("coordination.k8s.io", "Lease"),
    ("events.k8s.io", "Event"),
    ("node.k8s.io", "RuntimeClass"),
    ("rbac.authorization.k8s.io", "ClusterRole"),
    ("rbac.authorization.k8s.io", "ClusterRoleBinding"),
    ("rbac.authorization.k8s.io", "Role"),
    ("rbac.authorization.k8s.io", "RoleBinding"),
})

#: The API groups the hub serves as its own whose kinds are CustomResourceDefinitions on a real
#: cluster (Karmada's, Kueue's, JobSet, LeaderWorkerSet, the MCS API's, Kubeflow's and KubeRay's):
#: apiextensions' strategy for custom resources applies to them.
CUSTOM_RESOURCE_GROUPS: Final[frozenset[str]] = frozenset({
    "apps.karmada.io",
    "autoscaling.karmada.io",
    "cluster.karmada.io",
    "config.karmada.io",
    "networking.karmada.io",
    "policy.karmada.io",
    "work.karmada.io",
    "kueue.x-k8s.io",
    "jobset.x-k8s.io",
    "leaderworkerset.x-k8s.io",
    "multicluster.x-k8s.io",
    "kubeflow.org",
    "trainer.kubeflow.org",
    "ray.io",
})


def allows_unconditional_update(group: str, kind: str) -> bool:
    """Whether kube's strategy for the built-in ``group``/``kind`` lets an update without a
    resourceVersion through (its ``AllowUnconditionalUpdate()``)."""
    return (group, kind) not in CONDITIONAL_ONLY and group not in CUSTOM_RESOURCE_GROUPS


def allows_create_on_update(group: str, kind: str) -> bool:
    """Whether kube's strategy for the built-in ``group``/``kind`` creates a missing object an
    update names (its ``AllowCreateOnUpdate()``)."""
    return (group, kind) in CREATE_ON_UPDATE
