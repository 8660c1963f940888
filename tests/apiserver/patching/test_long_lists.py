"""Long lists cost merge time in proportion to their length, not its square.

A strategic merge patch indexes each merged list once (an item's identity, its merge key's
canonical JSON, computed once per item), and server-side apply prunes the items a manager gave up
in one walk that indexes each list once. Counted, not timed: the identities computed stay a small
multiple of the items (the quadratic merge computed one per stored item for every patch item).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from controlplane.apiserver.patching import fieldpaths, merging, strategic, strategic_merge_patch
from controlplane.apiserver.patching.merging import remove_paths
from controlplane.apiserver.patching.schema import builtin_apply_schema

from .builders import make_object, server_side_apply

N = 2000
DEPLOYMENT = builtin_apply_schema("apps", "Deployment")


def deployment(containers: list[dict[str, Any]], **metadata: Any) -> dict[str, Any]:
    spec = {"selector": {"matchLabels": {"a": "b"}}, "template": {"spec": {"containers": containers}}}
    return make_object("Deployment", "web", metadata=metadata, spec=spec)


def env(count: int, value: str = "v", start: int = 0) -> list[dict[str, str]]:
    return [{"name": f"e{i}", "value": value} for i in range(start, start + count)]


def containers_of(obj: dict[str, Any]) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = obj["spec"]["template"]["spec"]["containers"]
    return found


@pytest.fixture
def identities(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """How many times an item's identity (its canonical JSON) is computed."""
    calls = [0]
    real = fieldpaths.canonical_json

    def counting(value: Any) -> str:
        calls[0] += 1
        return real(value)

    monkeypatch.setattr(fieldpaths, "canonical_json", counting)
    monkeypatch.setattr(strategic, "canonical_json", counting)
    return calls


def _pod(patch: dict[str, Any]) -> dict[str, Any]:
    return {"spec": {"template": {"spec": patch}}}


# (live, patch, check of the result)
LongCase = tuple[dict[str, Any], dict[str, Any], Callable[[dict[str, Any]], bool]]


def _long_cases() -> dict[str, LongCase]:
    one = [{"name": "c", "image": "x"}]
    names = [{"name": f"c{i}"} for i in range(N)]
    return {
        "env entries added to a container": (
            deployment(one),
            _pod({"containers": [{"name": "c", "env": env(N)}]}),
            lambda out: containers_of(out)[0]["env"] == env(N),
        ),
        "every stored env entry changed": (
            deployment([{"name": "c", "image": "x", "env": env(N)}]),
            _pod({"containers": [{"name": "c", "env": env(N, "w")}]}),
            lambda out: containers_of(out)[0]["env"] == env(N, "w"),
        ),
        "half the entries changed, half added": (
            deployment([{"name": "c", "image": "x", "env": env(N)}]),
            _pod({"containers": [{"name": "c", "env": env(N, "w", start=N // 2)}]}),
            lambda out: containers_of(out)[0]["env"] == env(N // 2) + env(N, "w", start=N // 2),
        ),
        "$setElementOrder of every container": (
            deployment(one),
            _pod({"$setElementOrder/containers": names, "containers": [{**n, "image": "x"} for n in names]}),
            lambda out: [c["name"] for c in containers_of(out)] == [n["name"] for n in names] + ["c"],
        ),
        "$patch: delete of half the containers": (
            deployment([{"name": f"c{i}", "image": "x"} for i in range(N)]),
            _pod({"containers": [{"$patch": "delete", "name": f"c{i}"} for i in range(0, N, 2)]}),
            lambda out: [c["name"] for c in containers_of(out)] == [f"c{i}" for i in range(1, N, 2)],
        ),
        "finalizers merged as a set": (
            deployment(one, finalizers=[f"f{i}" for i in range(N)]),
            {"metadata": {"finalizers": [f"f{i}" for i in range(N // 2, N + N // 2)]}},
            lambda out: sorted(out["metadata"]["finalizers"]) == sorted(f"f{i}" for i in range(N + N // 2)),
        ),
        "$deleteFromPrimitiveList of half the finalizers": (
            deployment(one, finalizers=[f"f{i}" for i in range(N)]),
            {"metadata": {"$deleteFromPrimitiveList/finalizers": [f"f{i}" for i in range(0, N, 2)]}},
            lambda out: out["metadata"]["finalizers"] == [f"f{i}" for i in range(1, N, 2)],
        ),
    }


LONG_CASES = _long_cases()


@pytest.mark.parametrize("name", list(LONG_CASES))
def test_a_strategic_merge_computes_each_items_identity_a_few_times(name: str, identities: list[int]) -> None:
    live, patch, check = LONG_CASES[name]

    result = strategic_merge_patch(live, patch, kind="Deployment")

    assert check(result)
    assert identities[0] < 10 * N, f"{identities[0]} identities computed for {N} items"


def test_an_apply_giving_up_many_items_of_a_kept_list_prunes_them_in_one_walk(identities: list[int]) -> None:
    # m1 applied N env entries; m2 owns one more, so the list stays and m1's N items are pruned.
    first = server_side_apply(
        None, deployment([{"name": "c", "image": "x", "env": env(N)}]), manager="m1", force=False, now="t1"
    )
    shared = server_side_apply(
        first,
        deployment([{"name": "c", "image": "x", "env": [{"name": "keep", "value": "k"}]}]),
        manager="m2",
        force=False,
        now="t2",
    )
    identities[0] = 0

    result = server_side_apply(
        shared, deployment([{"name": "c", "image": "x"}]), manager="m1", force=False, now="t3"
    )

    assert containers_of(result)[0]["env"] == [{"name": "keep", "value": "k"}]
    assert identities[0] < 10 * N, f"{identities[0]} identities computed for {N} items"


def _env_path(name: str, *rest: tuple[str, str]) -> tuple[tuple[str, str], ...]:
    return (
        ("f", "spec"),
        ("f", "template"),
        ("f", "spec"),
        ("f", "containers"),
        ("k", '{"name":"c"}'),
        ("f", "env"),
        ("k", f'{{"name":"{name}"}}'),
        *rest,
    )


def test_removing_many_items_reads_each_items_key_once(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = [0]
    real = merging.item_element

    def counting(item: Any, schema: Any) -> Any:
        calls[0] += 1
        return real(item, schema)

    monkeypatch.setattr(merging, "item_element", counting)
    obj = deployment([{"name": "c", "image": "x", "env": [*env(N), {"name": "keep", "value": "k"}]}])
    doomed = [_env_path(f"e{i}") for i in range(N)] + [_env_path(f"e{i}", ("f", "value")) for i in range(N)]

    remove_paths(obj, doomed, DEPLOYMENT)

    assert containers_of(obj)[0]["env"] == [{"name": "keep", "value": "k"}]
    assert calls[0] < 3 * N, f"{calls[0]} keys read for {N + 1} items"


def test_paths_below_one_item_are_all_removed_though_one_is_its_key() -> None:
    # As kube's structured-merge-diff removes a set of paths: every item is matched by its key as
    # the object stood, so removing the item's key field does not hide the item from the others.
    obj = deployment(
        [{"name": "c", "image": "x", "env": [{"name": "a", "value": "1"}, {"name": "b", "value": "2"}]}]
    )

    remove_paths(obj, [_env_path("a", ("f", "name")), _env_path("a", ("f", "value"))], DEPLOYMENT)

    assert containers_of(obj)[0]["env"] == [{}, {"name": "b", "value": "2"}]
