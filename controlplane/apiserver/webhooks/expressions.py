"""CEL expressions of admission webhooks and policies: compiled once, evaluated per write.

:func:`conditions_match` is kube's ``matchconditions`` matcher, shared by a webhook's and a
policy's ``matchConditions``: any condition false -> no match (whatever the errors); otherwise
an error -> the failure policy (``Fail``: the errors; ``Ignore``: no match); all true -> match.
Pure: no I/O.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from controlplane.apis.apiextensions import cel
from controlplane.apis.kube.field import aggregate


@dataclass(frozen=True, slots=True)
class Expression:
    source: str
    program: Any  # None: it does not compile
    #: The policy variables it reads (``variables.x``).
    reads: frozenset[str]


def expression(source: str) -> Expression:
    """``source`` compiled (its validation made sure it compiles; one stored before that did not
    is kept uncompiled, and fails when evaluated)."""
    try:
        program = cel.compiled(source)
    except Exception:  # the compiler's error: refused by validation since
        program = None
    return Expression(source, program, frozenset(re.findall(r"\bvariables\s*\.\s*([A-Za-z_]\w*)", source)))


def evaluation_error(source: str, exc: Exception) -> str:
    """kube's message of an expression that failed at run time."""
    return f"expression '{source}' resulted in error: {exc}"


#: Answers an authorizer check: the target (group, resource, subresource, namespace, name or path,
#: serviceAccount) and the verb -> (allowed, reason).
Authorize = Callable[[dict[str, Any], str], tuple[bool, str]]


def authorizer_variable(request_resource: dict[str, Any]) -> dict[str, Any]:
    """kube's ``authorizer`` variable; ``authorizer.requestResource`` targets the request's resource."""
    return {"kind": "Authorizer", "requestResource": {"kind": "ResourceCheck", **request_resource}}


def authorizer_functions(authorize: Authorize) -> dict[str, Callable[..., Any]]:
    """kube's authorizer library: ``authorizer.group('apps').resource('deployments').namespace('ns')
    .name('x').check('create').allowed()``, ``.subresource(s)``, ``.path('/p')``,
    ``authorizer.serviceAccount(ns, name)`` (checks as that ServiceAccount), and a decision's
    ``allowed()``, ``reason()``, ``errored()`` and ``error()``."""

    def setting(key: str) -> Callable[[dict[str, Any], str], dict[str, Any]]:
        return lambda target, value: {**target, key: value}

    def check(target: dict[str, Any], verb: str) -> dict[str, Any]:
        allowed, reason = authorize(target, verb)
        return {"kind": "Decision", "allowed": allowed, "reason": reason}

    return {
        **{key: setting(key) for key in ("group", "resource", "subresource", "namespace", "name", "path")},
        "serviceAccount": lambda target, namespace, name: {**target, "serviceAccount": [namespace, name]},
        "check": check,
        "allowed": lambda decision: bool(decision["allowed"]),
        "reason": lambda decision: str(decision["reason"]),
        "errored": lambda decision: False,
        "error": lambda decision: "",
    }


def conditions_match(conditions: tuple[Expression, ...], context: Any, *, fails_open: bool) -> tuple[bool, str | None]:
    """(matches, error): kube's matcher over ``conditions`` in ``context`` (:func:`cel.activation`)."""
    errors = []
    for condition in conditions:
        try:
            if condition.program is None:
                raise cel.EvaluationError("compilation failed")
            result = cel.execute(condition.program, context)
        except cel.EvaluationError as exc:
            errors.append(evaluation_error(condition.source, exc))
            continue
        if result is False:
            return False, None
        if result is not True:
            errors.append(evaluation_error(condition.source, TypeError("expected a bool result")))
    if errors:
        return (False, None) if fails_open else (False, aggregate(errors))
    return True, None
