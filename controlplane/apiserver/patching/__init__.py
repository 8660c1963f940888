"""Pure patch and apply logic for the hub's API server: dicts in, dicts out, no I/O.

- :func:`strategic_merge_patch` applies ``application/strategic-merge-patch+json``
  (what client-side ``kubectl apply``/``edit``/``patch`` send for built-in kinds).
- :func:`server_side_apply` applies ``application/apply-patch+yaml`` with field ownership.
- :func:`record_update` tracks ownership for ordinary creates, updates and patches.
"""

from controlplane.apiserver.patching.apply import ApplyError, record_update, server_side_apply
from controlplane.apiserver.patching.conflicts import ApplyConflict
from controlplane.apiserver.patching.schema import supported_strategic_kinds
from controlplane.apiserver.patching.strategic import PatchError, strategic_merge_patch

__all__ = [
    "ApplyConflict",
    "ApplyError",
    "PatchError",
    "record_update",
    "server_side_apply",
    "strategic_merge_patch",
    "supported_strategic_kinds",
]
