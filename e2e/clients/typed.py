"""Driving a built-in kind through a generated typed client: the official ``kubernetes``
client and ``kubernetes_asyncio`` share the generator's names (``AppsV1Api``,
``create_namespaced_deployment``, ``V1Deployment``), so one driver serves both; each answer
must come back as the kind's typed model."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Callable
from typing import Any

from e2e.clients.conftest import BUILTIN, ServedKind
from e2e.clients.scenario import PATCHED, Seen

#: Every built-in kind the hub serves: each typed model must parse what the hub returns.
TYPED = list(BUILTIN)


def snake(kind: str) -> str:
    """The generator's method suffix: ``Deployment`` -> ``deployment``, ``APIService`` -> ``api_service``."""
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])", "_", kind).lower()


def group_prefix(kind: ServedKind) -> str:
    group = kind.group.removesuffix(".k8s.io")
    return "".join(part.capitalize() for part in group.split(".")) if group else "Core"


def api_class_name(kind: ServedKind) -> str:
    """The generated API class of a group version: ``CoreV1Api``, ``RbacAuthorizationV1Api``…"""
    return f"{group_prefix(kind)}{kind.version.capitalize()}Api"


def model_class(module: Any, kind: ServedKind) -> Any:
    """The generated model: ``V1Deployment``, or with its group where two groups share a kind
    name (``CoreV1Event``)."""
    qualified = f"{group_prefix(kind)}{kind.version.capitalize()}{kind.kind}"
    return getattr(module, qualified, None) or getattr(module, f"{kind.version.capitalize()}{kind.kind}")


def seen_of(obj: Any) -> Seen:
    meta = obj.metadata
    return Seen(meta.name, meta.uid, meta.resource_version, dict(meta.labels or {}))


class TypedDriver:
    """A built-in kind through a generated client. ``run`` turns a call of the client into an
    awaitable (a thread for the sync client); subclasses say how the client watches and how it
    reports an error status."""

    def __init__(self, module: Any, api_client: Any, kind: ServedKind, *, run: Callable[..., Any]) -> None:
        self.kind = kind
        self.api = getattr(module, api_class_name(kind))(api_client)
        self.model = model_class(module, kind)
        self.run = run
        self.suffix = snake(kind.kind)

    # --- what differs between the clients ------------------------------------------------------

    @property
    def watch_return_type(self) -> str | None:
        """What a watch's events are decoded into: the clients take it from the list's type, less
        ``List`` (None: let them), which names no model where the item's name has its group and
        the list's has not (resource.k8s.io's ResourceV1ResourceClaim, listed as
        V1ResourceClaimList): the same against any kube-apiserver, so the model is named."""
        plain = f"{self.kind.version.capitalize()}{self.kind.kind}"
        return None if self.model.__name__ == plain else self.model.__name__

    def body(self, manifest: dict[str, Any]) -> Any:
        return manifest

    def events(self, resource_version: str, name: str) -> AsyncIterator[tuple[str, Any]]:
        """Watch events (type, typed object) about ``name`` after ``resource_version``."""
        raise NotImplementedError

    def status_of(self, exc: Exception) -> int | None:
        """The HTTP status of a failed call (None: not an API error)."""
        raise NotImplementedError

    # --- the calls --------------------------------------------------------------------------

    def method(self, verb: str) -> Any:
        scope = "namespaced_" if self.kind.namespaced else ""
        return getattr(self.api, f"{verb}_{scope}{self.suffix}")

    def args(self, *args: Any) -> tuple[Any, ...]:
        namespace = self.kind.namespace()
        return (*args, namespace) if namespace else args

    async def _typed(self, call: Callable[[], Any]) -> Seen:
        obj = await self.run(call)
        assert isinstance(obj, self.model), type(obj)
        return seen_of(obj)

    async def create(self, manifest: dict[str, Any]) -> Seen:
        return await self._typed(lambda: self.method("create")(*self.args(), self.body(manifest)))

    async def read(self, name: str) -> Seen:
        return await self._typed(lambda: self.method("read")(*self.args(name)))

    async def _listed(self, call: Callable[[], Any]) -> list[Seen]:
        listed = await self.run(call)
        # The list keeps the plain name where the item's has its group: resource.k8s.io's claim is
        # ResourceV1ResourceClaim (core/v1 has a ResourceClaim of its own), its list V1ResourceClaimList.
        plain = f"{self.kind.version.capitalize()}{self.kind.kind}List"
        assert type(listed).__name__ in (f"{self.model.__name__}List", plain), type(listed)
        assert all(isinstance(item, self.model) for item in listed.items)
        return [seen_of(item) for item in listed.items]

    async def list(self) -> list[Seen]:
        return await self._listed(lambda: self.method("list")(*self.args()))

    async def list_all_namespaces(self) -> list[Seen]:
        return await self._listed(lambda: getattr(self.api, f"list_{self.suffix}_for_all_namespaces")())

    async def patch_labels(self, name: str, labels: dict[str, str]) -> Seen:
        body = {"metadata": {"labels": labels}}
        return await self._typed(
            lambda: self.method("patch")(*self.args(name), body, _content_type="application/merge-patch+json")
        )

    async def replace_labels(self, name: str, labels: dict[str, str]) -> Seen:
        current = await self.run(lambda: self.method("read")(*self.args(name)))
        current.metadata.labels = {**(current.metadata.labels or {}), **labels}
        return await self._typed(lambda: self.method("replace")(*self.args(name), current))

    def conflicted(self, error: Exception) -> bool:
        # Both generated clients raise their own ApiException carrying the HTTP status.
        return type(error).__name__ == "ApiException" and getattr(error, "status", None) == 409

    async def watch_change(self, name: str, resource_version: str) -> tuple[str, Seen]:
        async for event_type, obj in self.events(resource_version, name):
            assert isinstance(obj, self.model), type(obj)
            seen = seen_of(obj)
            if PATCHED in seen.labels:
                return event_type, seen
        raise AssertionError(f"the watch of {self.kind.id} ended without the change")

    async def delete(self, name: str) -> None:
        answer = await self.run(lambda: self.method("delete")(*self.args(name)))
        # The generated method's return type is kube's answer: the deleted object for the kinds
        # whose registry returns it (V1Pod…), a success Status for the others (V1Status, which
        # a client may hand back as a dict), and the Namespace, terminating, for a namespace (the
        # CRD, likewise, while its cleanup finalizer holds it).
        if isinstance(answer, self.model):
            assert answer.kind == self.kind.kind, answer.kind
            return
        kind, status = (answer.get("kind"), answer.get("status")) if isinstance(answer, dict) else (
            answer.kind, answer.status
        )
        if self.kind.plural == "namespaces":
            assert kind == "Namespace" and "Terminating" in str(status), (kind, status)
        elif self.kind.plural == "customresourcedefinitions":
            # Its cleanup finalizer keeps it while its objects go: kube answers with the object.
            assert kind == "CustomResourceDefinition" and "Established" in str(status), (kind, status)
        elif (self.kind.api_version, self.kind.kind) in (("batch/v1", "Job"), ("v1", "ReplicationController")):
            # A delete without a propagationPolicy orphans these kinds' dependents (their kube
            # strategies' default): marked with the finalizer "orphan", answered with the object.
            assert kind == self.kind.kind, (kind, status)
        else:
            assert (kind, status) == ("Status", "Success"), (kind, status)

    async def exists(self, name: str) -> bool:
        try:
            await self.run(lambda: self.method("read")(*self.args(name)))
        except Exception as exc:
            if self.status_of(exc) == 404:
                return False
            raise
        return True
