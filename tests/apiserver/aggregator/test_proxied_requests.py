"""Aggregated requests on a real hub (real etcd, HTTPS) to a real extension server in the same
loop: the caller's own ``X-Remote-*`` headers and credentials never reach the server, the
impersonated user's extra values do (client-go's header names); a watch streams through; aggregated discovery lists the server's resources, ``Stale``
once it stops; an APIService whose Service is
missing is ``False (ServiceNotFound)`` with kube's message and its requests kube's 503; the
aggregated group is listed in ``/apis`` and ``/apis/<group>``."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import aiohttp

from controlplane.hub import Hub
from tests.extensionserver import GROUP, VERSION, ExtensionServer, extension_server

from ..auth.realhub import Client, eventually

APISERVICES = "/apis/apiregistration.k8s.io/v1/apiservices"
NAME = f"{VERSION}.{GROUP}"


def registrations(port: int, ca_bundle: str, *, service: str = "widgets") -> list[tuple[str, dict[str, Any]]]:
    return [
        ("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ext"}}),
        ("/api/v1/namespaces/ext/services", {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "widgets"},
                                             "spec": {"ports": [{"name": "https", "port": 443, "targetPort": port}]}}),
        ("/api/v1/namespaces/ext/endpoints", {"apiVersion": "v1", "kind": "Endpoints", "metadata": {"name": "widgets"},
                                              "subsets": [{"addresses": [{"ip": "127.0.0.1"}],
                                                           "ports": [{"name": "https", "port": port}]}]}),
        (APISERVICES, {"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService", "metadata": {"name": NAME},
                       "spec": {"group": GROUP, "version": VERSION, "groupPriorityMinimum": 1000, "versionPriority": 15,
                                "caBundle": ca_bundle, "service": {"namespace": "ext", "name": service, "port": 443}}}),
    ]


async def available(admin: Client, name: str) -> dict[str, Any]:
    _, obj = await admin("GET", f"{APISERVICES}/{name}")
    return next((c for c in (obj.get("status") or {}).get("conditions") or [] if c["type"] == "Available"), {})


async def authentication(admin: Client) -> dict[str, str]:
    path = "/api/v1/namespaces/kube-system/configmaps/extension-apiserver-authentication"

    async def written() -> bool:
        return (await admin("GET", path))[0] == 200

    await eventually(written)
    return dict((await admin("GET", path))[1]["data"])


@asynccontextmanager
async def registered_server(admin: Client, tmp_path: Path) -> AsyncIterator[ExtensionServer]:
    """The extension server, registered with its APIService, once that is Available."""
    async with extension_server(tmp_path / "widgets", authentication=await authentication(admin),
                                hosts=("widgets.ext.svc",)) as server:
        for path, body in registrations(server.port, server.ca_bundle):
            code, created = await admin("POST", path, body)
            assert code == 201, created

        async def ready() -> bool:
            return (await available(admin, NAME)).get("status") == "True"

        async def routed() -> bool:
            # The leader writes Available; this replica routes the group once its own watch of the
            # APIServices has the change (an informer's lag, as in kube).
            code, _ = await admin("GET", f"/apis/{GROUP}/{VERSION}")
            return code == 200

        await eventually(ready)
        await eventually(routed)
        yield server


async def aggregated_discovery(session: aiohttp.ClientSession, hub: Hub, admin: Client) -> tuple[str, list[str]] | None:
    """The aggregated group's version in ``/apis``' aggregated discovery: its freshness and resources."""
    accept = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json"
    async with session.get(f"{hub.url}/apis", headers={"Authorization": f"Bearer {admin.token}", "Accept": accept}) as response:
        document = await response.json(content_type=None)
    for item in document["items"]:
        if item["metadata"].get("name") == GROUP:
            [version] = item["versions"]
            return version["freshness"], [r["resource"] for r in version["resources"]]
    return None


async def test_only_the_hubs_identity_headers_reach_the_server(
    hub: Hub, admin: Client, session: aiohttp.ClientSession, tmp_path: Path,
) -> None:
    async with registered_server(admin, tmp_path) as server:
        code, bound = await admin("POST", "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings", {
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding", "metadata": {"name": "devs"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "view"},
            "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": "devs"}]})
        assert code == 201, bound
        code, role = await admin("POST", "/apis/rbac.authorization.k8s.io/v1/clusterroles", {
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
            "metadata": {"name": "widgets-view", "labels": {"rbac.authorization.k8s.io/aggregate-to-view": "true"}},
            "rules": [{"apiGroups": [GROUP], "resources": ["widgets"], "verbs": ["list"]}]})
        assert code == 201, role
        path = f"/apis/{GROUP}/{VERSION}/namespaces/default/widgets"
        headers = {"Authorization": f"Bearer {admin.token}", "X-Remote-User": "mallory", "X-Remote-Group": "system:masters",
                   "Impersonate-User": "alice", "Impersonate-Group": "devs", "Impersonate-Extra-Team": "ml/gpu"}

        async def listed() -> bool:  # once the view role has aggregated the widgets rule
            async with session.get(f"{hub.url}{path}", headers=headers) as response:
                return response.status == 200 and (await response.json())["items"][0]["metadata"]["name"] == "sprocket"

        await eventually(listed)
        seen = server.seen[path][-1]
        assert (seen.user, set(seen.groups)) == ("alice", {"devs", "system:authenticated"})
        assert seen.extra == {"team": ["ml/gpu"]}

        # A watch streams through as it comes: its first event arrives while the server holds the rest.
        async with session.get(f"{hub.url}{path}?watch=1", headers={"Authorization": f"Bearer {admin.token}"}) as watch:
            assert watch.status == 200
            async with asyncio.timeout(10):
                first = json.loads(await watch.content.readline())
            assert first["type"] == "ADDED"
            server.release.set()
            async with asyncio.timeout(10):
                assert json.loads(await watch.content.readline())["type"] == "DELETED"

        # Discovery lists the aggregated group after the hub's own.
        _, groups = await admin("GET", "/apis")
        assert {"name": GROUP, "versions": [{"groupVersion": f"{GROUP}/{VERSION}", "version": VERSION}],
                "preferredVersion": {"groupVersion": f"{GROUP}/{VERSION}", "version": VERSION}} in groups["groups"]
        code, group = await admin("GET", f"/apis/{GROUP}")
        assert code == 200 and group["versions"] == [{"groupVersion": f"{GROUP}/{VERSION}", "version": VERSION}]
        assert await aggregated_discovery(session, hub, admin) == ("Current", ["widgets"])

    # The server stopped: its last resources stay in aggregated discovery, marked Stale.
    # Noticed by the next availability check (every 10 s), whose condition change refreshes discovery.
    async with asyncio.timeout(60):
        while await aggregated_discovery(session, hub, admin) != ("Stale", ["widgets"]):  # noqa: ASYNC110
            await asyncio.sleep(0.2)
    assert (await available(admin, NAME))["reason"] == "FailedDiscoveryCheck"


async def test_a_missing_service_is_kubes_condition_and_503(hub: Hub, admin: Client) -> None:
    for path, body in registrations(1, "", service="nowhere"):
        if path == APISERVICES:
            body["spec"].pop("caBundle")
            body["spec"]["insecureSkipTLSVerify"] = True
        code, created = await admin("POST", path, body)
        assert code == 201, created

    async def failed() -> bool:
        return (await available(admin, NAME)).get("reason") == "ServiceNotFound"

    await eventually(failed)
    condition = await available(admin, NAME)
    assert (condition["status"], condition["message"]) == ("False", 'service/nowhere in "ext" is not present')
    answer: tuple[int, Any] = (0, None)

    async def routed() -> bool:
        # The leader writes the condition; this replica routes the group (kube's 404 until then)
        # once its own watch of the APIServices has the APIService (an informer's lag, as in kube).
        nonlocal answer
        answer = await admin("GET", f"/apis/{GROUP}/{VERSION}/namespaces/default/widgets")
        return answer[0] != 404

    await eventually(routed)
    code, status = answer
    assert code == 503
    assert (status["reason"], status["message"]) == ("ServiceUnavailable", "the server is currently unable to handle the request")


def _api_service(name: str, group: str, service: str) -> dict[str, Any]:
    return {"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService", "metadata": {"name": f"v1.{group}"},
            "spec": {"group": group, "version": "v1", "groupPriorityMinimum": 1000, "versionPriority": 15,
                     "insecureSkipTLSVerify": True, "service": {"namespace": "checks", "name": service, "port": 443}}}


async def test_the_availability_checks_speak_kubes_words(hub: Hub, admin: Client) -> None:
    services = "/api/v1/namespaces/checks/services"
    setup: list[tuple[str, dict[str, Any]]] = [
        ("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "checks"}}),
        (services, {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "other-port"},
                    "spec": {"ports": [{"name": "https", "port": 8443}]}}),
        (services, {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "no-endpoints"},
                    "spec": {"ports": [{"name": "https", "port": 443}]}}),
        (services, {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "no-addresses"},
                    "spec": {"ports": [{"name": "https", "port": 443}]}}),
        ("/api/v1/namespaces/checks/endpoints", {"apiVersion": "v1", "kind": "Endpoints", "metadata": {"name": "no-addresses"},
                                                 "subsets": [{"notReadyAddresses": [{"ip": "127.0.0.1"}],
                                                              "ports": [{"name": "https", "port": 1}]}]}),
        (services, {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "outside"},
                    "spec": {"type": "ExternalName", "externalName": "127.0.0.1"}}),
    ]
    for path, body in setup:
        code, created = await admin("POST", path, body)
        assert code == 201, created
    expected = {
        "port.example.com": ("other-port", "ServicePortError", 'service/other-port in "checks" is not listening on port 443'),
        "endpoints.example.com": ("no-endpoints", "EndpointsNotFound", 'cannot find endpoints for service/no-endpoints in "checks"'),
        "addresses.example.com": ("no-addresses", "MissingEndpoints",
                                  'endpoints for service/no-addresses in "checks" have no addresses with port name "https"'),
        "outside.example.com": ("outside", "FailedDiscoveryCheck",
                                "failing or missing response from https://127.0.0.1:443/apis/outside.example.com/v1: "
                                'Get "https://127.0.0.1:443/apis/outside.example.com/v1": dial tcp 127.0.0.1:443: '
                                "connect: connection refused"),
    }
    for group, (service, _, _) in expected.items():
        code, created = await admin("POST", APISERVICES, _api_service(f"v1.{group}", group, service))
        assert code == 201, created

    async def checked() -> bool:
        reasons = [(await available(admin, f"v1.{group}")).get("reason") for group in expected]
        return reasons == [reason for _, reason, _ in expected.values()]

    await eventually(checked)
    for group, (_, _, message) in expected.items():
        condition = await available(admin, f"v1.{group}")
        assert condition["status"] == "False"
        assert condition["message"] == message
