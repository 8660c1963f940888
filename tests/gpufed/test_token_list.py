"""`gpufed token list` against a real hub: the ONE-TIME column says whether a one-time token is
spent, and never calls a reusable token in use "unused"."""

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


async def token_table(hub: Hub, capsys: pytest.CaptureFixture[str]) -> dict[str, dict[str, str]]:
    """``gpufed token list`` (the real command line) as {name: {column: cell}}."""
    assert await asyncio.to_thread(main, ["token", "list", "--kubeconfig", str(hub.kubeconfig_path)]) == 0
    header, *lines = capsys.readouterr().out.splitlines()
    starts = [header.index(column) for column in header.split()]
    table = {}
    for line in lines:
        cells = [line[a:b].strip() for a, b in zip(starts, [*starts[1:], len(line)], strict=True)]
        row = dict(zip(header.split(), cells, strict=True))
        table[row["NAME"]] = row
    return table


async def test_token_list_says_which_one_time_tokens_are_spent(
    hub: Hub, capsys: pytest.CaptureFixture[str]
) -> None:
    assert hub.tokens is not None
    await hub.tokens.create(role=Role.VIEWER, name="alice")
    spent = await hub.tokens.create(role=Role.BOOTSTRAP, name="join-a", one_time=True)
    await hub.tokens.create(role=Role.BOOTSTRAP, name="join-b", one_time=True)
    await hub.tokens.consume_bootstrap(spent.token, cluster="gpu-a")

    table = await token_table(hub, capsys)
    assert "USED" not in table  # no column that reads False for a token in use
    assert table["alice"]["ONE-TIME"] == "no"
    assert table["join-a"]["ONE-TIME"] == "yes, spent (joined gpu-a)"
    assert table["join-b"]["ONE-TIME"] == "yes, unspent"
    # The admin token the command itself just used is reusable, so not "unused" either.
    admin = [row for row in table.values() if row["ROLE"] == "admin"]
    assert admin and all(row["ONE-TIME"] == "no" for row in admin)
