"""kube's string formats are Go regular expressions anchored with ``^...$``, where ``$`` (without
the multi-line flag) is the end of the text: a value with a trailing newline does not match.
Python's ``$`` also matches before a final newline, so each format must hold to the very end."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from controlplane.apis.kube import names
from member_agent.config import _DNS_LABEL
from policies.overriders import _TAG_RE


@pytest.mark.parametrize(
    ("check", "value"),
    [
        (names.dns_label_errors, "web"),
        (names.dns_subdomain_errors, "web.example.com"),
        (names.dns_1035_errors, "web"),
        (names.qualified_name_errors, "app.kubernetes.io/name"),
        (names.label_value_errors, "gpu"),
        (names.port_name_errors, "http"),
        (names.env_var_name_errors, "HF_TOKEN"),
        (names.config_key_errors, "config.yaml"),
        (names.percent_errors, "25%"),
        (names.c_identifier_errors, "value"),
    ],
)
def test_a_value_kube_accepts_is_refused_with_a_trailing_newline(check: Callable[[str], list[str]], value: str) -> None:
    assert check(value) == []
    assert check(value + "\n") != []


def test_the_agents_and_the_overriders_formats_end_at_the_end_too() -> None:
    assert _DNS_LABEL.match("onprem-a100") and not _DNS_LABEL.match("onprem-a100\n")
    assert _TAG_RE.match("v1.2") and not _TAG_RE.match("v1.2\n")


def test_a_qualified_name_with_more_than_one_slash_has_kubes_one_error_of_the_whole() -> None:
    """``IsQualifiedName`` splits on every ``/``: three parts are one error, not a prefix's."""
    assert names.qualified_name_errors("a/b/c") == [
        "a qualified name must consist of alphanumeric characters, '-', '_' or '.', and must start and end with "
        "an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is "
        "'([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]') with an optional DNS subdomain prefix and '/' "
        "(e.g. 'example.com/MyName')"
    ]
