"""kube's CEL format library (k8s.io/apiserver/pkg/cel/library format.go).

``format.named(name)`` is an optional format; ``format.dns1123Label()`` and its siblings are
the formats themselves; ``<format>.validate(s)`` is ``optional.none()`` for a valid string and
otherwise an optional list of kube's messages (the name checks of
:mod:`controlplane.apis.kube.names`, Go's url error for ``uri``, and for ``uuid``, ``byte``,
``date`` and ``datetime`` the schema ``format`` checks with kube's short messages). A format
travels between calls as a one-key map naming it. Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from cel import OptionalValue

from controlplane.apis.apiextensions.cel_url import uri_errors
from controlplane.apis.apiextensions.schema import format_ok
from controlplane.apis.kube.names import (
    dns_1035_errors,
    dns_label_errors,
    dns_subdomain_errors,
    label_value_errors,
    qualified_name_errors,
)

_FORMAT_KEY = "kubernetes.io/format"


def _mask_trailing_dash(name: str) -> str:
    """kube's maskTrailingDash, verbatim (a name meant as a prefix may end in a dash)."""
    return name[:-2] + "a" if len(name) > 1 and name.endswith("-") else name


def _prefixed(check: Callable[[str], list[str]]) -> Callable[[str], list[str]]:
    return lambda name: check(_mask_trailing_dash(name))


def _strfmt(fmt: str, message: str) -> Callable[[str], list[str]]:
    """A format kube checks with the OpenAPI ``format`` validators, as CRD schemas do."""
    return lambda text: [] if format_ok(fmt, text) else [message]


#: kube's formats by name: how each validates a string.
FORMATS: dict[str, Callable[[str], list[str]]] = {
    "dns1123Label": dns_label_errors,
    "dns1123Subdomain": dns_subdomain_errors,
    "dns1035Label": dns_1035_errors,
    "qualifiedName": qualified_name_errors,
    "dns1123LabelPrefix": _prefixed(dns_label_errors),
    "dns1123SubdomainPrefix": _prefixed(dns_subdomain_errors),
    "dns1035LabelPrefix": _prefixed(dns_1035_errors),
    "labelValue": label_value_errors,
    "uri": uri_errors,
    "uuid": _strfmt("uuid", "does not match the UUID format"),
    "byte": _strfmt("byte", "invalid base64"),
    "date": _strfmt("date", "invalid date"),
    "datetime": _strfmt("date-time", "invalid datetime"),
}


def _named(name: str) -> OptionalValue:
    return OptionalValue.of({_FORMAT_KEY: name}) if name in FORMATS else OptionalValue.none()


def _validate(fmt: Any, text: str) -> OptionalValue:
    if not (isinstance(fmt, dict) and fmt.get(_FORMAT_KEY) in FORMATS):
        raise ValueError(f"no such overload: expected a format, got {fmt!r}")
    errors = FORMATS[fmt[_FORMAT_KEY]](text)
    return OptionalValue.of(list(errors)) if errors else OptionalValue.none()


def _constant(name: str) -> Callable[[], dict[str, str]]:
    return lambda: {_FORMAT_KEY: name}


FUNCTIONS: dict[str, Any] = {
    "format.named": _named,
    "validate": _validate,
    **{f"format.{name}": _constant(name) for name in FORMATS},
}
