"""Reading a resource request's query parameters and DeleteOptions as kube's parameter codec
reads them: kube's 400 for a value that does not parse. Pure: no I/O beyond the request object.
"""

from __future__ import annotations

from typing import Any

from aiohttp import web

from controlplane.apiserver import codec, errors
from controlplane.apiserver.decoding import INT64_MAX
from controlplane.apiserver.validation import FieldValidation


def checked_delete_options(options: dict[str, Any]) -> dict[str, Any]:
    """``options`` when its fields have DeleteOptions' types; 400 naming the field otherwise
    (kube's decoder refuses e.g. ``"preconditions": "x"`` the same way)."""

    def wrong(field: str, expected: str, value: Any) -> errors.BadRequest:
        message = f"{field}: Invalid value: {codec.dumps(value).decode()[:80]}: must be {expected}"
        cause = errors.Cause(errors.CauseType.FIELD_VALUE_INVALID, f"must be {expected}", field)
        return errors.BadRequest(f"the DeleteOptions are not valid: {message}", causes=[cause])

    pre = options.get("preconditions")
    if pre is not None:
        if not isinstance(pre, dict):
            raise wrong("preconditions", "an object with uid and resourceVersion", pre)
        for key in ("uid", "resourceVersion"):
            if pre.get(key) is not None and not isinstance(pre[key], str):
                raise wrong(f"preconditions.{key}", "a string", pre[key])
    dry_run = options.get("dryRun")
    if dry_run is not None and not (isinstance(dry_run, list) and all(isinstance(v, str) for v in dry_run)):
        raise wrong("dryRun", "a list of strings", dry_run)
    policy = options.get("propagationPolicy")
    if policy is not None and not isinstance(policy, str):
        raise wrong("propagationPolicy", "a string", policy)
    orphan = options.get("orphanDependents")
    if orphan is not None and not isinstance(orphan, bool):
        raise wrong("orphanDependents", "a boolean", orphan)
    grace = options.get("gracePeriodSeconds")
    if grace is not None and (isinstance(grace, bool) or not isinstance(grace, int)):
        raise wrong("gracePeriodSeconds", "an integer", grace)
    return options


def field_validation(request: web.Request) -> FieldValidation:
    return FieldValidation.parse(request.query.get("fieldValidation"), default=FieldValidation.WARN)


def parameter_int64(value: str | None) -> int:
    """A query integer as kube's parameter codec reads it (Go's ``strconv.ParseInt``, whose error
    is kube's 400): any int64, 0 when absent."""
    if value in (None, ""):
        return 0
    assert value is not None
    digits = value[1:] if value[:1] in ("+", "-") else value
    if not digits or not all("0" <= c <= "9" for c in digits):
        raise errors.BadRequest(f'strconv.ParseInt: parsing "{value[:40]}": invalid syntax')
    parsed = int(value)
    if not -INT64_MAX - 1 <= parsed <= INT64_MAX:
        raise errors.BadRequest(f'strconv.ParseInt: parsing "{value[:40]}": value out of range')
    return parsed


def int_param(value: str | None, name: str) -> int:
    if value in (None, ""):
        return 0
    try:
        parsed = int(value)
    except ValueError:
        parsed = -1
    if not 0 <= parsed <= INT64_MAX:
        raise errors.BadRequest(
            f'{name}: Invalid value: "{value[:40]}": must be a non-negative integer of at most 64 bits'
        )
    return parsed


def bool_param(value: str | None, name: str) -> bool | None:
    if value is None:
        return None
    if value in ("true", "1", "True"):
        return True
    if value in ("false", "0", "False"):
        return False
    raise errors.BadRequest(f'{name}: Invalid value: "{value}": must be true or false')
