"""Names of Kueue's that code outside the hub's Kueue models needs: the labels a job carries, the
MultiKueue controller's name, and the group, versions and kind of Kueue's visibility API.

A standard-library leaf: the member agent and the OpenAPI catalog read these names without
building Kueue's pydantic models (a noticeable share of a process's start-up CPU).
:mod:`.kueue_v1beta1`, :mod:`.kueue_multikueue` and :mod:`controlplane.apiserver.visibility`
re-export them.
"""

from __future__ import annotations

from typing import Final

#: The label that puts a job (or any workload) in a LocalQueue of its namespace.
LABEL_QUEUE_NAME: Final = "kueue.x-k8s.io/queue-name"
#: Kueue's pod groups: Pods with the same group name label share one Workload (see
#: :mod:`.kueue_v1beta1` for the annotations that go with it).
LABEL_POD_GROUP_NAME: Final = "kueue.x-k8s.io/pod-group-name"

#: The controller name of Kueue's MultiKueue admission checks (also the ``managedBy`` value of a
#: job MultiKueue dispatches).
MULTIKUEUE_CONTROLLER_NAME: Final = "kueue.x-k8s.io/multikueue"

#: Kueue's visibility API (pending workloads, computed on each read).
VISIBILITY_GROUP: Final = "visibility.kueue.x-k8s.io"
#: Its served versions, the preferred first (Kueue's ``PrioritizedVersions``).
VISIBILITY_VERSIONS: Final = ("v1beta2", "v1beta1")
VISIBILITY_SUMMARY: Final = "PendingWorkloadsSummary"
