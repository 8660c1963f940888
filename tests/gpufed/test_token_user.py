"""`gpufed token create --user NAME --group G`: a token that carries a user and groups for RBAC."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from controlplane.apiserver.identity import Role
from controlplane.hub import Hub
from controlplane.hubconfig import HubConfig
from gpufed.cli import main


@pytest.fixture
async def hub(tmp_path: Path) -> AsyncIterator[Hub]:
    async with Hub(HubConfig(state_dir=tmp_path / "hub", port=0)) as running:
        yield running


async def test_a_user_token_carries_its_name_and_groups(hub: Hub, capsys: pytest.CaptureFixture[str]) -> None:
    assert hub.tokens is not None
    kubeconfig = str(hub.kubeconfig_path)
    args = ["token", "create", "--user", "alice", "--group", "team-a", "--group", "gpu-users", "--kubeconfig", kubeconfig]
    assert await asyncio.to_thread(main, args) == 0
    token = capsys.readouterr().out.strip()
    user = await hub.tokens.authenticate(token)
    assert user is not None
    assert (user.name, user.role, user.groups) == ("alice", Role.USER, ("team-a", "gpu-users", "system:authenticated"))

    assert await asyncio.to_thread(main, ["token", "list", "--kubeconfig", kubeconfig]) == 0
    header, *lines = capsys.readouterr().out.splitlines()
    assert "GROUPS" in header.split()
    alice = next(line for line in lines if " alice " in line)
    assert "team-a,gpu-users" in alice and " user " in alice


def test_groups_belong_to_user_tokens_only(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A usage error (exit status 2), refused before any hub is asked."""
    args = ["token", "create", "--role", "admin", "--group", "team-a", "--kubeconfig", str(tmp_path / "missing")]
    with pytest.raises(SystemExit) as exited:
        main(args)
    assert exited.value.code == 2
    assert "gpufed token create: error: --user and --group make a user token" in capsys.readouterr().err
