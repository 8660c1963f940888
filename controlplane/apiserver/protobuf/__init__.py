"""Kubernetes protobuf request bodies, decoded into the objects the JSON path would parse.

kubectl's imperative commands (``kubectl create namespace|configmap|secret|
serviceaccount|service|quota|deployment|job|cronjob|ingress|poddisruptionbudget|
priorityclass``, among others) send built-in kinds as
``application/vnd.kubernetes.protobuf`` and never fall back to JSON. The API server
calls :func:`decode_object` for such bodies and continues exactly as for JSON; a delete's
body (DeleteOptions, which client-go's typed clients send as protobuf too) goes through
:func:`decode_delete_options`.

Layout: :mod:`.wire` splits bytes into fields; :mod:`.schema` describes field tables;
:mod:`.tables` reads the tables (``meta_v1.yaml``, ``core_v1.yaml``, ``apps_v1.yaml``,
``batch_v1.yaml``, ``rbac_v1.yaml``, ``networking_v1.yaml``, ``policy_v1.yaml``, ``autoscaling_v1.yaml``,
``scheduling_v1.yaml``) taken from the upstream ``generated.proto`` files;
:mod:`.kinds` lists the decodable kinds;
:mod:`.decoding` reads the envelope and applies the tables.
"""

from controlplane.apiserver.protobuf.decoding import MEDIA_TYPE, decode_delete_options, decode_object
from controlplane.apiserver.protobuf.kinds import MESSAGES_BY_KIND

__all__ = ["MEDIA_TYPE", "MESSAGES_BY_KIND", "decode_delete_options", "decode_object"]
