"""apiregistration.k8s.io/v1 APIService, as kube-aggregator serves it: cluster-scoped, category
``api-extensions``, the ``status`` subresource, kube's strategy and validation
(:mod:`controlplane.apis.kube.apiregistration`) and kube's ``kubectl get apiservices`` columns
(NAME SERVICE AVAILABLE AGE).

The hub keeps the local APIServices (:mod:`controlplane.controllers.apiservices`) and proxies the
aggregated ones (:mod:`controlplane.apiserver.aggregator`).
"""

from __future__ import annotations

import datetime as dt

from controlplane.apis.kube import apiregistration
from controlplane.apiserver import columns as col
from controlplane.apiserver.resources import NameRule, ResourceType, TableColumn

API_SERVICE = ResourceType(
    apiregistration.GROUP, apiregistration.VERSION, "APIService", "apiservices", "apiservice",
    namespaced=False, categories=("api-extensions",), has_status=True, strategic_merge=True,
    name_rule=NameRule.PATH_SEGMENT,
    prepare=lambda obj: apiregistration.prepare(obj, dt.datetime.now(dt.UTC)),
    defaults=apiregistration.defaults,
    validate=apiregistration.validate,
    validate_status=apiregistration.validate_status,
    columns=(
        TableColumn("Service", lambda obj, _now: apiregistration.printed_service(obj),
                    description="The reference to the service that hosts this API endpoint."),
        TableColumn("Available", lambda obj, _now: apiregistration.printed_available(obj),
                    description="Whether this service is available."),
        TableColumn("Age", lambda obj, now: col.age(obj, now),
                    description="CreationTimestamp is a timestamp representing the server time when this object was created."),
    ),
)
