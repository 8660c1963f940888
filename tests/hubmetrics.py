"""Reading a running hub's own ``/metrics`` as a client does: over HTTPS, with the admin token
of its kubeconfig."""

from __future__ import annotations

import aiohttp
from prometheus_client.parser import text_string_to_metric_families

from controlplane.apiserver.kubeconfig import load_kubeconfig
from controlplane.apiserver.tls import client_ssl_context
from controlplane.hub import Hub


async def lines(hub: Hub) -> list[str]:
    """The lines of ``hub``'s ``/metrics``, exactly as served."""
    credentials = load_kubeconfig(hub.kubeconfig_path)
    connector = aiohttp.TCPConnector(ssl=client_ssl_context(credentials.ca_pem))
    async with (
        aiohttp.ClientSession(connector=connector, timeout=aiohttp.ClientTimeout(total=10)) as session,
        session.get(f"{hub.url}/metrics", headers={"Authorization": f"Bearer {credentials.token}"}) as response,
    ):
        assert response.status == 200, await response.text()
        return (await response.text()).splitlines()


async def samples(hub: Hub, name: str) -> list[tuple[dict[str, str], float]]:
    """The labels and value of every sample called ``name`` on ``hub``'s ``/metrics`` (as the
    Python parser names them: a counter's samples end in ``_total``)."""
    return [
        (sample.labels, sample.value)
        for family in text_string_to_metric_families("\n".join(await lines(hub)) + "\n")
        for sample in family.samples
        if sample.name == name
    ]
