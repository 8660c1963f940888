"""ClusterRestriction: an agent may write its Cluster's status, not what an admin decided.

The authorizer lets an agent write its own Cluster (registration and status reports);
it cannot see what the write changes. This admission check, modelled on kube's
NodeRestriction plugin for kubelets, refuses an agent's write that changes a field the
agent does not own, with 403 Forbidden naming the fields. A compromised member could
otherwise undo a cordon or a NoExecute taint, or label, re-tier or re-price its cluster,
and pull workloads (and their Secrets) to itself.

What the agent owns comes from field ownership (``metadata.managedFields``), the same
bookkeeping server-side apply keeps:

- ``.status`` is always the agent's (the status subresource writes nothing else);
- a spec or metadata field may change only when the agent's field manager
  (``gpufed-agent``) owns it and no other manager does: the fields it declared when it
  registered (provider, region, zone, tier, labels, pricing), until an admin sets them —
  an admin's write takes the field over, as every write in Kubernetes does;
- ``.spec.taints`` and ``.spec.unschedulable`` never: an admin cordons and taints, and so
  does the hub's health monitor (as NodeRestriction never lets a kubelet change taints);
- an agent's write may not change anyone else's ownership, nor give the agent a field
  nobody else owns (it could then change it next time): ``managedFields`` stay the hub's
  record. Sharing a field with an admin at the same value (re-applying a label the
  admin also set) is fine — the admin still owns it, so the agent still cannot change it.

Creating the Cluster is allowed as the authorizer allows it: what an agent declares when
it joins is its registration. Only Clusters and only the agent role are checked; admins
and the hub's own controllers (which write in-process) are not.

Pure: no I/O.
"""

from __future__ import annotations

from typing import Final

from controlplane.apis.constants import CLUSTER_GROUP, FIELD_MANAGER_AGENT
from controlplane.apiserver import errors
from controlplane.apiserver.admission import Operation, WriteAttributes
from controlplane.apiserver.identity import Role, UserInfo
from controlplane.apiserver.patching.fieldpaths import field_element
from controlplane.apiserver.patching.ownership import Path, changed_fields, describe, owners
from controlplane.apiserver.patching.schema import FieldSchema

CLUSTERS: Final = "clusters"
#: Fields an agent may never change, whoever owns them.
ADMIN_ONLY_FIELDS: Final[tuple[Path, ...]] = (
    (field_element("spec"), field_element("taints")),
    (field_element("spec"), field_element("unschedulable")),
)


class ClusterRestriction:
    """The admission plugin; see the module docstring."""

    def validate(self, user: UserInfo, write: WriteAttributes) -> None:
        rt = write.resource
        if user.role is not Role.AGENT or rt.group != CLUSTER_GROUP or rt.plural != CLUSTERS:
            return
        if write.operation is not Operation.UPDATE or write.old is None:
            return
        name = str(write.new.get("metadata", {}).get("name", ""))
        agent = user.cluster or user.name
        denied = _forbidden_changes(write.old, write.new, schema=rt.apply_schema)
        if denied:
            fields = ", ".join(f"{describe(path)} ({why})" for path, why in denied)
            raise _forbidden(
                name,
                f'agent "{agent}" may change only the status and the registration fields it owns, '
                f"not {fields}; an admin changes those (kubectl patch / kubectl label "
                f"{rt.plural}.{rt.group} {name})",
                causes=[
                    errors.Cause(errors.CauseType.FIELD_VALUE_FORBIDDEN, f"Forbidden: {why}", describe(path)[1:])
                    for path, why in denied
                ],
            )
        if not _ownership_kept(write.old, write.new):
            raise _forbidden(
                name,
                f'agent "{agent}" may not change metadata.managedFields: field ownership is the '
                "hub's record of who set what",
                causes=[
                    errors.Cause(
                        errors.CauseType.FIELD_VALUE_FORBIDDEN,
                        "Forbidden: agents may not change field ownership",
                        "metadata.managedFields",
                    )
                ],
            )


def _forbidden_changes(
    old: dict[str, object], new: dict[str, object], *, schema: FieldSchema
) -> list[tuple[Path, str]]:
    """The changed fields the agent may not change, each with the reason."""
    owned = owners(old)
    agent_fields = owned.get(FIELD_MANAGER_AGENT, frozenset())
    denied: list[tuple[Path, str]] = []
    for path in sorted(changed_fields(old, new, schema=schema), key=describe):
        if any(path[: len(admin)] == admin for admin in ADMIN_ONLY_FIELDS):
            denied.append((path, "set only by admins and the hub"))
            continue
        others = sorted(manager for manager, fields in owned.items() if manager != FIELD_MANAGER_AGENT and path in fields)
        if others:
            denied.append((path, "owned by " + ", ".join(f'"{m}"' for m in others)))
        elif path not in agent_fields:
            denied.append((path, "not registered by the agent"))
    return denied


def _ownership_kept(old: dict[str, object], new: dict[str, object]) -> bool:
    """Every other manager keeps its fields; the agent gains only fields others share."""
    before, after = owners(old), owners(new)
    others_before = {m: fields for m, fields in before.items() if m != FIELD_MANAGER_AGENT}
    others_after = {m: fields for m, fields in after.items() if m != FIELD_MANAGER_AGENT}
    if any(not fields <= others_after.get(m, frozenset()) for m, fields in others_before.items()):
        return False
    shared = frozenset().union(*others_after.values()) if others_after else frozenset()
    gained = after.get(FIELD_MANAGER_AGENT, frozenset()) - before.get(FIELD_MANAGER_AGENT, frozenset())
    return gained <= shared


def _forbidden(name: str, reason: str, *, causes: list[errors.Cause]) -> errors.Forbidden:
    """kube's admission wording: ``clusters.cluster.gpufed.io "x" is forbidden: <reason>``."""
    return errors.Forbidden(
        f'{CLUSTERS}.{CLUSTER_GROUP} "{name}" is forbidden: {reason}',
        target=errors.Target(name=name, group=CLUSTER_GROUP, kind=CLUSTERS),
        causes=causes,
    )
