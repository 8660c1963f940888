"""Protobuf bodies built with the test encoder decode to the JSON objects the JSON path would see;
bodies the tables cannot represent are refused with a 415 that names the kind and the field."""

from __future__ import annotations

import base64
from typing import Any

import pytest

from controlplane.apiserver import errors
from controlplane.apiserver.protobuf import MEDIA_TYPE, MESSAGES_BY_KIND, decode_object

from .builders import (
    container,
    entry,
    envelope,
    msg,
    object_meta,
    pod_spec,
    quantity_entry,
    text,
    varint,
    vint,
)

DECODED: list[tuple[str, bytes, dict[str, Any]]] = [
    (
        "token request (kubectl create token): audiences, expirationSeconds a pointer, empty status dropped",
        envelope(
            "authentication.k8s.io/v1", "TokenRequest",
            object_meta(1, "bot")
            + msg(2, text(1, "https://kubernetes.default.svc.cluster.local"), vint(4, 1200))
            + msg(3, text(1, "") + msg(2)),
        ),
        {
            "apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "metadata": {"name": "bot"},
            "spec": {"audiences": ["https://kubernetes.default.svc.cluster.local"], "expirationSeconds": 1200},
        },
    ),
    (
        "token review, as client-go's typed client sends it",
        envelope(
            "authentication.k8s.io/v1", "TokenReview",
            msg(1) + msg(2, text(1, "abcdef.0123456789abcdef"), text(2, "aud-1"), text(2, "aud-2")) + msg(3),
        ),
        {
            "apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview",
            "spec": {"token": "abcdef.0123456789abcdef", "audiences": ["aud-1", "aud-2"]},
        },
    ),
    (
        "namespace, empty fields as Go writes them",
        envelope("v1", "Namespace", object_meta(1, "ml") + msg(2) + msg(3, text(1, ""))),
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ml"}},
    ),
    (
        "namespace with finalizers, phase, labels (an empty label value is kept) and annotations",
        envelope(
            "v1", "Namespace",
            object_meta(1, "ml", entry(11, "team", "vision"), entry(11, "flag", ""), entry(12, "note", "x"))
            + msg(2, text(1, "kubernetes"))
            + msg(3, text(1, "Active")),
        ),
        {
            "apiVersion": "v1", "kind": "Namespace",
            "metadata": {"name": "ml", "labels": {"team": "vision", "flag": ""}, "annotations": {"note": "x"}},
            "spec": {"finalizers": ["kubernetes"]},
            "status": {"phase": "Active"},
        },
    ),
    (
        "metadata: namespace, generateName, times, pointers set to zero, owner references, finalizers",
        envelope(
            "v1", "ConfigMap",
            msg(
                1,
                text(1, ""), text(2, "cfg-"), text(3, "ml"), vint(7, 0),
                msg(8, vint(1, 1704164645)),
                msg(9, vint(1, 1704164705), vint(2, 500)),
                vint(10, 0),
                msg(13, text(5, "apps/v1"), text(1, "Deployment"), text(3, "web"), text(4, "u-1"), vint(6, 1)),
                text(14, "example.com/keep"),
                text(15, ""),
            ),
        ),
        {
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {
                "generateName": "cfg-", "namespace": "ml",
                "creationTimestamp": "2024-01-02T03:04:05Z",
                "deletionTimestamp": "2024-01-02T03:05:05Z",
                "deletionGracePeriodSeconds": 0,
                "ownerReferences": [
                    {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web", "uid": "u-1", "controller": True}
                ],
                "finalizers": ["example.com/keep"],
            },
        },
    ),
    (
        "configmap data, binary data in base64, immutable false kept (a pointer)",
        envelope(
            "v1", "ConfigMap",
            object_meta(1, "cfg")
            + entry(2, "a", "b") + entry(2, "empty", "")
            + entry(3, "blob", b"\x00\xff\x10")
            + vint(4, False),
        ),
        {
            "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cfg"},
            "data": {"a": "b", "empty": ""},
            "binaryData": {"blob": base64.b64encode(b"\x00\xff\x10").decode()},
            "immutable": False,
        },
    ),
    (
        "secret: data as base64, stringData, type",
        envelope(
            "v1", "Secret",
            object_meta(1, "s") + entry(2, "pw", "hunter2") + text(3, "Opaque") + entry(4, "user", "me"),
        ),
        {
            "apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"},
            "data": {"pw": "aHVudGVyMg=="}, "type": "Opaque", "stringData": {"user": "me"},
        },
    ),
    (
        "service account: secrets, image pull secrets, automount false",
        envelope(
            "v1", "ServiceAccount",
            object_meta(1, "bot") + msg(2, text(3, "tok"), text(1, "Secret")) + msg(3, text(1, "regcred"))
            + vint(4, False),
        ),
        {
            "apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "bot"},
            "secrets": [{"name": "tok", "kind": "Secret"}],
            "imagePullSecrets": [{"name": "regcred"}],
            "automountServiceAccountToken": False,
        },
    ),
    (
        "service: node port, named target port, session affinity, empty status",
        envelope(
            "v1", "Service",
            object_meta(1, "svc")
            + msg(
                2,
                msg(1, text(1, "http"), text(2, "TCP"), vint(3, 80), msg(4, vint(1, 1), vint(2, 0), text(3, "web")),
                    vint(5, 30080)),
                msg(1, text(1, "metrics"), text(2, "TCP"), vint(3, 9090), msg(4, vint(1, 0), vint(2, 9090), text(3, "")),
                    vint(5, 0)),
                entry(2, "app", "web"),
                text(3, ""), text(4, "NodePort"), text(7, "ClientIP"), text(8, ""), text(10, ""), text(11, ""),
                vint(12, 0), vint(13, False),
                msg(14, msg(1, vint(1, 600))),
                text(17, "SingleStack"),
            )
            + msg(3, msg(1)),
        ),
        {
            "apiVersion": "v1", "kind": "Service", "metadata": {"name": "svc"},
            "spec": {
                "ports": [
                    {"name": "http", "protocol": "TCP", "port": 80, "targetPort": "web", "nodePort": 30080},
                    {"name": "metrics", "protocol": "TCP", "port": 9090, "targetPort": 9090},
                ],
                "selector": {"app": "web"},
                "type": "NodePort",
                "sessionAffinity": "ClientIP",
                "sessionAffinityConfig": {"clientIP": {"timeoutSeconds": 600}},
                "ipFamilyPolicy": "SingleStack",
            },
        },
    ),
    (
        "deployment: replicas 0 kept, rolling update, GPU limits, env from a secret, mounts, tolerations",
        envelope(
            "apps/v1", "Deployment",
            object_meta(1, "web", entry(11, "app", "web"))
            + msg(
                2,
                vint(1, 0),
                msg(2, entry(1, "app", "web"), msg(2, text(1, "tier"), text(2, "In"), text(3, "a"), text(3, "b"))),
                msg(
                    3,
                    object_meta(1, "", entry(11, "app", "web")),
                    pod_spec(
                        2,
                        container(
                            2, "main", "nginx:1.27",
                            text(3, "nginx"), text(4, "-g"), text(4, "daemon off;"),
                            msg(6, text(1, "http"), vint(2, 0), vint(3, 80), text(4, "TCP"), text(5, "")),
                            msg(7, text(1, "MODE"), text(2, "fast")),
                            msg(7, text(1, "TOKEN"), text(2, ""),
                                msg(3, msg(4, msg(1, text(1, "creds")), text(2, "token"), vint(3, True)))),
                            msg(19, text(1, "CFG_"), msg(2, msg(1, text(1, "settings")))),
                            msg(8, quantity_entry(1, "nvidia.com/gpu", "1"), quantity_entry(2, "cpu", "500m")),
                            msg(9, text(1, "data"), vint(2, True), text(3, "/data"), text(4, ""), text(6, "")),
                            text(14, "IfNotPresent"),
                        ),
                        entry(7, "nvidia.com/gpu.product", "A100"),
                        msg(22, text(1, "nvidia.com/gpu"), text(2, "Exists"), text(3, ""), text(4, "NoSchedule")),
                        vint(4, 30),
                    ),
                ),
                msg(4, text(1, "RollingUpdate"),
                    msg(2, msg(1, vint(1, 0), vint(2, 0), text(3, "")), msg(2, vint(1, 1), vint(2, 0), text(3, "25%")))),
                vint(5, 0), vint(6, 5), vint(7, False),
            )
            + msg(3, vint(1, 0), vint(2, 0), vint(3, 0), vint(4, 0), vint(5, 0), vint(7, 0)),
        ),
        {
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web", "labels": {"app": "web"}},
            "spec": {
                "replicas": 0,
                "selector": {
                    "matchLabels": {"app": "web"},
                    "matchExpressions": [{"key": "tier", "operator": "In", "values": ["a", "b"]}],
                },
                "template": {
                    "metadata": {"labels": {"app": "web"}},
                    "spec": {
                        "containers": [
                            {
                                "name": "main", "image": "nginx:1.27",
                                "command": ["nginx"], "args": ["-g", "daemon off;"],
                                "ports": [{"name": "http", "containerPort": 80, "protocol": "TCP"}],
                                "env": [
                                    {"name": "MODE", "value": "fast"},
                                    {"name": "TOKEN", "valueFrom": {
                                        "secretKeyRef": {"name": "creds", "key": "token", "optional": True}}},
                                ],
                                "envFrom": [{"prefix": "CFG_", "configMapRef": {"name": "settings"}}],
                                "resources": {"limits": {"nvidia.com/gpu": "1"}, "requests": {"cpu": "500m"}},
                                "volumeMounts": [{"name": "data", "readOnly": True, "mountPath": "/data"}],
                                "imagePullPolicy": "IfNotPresent",
                            }
                        ],
                        "nodeSelector": {"nvidia.com/gpu.product": "A100"},
                        "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
                        "terminationGracePeriodSeconds": 30,
                    },
                },
                "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 0, "maxSurge": "25%"}},
                "revisionHistoryLimit": 5,
            },
        },
    ),
    (
        "job: pointers (backoffLimit 0), a negative priority, restart policy, init container",
        envelope(
            "batch/v1", "Job",
            object_meta(1, "train")
            + msg(
                2,
                vint(1, 2), vint(2, 4), vint(3, 86400), vint(7, 0), vint(10, False),
                msg(
                    6,
                    object_meta(1, ""),
                    pod_spec(
                        2,
                        container(20, "fetch", "busybox", text(3, "sh"), text(3, "-c"), text(3, "wget x")),
                        container(2, "train", "pytorch:2", text(4, "--epochs=3")),
                        text(3, "Never"),
                        vint(25, -5),
                    ),
                ),
            )
            + msg(3, vint(4, 0), vint(5, 0), vint(6, 0), text(7, "")),
        ),
        {
            "apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "train"},
            "spec": {
                "parallelism": 2, "completions": 4, "activeDeadlineSeconds": 86400, "backoffLimit": 0,
                "suspend": False,
                "template": {
                    "spec": {
                        "initContainers": [{"name": "fetch", "image": "busybox", "command": ["sh", "-c", "wget x"]}],
                        "containers": [{"name": "train", "image": "pytorch:2", "args": ["--epochs=3"]}],
                        "restartPolicy": "Never",
                        "priority": -5,
                    }
                },
            },
        },
    ),
    (
        "an empty pod security context, as defaulting leaves it",
        envelope(
            "batch/v1", "Job",
            object_meta(1, "j")
            + msg(2, msg(6, object_meta(1, ""), pod_spec(2, container(2, "c", "img"), msg(14)))),
        ),
        {
            "apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j"},
            "spec": {"template": {"spec": {"containers": [{"name": "c", "image": "img"}], "securityContext": {}}}},
        },
    ),
    (
        "a pod security context with user, group, fsGroup and supplemental groups",
        envelope(
            "apps/v1", "Deployment",
            object_meta(1, "web")
            + msg(2, msg(3, object_meta(1, ""), pod_spec(
                2, container(2, "c", "img"),
                msg(14, vint(2, 1000), vint(3, True), vint(4, 3000), vint(4, 4000), vint(5, 2000), text(9, "Always")),
            ))),
        ),
        {
            "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
            "spec": {"template": {"spec": {
                "containers": [{"name": "c", "image": "img"}],
                "securityContext": {
                    "runAsUser": 1000, "runAsNonRoot": True, "supplementalGroups": [3000, 4000], "fsGroup": 2000,
                    "fsGroupChangePolicy": "Always",
                },
            }}},
        },
    ),
    (
        "a pod disruption budget with the zero status counts Go writes",
        envelope(
            "policy/v1", "PodDisruptionBudget",
            object_meta(1, "pdb")
            + msg(2, msg(1, vint(1, 0), vint(2, 1)), msg(2, entry(1, "app", "x")))
            + msg(3, vint(1, 0), vint(3, 0), vint(4, 0), vint(5, 0), vint(6, 0)),
        ),
        {
            "apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "pdb"},
            "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "x"}}},
        },
    ),
    (
        "an explicit protobuf content type in the envelope",
        envelope("v1", "Namespace", object_meta(1, "ml"), content_type=MEDIA_TYPE),
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ml"}},
    ),
]


@pytest.mark.parametrize(("body", "expected"), [(body, expected) for _, body, expected in DECODED],
                         ids=[case for case, _, _ in DECODED])
def test_decodes_to_the_json_object(body: bytes, expected: dict[str, Any]) -> None:
    assert decode_object(body) == expected


def _deployment_with_container(*parts: bytes) -> bytes:
    return envelope(
        "apps/v1", "Deployment",
        object_meta(1, "web") + msg(2, msg(3, object_meta(1, ""), pod_spec(2, container(2, "c", "img", *parts)))),
    )


REFUSED: list[tuple[str, bytes, type[errors.ApiError], list[str]]] = [
    ("empty body", b"", errors.BadRequest, ["empty"]),
    ("no envelope", b"k8s", errors.UnsupportedMediaType, ["k8s\\x00", "kubectl apply -f"]),
    ("JSON sent as protobuf", b'{"kind": "Namespace"}', errors.UnsupportedMediaType, ["envelope"]),
    (
        "a kind without a table",
        envelope("storage.k8s.io/v1", "StorageClass", object_meta(1, "r")),
        errors.UnsupportedMediaType,
        ["StorageClass (storage.k8s.io/v1)", "Deployment (apps/v1)", "kubectl apply -f"],
    ),
    (
        "a known kind under another version",
        envelope("apps/v1beta1", "Deployment", object_meta(1, "web")),
        errors.UnsupportedMediaType,
        ["Deployment (apps/v1beta1)"],
    ),
    (
        "a field number the tables do not know",
        envelope("apps/v1", "Deployment", object_meta(1, "web") + msg(2, vint(99, 1))),
        errors.UnsupportedMediaType,
        ["spec.<field 99 of DeploymentSpec>", "Deployment (apps/v1)"],
    ),
    (
        "a probe, which the tables do not decode",
        _deployment_with_container(msg(10, msg(1, msg(1, text(1, "true"))))),
        errors.UnsupportedMediaType,
        ["spec.template.spec.containers[0].livenessProbe", "Deployment (apps/v1)"],
    ),
    (
        "an empty security context is still a set pointer",
        _deployment_with_container(msg(15)),
        errors.UnsupportedMediaType,
        ["spec.template.spec.containers[0].securityContext"],
    ),
    (
        "a seccomp profile in the pod security context",
        envelope(
            "apps/v1", "Deployment",
            object_meta(1, "web")
            + msg(2, msg(3, object_meta(1, ""), pod_spec(2, container(2, "c", "img"), msg(14, msg(10, text(1, "RuntimeDefault")))))),
        ),
        errors.UnsupportedMediaType,
        ["spec.template.spec.securityContext.seccompProfile", "Deployment (apps/v1)"],
    ),
    (
        "volumes",
        envelope("batch/v1", "Job", msg(2, msg(6, msg(2, msg(1, text(1, "data")))))),
        errors.UnsupportedMediaType,
        ["spec.template.spec.volumes", "Job (batch/v1)"],
    ),
    (
        "a removed metadata field with a value",
        envelope("v1", "Namespace", msg(1, text(1, "ml"), text(15, "east"))),
        errors.UnsupportedMediaType,
        ["metadata.clusterName"],
    ),
    (
        "a compressed envelope",
        envelope("v1", "Namespace", object_meta(1, "ml"), encoding="gzip"),
        errors.UnsupportedMediaType,
        ['content encoding "gzip"'],
    ),
    (
        "a JSON payload inside the envelope",
        envelope("v1", "Namespace", b"{}", content_type="application/json"),
        errors.UnsupportedMediaType,
        ['"application/json"'],
    ),
    (
        "a truncated object",
        envelope("v1", "Namespace", object_meta(1, "ml")[:-3]),
        errors.BadRequest,
        ["the protobuf body of the Namespace is malformed", "claims"],
    ),
    (
        "a truncated field inside the metadata",
        envelope("v1", "Namespace", msg(1, b"\x0a\x05ab")),
        errors.BadRequest,
        ["Namespace is malformed at metadata", "claims 5 bytes"],
    ),
    (
        "a string field sent as a number",
        envelope("v1", "Namespace", msg(1, vint(1, 7))),
        errors.BadRequest,
        ["metadata.name", "length-delimited"],
    ),
    (
        "a number field sent as a string",
        envelope("apps/v1", "Deployment", msg(2, text(1, "3"))),
        errors.BadRequest,
        ["spec.replicas", "varint"],
    ),
    (
        "a string that is not UTF-8",
        envelope("v1", "Namespace", msg(1, text(1, b"\xff\xfe"))),
        errors.BadRequest,
        ["UTF-8"],
    ),
    ("a truncated envelope", b"k8s\x00" + b"\x0a\x05" + varint(1), errors.BadRequest, ["envelope"]),
]


@pytest.mark.parametrize(("body", "error", "fragments"), [(b, e, f) for _, b, e, f in REFUSED],
                         ids=[case for case, _, _, _ in REFUSED])
def test_refused(body: bytes, error: type[errors.ApiError], fragments: list[str]) -> None:
    with pytest.raises(error) as raised:
        decode_object(body)
    status = raised.value.to_status()
    assert status["code"] == error.code
    for fragment in fragments:
        assert fragment in status["message"]


def test_every_kind_table_is_an_object_with_metadata() -> None:
    for (api_version, kind), message in MESSAGES_BY_KIND.items():
        assert message.name == kind, api_version
        assert message.fields[1].name == "metadata"
        decoded = decode_object(envelope(api_version, kind, object_meta(1, "x")))
        assert decoded == {"apiVersion": api_version, "kind": kind, "metadata": {"name": "x"}}
