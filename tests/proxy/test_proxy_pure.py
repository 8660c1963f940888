"""The proxy's pure parts: frames, the request attributes of a proxy path, the headers the agent
sends the member, simulated log lines."""

from __future__ import annotations

import asyncio

import pytest
from kubernetes_asyncio.client import ApiClient, Configuration

from controlplane.apis import proxyframing as framing
from controlplane.apis.impersonation import escape_extra_key, extra_of_headers
from controlplane.apis.proxyframing import FrameKind, ProxyRequest
from controlplane.apiserver.identity import ANONYMOUS_USER, AUTHENTICATED, Role, UserInfo
from controlplane.apiserver.proxy.routes import proxy_request
from controlplane.apiserver.proxy.tunnels import REPLACED_MESSAGE, TunnelRegistry
from controlplane.apiserver.routing import parse_request
from member_agent.tunnel import AgentTunnel
from simulator.podlogs import line_range

PROXY = "/apis/cluster.gpufed.io/v1alpha1/clusters/c1/proxy/api/v1/namespaces/ml/pods"


def test_open_frame_round_trips_request_and_body() -> None:
    request = ProxyRequest("POST", "/api/v1/namespaces?dryRun=All", [("Content-Type", "application/json")],
                           user="alice", groups=["gpufed:viewers"], uid="u-1", extra={"scopes": ["a", "b"]})
    frame = framing.decode(framing.encode(framing.open_frame(7, request, b'{"a":1}')))
    assert frame.kind is FrameKind.OPEN and frame.stream == 7
    assert framing.parse_open(frame.payload) == (request, b'{"a":1}')
    assert framing.parse_credit(framing.credit_frame(3, 4096).payload) == 4096


@pytest.mark.parametrize("message", [b"", b"\x63\x00\x00\x00\x01", b"\x01\x00\x00\x00\x01\x00\x00\x00\x05{}"])
def test_garbage_frames_are_refused(message: bytes) -> None:
    with pytest.raises(framing.FrameError):
        frame = framing.decode(message)
        framing.parse_open(frame.payload)


def test_credentials_and_impersonation_are_never_forwarded() -> None:
    headers = [("Authorization", "Bearer x"), ("Impersonate-User", "root"), ("Accept", "application/json")]
    assert framing.forwarded_headers(headers, drop=framing.DROPPED_REQUEST_HEADERS) == [("Accept", "application/json")]


@pytest.mark.parametrize(("method", "verb"), [("GET", "get"), ("POST", "create"), ("PUT", "update"),
                                              ("PATCH", "patch"), ("DELETE", "delete")])
def test_proxy_path_is_the_clusters_proxy_subresource(method: str, verb: str) -> None:
    info = parse_request(method, PROXY, {"watch": "true"})
    assert (info.verb, info.group, info.resource, info.name, info.subresource) == (
        verb, "cluster.gpufed.io", "clusters", "c1", "proxy"
    )


def test_log_line_range_follows_tail_and_since() -> None:
    assert line_range(100.0, 109.5, tail=None, since=None) == range(0, 10)
    assert line_range(100.0, 109.5, tail=3, since=None) == range(7, 10)
    assert line_range(100.0, 109.5, tail=None, since=105.0) == range(5, 10)
    assert line_range(100.0, 99.0, tail=None, since=None) == range(0)


async def test_the_agent_impersonates_the_hub_user_only_when_configured() -> None:
    request = ProxyRequest("GET", "/api/v1/pods", [("Accept", "application/json"), ("Impersonate-User", "root")],
                           user="ann", groups=["gpufed:users", "team-a"], uid="u-1",
                           extra={"authentication.kubernetes.io/credential-id": ["X509SHA256=ab"], "scopes": ["a", "b"]})
    async with ApiClient(Configuration()) as hub, ApiClient(Configuration()) as member:
        impersonating = AgentTunnel(cluster="c1", hub=hub, member=member, identity="impersonate")
        headers = impersonating.member_headers(request)
        assert [(k, v) for k, v in headers.items() if k.startswith("Impersonate-")] == [
            ("Impersonate-User", "ann"), ("Impersonate-Group", "gpufed:users"), ("Impersonate-Group", "team-a"),
            ("Impersonate-Uid", "u-1"),
            ("Impersonate-Extra-authentication.kubernetes.io%2Fcredential-id", "X509SHA256=ab"),
            ("Impersonate-Extra-scopes", "a"), ("Impersonate-Extra-scopes", "b"),
        ]
        # What kube-apiserver's impersonation reads back from them.
        assert extra_of_headers(headers.items()) == request.extra
        as_agent = AgentTunnel(cluster="c1", hub=hub, member=member, identity="agent")
        assert dict(as_agent.member_headers(request)) == {"Accept": "application/json"}


@pytest.mark.parametrize(("key", "escaped"), [
    ("scopes", "scopes"),
    ("authentication.kubernetes.io/credential-id", "authentication.kubernetes.io%2Fcredential-id"),
    ("100%", "100%25"),
    ("a b:c", "a%20b%3Ac"),
    ("ü", "%C3%BC"),
])
def test_extra_keys_are_escaped_as_client_go_does(key: str, escaped: str) -> None:
    assert escape_extra_key(key) == escaped
    assert extra_of_headers([(f"Impersonate-Extra-{escaped}", "v")]) == {key.lower(): ["v"]}


@pytest.mark.parametrize(("user", "groups", "uid", "extra"), [
    pytest.param(UserInfo("admin-user", Role.ADMIN), ["gpufed:admins"], "", {}, id="admin-token"),
    pytest.param(UserInfo("ann", Role.VIEWER), ["gpufed:viewers"], "", {}, id="viewer-token"),
    pytest.param(UserInfo("system:serviceaccount:ml:trainer", Role.USER, uid="sa-uid",
                          user_groups=("system:serviceaccounts", "system:serviceaccounts:ml", AUTHENTICATED),
                          extra=(("authentication.kubernetes.io/credential-id", ("JTI=j",)),)),
                 ["gpufed:users", "system:serviceaccounts", "system:serviceaccounts:ml"], "sa-uid",
                 {"authentication.kubernetes.io/credential-id": ["JTI=j"]}, id="service-account"),
    pytest.param(ANONYMOUS_USER, ["gpufed:users"], "", {}, id="anonymous"),
])
def test_the_hub_forwards_the_users_groups_uid_and_extra(
    user: UserInfo, groups: list[str], uid: str, extra: dict[str, list[str]]
) -> None:
    request = proxy_request("GET", "/api/v1/pods", [], user)
    assert (request.user, request.groups, request.uid, request.extra) == (user.name, groups, uid, extra)


async def test_a_replaced_tunnel_is_closed_and_its_end_leaves_the_newer_one() -> None:
    closed: list[tuple[int, bytes]] = []

    async def send(_: bytes) -> None:
        return None

    async def close(code: int, message: bytes) -> None:
        closed.append((code, message))

    registry = TunnelRegistry()
    old = registry.connect("c1", send, close=close)
    new = registry.connect("c1", send)
    await asyncio.sleep(0)  # the old socket is closed in the background
    assert closed == [(1012, REPLACED_MESSAGE)] and not old.connected
    registry.disconnect(old, "the old agent's socket ended")
    assert registry.get("c1") is new
    registry.disconnect(new, "the new one's too")
    assert registry.get("c1") is None
