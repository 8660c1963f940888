"""API resources answered by a handler of their own, never stored: the create-only ones,
kube's read-only ComponentStatus and Kueue's visibility API.

kube-apiserver serves some resources that only take a ``POST``: the access reviews
(``authorization.k8s.io/v1`` SelfSubjectAccessReview, SelfSubjectRulesReview,
SubjectAccessReview, LocalSubjectAccessReview), ``authentication.k8s.io/v1`` SelfSubjectReview
and TokenReview, and the ``token`` subresource of a ServiceAccount (an
``authentication.k8s.io/v1`` TokenRequest). Discovery lists them with the one verb ``create``
(so ``kubectl api-resources`` shows them and ``kubectl create -f`` finds their kind); any other
method on their path is kube's 405 MethodNotAllowed.

kube's deprecated ``v1`` ComponentStatus is computed on every read instead (probes of the
control plane's components): listed with the verbs ``get`` and ``list`` and its short name ``cs``,
its collection and its items are answered by one handler (:mod:`.componentstatus`). Kueue's
visibility API is a ``get``-only subresource (``clusterqueues/pendingworkloads``) of a resource
listed without verbs, as Kueue's aggregated server lists it (:mod:`.visibility`).

The module that serves one declares it (:class:`ComputedResource`) next to its handler
(:class:`ComputedEndpoint`); the API server routes the endpoint and discovery lists its
resource, so the two cannot drift apart. The declarations are pure values.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from aiohttp import web

    from controlplane.apiserver.resources import Registry

#: The verbs discovery lists for a create-only resource (kube's, for a REST storage that only creates).
CREATE_ONLY_VERBS: Final = ("create",)


@dataclass(frozen=True, slots=True)
class ComputedResource:
    """One resource answered by a handler of its own (never stored), as discovery lists it and as
    its route is addressed."""

    group: str
    version: str
    #: The resource (``selfsubjectaccessreviews``); for a subresource, its parent's (``serviceaccounts``).
    plural: str
    kind: str
    namespaced: bool
    #: A subresource of a stored kind (``token``); "" for a resource of its own.
    subresource: str = ""
    #: The group and version of ``kind`` when they are not the resource's own (kube's discovery
    #: says so: ``serviceaccounts/token`` in ``v1`` is an ``authentication.k8s.io/v1`` TokenRequest).
    kind_group: str | None = None
    kind_version: str | None = None
    #: The verbs discovery lists and the handler answers: ``create`` (a POST), or ``get`` and
    #: ``list`` (a GET of an item or of the collection; of a subresource, ``get`` alone); none for
    #: a resource listed only to carry its subresources (no route: kube's 404).
    verbs: tuple[str, ...] = CREATE_ONLY_VERBS
    short_names: tuple[str, ...] = ()
    #: kube's ``singularName`` when it is not the lower-cased kind (a resource whose storage only
    #: carries subresources, as Kueue's visibility ``clusterqueues``).
    singular_name: str | None = None
    #: The kind of a subresource's parent, which names its OpenAPI operation as kube's installer
    #: does (``readClusterQueuePendingworkloads``); None: ``kind``.
    parent_kind: str | None = None
    #: The query parameters a ``get`` takes (``limit``, ``offset``), as its OpenAPI operation lists them.
    query: tuple[str, ...] = ()

    @property
    def name(self) -> str:
        """The name discovery lists: ``selfsubjectaccessreviews``, ``serviceaccounts/token``."""
        return f"{self.plural}/{self.subresource}" if self.subresource else self.plural

    @property
    def singular(self) -> str:
        """kube's ``singularName``: the lower-cased kind, empty for a subresource."""
        if self.subresource:
            return ""
        return self.singular_name if self.singular_name is not None else self.kind.lower()

    @property
    def kind_group_version(self) -> tuple[str, str]:
        """The group and version of its kind (``authentication.k8s.io``, ``v1`` for a TokenRequest)."""
        return (
            self.kind_group if self.kind_group is not None else self.group,
            self.kind_version if self.kind_version is not None else self.version,
        )

    @property
    def group_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def path(self) -> str:
        """The route's path (aiohttp's ``{namespace}`` and ``{name}`` placeholders)."""
        root = f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"
        scope = f"{root}/namespaces/{{namespace}}" if self.namespaced else root
        if self.subresource:
            return f"{scope}/{self.plural}/{{name}}/{self.subresource}"
        return f"{scope}/{self.plural}"


@dataclass(frozen=True, slots=True)
class ComputedEndpoint:
    """A resource of :attr:`ComputedResource.verbs` and the handler of its ``POST`` (create),
    or of its ``GET``s (get and list; the item's ``{name}`` in the route's match)."""

    resource: ComputedResource
    handler: Callable[[web.Request], Awaitable[web.StreamResponse]]


def served_group_versions(registry: Registry, computed: Sequence[ComputedResource]) -> dict[str, list[str]]:
    """group -> its versions: the registry's, then those only create-only resources are served in."""
    out = {group: list(versions) for group, versions in registry.group_versions().items()}
    for resource in computed:
        versions = out.setdefault(resource.group, [])
        if resource.version not in versions:
            versions.append(resource.version)
    return out
