"""Kueue's pod and job webhooks' validation, as admissions of the hub's API (the hub serves Kueue).

In: every create and update (:data:`~controlplane.apiserver.admission.AdmitWrite`). Out: a 403
``admission webhook "v<kind>.kb.io" denied the request: <field errors>``, nothing written, when

* a Pod's label ``kueue.x-k8s.io/managed`` is set to anything but ``"true"``
  (:func:`controlplane.admission.pods.managed_label_errors`), or its pod group's label and
  annotation break Kueue's rules (:func:`controlplane.admission.podgroups.metadata_errors`: the
  group name and the total count go together, the count is a positive integer, the group name is
  immutable), or an update changes the label ``kueue.x-k8s.io/queue-name`` of a Pod that is
  neither gated nor finished (:func:`controlplane.admission.pods.queue_name_update_errors`) —
  :func:`check_managed_label`;
* an update adds, changes or removes the label ``kueue.x-k8s.io/queue-name`` of a job of a kind
  Kueue suspends while the job as written is not suspended, of a Deployment that had ready
  replicas (or removes it from any Deployment), of a StatefulSet (or its Pod template's) or of a
  LeaderWorkerSet, changes a StatefulSet's label ``kueue.x-k8s.io/pod-group-name``, or scales a
  queued StatefulSet other than to or from 0 (or up from 0 while its scale down goes on)
  (:func:`controlplane.apis.kueue_jobs.update_errors`) — :func:`check_job_queue_name`;

as Kueue's webhooks refuse them. A write through a subresource (``status``, ``scale``) is not
checked for what Kueue's webhooks only see on the object itself (``kubectl scale`` of a queued
StatefulSet goes around its replicas rule, as around Kueue's webhook).
"""

from __future__ import annotations

from controlplane.admission import podgroups, pods
from controlplane.apis import kueue_jobs
from controlplane.apis.kube.field import FieldError, error_list_text
from controlplane.apiserver import errors
from controlplane.apiserver.admission import WriteAttributes


def webhook_name(kind: str) -> str:
    """The name of Kueue's validating webhook for ``kind`` in its webhook configuration
    (``vjob.kb.io``, ``vpod.kb.io``, ``vstatefulset.kb.io`` ...)."""
    return f"v{kind.lower()}.kb.io"


def _refuse(attrs: WriteAttributes, refused: list[FieldError]) -> None:
    """Kueue's webhooks return their field errors aggregated, not a Status, so controller-runtime
    answers ``admission.Denied`` and kube-apiserver a 403 naming the webhook."""
    if refused:
        raise errors.WebhookDenied(webhook_name(attrs.resource.kind), error_list_text(refused), code=403,
                                   reason=errors.StatusReason.FORBIDDEN)


async def check_managed_label(attrs: WriteAttributes) -> None:
    if (attrs.resource.group, attrs.resource.kind) != ("", "Pod"):
        return
    refused: list[FieldError] = []
    if attrs.old is not None and attrs.subresource is None:  # Kueue's order: the queue name first
        refused += pods.queue_name_update_errors(attrs.new, attrs.old)
    refused += pods.managed_label_errors(attrs.new)
    if attrs.subresource != "status":
        refused += podgroups.metadata_errors(attrs.new, attrs.old)
    _refuse(attrs, refused)


async def check_job_queue_name(attrs: WriteAttributes) -> None:
    if attrs.old is None or attrs.subresource is not None or attrs.scale:
        return
    typed = {**attrs.new, "apiVersion": attrs.resource.api_version, "kind": attrs.resource.kind}
    _refuse(attrs, kueue_jobs.update_errors(typed, attrs.old))


__all__ = ["check_job_queue_name", "check_managed_label", "webhook_name"]
