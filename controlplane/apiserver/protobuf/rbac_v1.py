"""Field tables of ``k8s.io/api/rbac/v1`` and of the access reviews (``k8s.io/api/authorization/v1``,
``k8s.io/api/authentication/v1``), from their generated.proto: what ``kubectl create role|
clusterrole|rolebinding|clusterrolebinding``, ``kubectl auth can-i`` and ``kubectl auth whoami`` send."""

from __future__ import annotations

from controlplane.apiserver.protobuf.meta_v1 import LABEL_SELECTOR, OBJECT_META
from controlplane.apiserver.protobuf.schema import Message, boolean, nested, string, unsupported

POLICY_RULE = Message(
    "PolicyRule",
    {
        1: string("verbs", repeated=True),
        2: string("apiGroups", repeated=True),
        3: string("resources", repeated=True),
        4: string("resourceNames", repeated=True),
        5: string("nonResourceURLs", repeated=True),
    },
)
AGGREGATION_RULE = Message("AggregationRule", {1: nested("clusterRoleSelectors", LABEL_SELECTOR, repeated=True)})
SUBJECT = Message(
    "Subject", {1: string("kind"), 2: string("apiGroup"), 3: string("name"), 4: string("namespace")}
)
ROLE_REF = Message("RoleRef", {1: string("apiGroup"), 2: string("kind"), 3: string("name")})

ROLE = Message("Role", {1: nested("metadata", OBJECT_META), 2: nested("rules", POLICY_RULE, repeated=True)})
CLUSTER_ROLE = Message(
    "ClusterRole",
    {
        1: nested("metadata", OBJECT_META),
        2: nested("rules", POLICY_RULE, repeated=True),
        3: nested("aggregationRule", AGGREGATION_RULE, pointer=True),
    },
)
_BINDING_FIELDS = {
    1: nested("metadata", OBJECT_META),
    2: nested("subjects", SUBJECT, repeated=True),
    3: nested("roleRef", ROLE_REF),
}
ROLE_BINDING = Message("RoleBinding", _BINDING_FIELDS)
CLUSTER_ROLE_BINDING = Message("ClusterRoleBinding", _BINDING_FIELDS)

RESOURCE_ATTRIBUTES = Message(
    "ResourceAttributes",
    {
        1: string("namespace"),
        2: string("verb"),
        3: string("group"),
        4: string("version"),
        5: string("resource"),
        6: string("subresource"),
        7: string("name"),
        8: unsupported("fieldSelector", pointer=True),
        9: unsupported("labelSelector", pointer=True),
    },
)
NON_RESOURCE_ATTRIBUTES = Message("NonResourceAttributes", {1: string("path"), 2: string("verb")})
_ATTRIBUTES = {
    1: nested("resourceAttributes", RESOURCE_ATTRIBUTES, pointer=True),
    2: nested("nonResourceAttributes", NON_RESOURCE_ATTRIBUTES, pointer=True),
}
SUBJECT_ACCESS_REVIEW_SPEC = Message(
    "SubjectAccessReviewSpec",
    {**_ATTRIBUTES, 3: string("user"), 4: string("groups", repeated=True), 5: unsupported("extra"), 6: string("uid")},
)


# The status is the server's answer; a client sends it empty (Go encodes its plain fields anyway).
ACCESS_REVIEW_STATUS = Message(
    "SubjectAccessReviewStatus",
    {1: boolean("allowed"), 4: boolean("denied"), 2: string("reason"), 3: string("evaluationError")},
)
RULES_REVIEW_STATUS = Message(
    "SubjectRulesReviewStatus",
    {
        1: unsupported("resourceRules", repeated=True),
        2: unsupported("nonResourceRules", repeated=True),
        3: boolean("incomplete"),
        4: string("evaluationError"),
    },
)
USER_INFO = Message(
    "UserInfo", {1: string("username"), 2: string("uid"), 3: string("groups", repeated=True), 4: unsupported("extra")}
)


def _review(name: str, spec: Message, status: Message) -> Message:
    return Message(name, {1: nested("metadata", OBJECT_META), 2: nested("spec", spec), 3: nested("status", status)})


SELF_SUBJECT_ACCESS_REVIEW = _review(
    "SelfSubjectAccessReview", Message("SelfSubjectAccessReviewSpec", _ATTRIBUTES), ACCESS_REVIEW_STATUS
)
SELF_SUBJECT_RULES_REVIEW = _review(
    "SelfSubjectRulesReview", Message("SelfSubjectRulesReviewSpec", {1: string("namespace")}), RULES_REVIEW_STATUS
)
SUBJECT_ACCESS_REVIEW = _review("SubjectAccessReview", SUBJECT_ACCESS_REVIEW_SPEC, ACCESS_REVIEW_STATUS)
LOCAL_SUBJECT_ACCESS_REVIEW = _review("LocalSubjectAccessReview", SUBJECT_ACCESS_REVIEW_SPEC, ACCESS_REVIEW_STATUS)
SELF_SUBJECT_REVIEW = Message(
    "SelfSubjectReview",
    {1: nested("metadata", OBJECT_META), 2: nested("status", Message("SelfSubjectReviewStatus", {1: nested("userInfo", USER_INFO)}))},
)
