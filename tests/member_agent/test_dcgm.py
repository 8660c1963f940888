"""Parsing dcgm-exporter output into per-device utilization, and scraping a real HTTP endpoint."""

from __future__ import annotations

import math
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from prometheus_client.parser import text_string_to_metric_families

from member_agent import dcgm
from simulator.dcgm import PodDevice, render_metrics
from simulator.nodes import build_inventory
from simulator.profile import parse_fleet

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


def reference_samples(text: str) -> list[tuple[str, dict[str, str], float]]:
    """What the agent read with prometheus_client's parser: the samples of the wanted
    families whose sample name is the family's, NaN kept as a marker."""
    return [
        (sample.name, dict(sample.labels), sample.value)
        for family in text_string_to_metric_families(text)
        if family.name in dcgm.WANTED_FAMILIES
        for sample in family.samples
        if sample.name == family.name
    ]


def fast_samples(text: str) -> list[tuple[str, dict[str, str], float]]:
    return [(s.name, dict(s.labels), s.value) for s in dcgm.parse_samples(text)]


def same_samples(
    a: list[tuple[str, dict[str, str], float]], b: list[tuple[str, dict[str, str], float]]
) -> bool:
    def key(items: list[tuple[str, dict[str, str], float]]) -> list[tuple[str, dict[str, str], Any]]:
        return [(n, labels, "nan" if math.isnan(v) else v) for n, labels, v in items]

    return key(a) == key(b)


GR = "DCGM_FI_PROF_GR_ENGINE_ACTIVE"
UTIL = "DCGM_FI_DEV_GPU_UTIL"


@pytest.mark.parametrize(
    "text",
    [
        pytest.param(EXPORTER_TEXT, id="dcgm-exporter-3.x-with-kubernetes-mapping"),
        pytest.param(f'{GR}{{gpu="0",pod="a\\"b",Hostname="n1"}} 0.5\n', id="escaped-quote"),
        pytest.param(f'{GR}{{gpu="0",pod="a\\\\",Hostname="n1"}} 0.5\n', id="escaped-backslash-at-end"),
        pytest.param(f'{GR}{{gpu="0",pod="x\\ny",Hostname="n1"}} 0.5\n', id="escaped-newline"),
        pytest.param(f'{GR}{{gpu="0",pod="x\\ty",Hostname="n1"}} 0.5\n', id="unknown-escape-kept"),
        pytest.param(f'{GR}{{gpu="0",pod="a,b=}}{{c",Hostname="n1"}} 0.5\n', id="separators-inside-a-value"),
        pytest.param(f'{GR}{{ gpu = "0" , Hostname="n1", }} 0.5\n', id="blanks-and-trailing-comma"),
        pytest.param(f'{GR}{{gpu="0",Hostname="n1",}}   0.5 \t\n', id="trailing-comma-and-blanks"),
        pytest.param(f'{GR}{{gpu="0",Hostname="n1"}} 0.5 1700000000000\n', id="timestamp"),
        pytest.param(f'{GR}{{gpu="0",Hostname="n1"}}\t0.25\n', id="tab-before-value"),
        pytest.param(
            f'{GR}{{gpu="0",Hostname="n1"}} NaN\n{UTIL}{{gpu="0",Hostname="n1"}} +Inf\n', id="nan-and-inf"
        ),
        pytest.param(f"{UTIL} 7\n", id="no-labels"),
        pytest.param(f"{UTIL}{{}} 7\n", id="empty-labels"),
        pytest.param(f'{{__name__="{UTIL}",gpu="1",Hostname="n1"}} 9\n', id="name-as-a-label"),
        pytest.param(f'{UTIL} {{gpu="1",Hostname="n1"}} 9\n', id="blank-before-labels"),
        pytest.param(f'# TYPE {UTIL} counter\n{UTIL}{{gpu="1"}} 9\n', id="declared-counter-ignored"),
        pytest.param(
            f'# TYPE {UTIL} counter\n{UTIL}{{gpu="1"}} 9\nOTHER 1\n{UTIL}{{gpu="2"}} 8\n',
            id="counter-block-ends-at-another-family",
        ),
        pytest.param(f'# HELP {UTIL} util\n# TYPE {UTIL} gauge\n{UTIL}{{gpu="1"}} 9\n', id="gauge-block"),
        pytest.param(f'# TYPE {UTIL} histogram\n{UTIL}{{gpu="1"}} 9\n', id="histogram-typed-still-read"),
        pytest.param('other_metric{a="b\\"}"} 3\nother_metric 4\n', id="other-families-skipped"),
        pytest.param("# a comment\n#\n\n  \n", id="comments-and-blank-lines"),
    ],
)
def test_fast_parser_reads_what_prometheus_client_reads(text: str) -> None:
    assert same_samples(fast_samples(text), reference_samples(text))


@pytest.mark.parametrize(
    "text",
    [
        pytest.param(f'{GR}{{gpu="0",gpu="1"}} 0.5\n', id="duplicate-label"),
        pytest.param(f'{GR}{{__reserved="0"}} 0.5\n', id="reserved-label-name"),
        pytest.param(f'{GR}{{gpu="0"}} 1_000\n', id="underscore-in-value"),
        pytest.param(f'{GR}{{gpu="0"}} 0.5 soon\n', id="bad-timestamp"),
        pytest.param(f'{GR}{{gpu="0"}}\n', id="no-value"),
        pytest.param(f"{GR}{{gpu=0}} 0.5\n", id="unquoted-value"),
        pytest.param(f'{GR}{{gpu="0" pod="p"}} 0.5\n', id="missing-comma"),
        pytest.param(f'{GR}{{gpu="0}} 0.5\n', id="unterminated-value"),
        pytest.param(f"# TYPE {UTIL}\n", id="type-without-type"),
        pytest.param("<html><body>login</body></html>\n", id="html"),
    ],
)
def test_fast_parser_refuses_what_prometheus_client_refuses(text: str) -> None:
    with pytest.raises(ValueError):
        list(text_string_to_metric_families(text))
    with pytest.raises(dcgm.ScrapeError):
        dcgm.parse_samples(text)


def test_fast_parser_matches_prometheus_client_on_a_simulated_cluster_page() -> None:
    """Whole GPUs, MIG instances and time-sliced shares, with pod labels whose values need escaping."""
    profile = parse_fleet(
        {
            "clusters": [
                {
                    "name": "c",
                    "nodeGroups": [
                        {
                            "name": "whole",
                            "count": 2,
                            "cpu": 64,
                            "memoryGiB": 512,
                            "gpu": {"product": "NVIDIA-A100-SXM4-80GB", "count": 8},
                        },
                        {
                            "name": "mig",
                            "count": 1,
                            "cpu": 64,
                            "memoryGiB": 512,
                            "gpu": {
                                "product": "NVIDIA-A100-SXM4-80GB",
                                "count": 8,
                                "mig": {
                                    "strategy": "mixed",
                                    "layout": ["3g.40gb", "2g.20gb", "1g.10gb", "1g.10gb"],
                                },
                            },
                        },
                        {
                            "name": "shared",
                            "count": 1,
                            "cpu": 64,
                            "memoryGiB": 512,
                            "gpu": {"product": "NVIDIA-A10", "count": 4, "sharing": {"replicas": 4}},
                        },
                    ],
                }
            ]
        }
    ).clusters[0]
    inventories = build_inventory(profile)
    uses = []
    utilization = {}
    for index, inventory in enumerate(inventories.values()):
        for resource, devices in sorted(inventory.devices.items()):
            for number, device in enumerate(devices[:3]):
                pod = f'p{index}-{number}-"q\\{resource[-3:]}'
                uses.append(PodDevice(inventory.node, device.id, "team,a", pod, "main"))
                utilization[f"team,a/{pod}"] = number / 4
    page = render_metrics(inventories.values(), uses, utilization)
    expected = reference_samples(page)
    assert len(expected) > 100 and any('"' in labels.get("pod", "") for _, labels, _ in expected)
    assert same_samples(fast_samples(page), expected)


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


def _large_page(gpus: int) -> str:
    """A real-shaped exporter page of ``gpus`` busy whole GPUs (several hundred KiB for ~1,000)."""
    lines = ["# HELP DCGM_FI_DEV_GPU_UTIL GPU utilization (in %).", "# TYPE DCGM_FI_DEV_GPU_UTIL gauge"]
    for index in range(gpus):
        node, gpu = divmod(index, 8)
        lines.append(
            f'DCGM_FI_DEV_GPU_UTIL{{gpu="{gpu}",UUID="GPU-{index:08x}-aaaa-bbbb-cccc-{index:012x}",'
            f'pci_bus_id="00000000:{gpu:02X}:00.0",device="nvidia{gpu}",modelName="NVIDIA A100-SXM4-80GB",'
            f'Hostname="node-{node:04d}",container="main",namespace="ml",pod="train-{index:05d}-abcdefgh"}} 55'
        )
    return "\n".join(lines) + "\n"


@pytest.fixture
async def large_exporter() -> AsyncIterator[tuple[str, str]]:
    """An aiohttp server answering a page larger than one read buffer, both with a
    Content-Length (/metrics) and chunked in pieces as they are written (/stream)."""
    page = _large_page(1200)

    async def metrics(request: web.Request) -> web.Response:
        return web.Response(text=page, content_type="text/plain")

    async def stream(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "text/plain"})
        response.enable_chunked_encoding()
        await response.prepare(request)
        data = page.encode()
        for start in range(0, len(data), 16384):
            await response.write(data[start : start + 16384])
        await response.write_eof()
        return response

    app = web.Application()
    app.router.add_get("/metrics", metrics)
    app.router.add_get("/stream", stream)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    try:
        yield f"http://127.0.0.1:{port}", page
    finally:
        await runner.cleanup()


@pytest.mark.parametrize("path", ["/metrics", "/stream"])
async def test_scrape_reads_the_whole_of_a_page_larger_than_one_read_buffer(
    large_exporter: tuple[str, str], path: str
) -> None:
    url, page = large_exporter
    assert len(page) > 2**18  # far more than one chunk of the client's buffer
    async with aiohttp.ClientSession() as session:
        text = await dcgm.scrape(session, f"{url}{path}", request_timeout=10)
    print(f"served {len(page)} bytes, scraped {len(text)}")
    assert text == page
    assert len(dcgm.parse_metrics(text)) == 1200


@pytest.mark.parametrize("path", ["/metrics", "/stream"])
async def test_scrape_refuses_a_page_over_the_size_limit(large_exporter: tuple[str, str], path: str) -> None:
    url, page = large_exporter
    async with aiohttp.ClientSession() as session:
        with pytest.raises(dcgm.ScrapeError, match=r"more than 100000 bytes .*--dcgm-max-bytes"):
            await dcgm.scrape(session, f"{url}{path}", request_timeout=10, max_bytes=100_000)
        assert await dcgm.scrape(session, f"{url}{path}", request_timeout=10, max_bytes=len(page)) == page
