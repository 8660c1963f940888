"""Upgrade requests to an aggregated API through a real hub (real etcd, HTTPS) to a real extension
server in the same loop: the WebSocket is relayed both ways with the server's subprotocol and close
code, as the front proxy's user (never the client's own ``X-Remote-*`` headers); a caller the hub
does not authorize never reaches the server."""

from __future__ import annotations

from pathlib import Path

import aiohttp
import pytest

from controlplane.hub import Hub
from tests.extensionserver import GROUP, VERSION

from ..auth.realhub import Client
from .test_proxied_requests import registered_server

ECHO = f"/apis/{GROUP}/{VERSION}/namespaces/default/widgets/sprocket/echo"


async def test_an_upgrade_is_relayed_both_ways(
    hub: Hub, admin: Client, session: aiohttp.ClientSession, tmp_path: Path,
) -> None:
    async with registered_server(admin, tmp_path) as server:
        headers = {"Authorization": f"Bearer {admin.token}", "X-Remote-User": "mallory"}
        async with session.ws_connect(f"{hub.url}{ECHO}", headers=headers,
                                      protocols=("v5.channel.k8s.io", "v4.channel.k8s.io")) as ws:
            assert ws.protocol == "v5.channel.k8s.io"
            await ws.send_bytes(b"\x00hello")
            assert await ws.receive_bytes(timeout=10) == b"echo: \x00hello"
            await ws.send_str("text")
            assert await ws.receive_str(timeout=10) == "echo: text"
            await ws.send_str("bye")
            closing = await ws.receive(timeout=10)
            assert closing.type is aiohttp.WSMsgType.CLOSE and closing.data == 4000
        [seen] = server.seen[ECHO]
        assert seen.user != "mallory" and "system:masters" in seen.groups, seen

        # The hub authorizes before relaying: alice may not, and the server never sees her.
        denied = {"Authorization": f"Bearer {admin.token}", "Impersonate-User": "alice"}
        with pytest.raises(aiohttp.WSServerHandshakeError) as refused:
            await session.ws_connect(f"{hub.url}{ECHO}", headers=denied, protocols=("v5.channel.k8s.io",))
        assert refused.value.status == 403
        assert len(server.seen[ECHO]) == 1

        # A SPDY upgrade is refused with the hub's 400 saying so.
        async with session.post(f"{hub.url}{ECHO}", headers={
                "Authorization": f"Bearer {admin.token}", "Connection": "Upgrade", "Upgrade": "SPDY/3.1"}) as response:
            assert response.status == 400
            assert "proxied as WebSockets only" in (await response.json())["message"]
