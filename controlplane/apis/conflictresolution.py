"""What a member's agent does with an object of the same name that gpufed did not create:
Karmada's ``ConflictResolution``, set on a (Cluster)PropagationPolicy, carried by each Work, and
read by the agent.

Out: :class:`ConflictResolution` and its default, used by the policy models
(:mod:`policies.models`), the Work model (:mod:`controlplane.apis.work_v1alpha1`), the controllers
that write Works and the agent (:mod:`member_agent.manifests`).
"""

from __future__ import annotations

from enum import StrEnum
from typing import Final


class ConflictResolution(StrEnum):
    ABORT = "Abort"
    """Leave the object alone and report the conflict."""
    OVERWRITE = "Overwrite"
    """Take the object over."""


#: A policy's or a Work's ``conflictResolution`` when it has none (Karmada's CRD default).
DEFAULT_CONFLICT_RESOLUTION: Final = ConflictResolution.ABORT
