"""A Pod's ``kubectl get`` cells: READY, STATUS and RESTARTS as kube's ``printPod``
(pkg/printers/internalversion) makes them, read from :func:`controlplane.apis.podstatus.pod_cells`
(shared with the pod view of `gpufed explain`/`describe`), and READINESS GATES.

In: the stored Pod and "now". Out: strings. Pure: no I/O.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from controlplane.apis.podstatus import pod_cells
from controlplane.apis.untyped import Obj, as_list, dig


def pod_ready(obj: Obj, now: datetime) -> str:
    return pod_cells(obj, now).ready


def pod_status(obj: Obj, now: datetime) -> str:
    return pod_cells(obj, now).status


def pod_restarts(obj: Obj, now: datetime) -> str:
    return pod_cells(obj, now).restarts


def pod_readiness_gates(obj: Obj, _now: datetime) -> str:
    """kube's READINESS GATES cell: how many of the pod's readiness gates have a True condition."""
    gates = dig(obj, "spec", "readinessGates")
    if not isinstance(gates, list) or not gates:
        return "<none>"
    statuses: dict[Any, Any] = {}
    for found in as_list(dig(obj, "status", "conditions")):
        if not isinstance(found, dict):
            continue
        statuses.setdefault(found.get("type"), found.get("status"))
    met = sum(
        1 for gate in gates if isinstance(gate, dict) and statuses.get(gate.get("conditionType")) == "True"
    )
    return f"{met}/{len(gates)}"
