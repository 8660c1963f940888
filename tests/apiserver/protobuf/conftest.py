"""Helpers to run the real kubectl (/usr/bin/kubectl) against a server on 127.0.0.1."""

from __future__ import annotations

import asyncio
import shutil
import socket
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import pytest
import yaml
from aiohttp import web

KUBECTL = shutil.which("kubectl") or "/usr/bin/kubectl"
KUBECTL_TIMEOUT = 60.0

Kubectl = Callable[..., Awaitable[tuple[int, str, str]]]


def write_kubeconfig(path: Path, server_url: str) -> Path:
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "hub", "cluster": {"server": server_url}}],
                "users": [{"name": "me", "user": {}}],
                "contexts": [{"name": "hub", "context": {"cluster": "hub", "user": "me", "namespace": "default"}}],
                "current-context": "hub",
            }
        )
    )
    return path


async def run_kubectl(kubeconfig: Path, *args: str) -> tuple[int, str, str]:
    """``kubectl --kubeconfig ... args``: (exit code, stdout, stderr)."""
    process = await asyncio.create_subprocess_exec(
        KUBECTL, "--kubeconfig", str(kubeconfig), *args,
        stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        env={"PATH": "/usr/bin:/bin", "HOME": str(kubeconfig.parent)},
    )
    try:
        async with asyncio.timeout(KUBECTL_TIMEOUT):
            out, err = await process.communicate()
    except TimeoutError:
        process.kill()
        await process.wait()
        raise
    assert process.returncode is not None
    return process.returncode, out.decode(), err.decode()


async def serve(app: web.Application) -> tuple[web.AppRunner, str]:
    """``app`` on 127.0.0.1 at a free port; the caller cleans the runner up."""
    runner = web.AppRunner(app)
    await runner.setup()
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    await web.SockSite(runner, sock).start()
    return runner, f"http://127.0.0.1:{port}"


@pytest.fixture
def needs_kubectl() -> None:
    if not Path(KUBECTL).exists():
        pytest.skip("kubectl is not installed")


@pytest.fixture
async def served() -> AsyncIterator[Callable[[web.Application], Awaitable[str]]]:
    """Start apps on 127.0.0.1 for the test; all are stopped when it ends."""
    runners: list[web.AppRunner] = []

    async def start(app: web.Application) -> str:
        runner, url = await serve(app)
        runners.append(runner)
        return url

    yield start
    for runner in runners:
        await runner.cleanup()
