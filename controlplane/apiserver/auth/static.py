"""One fixed admin token, for servers with a single user (a simulated member cluster).

The token is generated on first start, kept in the server's state dir (mode 0600) and
compared in constant time.
"""

from __future__ import annotations

import hmac
import os
import secrets
from pathlib import Path

from controlplane.apiserver.identity import Role, UserInfo


class StaticTokenAuthenticator:
    def __init__(self, token: str, *, user: str = "cluster-admin") -> None:
        self._token = token.encode()
        self._user = UserInfo(name=user, role=Role.ADMIN)

    async def authenticate(self, token: str) -> UserInfo | None:
        return self._user if hmac.compare_digest(token.encode(), self._token) else None


def load_or_create_token(path: Path) -> str:
    """The token in ``path``, created (0600) with 32 random bytes the first time."""
    try:
        existing = path.read_text(encoding="utf-8").strip()
    except FileNotFoundError:
        existing = ""
    if existing:
        return existing
    token = secrets.token_urlsafe(32)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as file:
        file.write(token + "\n")
    return token
