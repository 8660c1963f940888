"""Health of one member object, by its kind's rule (the Work status' ``health``).

In: a member object as read (or as a watch cache keeps it). Out: Healthy, Unhealthy or Unknown.
The rules are the interpreters' (:func:`controlplane.interpreter.judge_health`), the ones the hub
applies to what it knows of the same object: a Deployment's available and updated replicas, a
DaemonSet's updated and available daemon pods, a LoadBalancer Service's ingress points, a Job's
Failed condition...; a kind with no rule of its own is judged by its conditions, and is healthy
once applied when it has none, as Karmada's default interpreter says. Pure.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from controlplane.apis.work_v1alpha1 import Health
from controlplane.interpreter import judge_health


def assess_health(obj: Mapping[str, Any] | None) -> Health:
    """Health of a member object by its kind's rule."""
    return judge_health(obj)
