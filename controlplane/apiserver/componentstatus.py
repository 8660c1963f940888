"""kube's deprecated ``v1`` ComponentStatus (``kubectl get componentstatuses``, ``cs``), computed
on every read from probes of the control plane's components.

kube-apiserver probes etcd through its storage and the scheduler's and the controller manager's
health endpoints (``pkg/registry/core/componentstatus``); each component is one object named
after it (``etcd-0``, ``scheduler``, ``controller-manager``) with one ``Healthy`` condition:
``True`` with the probe's answer as its message (``ok``), else ``False`` with the failure as its
message or error. The hub's probes are given by whoever serves it (the hub: its store, and its
own leader election, since the controllers and the scheduler run on the elected replica).

Only ``get`` and ``list`` are served (405 otherwise), every answer to them (a 404 too) with kube's warning ``v1
ComponentStatus is deprecated in v1.19+`` (kubectl prints it) and, when asked for, kube's Table
(``NAME STATUS MESSAGE ERROR``). A list takes label and field selectors (``metadata.name``) as
kube's does: a component has no labels, so a label selector that requires one selects none. A name that is not a component is a 404 (kube answers a bare
error there, which its handler turns into a 500). In: the probes; out: a
:class:`~controlplane.apiserver.computed.ComputedEndpoint` the API server routes and
discovery lists (read-only, short name ``cs``); RBAC decides each request as for any resource.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final

from aiohttp import web

from controlplane.apis.kube.fieldlabels import BASE_FIELD_SELECTORS, refusal
from controlplane.apis.kube.selectors import parse_field_selector, parse_label_selector
from controlplane.apiserver import errors
from controlplane.apiserver.computed import ComputedEndpoint, ComputedResource
from controlplane.apiserver.handlers import json_response
from controlplane.apiserver.metadataonly import computed_metadata
from controlplane.apiserver.objects.values import utc_now
from controlplane.apiserver.queryparams import watch_asked
from controlplane.apiserver.requeststate import request_warnings
from controlplane.apiserver.resources import ResourceType, TableColumn
from controlplane.apiserver.tables import IncludeObject, table, table_content_type, wants_table
from controlplane.storage.interface import Store

RESOURCE: Final = ComputedResource(
    "", "v1", "componentstatuses", "ComponentStatus", namespaced=False, verbs=("get", "list"), short_names=("cs",)
)
#: The warning kube-apiserver sends with every answer (``kubectl get cs`` prints it).
DEPRECATION: Final = "v1 ComponentStatus is deprecated in v1.19+"
#: How long a probe may take before its component is unhealthy.
PROBE_TIMEOUT_SECONDS: Final = 5.0
HEALTHY: Final = "Healthy"


@dataclass(frozen=True, slots=True)
class ComponentHealth:
    """What a probe found: ``healthy`` (None: unknown), and the condition's message and error."""

    healthy: bool | None
    message: str = ""
    error: str = ""


Probe = Callable[[], Awaitable[ComponentHealth]]


def _condition(obj: dict[str, Any]) -> dict[str, Any]:
    return next((c for c in obj.get("conditions") or () if c.get("type") == HEALTHY), {})


def _status_cell(obj: dict[str, Any], _now: datetime) -> str:
    """kube's printer: ``Healthy`` for a true condition, ``Unhealthy`` for another, ``Unknown`` for none."""
    condition = _condition(obj)
    if not condition:
        return "Unknown"
    return "Healthy" if condition.get("status") == "True" else "Unhealthy"


#: kube's Table of the kind (``pkg/printers/internalversion``): its columns, no Age; a built-in
#: kind (``strategic_merge``), whose metadata-alone 406 names kube's ``*core.ComponentStatus``.
TABLE_TYPE: Final = ResourceType(
    "", "v1", "ComponentStatus", "componentstatuses", "componentstatus", namespaced=False, strategic_merge=True,
    columns=(
        TableColumn("Status", _status_cell, description="Status of the component conditions"),
        TableColumn("Message", lambda obj, _now: _condition(obj).get("message", ""),
                    description="Message of the component conditions"),
        TableColumn("Error", lambda obj, _now: _condition(obj).get("error", ""),
                    description="Error of the component conditions"),
    ),
)


def component_status(name: str, health: ComponentHealth) -> dict[str, Any]:
    """One component's object as kube serves it."""
    status = "Unknown" if health.healthy is None else ("True" if health.healthy else "False")
    condition: dict[str, Any] = {"type": HEALTHY, "status": status}
    if health.message:
        condition["message"] = health.message
    if health.error:
        condition["error"] = health.error
    return {
        "kind": "ComponentStatus",
        "apiVersion": "v1",
        "metadata": {"name": name, "creationTimestamp": None},
        "conditions": [condition],
    }


def store_probe(store: Store) -> Probe:
    """etcd's probe: healthy (``ok``) when the store answers a read of its revision."""

    async def probe() -> ComponentHealth:
        await store.current_revision()
        return ComponentHealth(True, "ok")

    return probe


#: The message of a controller component when no replica leads (kube's would be its probe's failure).
NO_LEADER: Final = "no hub replica leads the controllers"
STARTING: Final = "the controllers are starting on this replica, the leader"


def leader_probe(
    *, leader: Callable[[], str | None], leading: Callable[[], bool], started: Callable[[], bool]
) -> Probe:
    """The probe of a component that runs on the elected leader (the hub's controller manager and
    scheduler): healthy while a replica leads (``leader``: its identity as last seen) and, when
    it is this one (``leading``), once the component has ``started``."""

    async def probe() -> ComponentHealth:
        if leader() is None:
            return ComponentHealth(False, NO_LEADER)
        if leading() and not started():
            return ComponentHealth(False, STARTING)
        return ComponentHealth(True, "ok")

    return probe


async def _probed(probe: Probe) -> ComponentHealth:
    try:
        async with asyncio.timeout(PROBE_TIMEOUT_SECONDS):
            return await probe()
    except asyncio.CancelledError:
        raise
    except TimeoutError:
        return ComponentHealth(False, error="context deadline exceeded")
    except Exception as exc:  # a probe that fails is its component unhealthy, named by the failure
        return ComponentHealth(False, error=str(exc) or type(exc).__name__)


def _selected(names: Iterable[str], query: Mapping[str, str]) -> list[str]:
    """The components a list's ``labelSelector`` and ``fieldSelector`` select, as kube filters them
    (``storage.DefaultPredicateFunc``: the object's labels, of which a component has none, and its
    ``metadata.name``); a selector kube would refuse is its 400. Only these are probed."""
    labels = parse_label_selector(query.get("labelSelector"))
    # kube converts no field label of its own for ComponentStatus: its default conversion answers.
    fields = parse_field_selector(
        query.get("fieldSelector"), BASE_FIELD_SELECTORS, refuse=lambda name: refusal(name, own_conversion=False)
    )
    if not labels.matches({}):
        return []
    return [n for n in names if fields.matches({"metadata": {"name": n}})]


class ComponentStatuses:
    """The ComponentStatus resource over ``probes`` (component name -> probe, in listing order)."""

    def __init__(self, probes: Mapping[str, Probe], *, clock: Callable[[], datetime] = utc_now) -> None:
        self._probes = dict(probes)
        self._clock = clock

    def endpoint(self) -> ComputedEndpoint:
        return ComputedEndpoint(RESOURCE, self.handle)

    async def handle(self, request: web.Request) -> web.StreamResponse:
        """``GET`` of the collection, or of one component (``{name}``)."""
        name = request.match_info.get("name")
        # kube's installer wraps each route of a deprecated kind (AddWarningsHandler): the warning
        # is added before the storage answers, so a 404 or a refused selector carries it too.
        warnings = request_warnings(request)
        warnings.append(DEPRECATION)
        if watch_asked(request.query):
            raise errors.MethodNotAllowed("the server does not allow this method on the requested resource")
        if name is not None and name not in self._probes:
            raise errors.not_found(plural=RESOURCE.plural, group="", name=name)
        names = [name] if name is not None else _selected(self._probes, request.query)
        found = await asyncio.gather(*(_probed(self._probes[n]) for n in names))
        items = [component_status(n, health) for n, health in zip(names, found, strict=True)]
        if (as_table := wants_table(request.headers.get("Accept"))) is not None:
            include = IncludeObject.parse(request.query.get("includeObject"))
            rendered = table(TABLE_TYPE, items, include=include, now=self._clock(), version=as_table.version)
            return json_response(rendered, content_type=table_content_type(as_table.version), warnings=warnings)
        if (partial := computed_metadata(TABLE_TYPE, request.headers.get("Accept"), items, single=name is not None)) is not None:
            return json_response(partial, warnings=warnings)
        if name is not None:
            return json_response(items[0], warnings=warnings)
        return json_response(
            {"kind": "ComponentStatusList", "apiVersion": "v1", "metadata": {}, "items": items}, warnings=warnings
        )
