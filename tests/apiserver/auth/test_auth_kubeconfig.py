"""Kubeconfigs: written 0600, read back, and accepted by the real kubectl against a TLS
server using the generated PKI and a bearer token."""

from __future__ import annotations

import asyncio
import base64
import json
import shutil
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import yaml
from aiohttp import web

from controlplane.apiserver.auth import bearer_token
from controlplane.apiserver.kubeconfig import (
    HubCredentials,
    KubeconfigError,
    load_kubeconfig,
    write_kubeconfig,
)
from controlplane.apiserver.tls import Pki, ensure_pki
from controlplane.yamlfile import read_yaml_mapping

TOKEN = "abcdef.0123456789abcdef0123456789abcdef"
CA_PEM = b"-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"


def test_written_kubeconfig_is_private_and_reads_back(tmp_path: Path) -> None:
    path = tmp_path / "sub" / "hub.kubeconfig"

    write_kubeconfig(path, server="https://127.0.0.1:6443", ca_pem=CA_PEM, token=TOKEN, user="admin")

    assert path.stat().st_mode & 0o777 == 0o600
    assert load_kubeconfig(path) == HubCredentials("https://127.0.0.1:6443", CA_PEM, TOKEN)
    document = yaml.safe_load(path.read_text())
    assert document["current-context"] == "gpufed"
    cluster = document["clusters"][0]
    assert cluster["name"] == "gpufed-hub"
    assert base64.b64decode(cluster["cluster"]["certificate-authority-data"]) == CA_PEM
    assert document["contexts"][0]["context"] == {"cluster": "gpufed-hub", "user": "admin"}


def test_rewriting_replaces_the_file(tmp_path: Path) -> None:
    path = tmp_path / "hub.kubeconfig"
    write_kubeconfig(path, server="https://a:1", ca_pem=CA_PEM, token=TOKEN, user="admin")
    write_kubeconfig(path, server="https://b:2", ca_pem=CA_PEM, token="zzzzzz.0000000000000000", user="viewer")

    assert load_kubeconfig(path) == HubCredentials("https://b:2", CA_PEM, "zzzzzz.0000000000000000")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["hub.kubeconfig"]


def test_load_follows_current_context_and_file_references(tmp_path: Path) -> None:
    (tmp_path / "ca.crt").write_bytes(CA_PEM)
    (tmp_path / "token").write_text(TOKEN + "\n")
    document = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {"name": "other", "cluster": {"server": "https://other:1", "certificate-authority-data": "eA=="}},
            {"name": "hub", "cluster": {"server": "https://hub:6443", "certificate-authority": "ca.crt"}},
        ],
        "users": [{"name": "me", "user": {"tokenFile": "token"}}],
        "contexts": [
            {"name": "a", "context": {"cluster": "other", "user": "me"}},
            {"name": "b", "context": {"cluster": "hub", "user": "me"}},
        ],
        "current-context": "b",
    }
    path = tmp_path / "config"
    path.write_text(yaml.safe_dump(document))

    assert load_kubeconfig(path) == HubCredentials("https://hub:6443", CA_PEM, TOKEN)
    assert load_kubeconfig(path, context="a").ca_pem == b"x"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("- just a list", "not a kubeconfig"),
        ("{}", "no current-context"),
        ("current-context: x\ncontexts: []", "no context named 'x'"),
        (
            "current-context: c\ncontexts: [{name: c, context: {cluster: k, user: u}}]\n"
            "clusters: [{name: k, cluster: {server: 'https://x'}}]\nusers: [{name: u, user: {token: t}}]",
            "certificate-authority",
        ),
        (
            "current-context: c\ncontexts: [{name: c, context: {cluster: k, user: u}}]\n"
            "clusters: [{name: k, cluster: {server: 'https://x', certificate-authority-data: 'eA=='}}]\n"
            "users: [{name: u, user: {username: bob}}]",
            "no bearer token",
        ),
        ("key: [unclosed", "not valid YAML"),
    ],
)
def test_unusable_kubeconfigs_are_explained(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "config"
    path.write_text(text)
    with pytest.raises(KubeconfigError, match=message):
        load_kubeconfig(path)


def test_a_kubeconfig_that_is_not_yaml_is_refused_without_quoting_it(tmp_path: Path) -> None:
    """The YAML parser quotes the lines around a fault; a kubeconfig's may hold its token."""
    path = tmp_path / "config"
    path.write_text("users:\n- name: u\n  user: {token: s3cretvalue\n")
    with pytest.raises(ValueError, match=r"is not valid YAML: .* at line 4, column 1$"):  # the parser's words
        read_yaml_mapping(path, not_mapping=" is not a mapping")
    with pytest.raises(KubeconfigError, match="is not valid YAML") as caught:
        load_kubeconfig(path)
    assert "s3cret" not in str(caught.value)


@pytest.mark.parametrize("text", ["[a, b]", "just text", ""])
def test_a_yaml_document_that_is_not_a_mapping_is_not_a_kubeconfig(tmp_path: Path, text: str) -> None:
    path = tmp_path / "config"
    path.write_text(text)
    with pytest.raises(KubeconfigError, match=f"^{path} is not a kubeconfig$"):
        load_kubeconfig(path)


@pytest.fixture
async def hub_like_server(tmp_path: Path) -> AsyncIterator[tuple[Pki, str]]:
    """An HTTPS server answering /version only to the expected bearer token."""

    async def version(request: web.Request) -> web.Response:
        if bearer_token(request.headers) != TOKEN:
            return web.json_response({"kind": "Status", "apiVersion": "v1", "code": 401}, status=401)
        return web.json_response({"major": "1", "minor": "32", "gitVersion": "v1.32.0-gpufed"})

    pki = ensure_pki(tmp_path, hosts=[])
    app = web.Application()
    app.router.add_get("/version", version)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=pki.server_ssl_context())
    await site.start()
    try:
        yield pki, f"https://127.0.0.1:{runner.addresses[0][1]}"
    finally:
        await runner.cleanup()


async def kubectl(*args: str) -> tuple[int, str, str]:
    process = await asyncio.create_subprocess_exec(
        "kubectl", *args, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    async with asyncio.timeout(60):
        out, err = await process.communicate()
    assert process.returncode is not None
    return process.returncode, out.decode(), err.decode()


@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not installed")
@pytest.mark.parametrize(("token", "ok"), [(TOKEN, True), ("zzzzzz.0000000000000000", False)])
async def test_kubectl_reaches_the_tls_server_with_the_kubeconfig(
    hub_like_server: tuple[Pki, str], tmp_path: Path, token: str, ok: bool
) -> None:
    pki, url = hub_like_server
    path = tmp_path / "hub.kubeconfig"
    write_kubeconfig(path, server=url, ca_pem=pki.ca_pem, token=token, user="admin")

    code, out, err = await kubectl("--kubeconfig", str(path), "get", "--raw", "/version")

    if ok:
        assert code == 0, err
        assert json.loads(out)["gitVersion"] == "v1.32.0-gpufed"
    else:
        assert code != 0
        assert "must be logged in" in err
