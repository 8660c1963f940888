"""Which kinds the hub decodes from protobuf: the ones kubectl's imperative commands send.

``kubectl create namespace|configmap|secret|serviceaccount|service|deployment|job`` use
typed clients that write ``application/vnd.kubernetes.protobuf`` bodies; manifests
(``kubectl apply -f``) always go as JSON, so no other kind needs a table here. Keys
are ``(apiVersion, kind)`` as the envelope names them.
"""

from __future__ import annotations

from collections.abc import Mapping

from controlplane.apiserver.protobuf.apps_v1 import DEPLOYMENT
from controlplane.apiserver.protobuf.batch_v1 import JOB
from controlplane.apiserver.protobuf.core_v1 import CONFIG_MAP, NAMESPACE, SECRET, SERVICE, SERVICE_ACCOUNT
from controlplane.apiserver.protobuf.schema import Message

MESSAGES_BY_KIND: Mapping[tuple[str, str], Message] = {
    ("v1", "Namespace"): NAMESPACE,
    ("v1", "ConfigMap"): CONFIG_MAP,
    ("v1", "Secret"): SECRET,
    ("v1", "ServiceAccount"): SERVICE_ACCOUNT,
    ("v1", "Service"): SERVICE,
    ("apps/v1", "Deployment"): DEPLOYMENT,
    ("batch/v1", "Job"): JOB,
}
