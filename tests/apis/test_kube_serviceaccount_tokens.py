"""Reading a service account token Secret as kube's token controller and legacy authenticator do:
which Secrets are tokens of which account (``IsServiceAccountToken``), and what is still to fill
(``secretUpdateNeeded``)."""

from __future__ import annotations

import base64
import datetime as dt
from typing import Any

import pytest

from controlplane.apis.kube.serviceaccounttokens import NeededData, last_used_due, needed_data, token_secret

CA = b"hub CA"


def secret(*, data: dict[str, bytes] | None = None, kind: str = "kubernetes.io/service-account-token",
           **annotations: str) -> dict[str, Any]:
    return {
        "type": kind,
        "metadata": {"name": "bot-token", "namespace": "team", "uid": "s-1", "annotations": annotations},
        "data": {key: base64.b64encode(value).decode() for key, value in (data or {}).items()},
    }


NAMED = {"kubernetes.io/service-account.name": "bot"}


@pytest.mark.parametrize(("annotations", "account", "uid", "belongs"), [
    (NAMED, "bot", "u-1", True),
    ({**NAMED, "kubernetes.io/service-account.uid": "u-1"}, "bot", "u-1", True),
    ({**NAMED, "kubernetes.io/service-account.uid": "u-1"}, "bot", "u-2", False),
    (NAMED, "other", "u-1", False),
])
def test_a_token_secret_belongs_to_the_account_it_names(
    annotations: dict[str, str], account: str, uid: str, belongs: bool
) -> None:
    held = token_secret(secret(**annotations))
    assert held is not None and held.belongs_to(account, uid) is belongs


@pytest.mark.parametrize("obj", [
    secret(kind="Opaque", **NAMED),
    secret(),
    secret(**{"kubernetes.io/service-account.name": ""}),
    None,
])
def test_other_secrets_are_no_token_secrets(obj: dict[str, Any] | None) -> None:
    assert token_secret(obj) is None


def test_the_view_reads_the_token_and_the_marks_the_authenticator_refuses() -> None:
    obj = secret(data={"token": b"abcdef.secret"}, **NAMED)
    obj["metadata"]["labels"] = {"kubernetes.io/legacy-token-invalid-since": "2026-01-01"}
    obj["metadata"]["deletionTimestamp"] = "2026-01-02T00:00:00Z"
    held = token_secret(obj)
    assert held is not None
    assert (held.token, held.deleting, held.invalidated, held.account_uid) == ("abcdef.secret", True, True, "")
    for unreadable in ("%%%", "QUFB" * 300):
        obj["data"]["token"] = unreadable
        assert token_secret(obj).token == ""  # type: ignore[union-attr]


@pytest.mark.parametrize(("data", "needed"), [
    ({}, NeededData(ca=True, namespace=True, token=True)),
    ({"token": b"t", "ca.crt": CA, "namespace": b"team"}, NeededData(ca=False, namespace=False, token=False)),
    ({"token": b"t", "ca.crt": b"old", "namespace": b"team"}, NeededData(ca=True, namespace=False, token=False)),
    ({"token": b"", "ca.crt": CA, "namespace": b"team"}, NeededData(ca=False, namespace=False, token=True)),
])
def test_only_what_is_missing_or_outdated_is_needed(data: dict[str, bytes], needed: NeededData) -> None:
    assert needed_data(secret(data=data, **NAMED), ca_pem=CA) == needed
    assert bool(needed) is (needed != NeededData(ca=False, namespace=False, token=False))


@pytest.mark.parametrize(("label", "due"), [
    (None, "2026-03-02"),
    ("2026-03-01", "2026-03-02"),
    ("2026-03-02", None),
    ("2026-03-03", None),  # a clock a little ahead
    ("2026-03-04", "2026-03-02"),
    ("not a day", "2026-03-02"),
])
def test_the_last_used_label_is_due_once_a_day_in_utc(label: str | None, due: str | None) -> None:
    obj = secret(**NAMED)
    if label is not None:
        obj["metadata"]["labels"] = {"kubernetes.io/legacy-token-last-used": label}
    held = token_secret(obj)
    assert held is not None
    now = dt.datetime(2026, 3, 1, 23, 30, tzinfo=dt.timezone(dt.timedelta(hours=-1)))  # 2026-03-02 00:30 UTC
    assert last_used_due(held, now=now) == due
