"""The ResourceInterpreterCustomization of the ``TrainingRun`` custom kind (``ml.example.com/v1``)
that the interpreter's unit tests and the controllers' hub tests both drive: its Lua hooks and
the customization object that carries them."""

from __future__ import annotations

from typing import Any

API = "ml.example.com/v1"
RIC_API = "config.karmada.io/v1alpha1"

GET_REPLICAS = """
function GetReplicas(obj)
  local kube = require("kube")
  return obj.spec.workers, kube.accuratePodRequirements(obj.spec.template)
end
"""
REVISE = """
function ReviseReplica(obj, desiredReplica)
  obj.spec.workers = desiredReplica
  return obj
end
"""
#: Sums the members' ``readyWorkers`` and lists the clusters they came from.
AGGREGATE = """
function AggregateStatus(desiredObj, statusItems)
  if statusItems == nil then return desiredObj end
  local ready, clusters = 0, {}
  for i = 1, #statusItems do
    local item = statusItems[i]
    if item.status ~= nil and item.status.readyWorkers ~= nil then
      ready = ready + item.status.readyWorkers
    end
    clusters[i] = item.clusterName
  end
  desiredObj.status = {readyWorkers = ready, clusters = clusters}
  return desiredObj
end
"""


def customization(name: str = "trainingrun", *, created: str | None = None, **hooks: str) -> dict[str, Any]:
    """A ResourceInterpreterCustomization of TrainingRun with a Lua script per hook."""
    metadata: dict[str, Any] = {"name": name}
    if created is not None:
        metadata["creationTimestamp"] = created
    return {
        "apiVersion": RIC_API,
        "kind": "ResourceInterpreterCustomization",
        "metadata": metadata,
        "spec": {
            "target": {"apiVersion": API, "kind": "TrainingRun"},
            "customizations": {hook: {"luaScript": script} for hook, script in hooks.items()},
        },
    }
