"""kube's string formats (k8s.io/apimachinery ``pkg/util/validation``), with kube's messages.

Each ``*_errors`` function returns the messages kube's ``Is*`` function returns for a value
(empty: the value is fine); callers wrap them in field errors with the path they check.
The same strings recur in every object (``app``, ``nvidia.com/gpu``, ``http``), so answers
are memoised in a bounded cache (hostile input cannot grow it without limit).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from functools import lru_cache, wraps

_DNS_LABEL_FMT = "[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_DNS_SUBDOMAIN_FMT = _DNS_LABEL_FMT + "(\\." + _DNS_LABEL_FMT + ")*"
_DNS_1035_FMT = "[a-z]([-a-z0-9]*[a-z0-9])?"
_QUALIFIED_NAME_FMT = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
_LABEL_VALUE_FMT = "(" + _QUALIFIED_NAME_FMT + ")?"
_CONFIG_KEY_FMT = "[-._a-zA-Z0-9]+"
_PERCENT_FMT = "[0-9]+%"
_C_IDENTIFIER_FMT = "[A-Za-z_][A-Za-z0-9_]*"

DNS_LABEL = re.compile(f"^{_DNS_LABEL_FMT}\\Z")
DNS_SUBDOMAIN = re.compile(f"^{_DNS_SUBDOMAIN_FMT}\\Z")
DNS_1035 = re.compile(f"^{_DNS_1035_FMT}\\Z")
_QUALIFIED_NAME = re.compile(f"^{_QUALIFIED_NAME_FMT}\\Z")
_LABEL_VALUE = re.compile(f"^{_LABEL_VALUE_FMT}\\Z")
_CONFIG_KEY = re.compile(f"^{_CONFIG_KEY_FMT}\\Z")
_PERCENT = re.compile(f"^{_PERCENT_FMT}\\Z")
_C_IDENTIFIER = re.compile(f"^{_C_IDENTIFIER_FMT}\\Z")
_PORT_NAME_CHARS = re.compile("^[-a-z0-9]+\\Z")
_PORT_NAME_LETTER = re.compile("[a-z]")


def _memoised(check: Callable[[str], list[str]]) -> Callable[[str], list[str]]:
    cached = lru_cache(maxsize=4096)(lambda value: tuple(check(value)))

    @wraps(check)
    def memo(value: str) -> list[str]:
        return list(cached(value))

    return memo


def regex_error(message: str, fmt: str, *examples: str) -> str:
    """``RegexError``: the message, examples and the regex kube validated with."""
    if not examples:
        return f"{message} (regex used for validation is '{fmt}')"
    shown = " or ".join(f"'{example}', " for example in examples)
    return f"{message} (e.g. {shown}regex used for validation is '{fmt}')"


def max_len_error(length: int) -> str:
    return f"must be no more than {length} characters"


def inclusive_range_error(low: int, high: int) -> str:
    return f"must be between {low} and {high}, inclusive"


_DNS_LABEL_MESSAGE = (
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', "
    "and must start and end with an alphanumeric character"
)
_DNS_SUBDOMAIN_MESSAGE = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', "
    "and must start and end with an alphanumeric character"
)
_DNS_1035_MESSAGE = (
    "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an "
    "alphabetic character, and end with an alphanumeric character"
)
QUALIFIED_NAME_MESSAGE = regex_error(
    "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end "
    "with an alphanumeric character",
    _QUALIFIED_NAME_FMT, "MyName", "my.name", "123-abc",
)
_MANY_SLASHES_MESSAGE = (
    regex_error(
        "a qualified name must consist of alphanumeric characters, '-', '_' or '.', and must start and end "
        "with an alphanumeric character",
        _QUALIFIED_NAME_FMT, "MyName", "my.name", "123-abc",
    )
    + " with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"
)
LABEL_VALUE_MESSAGE = regex_error(
    "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', "
    "and must start and end with an alphanumeric character",
    _LABEL_VALUE_FMT, "MyValue", "my_value", "12345",
)


#: The whole messages of a value that does not match the format (examples and regex included).
DNS_LABEL_REGEX_MESSAGE = regex_error(_DNS_LABEL_MESSAGE, _DNS_LABEL_FMT, "my-name", "123-abc")
DNS_SUBDOMAIN_REGEX_MESSAGE = regex_error(_DNS_SUBDOMAIN_MESSAGE, _DNS_SUBDOMAIN_FMT, "example.com")
DNS_1035_REGEX_MESSAGE = regex_error(_DNS_1035_MESSAGE, _DNS_1035_FMT, "my-name", "abc-123")


@_memoised
def dns_label_errors(value: str) -> list[str]:
    """``IsDNS1123Label``."""
    errors = [max_len_error(63)] if len(value) > 63 else []
    if not DNS_LABEL.match(value):
        if DNS_SUBDOMAIN.match(value):
            errors.append("must not contain dots")
        else:
            errors.append(DNS_LABEL_REGEX_MESSAGE)
    return errors


def path_segment_errors(name: str) -> list[str]:
    """``IsValidPathSegmentName``: a name that can stand as one segment of a URL path."""
    if name in (".", ".."):
        return [f"may not be '{name}'"]
    return [f"may not contain '{bad}'" for bad in ("/", "%") if bad in name]


def path_segment_prefix_errors(prefix: str) -> list[str]:
    """``IsValidPathSegmentPrefix``: a prefix (a ``generateName``) that can begin one segment of a
    URL path (``.`` and ``..`` can, a name is made longer)."""
    return [f"may not contain '{bad}'" for bad in ("/", "%") if bad in prefix]


def format_errors(value: str, pattern: re.Pattern[str], max_len: int, message: str) -> list[str]:
    """The messages of a value that must match ``pattern`` within ``max_len`` characters."""
    errors = [max_len_error(max_len)] if len(value) > max_len else []
    if not pattern.match(value):
        errors.append(message)
    return errors


@_memoised
def dns_subdomain_errors(value: str) -> list[str]:
    """``IsDNS1123Subdomain``."""
    return format_errors(value, DNS_SUBDOMAIN, 253, DNS_SUBDOMAIN_REGEX_MESSAGE)


@_memoised
def dns_1035_errors(value: str) -> list[str]:
    """``IsDNS1035Label``."""
    return format_errors(value, DNS_1035, 63, DNS_1035_REGEX_MESSAGE)


@_memoised
def qualified_name_errors(key: str) -> list[str]:
    """kube's ``IsQualifiedName``: an optional DNS-subdomain prefix and a 63-char name (more than
    one ``/``: one error, of the whole)."""
    if key.count("/") > 1:
        return [_MANY_SLASHES_MESSAGE]
    errors: list[str] = []
    prefix, slash, name = key.rpartition("/")
    if slash:
        if not prefix:
            errors.append("prefix part must be non-empty")
        elif len(prefix) > 253 or not DNS_SUBDOMAIN.match(prefix):
            errors.append("prefix part " + _DNS_SUBDOMAIN_MESSAGE)
    if not name:
        errors.append("name part must be non-empty")
    elif len(name) > 63:
        errors.append("name part must be no more than 63 characters")
    if not _QUALIFIED_NAME.match(name):  # as in kube, an empty or long name gets this one too
        errors.append(QUALIFIED_NAME_MESSAGE)
    return errors


@_memoised
def label_value_errors(value: str) -> list[str]:
    """``IsValidLabelValue``."""
    errors: list[str] = []
    if len(value) > 63:
        errors.append(max_len_error(63))
    if not _LABEL_VALUE.match(value):
        errors.append(LABEL_VALUE_MESSAGE)
    return errors


@_memoised
def port_name_errors(port: str) -> list[str]:
    """``IsValidPortName``: an IANA service name."""
    errors = [max_len_error(15)] if len(port) > 15 else []
    if not _PORT_NAME_CHARS.match(port):
        errors.append("must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)")
    if not _PORT_NAME_LETTER.search(port):
        errors.append("must contain at least one letter (a-z)")
    if "--" in port:
        errors.append("must not contain consecutive hyphens")
    if port and (port[0] == "-" or port[-1] == "-"):
        errors.append("must not begin or end with a hyphen")
    return errors


def port_number_errors(port: int) -> list[str]:
    """``IsValidPortNum``."""
    return [] if 1 <= port <= 65535 else [inclusive_range_error(1, 65535)]


@_memoised
def env_var_name_errors(name: str) -> list[str]:
    """``IsRelaxedEnvVarName`` (kube 1.32 enables RelaxedEnvironmentVariableValidation)."""
    errors = ["environment variable name must be non-empty"] if not name else []
    if any(ord(ch) > 126 or ord(ch) < 32 or ch == "=" for ch in name):
        errors.append("a valid environment variable name must consist only of printable ASCII characters other than '='")
    return errors


def _chdir_prefix_errors(value: str) -> list[str]:
    if value == ".":
        return ["must not be '.'"]
    if value == "..":
        return ["must not be '..'"]
    if value.startswith(".."):
        return ["must not start with '..'"]
    return []


@_memoised
def config_key_errors(key: str) -> list[str]:
    """``IsConfigMapKey``: a key of a ConfigMap's or Secret's data."""
    errors = [max_len_error(253)] if len(key) > 253 else []
    if not _CONFIG_KEY.match(key):
        errors.append(
            regex_error(
                "a valid config key must consist of alphanumeric characters, '-', '_' or '.'",
                _CONFIG_KEY_FMT, "key.name", "KEY_NAME", "key-name",
            )
        )
    return errors + _chdir_prefix_errors(key)


def percent_errors(value: str) -> list[str]:
    """``IsValidPercent``."""
    if _PERCENT.match(value):
        return []
    return [regex_error("a valid percent string must be a numeric string followed by an ending '%'", _PERCENT_FMT, "1%", "93%")]


def c_identifier_errors(value: str) -> list[str]:
    """``IsCIdentifier``."""
    if _C_IDENTIFIER.match(value):
        return []
    return [
        regex_error(
            "a valid C identifier must start with alphabetic character or '_', followed by a string of "
            "alphanumeric characters or '_'",
            _C_IDENTIFIER_FMT, "my_name", "MY_NAME", "MyName",
        )
    ]
