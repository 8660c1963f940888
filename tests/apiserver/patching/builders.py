"""Object builders shared by the patching tests."""

from __future__ import annotations

from typing import Any

API_VERSIONS = {
    "Deployment": "apps/v1",
    "StatefulSet": "apps/v1",
    "Job": "batch/v1",
    "Lease": "coordination.k8s.io/v1",
}


def make_object(kind: str, name: str = "obj", **body: Any) -> dict[str, Any]:
    """A ``kind`` object named ``name`` in namespace ``default`` with ``body`` as top-level fields."""
    metadata = {"name": name, "namespace": "default", **body.pop("metadata", {})}
    return {"apiVersion": API_VERSIONS.get(kind, "v1"), "kind": kind, "metadata": metadata, **body}
