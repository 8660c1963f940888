"""The last line of defence: anything shaped like a credential is masked in every log line."""

from __future__ import annotations

import pytest

from gpufed.logging_setup import redact

TOKEN = "abcdef.0123456789abcdefghij"


@pytest.mark.parametrize(
    "line",
    [
        f"Authorization: Bearer {TOKEN}",
        f"gpufed agent --bootstrap-token {TOKEN} --hub https://h",
        f"gpufed agent --bootstrap-token={TOKEN}",
        f"GPUFED_BOOTSTRAP_TOKEN={TOKEN} gpufed agent --hub https://h",
        "GPUFED_BOOTSTRAP_TOKEN=not-token-shaped-but-secret gpufed agent",
        f'{{"token": "{TOKEN}"}}',
    ],
)
def test_credentials_are_masked(line: str) -> None:
    cleaned = redact(line)
    assert "<redacted>" in cleaned
    assert "0123456789" not in cleaned
    assert "not-token-shaped-but-secret" not in cleaned


def test_a_token_file_path_is_not_a_secret() -> None:
    assert redact("gpufed agent --token-file /etc/gpufed/join-token") == (
        "gpufed agent --token-file /etc/gpufed/join-token"
    )
