"""The agent's connection to the hub: CA pinning, the bootstrap token exchange, the credential.

First start: fetch the hub's CA from ``/.well-known/gpufed/ca.crt`` without credentials, accept it
only if its public-key hash equals ``--hub-ca-hash`` (:mod:`member_agent.trust`), then trade the
one-time bootstrap token for an agent credential scoped to this cluster
(``POST /apis/auth.gpufed.io/v1alpha1/clusterjoins`` with ``{"clusterName": ...}``). The CA and
the credential are kept in the state directory (mode 0600), so later starts need neither the
bootstrap token nor a network round trip to trust the hub.

In: hub URL, CA hash, bootstrap token, cluster name, state directory. Out: a
:class:`~member_agent.kubeapi.KubeApi` for the hub (kubernetes_asyncio ``ApiClient`` with the
pinned CA and the bearer token). Tokens are never logged.
"""

from __future__ import annotations

import json
import logging
import os
import ssl
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
from kubernetes_asyncio.client import ApiClient, Configuration

from controlplane.apis.constants import CA_PATH, JOIN_PATH
from controlplane.pki import private_directory
from member_agent.kubeapi import ApiError, KubeApi, Unavailable, error_from_status
from member_agent.reachability import Reachability, Unreachable, connection_problem
from member_agent.trust import TrustError, verify_ca

logger = logging.getLogger(__name__)

CA_FILE = "hub-ca.crt"
CREDENTIAL_FILE = "credential.json"
DEFAULT_TIMEOUT = 30.0


class JoinError(Exception):
    """The hub refused the bootstrap token or its answer carried no credential."""


@dataclass(frozen=True, slots=True)
class Credential:
    hub: str
    cluster_name: str
    token: str = field(repr=False)


def _write_private(path: Path, data: bytes) -> None:
    private_directory(path.parent)
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as handle:
        handle.write(data)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(tmp, path)


class StateDir:
    """The agent's files: the pinned hub CA and the agent credential."""

    def __init__(self, path: Path) -> None:
        self.path = path

    @property
    def ca_file(self) -> Path:
        return self.path / CA_FILE

    def load_credential(self, *, hub: str, cluster_name: str) -> Credential | None:
        try:
            data = json.loads((self.path / CREDENTIAL_FILE).read_text())
        except (OSError, ValueError):
            return None
        if data.get("hub") != hub or data.get("clusterName") != cluster_name or not data.get("token"):
            return None
        return Credential(hub=hub, cluster_name=cluster_name, token=str(data["token"]))

    def save_credential(self, credential: Credential) -> None:
        body = {"hub": credential.hub, "clusterName": credential.cluster_name, "token": credential.token}
        _write_private(self.path / CREDENTIAL_FILE, json.dumps(body).encode())

    def forget_credential(self) -> None:
        (self.path / CREDENTIAL_FILE).unlink(missing_ok=True)

    def load_ca(self, expected_hash: str) -> bytes | None:
        try:
            return verify_ca(self.ca_file.read_bytes(), expected_hash)
        except (OSError, TrustError):
            return None

    def save_ca(self, ca_pem: bytes) -> None:
        _write_private(self.ca_file, ca_pem)


def _is_tls(url: str) -> bool:
    return url.lower().startswith("https://")


async def fetch_hub_ca(hub: str, ca_hash: str, *, request_timeout: float = DEFAULT_TIMEOUT) -> bytes:
    """The hub's CA, verified against ``ca_hash`` (the connection itself is not yet trusted)."""
    url = hub.rstrip("/") + CA_PATH
    try:
        async with (
            aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=request_timeout)) as session,
            session.get(url, ssl=False) as response,
        ):
            body = await response.read()
            if response.status != 200:
                raise error_from_status(response.status, body)
    except (aiohttp.ClientError, TimeoutError, OSError) as exc:
        raise Unreachable(hub.rstrip("/"), connection_problem(exc), what="hub") from exc
    return verify_ca(body, ca_hash)


def _ssl_context(ca_pem: bytes | None) -> ssl.SSLContext | bool:
    if ca_pem is None:
        return True
    return ssl.create_default_context(cadata=ca_pem.decode())


def _token_from_answer(answer: Any) -> str | None:
    if not isinstance(answer, dict):
        return None
    for holder in (answer, answer.get("status"), answer.get("spec")):
        if isinstance(holder, dict) and isinstance(holder.get("token"), str) and holder["token"]:
            return str(holder["token"])
    return None


async def exchange_bootstrap_token(
    hub: str,
    *,
    ca_pem: bytes | None,
    bootstrap_token: str,
    cluster_name: str,
    request_timeout: float = DEFAULT_TIMEOUT,
) -> str:
    """Trade the one-time bootstrap token for an agent token scoped to ``cluster_name``."""
    url = hub.rstrip("/") + JOIN_PATH
    body = {"apiVersion": "auth.gpufed.io/v1alpha1", "kind": "ClusterJoin", "clusterName": cluster_name}
    headers = {"Authorization": f"Bearer {bootstrap_token}", "Accept": "application/json"}
    try:
        async with (
            aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=request_timeout)) as session,
            session.post(url, json=body, headers=headers, ssl=_ssl_context(ca_pem)) as response,
        ):
            data = await response.read()
            status = response.status
    except (aiohttp.ClientError, TimeoutError, OSError) as exc:
        raise Unreachable(hub.rstrip("/"), connection_problem(exc), what="hub") from exc
    if not 200 <= status < 300:
        error = error_from_status(status, data)
        if isinstance(error, Unavailable):
            raise error
        raise JoinError(f"the hub refused to register cluster {cluster_name!r}: {error.message}") from error
    try:
        token = _token_from_answer(json.loads(data))
    except ValueError:
        token = None
    if not token:
        raise JoinError("the hub's answer to the join request carried no token")
    return token


def hub_api(
    hub: str, *, ca_file: Path | None, token: str, timeout: float = DEFAULT_TIMEOUT,
    reachability: Reachability | None = None,
) -> KubeApi:
    configuration = Configuration(host=hub.rstrip("/"))
    if ca_file is not None:
        configuration.ssl_ca_cert = str(ca_file)
    configuration.api_key = {"BearerToken": token}
    configuration.api_key_prefix = {"BearerToken": "Bearer"}
    return KubeApi(ApiClient(configuration=configuration), timeout=timeout, reachability=reachability)


async def connect(
    *,
    hub: str,
    ca_hash: str | None,
    bootstrap_token: str | None,
    cluster_name: str,
    state: StateDir,
    request_timeout: float = DEFAULT_TIMEOUT,
    reachability: Reachability | None = None,
) -> KubeApi:
    """A hub client with a working credential, joining the hub first if needed.

    A stored credential the hub no longer accepts (401) is replaced by a fresh exchange when a
    bootstrap token is at hand; without one, :class:`JoinError` says what to do. A hub that
    cannot be reached is an :class:`Unreachable`; the client notes each failure to reach it in
    ``reachability``.
    """
    ca_pem: bytes | None = None
    if _is_tls(hub):
        if not ca_hash:
            raise TrustError("--hub-ca-hash is required for an https hub")
        ca_pem = state.load_ca(ca_hash)
        if ca_pem is None:
            ca_pem = await fetch_hub_ca(hub, ca_hash, request_timeout=request_timeout)
            state.save_ca(ca_pem)
            logger.info("pinned the hub CA (%s)", ca_hash)
    ca_file = state.ca_file if ca_pem is not None else None

    credential = state.load_credential(hub=hub, cluster_name=cluster_name)
    if credential is not None:
        api = hub_api(hub, ca_file=ca_file, token=credential.token, timeout=request_timeout, reachability=reachability)
        try:
            await api.get("/version")
            # /version may be public: prove the token with a request only an agent may make.
            await api.get(f"/apis/cluster.gpufed.io/v1alpha1/clusters/{cluster_name}")
            return api
        except ApiError as exc:
            if exc.code == 404:
                return api
            if exc.code != 401:
                await api.close()
                raise
            await api.close()
            logger.warning("the stored agent credential for cluster %s was rejected by the hub", cluster_name)
            state.forget_credential()
    if not bootstrap_token:
        raise JoinError(
            f"cluster {cluster_name!r} has no credential in {state.path}; run `gpufed token create "
            f"--cluster {cluster_name} --print-join-command` on the hub and give the agent the token it "
            "prints ($GPUFED_BOOTSTRAP_TOKEN or --token-file)"
        )
    token = await exchange_bootstrap_token(
        hub,
        ca_pem=ca_pem,
        bootstrap_token=bootstrap_token,
        cluster_name=cluster_name,
        request_timeout=request_timeout,
    )
    state.save_credential(Credential(hub=hub, cluster_name=cluster_name, token=token))
    logger.info("joined the hub as cluster %s; credential stored in %s", cluster_name, state.path)
    return hub_api(hub, ca_file=ca_file, token=token, timeout=request_timeout, reachability=reachability)
