"""Discovery of the create-only resources (the access reviews, TokenReview, ``serviceaccounts/token``),
compared with kube-apiserver 1.32's own documents. Pure: the hub's registry and the declarations
its route modules export."""

from __future__ import annotations

from typing import Any

import pytest

from controlplane.apiserver import discovery
from controlplane.apiserver.auth.rbac.authorizing import HubAuthorizer
from controlplane.apiserver.auth.rbac.index import RbacIndex
from controlplane.apiserver.auth.rbac.reviews import REVIEW_RESOURCES, TOKEN_REVIEWS, review_endpoints
from controlplane.apiserver.auth.serviceaccounts import TOKEN_REQUESTS
from controlplane.apiserver.computed import ComputedResource
from controlplane.hub import hub_registry

REGISTRY = hub_registry()
CREATE_ONLY = (*REVIEW_RESOURCES, TOKEN_REQUESTS)

#: kube-apiserver's answers (``kubectl get --raw``), field for field and in its order.
KUBE_AUTHORIZATION_V1 = {
    "kind": "APIResourceList", "apiVersion": "v1", "groupVersion": "authorization.k8s.io/v1",
    "resources": [
        {"name": "localsubjectaccessreviews", "singularName": "localsubjectaccessreview", "namespaced": True,
         "kind": "LocalSubjectAccessReview", "verbs": ["create"]},
        {"name": "selfsubjectaccessreviews", "singularName": "selfsubjectaccessreview", "namespaced": False,
         "kind": "SelfSubjectAccessReview", "verbs": ["create"]},
        {"name": "selfsubjectrulesreviews", "singularName": "selfsubjectrulesreview", "namespaced": False,
         "kind": "SelfSubjectRulesReview", "verbs": ["create"]},
        {"name": "subjectaccessreviews", "singularName": "subjectaccessreview", "namespaced": False,
         "kind": "SubjectAccessReview", "verbs": ["create"]},
    ],
}
KUBE_AUTHENTICATION_V1 = {
    "kind": "APIResourceList", "apiVersion": "v1", "groupVersion": "authentication.k8s.io/v1",
    "resources": [
        {"name": "selfsubjectreviews", "singularName": "selfsubjectreview", "namespaced": False,
         "kind": "SelfSubjectReview", "verbs": ["create"]},
        {"name": "tokenreviews", "singularName": "tokenreview", "namespaced": False,
         "kind": "TokenReview", "verbs": ["create"]},
    ],
}
KUBE_SERVICE_ACCOUNT_TOKEN = {
    "name": "serviceaccounts/token", "singularName": "", "namespaced": True, "group": "authentication.k8s.io",
    "version": "v1", "kind": "TokenRequest", "verbs": ["create"],
}


def group_version_entry(group: str) -> dict[str, Any]:
    version = {"groupVersion": f"{group}/v1", "version": "v1"}
    return {"name": group, "versions": [version], "preferredVersion": version}


@pytest.mark.parametrize(
    ("group", "expected"),
    [("authorization.k8s.io", KUBE_AUTHORIZATION_V1), ("authentication.k8s.io", KUBE_AUTHENTICATION_V1)],
)
def test_a_group_of_create_only_resources_is_listed_as_kube_lists_it(group: str, expected: dict[str, Any]) -> None:
    assert discovery.api_resource_list(REGISTRY, group, "v1", CREATE_ONLY) == expected
    assert discovery.api_group(REGISTRY, group, CREATE_ONLY) == {"kind": "APIGroup", "apiVersion": "v1",
                                                                **group_version_entry(group)}
    groups = discovery.api_group_list(REGISTRY, CREATE_ONLY)["groups"]
    assert [g for g in groups if g["name"] == group] == [group_version_entry(group)]


def test_the_token_subresource_follows_its_service_accounts() -> None:
    document = discovery.api_resource_list(REGISTRY, "", "v1", CREATE_ONLY)
    assert document is not None
    names = [r["name"] for r in document["resources"]]
    at = names.index("serviceaccounts/token")
    assert names[at - 1] == "serviceaccounts"
    assert document["resources"][at] == KUBE_SERVICE_ACCOUNT_TOKEN
    # Everything else is the registry's, in its order.
    alone = discovery.api_resource_list(REGISTRY, "", "v1")
    assert alone is not None
    assert [r for r in document["resources"] if r["name"] != "serviceaccounts/token"] == alone["resources"]


def test_without_create_only_resources_discovery_is_the_registrys() -> None:
    assert discovery.api_resource_list(REGISTRY, "authorization.k8s.io", "v1") is None
    assert discovery.api_group(REGISTRY, "authentication.k8s.io") is None
    names = {g["name"] for g in discovery.api_group_list(REGISTRY)["groups"]}
    assert not names & {"authorization.k8s.io", "authentication.k8s.io"}
    with_them = [g["name"] for g in discovery.api_group_list(REGISTRY, CREATE_ONLY)["groups"]]
    # In kube's order, by their APIServices' priority: after apps and events.k8s.io, before autoscaling.
    at = with_them.index("events.k8s.io")
    assert with_them[at:at + 4] == ["events.k8s.io", "authentication.k8s.io", "authorization.k8s.io", "autoscaling"]
    assert [g for g in with_them if g not in {"authorization.k8s.io", "authentication.k8s.io"}] == [
        g["name"] for g in discovery.api_group_list(REGISTRY)["groups"]
    ]


def test_create_only_resources_among_stored_kinds() -> None:
    # kube's other two of /api/v1: a create-only resource of its own, and a subresource whose kind
    # is another group's (both are the hub's to serve some day; discovery places them already).
    bindings = ComputedResource("", "v1", "bindings", "Binding", namespaced=True)
    eviction = ComputedResource("", "v1", "pods", "Eviction", namespaced=True, subresource="eviction",
                                  kind_group="policy", kind_version="v1")
    document = discovery.api_resource_list(REGISTRY, "", "v1", [bindings, eviction])
    assert document is not None
    resources = document["resources"]
    # By path, as kube lists them: bindings first, a pod's subresources after it by name.
    assert resources[0] == {"name": "bindings", "singularName": "binding", "namespaced": True, "kind": "Binding",
                            "verbs": ["create"]}
    names = [r["name"] for r in resources]
    assert names[names.index("pods"):names.index("pods/status") + 1] == ["pods", "pods/eviction", "pods/status"]
    assert resources[names.index("pods/eviction")] == {
        "name": "pods/eviction", "singularName": "", "namespaced": True, "group": "policy", "version": "v1",
        "kind": "Eviction", "verbs": ["create"],
    }
    # No group of their own to list.
    assert discovery.api_group_list(REGISTRY, [bindings, eviction]) == discovery.api_group_list(REGISTRY)


@pytest.mark.parametrize(
    ("resource", "path"),
    [
        (REVIEW_RESOURCES[0], "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews"),
        (REVIEW_RESOURCES[3], "/apis/authorization.k8s.io/v1/namespaces/{namespace}/localsubjectaccessreviews"),
        (TOKEN_REVIEWS, "/apis/authentication.k8s.io/v1/tokenreviews"),
        (TOKEN_REQUESTS, "/api/v1/namespaces/{namespace}/serviceaccounts/{name}/token"),
    ],
)
def test_the_route_of_a_create_only_resource(resource: ComputedResource, path: str) -> None:
    assert resource.path == path


def test_tokenreviews_are_served_and_listed_only_with_an_authenticator() -> None:
    without = [endpoint.resource for endpoint in review_endpoints(HubAuthorizer(RbacIndex()))]
    assert without == [r for r in REVIEW_RESOURCES if r is not TOKEN_REVIEWS]
    document = discovery.api_resource_list(REGISTRY, "authentication.k8s.io", "v1", without)
    assert document is not None
    assert [r["name"] for r in document["resources"]] == ["selfsubjectreviews"]
