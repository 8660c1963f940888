"""Parsing dcgm-exporter output into per-device utilization, and scraping a real HTTP endpoint."""

from __future__ import annotations

from collections.abc import AsyncIterator

import aiohttp
import pytest
from aiohttp import web

from member_agent import dcgm

# The shape of a real dcgm-exporter answer (3.x, Kubernetes mapping on): two whole GPUs on one
# node (one busy pod, one idle without pod), two MIG instances of an H100 on another node.
EXPORTER_TEXT = """\
# HELP DCGM_FI_DEV_GPU_UTIL GPU utilization (in %).
# TYPE DCGM_FI_DEV_GPU_UTIL gauge
DCGM_FI_DEV_GPU_UTIL{gpu="0",UUID="GPU-aaaa",pci_bus_id="00000000:07:00.0",device="nvidia0",modelName="NVIDIA A100-SXM4-80GB",Hostname="node-a",container="main",namespace="ml",pod="train-0"} 87
DCGM_FI_DEV_GPU_UTIL{gpu="1",UUID="GPU-bbbb",pci_bus_id="00000000:0F:00.0",device="nvidia1",modelName="NVIDIA A100-SXM4-80GB",Hostname="node-a"} 0
# HELP DCGM_FI_DEV_FB_USED Framebuffer memory used (in MiB).
# TYPE DCGM_FI_DEV_FB_USED gauge
DCGM_FI_DEV_FB_USED{gpu="0",UUID="GPU-aaaa",pci_bus_id="00000000:07:00.0",device="nvidia0",modelName="NVIDIA A100-SXM4-80GB",Hostname="node-a",container="main",namespace="ml",pod="train-0"} 40960
DCGM_FI_DEV_FB_USED{gpu="1",UUID="GPU-bbbb",pci_bus_id="00000000:0F:00.0",device="nvidia1",modelName="NVIDIA A100-SXM4-80GB",Hostname="node-a"} 0
DCGM_FI_DEV_FB_USED{gpu="0",UUID="GPU-cccc",pci_bus_id="00000000:07:00.0",device="nvidia0",modelName="NVIDIA H100 80GB HBM3",GPU_I_PROFILE="3g.40gb",GPU_I_ID="2",Hostname="node-h",container="c",namespace="ml",pod="infer-1"} 2048
# HELP DCGM_FI_PROF_GR_ENGINE_ACTIVE Ratio of time the graphics engine is active.
# TYPE DCGM_FI_PROF_GR_ENGINE_ACTIVE gauge
DCGM_FI_PROF_GR_ENGINE_ACTIVE{gpu="0",UUID="GPU-aaaa",pci_bus_id="00000000:07:00.0",device="nvidia0",modelName="NVIDIA A100-SXM4-80GB",Hostname="node-a",container="main",namespace="ml",pod="train-0"} 0.912345
DCGM_FI_PROF_GR_ENGINE_ACTIVE{gpu="0",UUID="GPU-cccc",pci_bus_id="00000000:07:00.0",device="nvidia0",modelName="NVIDIA H100 80GB HBM3",GPU_I_PROFILE="3g.40gb",GPU_I_ID="2",Hostname="node-h",container="c",namespace="ml",pod="infer-1"} 0.25
DCGM_FI_PROF_GR_ENGINE_ACTIVE{gpu="0",UUID="GPU-cccc",pci_bus_id="00000000:07:00.0",device="nvidia0",modelName="NVIDIA H100 80GB HBM3",GPU_I_PROFILE="1g.10gb",GPU_I_ID="9",Hostname="node-h"} 0
# HELP DCGM_FI_DEV_POWER_USAGE Power draw (in W).
# TYPE DCGM_FI_DEV_POWER_USAGE gauge
DCGM_FI_DEV_POWER_USAGE{gpu="0",UUID="GPU-aaaa",pci_bus_id="00000000:07:00.0",device="nvidia0",modelName="NVIDIA A100-SXM4-80GB",Hostname="node-a"} 312.5
"""


def test_parse_groups_series_per_device_and_prefers_gr_engine_active() -> None:
    by_node = dcgm.utilization_by_node(dcgm.parse_metrics(EXPORTER_TEXT))
    assert by_node == {
        "node-a": [
            # GR_ENGINE_ACTIVE (0.912) wins over GPU_UTIL (87 %).
            {
                "gpu": 0,
                "uuid": "GPU-aaaa",
                "pod": "train-0",
                "namespace": "ml",
                "utilization": 0.912,
                "fbUsedMiB": 40960,
            },
            # No profiling metric: GPU_UTIL percent / 100.
            {"gpu": 1, "uuid": "GPU-bbbb", "utilization": 0.0, "fbUsedMiB": 0},
        ],
        "node-h": [
            {
                "gpu": 0,
                "uuid": "GPU-cccc",
                "profile": "3g.40gb",
                "instance": 2,
                "pod": "infer-1",
                "namespace": "ml",
                "utilization": 0.25,
                "fbUsedMiB": 2048,
            },
            {"gpu": 0, "uuid": "GPU-cccc", "profile": "1g.10gb", "instance": 9, "utilization": 0.0},
        ],
    }


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        pytest.param(
            'DCGM_FI_DEV_GPU_UTIL{gpu="3",UUID="GPU-x",hostname="n1"} 45\n',
            {"n1": [{"gpu": 3, "uuid": "GPU-x", "utilization": 0.45}]},
            id="newer-lowercase-hostname-and-no-type-lines",
        ),
        pytest.param(
            'DCGM_FI_DEV_FB_USED{gpu="0",UUID="GPU-x",Hostname="n1"} 10\n',
            {},
            id="no-utilization-metric-dropped",
        ),
        pytest.param(
            'DCGM_FI_PROF_GR_ENGINE_ACTIVE{gpu="0",UUID="GPU-x",Hostname="n1"} 1.7\n',
            {"n1": [{"gpu": 0, "uuid": "GPU-x", "utilization": 1.0}]},
            id="clamped-to-one",
        ),
        pytest.param("", {}, id="empty"),
    ],
)
def test_parse_cases(text: str, expected: dict[str, list[dict[str, object]]]) -> None:
    assert dcgm.utilization_by_node(dcgm.parse_metrics(text)) == expected


def test_parse_rejects_non_prometheus_text() -> None:
    with pytest.raises(dcgm.ScrapeError):
        dcgm.parse_metrics("<html>this is not metrics {</html>\n")


@pytest.fixture
async def exporter() -> AsyncIterator[str]:
    async def metrics(request: web.Request) -> web.Response:
        return web.Response(text=EXPORTER_TEXT, content_type="text/plain")

    async def broken(request: web.Request) -> web.Response:
        return web.Response(status=503, text="busy")

    app = web.Application()
    app.router.add_get("/metrics", metrics)
    app.router.add_get("/broken", broken)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        await runner.cleanup()


async def test_scrape_reads_an_http_endpoint(exporter: str) -> None:
    async with aiohttp.ClientSession() as session:
        text = await dcgm.scrape(session, f"{exporter}/metrics", request_timeout=5)
        assert len(dcgm.parse_metrics(text)) == 4
        with pytest.raises(dcgm.ScrapeError, match="503"):
            await dcgm.scrape(session, f"{exporter}/broken", request_timeout=5)
        with pytest.raises(dcgm.ScrapeError):
            await dcgm.scrape(session, "http://127.0.0.1:1/metrics", request_timeout=5)
