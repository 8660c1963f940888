"""OpenAPI v2 and v3: what ``kubectl explain``, ``kubectl apply`` and typed clients read.

Layout: :mod:`.upstream` reads kube's own definitions (the data file :mod:`.regenerate`
makes from ``kubernetes-validate``); :mod:`.models` turns gpufed's and Karmada's pydantic
models into schemas with user-facing descriptions; :mod:`.extra_kinds` describes Kubeflow's
and KubeRay's jobs and WasteReport; :mod:`.catalog` picks each served kind's schema;
:mod:`.paths` lists each kind's operations; :mod:`.v3` and :mod:`.v2` render the documents,
:mod:`.gnostic` the v2 protobuf; :mod:`.documents` builds and caches them for the server.
:mod:`.known_fields` reads the same definitions as kube's decoder of the built-in kinds
(the fields it drops). Import the modules themselves: the package re-exports nothing, so
that :mod:`controlplane.apiserver.resources` can use :mod:`.known_fields`.
"""
