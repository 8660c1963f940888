"""The create-only resources on a real hub (real etcd, HTTPS, the real kubectl), as on kube: the
access reviews, SelfSubjectReview, TokenReview and ``serviceaccounts/token`` are in discovery in
both forms kubectl asks for, ``kubectl api-resources`` lists them, ``kubectl create -f`` of each
review prints its status, and any other method on them is kube's 405."""

from __future__ import annotations

import asyncio
import subprocess
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import yaml

from controlplane.apiserver.identity import Role
from controlplane.hub import Hub

from .realhub import SHARED_HUB, Client

#: The tests read discovery and create reviews, which store nothing: one hub for them all.
pytestmark = SHARED_HUB

AUTHZ = "/apis/authorization.k8s.io/v1"
AUTHN = "/apis/authentication.k8s.io/v1"
#: What kubectl 1.32 sends first for ``/api`` and ``/apis`` (aggregated discovery, then the plain form).
AGGREGATED_ACCEPT = (
    "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,"
    "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,application/json"
)
#: kube-apiserver's answer to a method its create-only route does not take (go-restful's 405, as
#: its ``serviceErrorHandler`` writes it: ``NewGenericServerResponse``, whose details are set and empty).
METHOD_NOT_ALLOWED = {
    "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
    "message": "the server does not allow this method on the requested resource", "reason": "MethodNotAllowed",
    "code": 405, "details": {},
}


async def get_json(session: aiohttp.ClientSession, admin: Client, path: str, accept: str) -> tuple[int, str, Any]:
    headers = {"Authorization": f"Bearer {admin.token}", "Accept": accept}
    async with session.get(f"{admin.hub.url}{path}", headers=headers) as resp:
        return resp.status, resp.content_type, await resp.json(content_type=None)


@pytest.mark.parametrize("accept", [AGGREGATED_ACCEPT, "application/json, */*"])
async def test_discovery_lists_the_groups_and_resources(session: aiohttp.ClientSession, admin: Client, accept: str) -> None:
    # kubectl's request gets aggregated discovery (every group's resources in one answer), any
    # other the plain APIGroupList; the group-version documents answer both.
    status, content_type, groups = await get_json(session, admin, "/apis", accept)
    if accept == AGGREGATED_ACCEPT:
        assert (status, content_type, groups["kind"]) == (200, "application/json", "APIGroupDiscoveryList")
        resources = {
            (item["metadata"]["name"], resource["resource"]): resource["verbs"]
            for item in groups["items"] for version in item["versions"] for resource in version["resources"]
        }
        assert resources[("authorization.k8s.io", "selfsubjectaccessreviews")] == ["create"]
        assert resources[("authentication.k8s.io", "tokenreviews")] == ["create"]
        status, content_type, groups = await get_json(session, admin, "/apis", "application/json")
    assert (status, content_type, groups["kind"]) == (200, "application/json", "APIGroupList")
    listed = {g["name"]: g for g in groups["groups"]}
    for group in ("authorization.k8s.io", "authentication.k8s.io"):
        version = {"groupVersion": f"{group}/v1", "version": "v1"}
        assert listed[group] == {"name": group, "versions": [version], "preferredVersion": version}
        status, _, document = await get_json(session, admin, f"/apis/{group}", accept)
        assert (status, document["kind"], document["preferredVersion"]) == (200, "APIGroup", version)

    status, _, authz = await get_json(session, admin, AUTHZ, accept)
    assert status == 200
    assert [(r["name"], r["namespaced"], r["kind"], r["verbs"]) for r in authz["resources"]] == [
        ("localsubjectaccessreviews", True, "LocalSubjectAccessReview", ["create"]),
        ("selfsubjectaccessreviews", False, "SelfSubjectAccessReview", ["create"]),
        ("selfsubjectrulesreviews", False, "SelfSubjectRulesReview", ["create"]),
        ("subjectaccessreviews", False, "SubjectAccessReview", ["create"]),
    ]
    status, _, authn = await get_json(session, admin, AUTHN, accept)
    assert status == 200
    assert [(r["name"], r["kind"]) for r in authn["resources"]] == [
        ("selfsubjectreviews", "SelfSubjectReview"), ("tokenreviews", "TokenReview"),
    ]
    status, _, core = await get_json(session, admin, "/api/v1", accept)
    assert status == 200
    token = [r for r in core["resources"] if r["name"] == "serviceaccounts/token"]
    assert token == [{"name": "serviceaccounts/token", "singularName": "", "namespaced": True,
                      "group": "authentication.k8s.io", "version": "v1", "kind": "TokenRequest", "verbs": ["create"]}]


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("GET", f"{AUTHZ}/selfsubjectaccessreviews"),
        ("GET", f"{AUTHZ}/selfsubjectrulesreviews?watch=1"),
        ("DELETE", f"{AUTHZ}/subjectaccessreviews"),
        ("GET", f"{AUTHZ}/namespaces/default/localsubjectaccessreviews"),
        ("PUT", f"{AUTHN}/selfsubjectreviews"),
        ("PATCH", f"{AUTHN}/tokenreviews"),
        ("GET", "/api/v1/namespaces/default/serviceaccounts/default/token"),
        ("DELETE", "/api/v1/namespaces/default/serviceaccounts/default/token"),
    ],
)
async def test_any_other_method_is_kubes_method_not_allowed(admin: Client, method: str, path: str) -> None:
    assert await admin(method, path) == (405, METHOD_NOT_ALLOWED)


@pytest.mark.parametrize(
    "path",
    # No route at all on kube either: a review has no name, a LocalSubjectAccessReview no list across namespaces.
    [f"{AUTHZ}/selfsubjectaccessreviews/mine", f"{AUTHZ}/localsubjectaccessreviews"],
)
async def test_paths_kube_does_not_route_are_not_found(admin: Client, path: str) -> None:
    status, body = await admin("GET", path)
    assert (status, body["reason"]) == (404, "NotFound")


@pytest.mark.parametrize(
    ("content_type", "body", "status"),
    [
        ("application/json", b'{"spec": {"resourceAttributes": {"verb": "get", "resource": "pods"}}}', 201),
        ("application/yaml", b"spec:\n  resourceAttributes: {verb: get, resource: pods}\n", 201),
        (None, b'{"spec": {"resourceAttributes": {"verb": "get", "resource": "pods"}}}', 201),
        ("text/plain", b'{"spec": {}}', 415),
        ("application/octet-stream", b'{"spec": {}}', 415),
    ],
)
async def test_a_reviews_body_is_read_in_the_media_types_kube_decodes(
    session: aiohttp.ClientSession, admin: Client, content_type: str | None, body: bytes, status: int
) -> None:
    """A review is a create like any other: JSON, YAML or no Content-Type at all (read as JSON) is
    decoded, anything else is kube's 415 naming what it decodes (before, YAML was refused as
    malformed JSON and ``text/plain`` read as JSON)."""
    headers = {"Authorization": f"Bearer {admin.token}"}
    skip = ["Content-Type"] if content_type is None else []
    if content_type is not None:
        headers["Content-Type"] = content_type
    async with session.post(f"{admin.hub.url}{AUTHZ}/selfsubjectaccessreviews", data=body, headers=headers,
                            skip_auto_headers=skip) as resp:
        answer = await resp.json(content_type=None)
    assert resp.status == status, answer
    if status == 201:
        assert answer["status"]["allowed"] is True
    else:
        assert (answer["reason"], answer["message"]) == ("UnsupportedMediaType", (
            'the body of the request was in an unknown format - accepted media types include: '
            'application/json, application/yaml, application/vnd.kubernetes.protobuf'))


def kubectl(kubeconfig: Path, cache: Path, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["kubectl", "--kubeconfig", str(kubeconfig), "--cache-dir", str(cache), *args],
                          input=stdin, capture_output=True, text=True, timeout=60, check=False)


def manifests(token: str) -> list[tuple[str, dict[str, Any]]]:
    """One manifest of each review kind, as a user writes it (no name), and the status it gets."""
    pods = {"verb": "get", "resource": "pods", "namespace": "default"}
    return [
        ("authorization.k8s.io/v1", {"kind": "SelfSubjectAccessReview", "spec": {"resourceAttributes": pods}}),
        ("authorization.k8s.io/v1", {"kind": "SelfSubjectRulesReview", "spec": {"namespace": "default"}}),
        ("authorization.k8s.io/v1", {"kind": "SubjectAccessReview",
                                     "spec": {"user": "alice", "groups": ["team-a"], "resourceAttributes": pods}}),
        ("authorization.k8s.io/v1", {"kind": "LocalSubjectAccessReview", "metadata": {"namespace": "default"},
                                     "spec": {"user": "root", "groups": ["system:masters"], "resourceAttributes": pods}}),
        ("authentication.k8s.io/v1", {"kind": "SelfSubjectReview"}),
        ("authentication.k8s.io/v1", {"kind": "TokenReview", "spec": {"token": token}}),
    ]


async def test_kubectl_lists_them_and_creates_each_review_from_a_manifest(hub: Hub, tmp_path: Path) -> None:
    async def run(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
        return await asyncio.to_thread(kubectl, hub.kubeconfig_path, tmp_path / "cache", *args, stdin=stdin)

    listed = await run("api-resources", "--no-headers")
    assert listed.returncode == 0, listed.stderr
    rows = {tuple(line.split()) for line in listed.stdout.splitlines()}
    assert {
        ("localsubjectaccessreviews", "authorization.k8s.io/v1", "true", "LocalSubjectAccessReview"),
        ("selfsubjectaccessreviews", "authorization.k8s.io/v1", "false", "SelfSubjectAccessReview"),
        ("selfsubjectrulesreviews", "authorization.k8s.io/v1", "false", "SelfSubjectRulesReview"),
        ("subjectaccessreviews", "authorization.k8s.io/v1", "false", "SubjectAccessReview"),
        ("selfsubjectreviews", "authentication.k8s.io/v1", "false", "SelfSubjectReview"),
        ("tokenreviews", "authentication.k8s.io/v1", "false", "TokenReview"),
    } <= rows

    assert hub.tokens is not None
    token = (await hub.tokens.create(role=Role.USER, name="alice", groups=("team-a",))).token
    created: dict[str, Any] = {}
    for api_version, manifest in manifests(token):
        result = await run("create", "-f", "-", "-o", "yaml", stdin=yaml.safe_dump({"apiVersion": api_version, **manifest}))
        assert result.returncode == 0, (manifest["kind"], result.stderr)
        printed = yaml.safe_load(result.stdout)
        assert (printed["apiVersion"], printed["kind"]) == (api_version, manifest["kind"])
        created[manifest["kind"]] = printed["status"]

    assert created["SelfSubjectAccessReview"]["allowed"] is True  # the admin
    assert {"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]} in created["SelfSubjectRulesReview"]["resourceRules"]
    assert created["SubjectAccessReview"]["allowed"] is False  # alice has no binding
    assert created["LocalSubjectAccessReview"]["allowed"] is True
    assert created["SelfSubjectReview"]["userInfo"]["groups"][0] == "system:masters"
    assert created["TokenReview"]["authenticated"] is True
    assert created["TokenReview"]["user"]["username"] == "alice"

    # Without -o, kubectl names what it created as it does on kube: a review has no name.
    plain = await run("create", "-f", "-", stdin=yaml.safe_dump({"apiVersion": "authentication.k8s.io/v1",
                                                                  "kind": "SelfSubjectReview"}))
    assert plain.stdout.strip() == "selfsubjectreview.authentication.k8s.io/<unknown> created", plain.stderr

    listing = await run("get", "selfsubjectaccessreviews")
    assert listing.returncode == 1
    assert listing.stderr.strip() == (
        "Error from server (MethodNotAllowed): the server does not allow this method on the requested resource"
    )
