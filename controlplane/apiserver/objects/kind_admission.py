"""A kind's own admission, which the hub runs in process: its rules across its objects
(:func:`check_against_others`) and its admission webhooks (Karmada's, the training operator's:
:attr:`ResourceType.webhook_denial`), before which what kube refuses ahead of its admission comes
first, the decoder's 400 (unknown fields under ``fieldValidation=Strict``), then the 422 of the
kind's structural schema (:func:`refuse_schema_errors`).
"""

from __future__ import annotations

from typing import Any

from controlplane.apis.kube.field import blocks_rules
from controlplane.apiserver import errors
from controlplane.apiserver.openapi.structural import rule_errors, schema_errors
from controlplane.apiserver.resources import ResourceType
from controlplane.apiserver.validation import FieldValidation, refuse_unknown_fields


def check_against_others(rt: ResourceType, obj: dict[str, Any], others: list[dict[str, Any]]) -> None:
    """The rules of ``rt`` across its objects, ``others`` being the stored ones but ``obj``'s own:
    ``validate_against_stored`` (422 Invalid), then ``admit_against_stored``, kube's validating
    admission (403 ``priorityclasses.scheduling.k8s.io "x" is forbidden: <reason>``), then
    ``webhook_against_stored``, a webhook's (403 ``admission webhook "x" denied the request: <why>``)."""
    name = str(obj["metadata"]["name"])
    found = rt.validate_against_stored(obj, others) if rt.validate_against_stored is not None else []
    if found:
        causes = [errors.Cause(str(e.type), e.message, e.field) for e in found]
        raise errors.invalid(kind=rt.kind, group=rt.group, name=name, causes=causes)
    reason = rt.admit_against_stored(obj, others) if rt.admit_against_stored is not None else None
    if reason:
        target = errors.Target(name=name, group=rt.group, kind=rt.plural)
        raise errors.Forbidden(f'{rt.qualified()} "{name}" is forbidden: {reason}', target=target)
    denial = rt.webhook_against_stored(obj, others) if rt.webhook_against_stored is not None else None
    if denial is not None:
        raise errors.WebhookDenied(*denial, code=403, reason=errors.StatusReason.FORBIDDEN)


def refuse_schema_errors(rt: ResourceType, obj: dict[str, Any], old: dict[str, Any] | None) -> None:
    """422 Invalid for what ``rt``'s structural schema (:attr:`ResourceType.crd_schema`) refuses in
    ``obj``: kube validates a CRD's schema before it calls the validating webhooks."""
    if rt.crd_schema is None:
        return
    found = schema_errors(rt.crd_schema(), obj, old)
    found += rule_errors(
        rt.crd_schema(), obj, old, blocked=any(blocks_rules(str(e.type), built_in=False) for e in found)
    )
    if found:
        name = str((obj.get("metadata") or {}).get("name") or "")
        causes = [errors.Cause(str(e.type), e.message, e.field) for e in found]
        raise errors.invalid(kind=rt.kind, group=rt.group, name=name, causes=causes)


def webhooks_deny(rt: ResourceType, obj: dict[str, Any]) -> bool:
    """Whether the kind's admission webhook refuses ``obj`` as it stands (one stored before the rule)."""
    return rt.webhook_denial is not None and rt.webhook_denial(obj) is not None


def webhooks_admit(
    rt: ResourceType,
    obj: dict[str, Any],
    old: dict[str, Any] | None = None,
    *,
    field_validation: FieldValidation,
) -> None:
    """The kind's admission webhook (:attr:`ResourceType.webhook_denial`; on an update of ``old``,
    :attr:`ResourceType.webhook_update_denial` when the kind has one) refusing ``obj``, as kube answers a webhook's
    denial. Those webhooks are Karmada's and the training operator's, whose refusals are
    controller-runtime's ``admission.Denied``: code 403, reason ``Forbidden``, the message; or its
    ``admission.Errored``: the denial's code, no reason (Karmada's mutating webhook). What kube
    refuses before its admission comes first: the decoding's 400 (unknown fields under
    ``field_validation`` Strict), then the schema's 422."""
    if old is not None and rt.webhook_update_denial is not None:
        denial = rt.webhook_update_denial(obj, old)
    else:
        denial = rt.webhook_denial(obj) if rt.webhook_denial is not None else None
    if denial is not None:
        # The decoding comes first, then the schema: a Master's ``replicas: "1"`` is the schema's 422.
        refuse_unknown_fields(rt, obj, old, field_validation)
        refuse_schema_errors(rt, obj, old)
        webhook, why, *errored = denial
        if errored:
            raise errors.WebhookDenied(webhook, why, code=errored[0])
        raise errors.WebhookDenied(webhook, why, code=403, reason=errors.StatusReason.FORBIDDEN)
