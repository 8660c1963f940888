"""PyTorchJob (kubeflow.org/v1): ``spec.pytorchReplicaSpecs`` Master + Worker, always a gang."""

from __future__ import annotations

from controlplane.interpreter.kubeflow import KubeflowJobInterpreter


class PyTorchJobInterpreter(KubeflowJobInterpreter):
    kind = "PyTorchJob"
    specs_field = "pytorchReplicaSpecs"
    fixed_roles = frozenset({"Master"})
