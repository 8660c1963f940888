"""Malformed requests for the hub's fuzz test: a seeded generator over every served kind,
verb and content type, and the hostile bodies the hardening run found.

``FuzzRequest`` is one HTTP request (method, path with query, content type, body). The
generator is deterministic for a seed, so a failing request can be replayed.
"""

from __future__ import annotations

import copy
import json
import random
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

#: Big enough to pass the hub's 3 MiB body limit and fail etcd's 1.5 MiB request limit.
OVER_ETCD_LIMIT_BYTES = 2_900_000

JSON_TYPES = ("application/json",)
YAML_TYPES = ("application/yaml", "text/yaml", "application/x-yaml")
PROTOBUF = "application/vnd.kubernetes.protobuf"
PATCH_TYPES = (
    "application/json-patch+json",
    "application/merge-patch+json",
    "application/strategic-merge-patch+json",
    "application/apply-patch+yaml",
)
GARBAGE_TYPES = ("text/plain", "garbage/x;;;", "application/octet-stream", "", "application/json; charset=utf-16")


@dataclass(frozen=True)
class Kind:
    """One served resource, from discovery."""

    group_version: str
    plural: str
    kind: str
    namespaced: bool
    verbs: frozenset[str]

    def collection(self, namespace: str) -> str:
        root = "/api/v1" if self.group_version == "v1" else f"/apis/{self.group_version}"
        return f"{root}/namespaces/{namespace}/{self.plural}" if self.namespaced else f"{root}/{self.plural}"


@dataclass(frozen=True)
class FuzzRequest:
    label: str
    method: str
    path: str
    content_type: str | None = None
    body: bytes | None = None
    #: The status codes this request may get (empty: any code below 500).
    expect: tuple[int, ...] = ()


def alias_bomb() -> bytes:
    """The 542-byte-class YAML "billion laughs": nested anchors &l0 ... &l8, nine aliases each."""
    lines = [b"apiVersion: v1", b"kind: ConfigMap", b"metadata: {name: bomb}", b"data:", b"  l0: &l0 [" + b",".join([b"lol"] * 9) + b"]"]
    for level in range(1, 9):
        lines.append(b"  l%d: &l%d [%s]" % (level, level, b",".join([b"*l%d" % (level - 1)] * 9)))
    return b"\n".join(lines) + b"\n"


def deep_json(depth: int = 1000) -> bytes:
    return b'{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"deep"},"data":' + b"[" * depth + b"]" * depth + b"}"


def huge_object(kind: Kind, namespace: str) -> bytes:
    """A ConfigMap over etcd's limit (kube refuses one over 1 MiB before it reaches etcd)."""
    meta: dict[str, Any] = {"name": "huge"}
    if kind.namespaced:
        meta["namespace"] = namespace
    obj = {"apiVersion": kind.group_version, "kind": kind.kind, "metadata": meta,
           "data": {"blob": "x" * OVER_ETCD_LIMIT_BYTES}}
    return json.dumps(obj).encode()


def huge_lease(namespace: str) -> bytes:
    """A Lease over etcd's limit: kube sets no size limit on a Lease, so etcd's is the one that answers."""
    obj = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": "huge", "namespace": namespace},
           "spec": {"holderIdentity": "x" * OVER_ETCD_LIMIT_BYTES}}
    return json.dumps(obj).encode()


def reported_cases(configmaps: Kind, namespace: str) -> list[FuzzRequest]:
    """Every malformed input issue 18 lists, as the exact request that returned a 500."""
    base = configmaps.collection(namespace)
    item = f"{base}/seed"
    big = str(2**64)
    return [
        FuzzRequest("alias bomb (create)", "POST", base, "application/yaml", alias_bomb(), (400,)),
        FuzzRequest("alias bomb (apply)", "PATCH", f"{base}/bomb?fieldManager=fuzz", PATCH_TYPES[3], alias_bomb(), (400,)),
        FuzzRequest("recursive anchors (apply)", "PATCH", f"{item}?fieldManager=fuzz", PATCH_TYPES[3],
                    b"apiVersion: v1\nkind: ConfigMap\nmetadata: &m {name: seed, labels: *m}\n", (400,)),
        FuzzRequest("!!binary (apply)", "PATCH", f"{item}?fieldManager=fuzz", PATCH_TYPES[3],
                    b"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: seed}\ndata: {a: !!binary aGVsbG8=}\n", (400,)),
        FuzzRequest("integer >= 2^64 in YAML", "POST", base, "application/yaml",
                    b"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: bigint, generation: " + big.encode() + b"}\n", (400,)),
        FuzzRequest("?limit=2^64", "GET", f"{base}?limit={big}", expect=(400,)),
        FuzzRequest("?resourceVersion=2^64 (list)", "GET", f"{base}?resourceVersion={big}&resourceVersionMatch=Exact",
                    expect=(400,)),
        FuzzRequest("?resourceVersion=2^64 (watch)", "GET", f"{base}?watch=1&resourceVersion={big}", expect=(400,)),
        FuzzRequest("JSON nested 1,000 deep", "POST", base, "application/json", deep_json(), (400,)),
        FuzzRequest("2.9 MB ConfigMap (over kube's 1 MiB)", "POST", base, "application/json",
                    huge_object(configmaps, namespace), (422,)),
        FuzzRequest("2.9 MB Lease over etcd's limit", "POST",
                    f"/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases", "application/json",
                    huge_lease(namespace), (413,)),
        FuzzRequest("wastereports/last-99999999999999h", "GET",
                    "/apis/reports.gpufed.io/v1alpha1/wastereports/last-99999999999999h", expect=(404,)),
        FuzzRequest('DELETE {"preconditions":"x"}', "DELETE", item, "application/json", b'{"preconditions":"x"}', (400,)),
    ]


_NAMES = ("seed", "fuzz-a", "x" * 300, "UPPER", "..", "a%00b", "%C3%A4", "-lead", "a.b.c", "seed?x=1")
_QUERY_VALUES: dict[str, tuple[Any, ...]] = {
    "limit": (-1, 0, 1, "x", 2**64, 2**63 - 1, "1e3", " 5"),
    "resourceVersion": ("0", "1", "x", -5, 2**64, 2**63 - 1, "99999999"),
    "resourceVersionMatch": ("Exact", "NotOlderThan", "junk"),
    "labelSelector": ("a=b", "!!", "a in (", "x" * 400, "a notin (b),c!=d", "=,="),
    "fieldSelector": ("metadata.name=seed", "spec.foo=1", "==", "metadata.namespace!=x,status.phase=Running"),
    "continue": ("junk", "eyJ2IjoxfQ", "eyJ2IjoxLCJydiI6LTEsInN0YXJ0IjoiLi4vIn0", ""),
    "timeoutSeconds": (1, -1, 2**64, "x"),
    "dryRun": ("All", "x"),
    "fieldManager": ("fuzz", "x" * 200),
    "force": ("true", "false", "x"),
    "fieldValidation": ("Strict", "Warn", "Ignore", "junk"),
    "propagationPolicy": ("Orphan", "x"),
    "gracePeriodSeconds": ("x", -1, 2**64),
    "allowWatchBookmarks": ("true", "x"),
    "includeObject": ("None", "Object", "junk"),
}
_JUNK: tuple[Any, ...] = (
    None, True, 0, -1, 2**63, 1.5e308, "", "x" * 5000, "\u0000\ud7ff\uffff", [], [[[]]], {}, {"a": {"b": [1, {}]}},
    [1, "a", None], "2020-13-45T99:99:99Z",
)
_PATHS: tuple[tuple[str, ...], ...] = (
    ("metadata",), ("metadata", "name"), ("metadata", "namespace"), ("metadata", "labels"), ("metadata", "annotations"),
    ("metadata", "finalizers"), ("metadata", "ownerReferences"), ("metadata", "managedFields"),
    ("metadata", "resourceVersion"), ("metadata", "uid"), ("metadata", "creationTimestamp"),
    ("metadata", "deletionTimestamp"), ("metadata", "generateName"), ("metadata", "generation"), ("spec",),
    ("spec", "replicas"), ("spec", "template"), ("spec", "template", "spec", "containers"), ("spec", "selector"),
    ("status",), ("status", "conditions"), ("data",), ("stringData",), ("kind",), ("apiVersion",),
    ("spec", "placement"), ("spec", "resourceSelectors"), ("spec", "workload", "manifests"), ("type",),
)


def _setting(obj: dict[str, Any], path: tuple[str, ...], value: Any) -> dict[str, Any]:
    node: Any = obj
    for key in path[:-1]:
        if not isinstance(node.get(key), dict):
            node[key] = {}
        node = node[key]
    node[path[-1]] = value
    return obj


def _without(query: str, name: str) -> str:
    """``query`` (``?a=1&b=2`` or empty) without the parameter ``name``."""
    kept = [pair for pair in query.removeprefix("?").split("&") if pair and pair.split("=", 1)[0] != name]
    return ("?" + "&".join(kept)) if kept else ""


class Generator:
    """Seeded malformed requests over ``kinds``."""

    def __init__(self, seed: int, kinds: list[Kind], namespace: str) -> None:
        self.rng = random.Random(seed)
        self.kinds = kinds
        self.namespace = namespace

    def _query(self, keys: tuple[str, ...]) -> str:
        rng = self.rng
        chosen = rng.sample(keys, k=rng.randint(0, min(3, len(keys))))
        params = {key: str(rng.choice(_QUERY_VALUES[key])) for key in chosen}
        return ("?" + urlencode(params)) if params else ""

    def _object(self, kind: Kind, name: str) -> dict[str, Any]:
        meta: dict[str, Any] = {"name": name}
        if kind.namespaced:
            meta["namespace"] = self.namespace
        obj: dict[str, Any] = {"apiVersion": kind.group_version, "kind": kind.kind, "metadata": meta}
        rng = self.rng
        for _ in range(rng.randint(0, 3)):
            _setting(obj, rng.choice(_PATHS), copy.deepcopy(rng.choice(_JUNK)))
        return obj

    def _encode(self, value: Any, content_type: str) -> bytes:
        rng = self.rng
        roll = rng.random()
        if roll < 0.04:
            return bytes(rng.getrandbits(8) for _ in range(rng.randint(0, 200)))
        if roll < 0.06:
            return b""
        if roll < 0.08:
            return b"k8s\x00" + bytes(rng.getrandbits(8) for _ in range(rng.randint(0, 100)))
        if roll < 0.10:
            return alias_bomb()
        if roll < 0.12:
            return deep_json(rng.choice((100, 101, 254, 1000, 5000)))
        text = json.dumps(value, default=str)
        if roll < 0.20:
            text = text[: rng.randint(0, len(text))]  # truncated
        elif roll < 0.25:
            text = text.replace('"', "'", rng.randint(1, 3))
        if "yaml" in content_type and rng.random() < 0.5:
            extras = (b"\nx: !!binary aGk=", b"\n? [a]\n: b", b"\nn: " + str(2**70).encode(), b"\n&a r: [*a]",
                      b"\nt: !!timestamp 2020-01-01", b"\nbad: !!python/name:os.system", b"\n\t- tab")
            return text.encode() + rng.choice(extras)
        return text.encode()

    def _patch_body(self, kind: Kind, content_type: str) -> Any:
        rng = self.rng
        if content_type == PATCH_TYPES[0]:
            ops: tuple[Any, ...] = (
                [{"op": "replace", "path": "/spec/replicas", "value": 2**64}], [{"op": "x"}],
                [{"op": "add", "path": "/a/-/b", "value": 1}], [{"op": "move", "from": "/metadata", "path": "/metadata/x"}],
                [{"op": "copy", "from": "/nope", "path": "/x"}], [{"op": "test", "path": "/metadata/name", "value": "no"}],
                [{"op": "remove", "path": "/metadata"}], [{"op": "add", "path": "/metadata/labels/~2", "value": "x"}],
                [{"op": "replace", "path": "", "value": None}], {"op": "add"}, [1, 2], [{"op": "add", "path": 5}],
            )
            return rng.choice(ops)
        if content_type == PATCH_TYPES[3]:
            return self._object(kind, "seed")
        choices: tuple[Any, ...] = (
            {"metadata": None}, {"spec": None}, {"metadata": {"name": "other"}}, {"kind": "Other"}, {"apiVersion": "x"},
            {"$patch": "delete"}, {"$patch": "replace"}, {"spec": {"template": {"spec": {"containers": [{"$patch": "delete"}]}}}},
            {"$setElementOrder/containers": [1]}, {"$retainKeys": "x"}, {"spec": {"containers": [{"name": 1}]}},
            {"metadata": {"labels": {"a": {"b": 1}}}}, {"metadata": {"finalizers": "x"}}, [1], "x", None,
            {"status": {"conditions": "x"}}, {"data": {"a": 1}}, {"metadata": {"resourceVersion": "1"}},
        )
        return rng.choice(choices)

    def requests(self, count: int) -> Iterator[FuzzRequest]:
        rng = self.rng
        verbs = ("get", "list", "watch", "create", "update", "patch", "delete", "deletecollection", "status")
        for index in range(count):
            kind = self.kinds[index % len(self.kinds)]
            verb = verbs[(index // len(self.kinds)) % len(verbs)] if rng.random() < 0.8 else rng.choice(verbs)
            name = "seed" if rng.random() < 0.6 else rng.choice(_NAMES)
            collection = kind.collection(self.namespace)
            item = f"{collection}/{name}"
            if verb == "get":
                yield FuzzRequest(verb, "GET", item + self._query(("resourceVersion", "includeObject")))
            elif verb == "list":
                keys = ("limit", "resourceVersion", "resourceVersionMatch", "labelSelector", "fieldSelector",
                        "continue", "includeObject")
                yield FuzzRequest(verb, "GET", collection + self._query(keys))
            elif verb == "watch":
                keys = ("resourceVersion", "labelSelector", "fieldSelector", "allowWatchBookmarks", "includeObject")
                timeout = rng.choice(("1", "1", "1", "-1", "x", str(2**64)))
                query = self._query(keys)
                joiner = "&" if query else "?"
                yield FuzzRequest(verb, "GET", f"{collection}{query}{joiner}watch=1&timeoutSeconds={timeout}")
            elif verb in ("create", "update", "status"):
                content_type = rng.choice((*JSON_TYPES, *YAML_TYPES, PROTOBUF, *GARBAGE_TYPES))
                body = self._encode(self._object(kind, name), content_type)
                query = self._query(("dryRun", "fieldManager", "fieldValidation"))
                if verb == "create":
                    yield FuzzRequest(verb, "POST", collection + query, content_type, body)
                else:
                    suffix = "/status" if verb == "status" else ""
                    yield FuzzRequest(verb, "PUT", item + suffix + query, content_type, body)
            elif verb == "patch":
                content_type = rng.choice((*PATCH_TYPES, *PATCH_TYPES, *GARBAGE_TYPES[:2], PROTOBUF))
                body = self._encode(self._patch_body(kind, content_type), content_type)
                query = self._query(("dryRun", "fieldManager", "force", "fieldValidation"))
                suffix = rng.choice(("", "", "", "/status", "/scale"))
                yield FuzzRequest(verb, "PATCH", item + suffix + query, content_type, body)
            else:
                options: tuple[Any, ...] = (
                    {"preconditions": "x"}, {"preconditions": {"uid": 1}}, {"preconditions": {"resourceVersion": []}},
                    {"propagationPolicy": 1}, {"propagationPolicy": "x"}, {"dryRun": "All"}, {"dryRun": ["All"]},
                    {"gracePeriodSeconds": "x"}, {"gracePeriodSeconds": 2**64}, [], "x", None, {"kind": "DeleteOptions"},
                )
                content_type = rng.choice(("application/json", "application/yaml", "text/plain", None))
                option = rng.choice(options)
                # kube reads no query next to a body: a delete's dry run goes in the body it sends.
                if verb == "delete" and (isinstance(option, dict) or option is None):
                    option = {"dryRun": ["All"], **(option or {})}
                body = None if content_type is None else self._encode(option, content_type)
                query = self._query(("dryRun", "propagationPolicy", "gracePeriodSeconds", "labelSelector"))
                # Keep the seed objects for the other verbs: deletes of them are dry runs, and a
                # delete-collection selects only what is labelled for it. kube reads a parameter's
                # first value, so a drawn selector is dropped (it would delete the hub's own RBAC).
                if verb == "deletecollection":
                    query = _without(query, "labelSelector")
                keep = "dryRun=All" if verb == "delete" else "labelSelector=fuzz%3Ddoomed"
                query = f"{query}&{keep}" if query else f"?{keep}"
                target = item if verb == "delete" else collection
                yield FuzzRequest(verb, "DELETE", target + query, content_type, body)


#: Requests aiohttp's parser refuses before any handler runs (they were logged as ERROR tracebacks).
RAW_MALFORMED: tuple[bytes, ...] = (
    b"GARBAGE\r\n\r\n",
    b"GET / HTTP/1.1\r\nHost: x\r\nBad Header Line\r\n\r\n",
    # A head past what kube-apiserver reads (1 MiB and its 4 KiB buffer): Go's 431.
    b"GET /readyz HTTP/1.1\r\nHost: x\r\nX-Long: " + b"a" * ((1 << 20) + 8192) + b"\r\n\r\n",
    b"POST /api/v1/namespaces HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
    b"POST /api/v1/namespaces HTTP/1.1\r\nHost: x\r\nContent-Length: -1\r\n\r\n",
    b"GET /\x00 HTTP/1.1\r\nHost: x\r\n\r\n",
    b"GET / HTTP/9.9\r\nHost: x\r\n\r\n",
    b"GET / HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\nhello",
)
