"""What a member declares about its cluster when it registers: placement facts and GPU pricing.

In: the agent's cluster file (``--cluster-file``, YAML) or a simulated fleet entry, which carries
the same fields. Out: :class:`ClusterFacts`, the fields the agent writes into its Cluster's spec
(provider, region, zone, tier, labels, pricing).
"""

from __future__ import annotations

from typing import Final

from pydantic import BaseModel, ConfigDict, Field


class ClusterFacts(BaseModel):
    """A cluster's placement facts and pricing, as a cluster file (or a fleet entry) states them."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    provider: str = "onprem"
    region: str | None = None
    zone: str | None = None
    tier: int | None = None
    labels: dict[str, str] = Field(default_factory=dict)
    #: $ per GPU-hour by GFD product label value.
    pricing: dict[str, float] = Field(default_factory=dict)


#: The fields of a cluster file, in the order they are written.
CLUSTER_FILE_FIELDS: Final[tuple[str, ...]] = tuple(ClusterFacts.model_fields)
