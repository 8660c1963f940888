"""Kueue's pod webhook's validation, as an admission of the hub's API (the hub serves Kueue).

In: every create and update of a Pod (:data:`~controlplane.apiserver.admission.AdmitWrite`).
Out: a 422 ``Invalid`` when the Pod's label ``kueue.x-k8s.io/managed`` is set to anything but
``"true"`` (:func:`controlplane.admission.pods.managed_label_errors`), or its pod group's label
and annotation break Kueue's rules (:func:`controlplane.admission.podgroups.metadata_errors`: the
group name and the total count go together, the count is a positive integer, the group name is
immutable), as Kueue's webhook refuses them. A write through ``status`` is not checked: Kueue's
webhook is not called for it.
"""

from __future__ import annotations

from controlplane.admission import podgroups, pods
from controlplane.apiserver import errors
from controlplane.apiserver.admission import WriteAttributes


async def check_managed_label(attrs: WriteAttributes) -> None:
    if (attrs.resource.group, attrs.resource.kind) != ("", "Pod"):
        return
    refused = pods.managed_label_errors(attrs.new)
    if attrs.subresource != "status":
        refused += podgroups.metadata_errors(attrs.new, attrs.old)
    if refused:
        name = str((attrs.new.get("metadata") or {}).get("name") or "")
        raise errors.invalid(kind="Pod", group="", name=name,
                             causes=[errors.Cause(str(e.type), e.message, e.field) for e in refused])


__all__ = ["check_managed_label"]
