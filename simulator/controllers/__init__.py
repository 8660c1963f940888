"""Workload controllers of the simulated member cluster, one pure module per kind.

Mirrors the hub's :mod:`controlplane.interpreter`: :mod:`.base` holds the reconcile
contract (:class:`Changes`) and the pod and status helpers every kind uses;
``deployment``, ``replicaset``, ``statefulset``, ``job``, ``kubeflow`` (the Kubeflow
training jobs), ``raycluster`` and ``rayjob`` hold one reconcile function each; and
:mod:`.registry` maps a workload's (apiVersion, kind) to its :class:`Controller`
(:data:`CONTROLLERS`). Import a kind's names from its module.
"""

from simulator.controllers.base import Changes
from simulator.controllers.registry import CONTROLLERS, Controller

__all__ = ["CONTROLLERS", "Changes", "Controller"]
