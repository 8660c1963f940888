"""The real-clients suite's hub: one ``gpufed controlplane`` (embedded etcd), started as users
start it, shared by the suite's modules; and the kinds it serves.

The kinds come from the hub's registry (:func:`controlplane.hub.hub_registry`), so that each
gets its own test id; ``test_discovery_serves_the_registry`` checks that the running hub's
discovery serves exactly those (and the create-only resources, :func:`computed_kinds`), so a
kind added to the hub is covered here without a change (and fails loudly until ``samples.py`` has
a sample of it).
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from controlplane.apiserver.auth.rbac.reviews import REVIEW_RESOURCES
from controlplane.apiserver.auth.serviceaccounts import TOKEN_REQUESTS
from controlplane.apiserver.componentstatus import RESOURCE as COMPONENT_STATUSES
from controlplane.apiserver.proxy.resourcemetrics import NODES as METRICS_NODES
from controlplane.apiserver.proxy.resourcemetrics import PODS as METRICS_PODS
from controlplane.apiserver.visibility import RESOURCES as VISIBILITY_RESOURCES
from controlplane.hub import hub_registry
from e2e.clients.samples import training_runtime
from e2e.harness import Kubectl, ProcessGroup

#: The namespace every namespaced object of the suite is created in.
NAMESPACE = "clients"
#: events.k8s.io/v1 Events are the core Events seen through the newer API: a core Event (the
#: suite's own, the hub's) reads back with ``eventTime: null``, as from kube-apiserver, and the
#: typed clients' models refuse that (the official client raises on it against kube too). So the
#: newer API's Events are exercised in a namespace of their own.
EVENTS_NAMESPACE = "clients-events"


@dataclass(frozen=True)
class ServedKind:
    """One resource the hub serves, as discovery describes it."""

    group: str
    version: str
    kind: str
    plural: str
    namespaced: bool

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def builtin(self) -> bool:
        """A Kubernetes kind (the official clients have a typed API for it)."""
        return self.group in ("", "apps", "batch", "autoscaling", "policy") or self.group.endswith(".k8s.io")

    @property
    def id(self) -> str:
        """``plural.group``, ``plural.version.group`` for a resource served in several versions."""
        if (self.group, self.plural) in _SEVERAL_VERSIONS:
            return f"{self.plural}.{self.version}.{self.group}"
        return f"{self.plural}.{self.group}" if self.group else self.plural

    @property
    def newer_events(self) -> bool:
        return (self.group, self.kind) == ("events.k8s.io", "Event")

    def namespace(self) -> str | None:
        if not self.namespaced:
            return None
        return EVENTS_NAMESPACE if self.newer_events else NAMESPACE


#: (group, plural) of the resources the hub serves in more than one version (one stored object).
_SEVERAL_VERSIONS = {
    (rt.group, rt.plural) for rt in hub_registry() if rt.stored_in_version and not rt.custom
}


def registry_kinds() -> list[ServedKind]:
    """Every kind of the hub's registry, in registration order."""
    return [ServedKind(rt.group, rt.version, rt.kind, rt.plural, rt.namespaced) for rt in hub_registry()]


def computed_kinds() -> list[ServedKind]:
    """The resources the hub answers with a handler of their own beside its registry (the access
    reviews, TokenReview with the verb ``create`` alone; ComponentStatus, read-only; Kueue's
    visibility API; the members' resource metrics): they are not in :data:`KINDS`."""
    declared = (*REVIEW_RESOURCES, TOKEN_REQUESTS, COMPONENT_STATUSES, *VISIBILITY_RESOURCES, METRICS_PODS, METRICS_NODES)
    return [ServedKind(r.group, r.version, r.kind, r.plural, r.namespaced) for r in declared if not r.subresource]


#: Every kind: the suite creates, changes and deletes one of each through every client (lists
#: and reads those discovery serves read-only).
KINDS = registry_kinds()
BUILTIN = [k for k in KINDS if k.builtin]

_names = itertools.count()


def unique_name(prefix: str) -> str:
    """A name no other test of the suite uses (the hub is shared)."""
    return f"{prefix}-{next(_names)}"


@dataclass(frozen=True)
class Hub:
    kubeconfig: Path
    kubectl: Kubectl


@pytest.fixture(scope="package")
def served_verbs(hub: Hub) -> dict[str, frozenset[str]]:
    """kind id -> the verbs the running hub's discovery lists for it."""
    return {kind.id: verbs for kind, verbs in discovered(hub.kubectl)}


@pytest.fixture(scope="package")
def hub(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Hub]:
    with ProcessGroup.running_hub(tmp_path_factory.mktemp("clients-hub")) as kubectl:
        kubectl.run("create", "namespace", NAMESPACE)
        kubectl.run("create", "namespace", EVENTS_NAMESPACE)
        kubectl.run("apply", "-f", "-", input_text=json.dumps(training_runtime()))  # what TrainJobs name
        yield Hub(kubectl.kubeconfig, kubectl)


def discovered_kinds(kubectl: Kubectl) -> list[ServedKind]:
    """What the running hub's discovery serves (subresources left out)."""
    return [kind for kind, _ in discovered(kubectl)]


def discovered(kubectl: Kubectl) -> list[tuple[ServedKind, frozenset[str]]]:
    """What the running hub's discovery serves (subresources left out), with each one's verbs."""
    lists = [json.loads(kubectl.run("get", "--raw", "/api/v1").stdout)]
    for group in json.loads(kubectl.run("get", "--raw", "/apis").stdout)["groups"]:
        for version in group["versions"]:
            lists.append(json.loads(kubectl.run("get", "--raw", f"/apis/{version['groupVersion']}").stdout))
    out = []
    for listed in lists:
        group, _, version = listed["groupVersion"].rpartition("/")
        for resource in listed["resources"]:
            if "/" not in resource["name"]:
                kind = ServedKind(group, version, resource["kind"], resource["name"], resource["namespaced"])
                out.append((kind, frozenset(resource["verbs"])))
    return out
