"""kube-apiserver's ``--audit-log-format=legacy``: one line of text per event (kube's
``audit.EventString``), e.g.::

    2026-01-02T03:04:05.123456Z AUDIT: id="5d5c..." stage="ResponseComplete" ip="127.0.0.1" method="create"
    user="alice" groups="\"team-a\",\"system:authenticated\"" as="<self>" asgroups="<lookup>"
    user-agent="kubectl/v1.32.0" namespace="default" uri="/api/v1/namespaces/default/configmaps" response="201"

(on one line). In: an event (a dict). Out: its line, without the newline.
"""

from __future__ import annotations

import json
from typing import Any


def _quoted(value: str) -> str:
    """Go's ``%q`` of a string (as JSON quotes it, for the characters events hold)."""
    return json.dumps(value, ensure_ascii=False)


def _quoted_list(values: list[str]) -> str:
    return ",".join(_quoted(value) for value in values)


def _rfc3339_nano(timestamp: str) -> str:
    """Go's ``time.RFC3339Nano`` of a UTC timestamp: the fraction without its trailing zeros."""
    whole, dot, fraction = timestamp.removesuffix("Z").partition(".")
    fraction = fraction.rstrip("0")
    return f"{whole}.{fraction}Z" if dot and fraction else f"{whole}Z"


def event_string(event: dict[str, Any]) -> str:
    user = event.get("user") or {}
    username, groups = "<none>", "<none>"
    if user.get("username"):
        username = user["username"]
        if user.get("groups"):
            groups = _quoted_list(user["groups"])
    as_user, as_groups = "<self>", "<lookup>"
    if (impersonated := event.get("impersonatedUser")) is not None:
        as_user = impersonated.get("username", "")
        if impersonated.get("groups") is not None:
            as_groups = _quoted_list(impersonated["groups"])
    namespace = (event.get("objectRef") or {}).get("namespace") or "<none>"
    status = event.get("responseStatus")
    response = str(status.get("code", 0)) if status is not None else "<deferred>"
    ips = event.get("sourceIPs") or []
    ip = ips[0] if ips else "<unknown>"
    fields = (("id", event.get("auditID", "")), ("stage", event.get("stage", "")), ("ip", ip),
              ("method", event.get("verb", "")), ("user", username), ("groups", groups), ("as", as_user),
              ("asgroups", as_groups), ("user-agent", event.get("userAgent", "")), ("namespace", namespace),
              ("uri", event.get("requestURI", "")))
    quoted = " ".join(f"{name}={_quoted(value)}" for name, value in fields)
    return f'{_rfc3339_nano(event.get("requestReceivedTimestamp", ""))} AUDIT: {quoted} response="{response}"'
