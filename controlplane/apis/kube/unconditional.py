"""Which kinds take an update without ``metadata.resourceVersion``: kube's ``AllowUnconditionalUpdate``.

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
for itself.

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


def allows_unconditional_update(group: str, kind: str) -> bool:
    """Whether kube's strategy for the built-in ``group``/``kind`` lets an update without a
    resourceVersion through (its ``AllowUnconditionalUpdate()``)."""
    return (group, kind) not in CONDITIONAL_ONLY
