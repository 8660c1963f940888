"""MPIJob (kubeflow.org/v1 and v2beta1): ``spec.mpiReplicaSpecs`` Launcher + Worker, always a gang."""

from __future__ import annotations

from controlplane.interpreter.kubeflow import KubeflowJobInterpreter


class MPIJobInterpreter(KubeflowJobInterpreter):
    kind = "MPIJob"
    specs_field = "mpiReplicaSpecs"
    fixed_roles = frozenset({"Launcher"})
