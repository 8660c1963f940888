"""Kueue's MultiKueue at the hub, the rules: the hub is the dispatcher of an AdmissionCheck of the
``kueue.x-k8s.io/multikueue`` controller. Pure: the objects are given (no I/O).

* A MultiKueueCluster stands for the hub's registered Cluster of the same name (its kubeConfig is
  not read: the members' agents connect to the hub): ``Active`` as Kueue's cluster reconciler
  writes it, ``True``/``Active``/``Connected`` while that Cluster is ``Ready``,
  ``False``/``ClientConnectionFailed`` while it is not, ``False``/``BadConfig`` when no Cluster has
  the name (:func:`cluster_active`).
* The AdmissionCheck is ``Active`` as Kueue's admission check reconciler says
  (:func:`check_active`): ``Active`` when every cluster of its MultiKueueConfig is active,
  ``SomeActiveClusters`` (still True) when some are, ``NoUsableClusters`` (False) when none is,
  ``BadConfig`` (False) when its parameters do not name a stored MultiKueueConfig.
* A Workload's state of such a check goes ``Ready`` once one of the config's clusters is active
  (``Pending`` until then), and the workload is then placed on those clusters only
  (:func:`dispatch_clusters`); ``Rejected`` when its job is not MultiKueue's (another
  ``managedBy``: :func:`unmanaged_message`), as Kueue's multikueue workload controller rejects it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Final

from controlplane.apis.kueue_multikueue import COND_ACTIVE, CONTROLLER_NAME

Obj = Mapping[str, Any]

GROUP: Final = "kueue.x-k8s.io"
CONFIG_KIND: Final = "MultiKueueConfig"


def condition_of(obj: Obj | None, kind: str) -> Obj | None:
    """An object's status condition of ``kind``, or None."""
    for cond in ((obj or {}).get("status") or {}).get("conditions") or ():
        if isinstance(cond, Mapping) and cond.get("type") == kind:
            return cond
    return None


def _go_list(names: Iterable[str]) -> str:
    """A list of names as Go's ``%v`` prints a ``[]string``."""
    return "[" + " ".join(names) + "]"


def cluster_active(name: str, cluster: Obj | None) -> dict[str, str]:
    """The ``Active`` condition of the MultiKueueCluster ``name``, from the hub's Cluster of that name."""
    if cluster is None:
        return {"type": COND_ACTIVE, "status": "False", "reason": "BadConfig",
                "message": f'no Cluster named "{name}" is registered with the hub'}
    ready = condition_of(cluster, "Ready")
    if ready is not None and ready.get("status") == "True":
        return {"type": COND_ACTIVE, "status": "True", "reason": "Active", "message": "Connected"}
    why = str((ready or {}).get("message") or "") or f'the Cluster "{name}" is not Ready'
    return {"type": COND_ACTIVE, "status": "False", "reason": "ClientConnectionFailed", "message": why}


def is_multikueue(check: Obj | None) -> bool:
    return str(((check or {}).get("spec") or {}).get("controllerName") or "") == CONTROLLER_NAME


def config_of(check: Obj, configs: Mapping[str, Obj]) -> tuple[Obj | None, str]:
    """The MultiKueueConfig a check's parameters name, or None and why it cannot be loaded."""
    ref = (check.get("spec") or {}).get("parameters")
    if not isinstance(ref, Mapping) or ref.get("apiGroup") != GROUP or ref.get("kind") != CONFIG_KIND:
        return None, "admission check parameters must reference a MultiKueueConfig of kueue.x-k8s.io"
    name = str(ref.get("name") or "")
    config = configs.get(name)
    if config is None:
        return None, f'multikueueconfigs.kueue.x-k8s.io "{name}" not found'
    return config, ""


def config_clusters(config: Obj) -> list[str]:
    return [str(name) for name in ((config.get("spec") or {}).get("clusters") or ())]


def check_active(check: Obj, configs: Mapping[str, Obj], clusters: Mapping[str, Obj]) -> dict[str, str]:
    """The ``Active`` condition of a MultiKueue AdmissionCheck (``clusters``: the MultiKueueClusters by name)."""
    config, why = config_of(check, configs)
    if config is None:
        return {"type": "Active", "status": "False", "reason": "BadConfig",
                "message": f"Cannot load the AdmissionChecks parameters: {why}"}
    names = config_clusters(config)
    missing = [n for n in names if n not in clusters]
    inactive = [n for n in names if n in clusters and (condition_of(clusters[n], COND_ACTIVE) or {}).get("status") != "True"]
    if not missing and not inactive:
        return {"type": "Active", "status": "True", "reason": "Active", "message": "The admission check is active"}
    parts = [f"Missing clusters: {_go_list(missing)}"] if missing else []
    if inactive:
        parts.append(f"Inactive clusters: {_go_list(inactive)}")
    usable = len(missing) + len(inactive) < len(names)
    return {"type": "Active", "status": "True" if usable else "False",
            "reason": "SomeActiveClusters" if usable else "NoUsableClusters", "message": ", ".join(parts)}


def active_clusters(check: Obj, configs: Mapping[str, Obj], clusters: Mapping[str, Obj]) -> list[str]:
    """The clusters of a MultiKueue check's config whose MultiKueueCluster is ``Active``, in the config's order."""
    config, _ = config_of(check, configs)
    if config is None:
        return []
    return [n for n in config_clusters(config) if (condition_of(clusters.get(n), COND_ACTIVE) or {}).get("status") == "True"]


def dispatch_clusters(
    states: Iterable[Obj], checks: Mapping[str, Obj], configs: Mapping[str, Obj], clusters: Mapping[str, Obj],
) -> frozenset[str] | None:
    """The clusters a Workload with these check ``states`` may be placed on: those active in every
    MultiKueue check's config; None when it has no MultiKueue check."""
    allowed: frozenset[str] | None = None
    for state in states:
        check = checks.get(str(state.get("name")))
        if check is None or not is_multikueue(check):
            continue
        names = frozenset(active_clusters(check, configs, clusters))
        allowed = names if allowed is None else allowed & names
    return allowed


def unmanaged_message(reason: str) -> str:
    """The message of a MultiKueue check Rejected for a job MultiKueue does not manage (Kueue's
    multikueue workload controller's)."""
    return f"The owner is not managed by Kueue: {reason}"


def ready_message(names: Iterable[str]) -> str:
    return f"The workload is dispatched by the hub to the active clusters {_go_list(names)}"


def restrict_to_clusters(spec: dict[str, Any], names: frozenset[str] | None) -> None:
    """Restrict a binding spec's placement (every cluster affinity term) to the clusters ``names``,
    in place: a term's own ``clusterNames`` are intersected with them, and a term left with none
    excludes its names, so it fits no cluster."""
    if names is None:
        return
    placement = spec.setdefault("placement", {})
    terms = placement.get("clusterAffinities")
    affinities = list(terms) if isinstance(terms, list) and terms else [placement.setdefault("clusterAffinity", {})]
    for affinity in affinities:
        own = affinity.get("clusterNames") or []
        kept = sorted(n for n in own if n in names) if own else sorted(names)
        if kept:
            affinity["clusterNames"] = kept
        else:
            affinity["exclude"] = sorted({*(affinity.get("exclude") or ()), *own, *names})
