"""Pytest settings for the what-if tests."""

from __future__ import annotations

import pytest


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "slow: replays the full openb trace (a few seconds)")
