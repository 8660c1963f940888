"""Kubeconfig files for the hub: how kubectl, the ``gpufed`` command and agents find it.

:func:`write_kubeconfig` writes a standard single-context kubeconfig (server URL, the
hub's CA as ``certificate-authority-data``, a bearer token) readable only by its owner;
:func:`load_kubeconfig` reads one back, following ``current-context`` as kubectl does.

In: a path and the connection details. Out: a 0600 YAML file / :class:`HubCredentials`.
Kubeconfigs carry a secret: never log their contents.
"""

from __future__ import annotations

import base64
import binascii
import os
import tempfile
from pathlib import Path
from typing import Any, NamedTuple

import yaml

from controlplane.yamlfile import read_yaml_mapping


class KubeconfigError(ValueError):
    """The kubeconfig is missing a field gpufed needs, or is not a kubeconfig."""


class HubCredentials(NamedTuple):
    server: str
    ca_pem: bytes
    token: str


def write_kubeconfig(
    path: Path,
    *,
    server: str,
    ca_pem: bytes,
    token: str,
    user: str,
    cluster_name: str = "gpufed-hub",
    context: str = "gpufed",
) -> None:
    """Write (atomically, mode 0600) a kubeconfig with one cluster, user and context."""
    document = {
        "apiVersion": "v1",
        "kind": "Config",
        "preferences": {},
        "clusters": [
            {
                "name": cluster_name,
                "cluster": {
                    "server": server,
                    "certificate-authority-data": base64.b64encode(ca_pem).decode("ascii"),
                },
            }
        ],
        "users": [{"name": user, "user": {"token": token}}],
        "contexts": [{"name": context, "context": {"cluster": cluster_name, "user": user}}],
        "current-context": context,
    }
    text = yaml.safe_dump(document, sort_keys=False)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as file:
            file.write(text)
            file.flush()
            os.fsync(file.fileno())
        os.chmod(tmp, 0o600)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def load_kubeconfig(path: Path, *, context: str | None = None, token_required: bool = True) -> HubCredentials:
    """Server URL, CA PEM and bearer token of ``context`` (default: ``current-context``).

    Supports ``certificate-authority-data`` or a ``certificate-authority`` file, and
    ``token`` or ``tokenFile``; relative file paths resolve against the kubeconfig's
    directory, as kubectl resolves them. Without ``token_required``, a user without a token
    has the token ``""``.
    """
    cluster, user = _cluster_and_user(path, context)
    server = _str(cluster, "server", path=path)
    base = path.parent
    if "certificate-authority-data" in cluster:
        try:
            ca_pem = base64.b64decode(_str(cluster, "certificate-authority-data", path=path), validate=True)
        except binascii.Error as exc:
            raise KubeconfigError(f"{path}: certificate-authority-data is not base64") from exc
    elif "certificate-authority" in cluster:
        ca_pem = (base / _str(cluster, "certificate-authority", path=path)).read_bytes()
    else:
        raise KubeconfigError(f"{path}: cluster has no certificate-authority-data")

    if "token" in user:
        token = _str(user, "token", path=path)
    elif "tokenFile" in user:
        token = (base / _str(user, "tokenFile", path=path)).read_text(encoding="utf-8").strip()
    elif token_required:
        raise KubeconfigError(f"{path}: user has no bearer token")
    else:
        token = ""
    return HubCredentials(server=server, ca_pem=ca_pem, token=token)


def load_client_certificate(path: Path, *, context: str | None = None) -> tuple[bytes, bytes] | None:
    """The PEM certificate and key of ``context``'s user (``client-certificate(-data)`` and
    ``client-key(-data)``, files relative to the kubeconfig's directory, as kubectl reads them);
    None when the user has neither."""
    _, user = _cluster_and_user(path, context)
    pems: list[bytes] = []
    for field in ("client-certificate", "client-key"):
        if f"{field}-data" in user:
            try:
                pems.append(base64.b64decode(_str(user, f"{field}-data", path=path), validate=True))
            except binascii.Error as exc:
                raise KubeconfigError(f"{path}: {field}-data is not base64") from exc
        elif field in user:
            pems.append((path.parent / _str(user, field, path=path)).read_bytes())
    if not pems:
        return None
    if len(pems) == 1:
        raise KubeconfigError(f"{path}: client-certificate and client-key go together: the user has only one")
    return pems[0], pems[1]


def context_namespace(path: Path, *, context: str | None = None) -> str:
    """The ``namespace`` of ``context`` (default: ``current-context``), as kubectl takes it when
    ``-n`` is not given; ``""`` when the context sets none."""
    namespace = _context(_document(path), path, context).get("namespace")
    return namespace if isinstance(namespace, str) else ""


def _document(path: Path) -> dict[str, Any]:
    return read_yaml_mapping(path, not_mapping=" is not a kubeconfig", error=KubeconfigError, quote_error=False)


def _context(document: dict[str, Any], path: Path, context: str | None) -> dict[str, Any]:
    context_name = context or document.get("current-context")
    if not context_name:
        raise KubeconfigError(f"{path} has no current-context")
    return _named(document, "contexts", context_name, path=path, field="context")


def _cluster_and_user(path: Path, context: str | None) -> tuple[dict[str, Any], dict[str, Any]]:
    document = _document(path)
    ctx = _context(document, path, context)
    cluster = _named(document, "clusters", _str(ctx, "cluster", path=path), path=path, field="cluster")
    user = _named(document, "users", _str(ctx, "user", path=path), path=path, field="user")
    return cluster, user


def _named(document: dict[str, Any], section: str, name: str, *, path: Path, field: str) -> dict[str, Any]:
    for entry in document.get(section) or []:
        if isinstance(entry, dict) and entry.get("name") == name and isinstance(entry.get(field), dict):
            found: dict[str, Any] = entry[field]
            return found
    raise KubeconfigError(f"{path}: no {field} named {name!r} in {section}")


def _str(mapping: dict[str, Any], key: str, *, path: Path) -> str:
    value = mapping.get(key)
    if not isinstance(value, str) or not value:
        raise KubeconfigError(f"{path}: {key!r} is missing or not a string")
    return value
