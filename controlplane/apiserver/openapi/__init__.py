"""OpenAPI v2 and v3: what ``kubectl explain``, ``kubectl apply`` and typed clients read.

Layout: :mod:`.upstream` reads kube's own definitions (the data file :mod:`.regenerate`
makes from ``kubernetes-validate``); :mod:`.models` turns gpufed's and Karmada's pydantic
models into schemas with user-facing descriptions; :mod:`.extra_kinds` describes Kubeflow's
and KubeRay's jobs and WasteReport; :mod:`.catalog` picks each served kind's schema;
:mod:`.paths` lists each kind's operations; :mod:`.v3` and :mod:`.v2` render the documents,
:mod:`.gnostic` the v2 protobuf; :mod:`.documents` builds and caches them for the server.
"""

from controlplane.apiserver.openapi.documents import OpenApiDocuments, Rendered
from controlplane.apiserver.openapi.gnostic import MEDIA_TYPE as PROTOBUF_V2_MEDIA_TYPE

__all__ = ["PROTOBUF_V2_MEDIA_TYPE", "OpenApiDocuments", "Rendered"]
