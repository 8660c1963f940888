"""Request bodies are decoded within bounds: malformed or hostile JSON and YAML get a 400
naming what is wrong, fast, and never reach the object layer as something it cannot store."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from controlplane.apiserver import decoding, errors
from controlplane.apiserver.decoding import MAX_ALIAS_EXPANSION, MAX_DEPTH, decode_body, decode_body_sync

from .test_hostile_requests import alias_bomb, nested_json

YAML = "application/yaml"
JSON = "application/json"


@pytest.mark.parametrize(
    ("body", "media", "message"),
    [
        (alias_bomb(), YAML, "excessive aliasing"),
        (b"a: &a [1, *a]\n", YAML, "recursive document"),
        (b"a: &a {b: *a}\n", YAML, "recursive document"),
        (b"data: !!binary aGVsbG8=\n", YAML, "!!binary"),
        (b"x: !!set {a, b}\n", YAML, "set value"),
        (b"replicas: 18446744073709551616\n", YAML, "does not fit in 64 bits"),
        (b"replicas: -9223372036854775809\n", YAML, "does not fit in 64 bits"),
        (b"? [a]\n: b\n", YAML, "unhashable"),
        (b"!!python/object:os.system x\n", YAML, "could not determine a constructor"),
        (b"- " * (MAX_DEPTH + 1) + b"x\n", YAML, f"deeper than {MAX_DEPTH}"),
        (nested_json(1000), JSON, f"deeper than {MAX_DEPTH}"),
        (b'{"a":' * (MAX_DEPTH + 1) + b"1" + b"}" * (MAX_DEPTH + 1), JSON, f"deeper than {MAX_DEPTH}"),
        (b"a: [", YAML, "yaml: line 1: did not find expected node content"),
        (b'{"a": ', JSON, "unexpected end of JSON input"),
        (b"\xff\xfe", JSON, "invalid character 'ÿ' looking for beginning of value"),
        (b"   ", JSON, "unexpected end of JSON input"),
        (b"   ", YAML, "empty"),
    ],
    ids=[
        "alias-bomb", "recursive-sequence", "recursive-mapping", "binary", "set", "int-over-64-bits",
        "int-under-64-bits", "unhashable-key", "python-tag", "deep-yaml", "json-1000-deep", "deep-json-objects",
        "truncated-yaml", "truncated-json", "not-utf8", "blank", "blank-yaml",
    ],
)
def test_hostile_or_malformed_bodies_are_a_400(body: bytes, media: str, message: str) -> None:
    started = time.perf_counter()
    with pytest.raises(errors.BadRequest) as caught:
        decode_body_sync(body, media=media)
    elapsed = time.perf_counter() - started
    print(f"{len(body)} bytes refused in {elapsed * 1000:.1f} ms: {caught.value.message[:100]}")
    assert message in caught.value.message
    assert caught.value.code == 400


@pytest.mark.parametrize(
    ("body", "media", "expected"),
    [
        # Anchors a person writes to share a block are fine, merge keys included.
        (b"base: &b {cpu: 1}\nx: *b\ny: {<<: *b, gpu: 2}\n", YAML, {"base": {"cpu": 1}, "x": {"cpu": 1}, "y": {"cpu": 1, "gpu": 2}}),
        # Timestamps stay the strings they were written as; keys become strings (sigs.k8s.io/yaml).
        (b"t: 2024-05-01T10:00:00Z\n1: one\nfalse: no\n", YAML, {"t": "2024-05-01T10:00:00Z", "1": "one", "false": False}),
        (b"n: 18446744073709551615\n", YAML, {"n": 2**64 - 1}),
        (b'{"a": [1, 2.5, null, true, "s"]}', JSON, {"a": [1, 2.5, None, True, "s"]}),
        (nested_json(MAX_DEPTH), JSON, None),
    ],
    ids=["anchors-and-merge", "timestamps-and-keys", "uint64", "json", "json-at-the-depth-limit"],
)
def test_ordinary_bodies_decode(body: bytes, media: str, expected: Any) -> None:
    decoded = decode_body_sync(body, media=media)
    if expected is not None:
        assert decoded == expected


def test_aliases_may_repeat_a_block_up_to_the_budget() -> None:
    block = b"[" + b",".join([b"1"] * 99) + b"]"  # 100 nodes
    within = MAX_ALIAS_EXPANSION // 100 - 1
    body = b"a: &a " + block + b"\nb: [" + b",".join([b"*a"] * within) + b"]\n"
    assert len(decode_body_sync(body, media=YAML)["b"]) == within
    over = b"a: &a " + block + b"\nb: [" + b",".join([b"*a"] * (within + 2)) + b"]\n"
    with pytest.raises(errors.BadRequest, match="excessive aliasing"):
        decode_body_sync(over, media=YAML)


async def test_large_yaml_decodes_in_a_worker_thread(monkeypatch: pytest.MonkeyPatch) -> None:
    threads: list[int] = []
    real = decoding.decode_body_sync

    def recording(raw: bytes, *, media: str) -> Any:
        threads.append(threading.get_ident())
        return real(raw, media=media)

    monkeypatch.setattr(decoding, "decode_body_sync", recording)
    small = await decode_body(b"data: {a: b}\n", media=YAML)
    body = b"data:\n" + b"".join(b"  k%d: v\n" % i for i in range(20000))
    large = await decode_body(body, media=YAML)
    assert small == {"data": {"a": "b"}} and len(large["data"]) == 20000
    assert threads[0] == threading.get_ident(), "a small body is decoded inline"
    assert threads[1] != threading.get_ident(), "a large YAML body is decoded off the event loop's thread"


@pytest.mark.parametrize(
    ("body", "cause"),
    [
        # A scanner error's line is one-based, a parser error's the parser's zero-based one, and
        # none is given for the first line: as go-yaml v2 counts them.
        (b"a: b\n c: d\n", "yaml: line 2: mapping values are not allowed in this context"),
        (b"a:\n  b: c\n d: e\n", "yaml: line 2: did not find expected key"),
        (b'"abc', "yaml: found unexpected end of stream"),
        (b"a: @b", "yaml: found character that cannot start any token"),
        (b"- a\nb: c\n", "yaml: line 1: did not find expected '-' indicator"),
    ],
)
def test_yaml_that_does_not_parse_carries_go_yamls_words(body: bytes, cause: str) -> None:
    with pytest.raises(decoding.MalformedBody) as caught:
        decode_body_sync(body, media=YAML)
    assert (caught.value.cause, caught.value.is_yaml) == (cause, True)
