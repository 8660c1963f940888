"""Which webhooks a write calls (kube's ``predicates/rules``, ``namespace/matcher.go`` and
``object/matcher.go``), and how an AdmissionReview answer is read (``VerifyAdmissionResponse``,
``ToStatusErr``), table by table."""

from __future__ import annotations

import base64
from typing import Any

import orjson
import pytest

from controlplane.apiserver.admission import Operation, WebhookRequest
from controlplane.apiserver.identity import Role, UserInfo
from controlplane.apiserver.webhooks import matching, review
from controlplane.hub import hub_registry

REGISTRY = hub_registry()
DEPLOYMENTS = REGISTRY.require("apps/v1", "Deployment")
NAMESPACES = REGISTRY.require("v1", "Namespace")
CLUSTER_ROLES = REGISTRY.require("rbac.authorization.k8s.io/v1", "ClusterRole")
VALIDATING = REGISTRY.require("admissionregistration.k8s.io/v1", "ValidatingWebhookConfiguration")


def request(
    rt: Any = DEPLOYMENTS, *, operation: Operation = Operation.CREATE, subresource: str | None = None,
    namespace: str | None = "default", labels: dict[str, str] | None = None, old_labels: dict[str, str] | None = None,
) -> WebhookRequest:
    obj = {"metadata": {"name": "x", "labels": labels or {}}}
    old = {"metadata": {"name": "x", "labels": old_labels}} if old_labels is not None else None
    return WebhookRequest(operation, rt, "x", namespace, obj, old, subresource=subresource)


def rule(resources: list[str], *, groups: list[str] | None = None, operations: list[str] | None = None,
         scope: str = "*") -> dict[str, Any]:
    return {"operations": operations or ["*"], "apiGroups": groups or ["*"], "apiVersions": ["*"],
            "resources": resources, "scope": scope}


@pytest.mark.parametrize(("the_rule", "the_request", "matches"), [
    (rule(["deployments"]), request(), True),
    (rule(["deployments"], groups=["batch"]), request(), False),
    (rule(["deployments"], operations=["UPDATE"]), request(), False),
    (rule(["deployments"], operations=["CREATE"]), request(), True),
    (rule(["*"]), request(), True),
    (rule(["*"]), request(subresource="status"), False),
    (rule(["deployments/status"]), request(subresource="status"), True),
    (rule(["deployments/status"]), request(), False),
    (rule(["*/scale"]), request(subresource="scale"), True),
    (rule(["*/*"]), request(subresource="scale"), True),
    (rule(["*/*"]), request(), True),
    (rule(["deployments/*"]), request(subresource="status"), True),
    (rule(["deployments"], scope="Namespaced"), request(), True),
    (rule(["deployments"], scope="Cluster"), request(), False),
    (rule(["clusterroles"], scope="Cluster"), request(CLUSTER_ROLES, namespace=None), True),
    (rule(["clusterroles"], scope="Namespaced"), request(CLUSTER_ROLES, namespace=None), False),
    (rule(["namespaces"], scope="Cluster"), request(NAMESPACES, namespace=None), True),
    (rule(["namespaces"], scope="Namespaced"), request(NAMESPACES, namespace=None), False),
])
def test_rules_match_as_kubes(the_rule: dict[str, Any], the_request: WebhookRequest, matches: bool) -> None:
    assert matching.rule_matches(the_rule, the_request) is matches


def hook(**selectors: Any) -> matching.Webhook:
    config = {"metadata": {"name": "c"}, "webhooks": [{"name": "h.acme.io", "rules": [rule(["*"])], **selectors}]}
    return matching.webhooks_of(config)[0]


SELECTED = {"matchLabels": {"team": "ml"}}


@pytest.mark.parametrize(("labels", "old_labels", "matches"), [
    ({"team": "ml"}, None, True),
    ({}, None, False),
    ({}, {"team": "ml"}, True),  # the old object's labels count too (a write removing the label)
])
def test_the_object_selector_reads_the_new_or_the_old_labels(
    labels: dict[str, str], old_labels: dict[str, str] | None, matches: bool
) -> None:
    assert matching.object_matches(hook(objectSelector=SELECTED), request(labels=labels, old_labels=old_labels)) is matches
    assert matching.object_matches(hook(objectSelector={}), request(labels=labels)) is True


def test_the_namespace_selector() -> None:
    selective = hook(namespaceSelector=SELECTED)
    assert matching.needs_namespace_labels(selective, request())
    assert matching.namespace_matches(selective, request(), {"team": "ml"})
    assert not matching.namespace_matches(selective, request(), {"team": "web"})
    # A cluster-scoped object (but a Namespace) is never exempted; a Namespace is matched by its own labels.
    assert not matching.needs_namespace_labels(selective, request(CLUSTER_ROLES, namespace=None))
    assert matching.namespace_matches(selective, request(CLUSTER_ROLES, namespace=None), None)
    assert matching.namespace_matches(selective, request(NAMESPACES, namespace=None, labels={"team": "ml"}), None)
    assert not matching.namespace_matches(selective, request(NAMESPACES, namespace=None, labels={}), None)
    assert not matching.needs_namespace_labels(hook(namespaceSelector={}), request())


def test_no_webhook_is_called_for_the_webhook_configurations() -> None:
    assert matching.called(request())
    assert not matching.called(request(VALIDATING, namespace=None))


USER = UserInfo(name="alice", role=Role.USER, user_groups=("ml", "system:authenticated"))


def test_the_review_request_is_kubes() -> None:
    body = review.review_request(request(NAMESPACES, namespace=None), user=USER, uid="u-1", version="v1")
    assert body["apiVersion"] == "admission.k8s.io/v1" and body["kind"] == "AdmissionReview"
    sent = body["request"]
    assert sent["uid"] == "u-1" and sent["operation"] == "CREATE"
    assert sent["kind"] == {"group": "", "version": "v1", "kind": "Namespace"}
    assert sent["requestResource"] == {"group": "", "version": "v1", "resource": "namespaces"}
    assert sent["namespace"] == "x", "a Namespace's namespace is its own name"
    assert sent["userInfo"] == {"username": "alice", "groups": ["ml", "system:authenticated"]}
    assert sent["options"] == {"kind": "CreateOptions", "apiVersion": "meta.k8s.io/v1"}
    assert "subResource" not in sent and sent["oldObject"] is None
    assert review.review_version(("v1beta1", "v1")) == "v1beta1"
    # A service account's token: its uid and extras reach the webhook (and a policy's request.userInfo).
    bot = UserInfo(name="system:serviceaccount:ml:bot", role=Role.USER, user_groups=("system:authenticated",),
                   uid="sa-uid", extra=(("authentication.kubernetes.io/credential-id", ("JTI=j-1",)),))
    sent = review.review_request(request(), user=bot, uid="u-2", version="v1")["request"]
    assert sent["userInfo"] == {"username": "system:serviceaccount:ml:bot", "uid": "sa-uid",
                                "groups": ["system:authenticated"],
                                "extra": {"authentication.kubernetes.io/credential-id": ["JTI=j-1"]}}


def answer(**response: Any) -> bytes:
    return orjson.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": response})


@pytest.mark.parametrize(("raw", "mutating", "reason"), [
    (b"not json", False, "couldn't decode the response"),
    (orjson.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview"}), False, "webhook response was absent"),
    (answer(uid="other", allowed=True), False, 'expected response.uid="u", got "other"'),
    (orjson.dumps({"apiVersion": "v1", "kind": "Status", "response": {"uid": "u"}}), False,
     "expected webhook response of admission.k8s.io/v1, Kind=AdmissionReview, got v1, Kind=Status"),
    (answer(uid="u", allowed=True, patch="W10="), False, "validating webhook may not return response.patch"),
    (answer(uid="u", allowed=True, patch="W10="), True, "webhook returned response.patch but not response.patchType"),
    (answer(uid="u", allowed=True, patchType="JSONPatch"), True, "webhook returned response.patchType but not response.patch"),
])
def test_an_invalid_answer_says_why_as_kube(raw: bytes, mutating: bool, reason: str) -> None:
    with pytest.raises(review.InvalidResponse) as caught:
        review.verdict(raw, uid="u", version="v1", mutating=mutating)
    assert str(caught.value).startswith(reason)


def test_a_mutating_answer_carries_its_patch_and_bounded_warnings() -> None:
    patch = [{"op": "add", "path": "/metadata/labels/a", "value": "b"}]
    raw = answer(uid="u", allowed=True, patchType="JSONPatch", patch=base64.b64encode(orjson.dumps(patch)).decode(),
                 warnings=["x" * 1000, "  ", "two\nlines"])
    verdict = review.verdict(raw, uid="u", version="v1", mutating=True)
    assert verdict.allowed and verdict.patch == patch
    assert [len(w) for w in verdict.warnings] == [review.WARNING_ITEM_CHARS, len("two lines")]


@pytest.mark.parametrize(("status", "message", "code", "reason"), [
    ({"message": "no", "code": 403, "reason": "Forbidden"}, 'admission webhook "h" denied the request: no', 403, "Forbidden"),
    ({"code": 200}, 'admission webhook "h" denied the request without explanation', 400, None),
    ({"reason": "NotAllowed"}, 'admission webhook "h" denied the request: NotAllowed', 400, "NotAllowed"),
    (None, 'admission webhook "h" denied the request without explanation', 400, None),
])
def test_a_denial_is_kubes_status(status: dict[str, Any] | None, message: str, code: int, reason: str | None) -> None:
    error = review.denial("h", status)
    shown = error.to_status()
    assert (shown["message"], shown["code"], shown.get("reason")) == (message, code, reason)
