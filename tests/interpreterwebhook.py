"""Answers of a resource interpreter webhook for tests, after Karmada's sample
(examples/customresourceinterpreter): a ``workload.example.io/v1alpha1`` Workload whose replicas
are ``spec.replicas``, revised by a JSONPatch; ``spec.paused`` as the member has it is retained;
the members' ``readyReplicas`` are summed into the status; a Workload is healthy when all its
replicas are ready. :func:`interpret` answers a ResourceInterpreterContext; the path
``/interpreter-failing`` answers ``successful: false`` and ``/interpreter-wrong-uid`` another uid.
"""

from __future__ import annotations

import base64
import json
from typing import Any


def _patch(operations: list[dict[str, Any]]) -> dict[str, Any]:
    return {"patchType": "JSONPatch", "patch": base64.b64encode(json.dumps(operations).encode()).decode()}


def _answer(request: dict[str, Any]) -> dict[str, Any]:
    operation, obj = request["operation"], request["object"]
    spec, status = obj.get("spec") or {}, obj.get("status") or {}
    if operation == "InterpretReplica":
        resources = (((spec.get("template") or {}).get("spec") or {}).get("containers") or [{}])[0].get("resources") or {}
        requirements = {"resourceRequest": resources.get("requests") or {}}
        return {"replicas": int(spec.get("replicas") or 0), "replicaRequirements": requirements}
    if operation == "ReviseReplica":
        return _patch([{"op": "replace", "path": "/spec/replicas", "value": request["desiredReplicas"]}])
    if operation == "Retain":
        paused = ((request.get("observedObject") or {}).get("spec") or {}).get("paused")
        return _patch([{"op": "replace", "path": "/spec/paused", "value": bool(paused)}])
    if operation == "AggregateStatus":
        ready = sum(int((item.get("status") or {}).get("readyReplicas") or 0) for item in request.get("aggregatedStatus") or [])
        return _patch([{"op": "add", "path": "/status", "value": {"readyReplicas": ready}}])
    if operation == "InterpretStatus":
        return {"rawStatus": {"readyReplicas": status.get("readyReplicas") or 0}}
    if operation == "InterpretHealth":
        return {"healthy": (status.get("readyReplicas") or 0) == spec.get("replicas")}
    if operation == "InterpretDependency":
        name = ((spec.get("template") or {}).get("spec") or {}).get("serviceAccountName")
        return {"dependencies": [{"apiVersion": "v1", "kind": "ServiceAccount", "namespace": "default", "name": name}]}
    return {}


def interpret(path: str, context: dict[str, Any]) -> dict[str, Any]:
    """The ResourceInterpreterContext answering ``context`` at ``path``."""
    request = context["request"]
    uid = "not-the-request" if path == "/interpreter-wrong-uid" else request["uid"]
    if path == "/interpreter-failing":
        response: dict[str, Any] = {"successful": False, "status": {"code": 500, "message": "workload unreadable"}}
    else:
        response = {"successful": True, **_answer(request)}
    return {"apiVersion": context["apiVersion"], "kind": context["kind"], "response": {"uid": uid, **response}}
