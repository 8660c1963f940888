"""A write's options read from its request and checked as kube-apiserver's handlers check them,
before the object: every problem a cause of one 422 naming the options' kind (the checks
themselves are :mod:`controlplane.apis.kube.requestoptions`).

- create and update: ``CreateOptions`` / ``UpdateOptions`` from the query (``fieldManager``,
  ``dryRun``, ``fieldValidation``), a computed create's (access reviews, TokenRequest) too;
- patch: ``PatchOptions`` from the query, where ``force`` is an apply's only and an apply must
  name its ``fieldManager``;
- delete and deletecollection: ``DeleteOptions`` from the body when the request has one (the
  query is not read at all then), from the query otherwise.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web
from multidict import MultiMapping

from controlplane.apis.kube.requestoptions import (
    delete_options_errors,
    patch_options_errors,
    write_options_errors,
)
from controlplane.apiserver import codec, errors
from controlplane.apiserver.patches import PatchType
from controlplane.apiserver.queryparams import parameter_int64, query_optional_bool


def checked_write_options(request: web.Request, kind: str) -> None:
    """422 ``<kind>.meta.k8s.io "" is invalid`` when a create's or an update's options are not
    kube's (``kind``: ``CreateOptions`` or ``UpdateOptions``)."""
    query = request.query
    found = write_options_errors(
        manager=query.get("fieldManager", ""), dry_run=query.getall("dryRun", []),
        field_validation=query.get("fieldValidation", ""),
    )
    if found:
        raise errors.invalid_options(kind, found)


def create_options_checked(
    handler: Callable[[web.Request], Awaitable[web.StreamResponse]],
) -> Callable[[web.Request], Awaitable[web.StreamResponse]]:
    """``handler`` of a create computed by a handler of its own (an access review, a TokenRequest),
    its CreateOptions checked first: kube's create handler checks them for every create, stored or
    not (a ``dryRun`` of ``All`` is then the handler's to honour)."""

    async def checked(request: web.Request) -> web.StreamResponse:
        checked_write_options(request, "CreateOptions")
        return await handler(request)

    return checked


def force_of(request: web.Request, patch_type: PatchType) -> bool:
    """A patch's ``force``, once its PatchOptions pass kube's ``ValidatePatchOptions`` (its 422
    otherwise: ``force`` at all on any other patch than an apply, ``force=false`` too; an apply
    without ``fieldManager``; the checks of every write)."""
    query = request.query
    force = query_optional_bool(query, "force")
    found = patch_options_errors(
        apply=patch_type is PatchType.APPLY, force_given=force is not None, manager=query.get("fieldManager", ""),
        dry_run=query.getall("dryRun", []), field_validation=query.get("fieldValidation", ""),
    )
    if found:
        raise errors.invalid_options("PatchOptions", found)
    return bool(force)


def checked_delete_options(query: MultiMapping[str], body: dict[str, Any] | None) -> dict[str, Any]:
    """A delete's DeleteOptions as kube's delete handlers read them: the decoded ``body`` when the
    request has one (its fields' types checked, 400), the query's parameters otherwise (a
    ``gracePeriodSeconds`` that is no int64 is a 400); then ``ValidateDeleteOptions`` (422)."""
    options = _typed(body) if body is not None else _from_query(query)
    found = delete_options_errors(
        policy=options.get("propagationPolicy"), orphan=options.get("orphanDependents"),
        dry_run=options.get("dryRun") or [],
    )
    if found:
        raise errors.invalid_options("DeleteOptions", found)
    return options


def _from_query(query: MultiMapping[str]) -> dict[str, Any]:
    options: dict[str, Any] = {}
    if "propagationPolicy" in query:
        options["propagationPolicy"] = query.get("propagationPolicy")
    if "gracePeriodSeconds" in query:
        options["gracePeriodSeconds"] = parameter_int64(query.get("gracePeriodSeconds"))
    orphan = query_optional_bool(query, "orphanDependents")
    if orphan is not None:
        options["orphanDependents"] = orphan
    dry_run = query.getall("dryRun", [])
    if dry_run:
        options["dryRun"] = dry_run
    return options


def _typed(options: dict[str, Any]) -> dict[str, Any]:
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
