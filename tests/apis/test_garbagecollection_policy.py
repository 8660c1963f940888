"""kube's choice of the garbage collector's finalizers on a delete (deletionFinalizersForGarbageCollection)."""

from __future__ import annotations

import pytest

from controlplane.apis.kube.garbagecollection import (
    GarbageCollectionPolicy,
    default_policy,
    deletion_finalizers,
)

DELETE = GarbageCollectionPolicy.DELETE_DEPENDENTS
ORPHAN = GarbageCollectionPolicy.ORPHAN_DEPENDENTS
UNSUPPORTED = GarbageCollectionPolicy.UNSUPPORTED


@pytest.mark.parametrize(
    ("finalizers", "policy", "orphan_dependents", "propagation", "expected"),
    [
        ([], DELETE, None, None, None),
        ([], DELETE, None, "Foreground", ["foregroundDeletion"]),
        ([], DELETE, None, "Orphan", ["orphan"]),
        ([], DELETE, True, None, ["orphan"]),
        ([], DELETE, False, None, None),
        # the kind's default
        ([], ORPHAN, None, None, ["orphan"]),
        ([], ORPHAN, None, "Background", None),
        ([], ORPHAN, False, None, None),
        # a finalizer already there decides when the options do not
        (["foregroundDeletion"], ORPHAN, None, None, None),
        (["a", "orphan"], DELETE, None, None, None),
        # the options replace it; others keep their order
        (["a", "foregroundDeletion", "b"], DELETE, None, "Orphan", ["a", "b", "orphan"]),
        (["a", "orphan"], DELETE, None, "Background", ["a"]),
        (["orphan"], DELETE, False, None, []),
        # Unsupported: neither, whatever is asked
        ([], UNSUPPORTED, None, "Foreground", None),
        (["orphan"], UNSUPPORTED, None, None, []),
    ],
)
def test_deletion_finalizers(
    finalizers: list[str], policy: GarbageCollectionPolicy, orphan_dependents: bool | None,
    propagation: str | None, expected: list[str] | None,
) -> None:
    assert deletion_finalizers(
        finalizers, policy=policy, orphan_dependents=orphan_dependents, propagation=propagation
    ) == expected


@pytest.mark.parametrize(
    ("group", "version", "kind", "expected"),
    [
        ("batch", "v1", "Job", ORPHAN),
        ("", "v1", "ReplicationController", ORPHAN),
        ("", "v1", "Event", UNSUPPORTED),
        ("events.k8s.io", "v1", "Event", UNSUPPORTED),
        ("apps", "v1", "Deployment", DELETE),
        ("batch", "v1", "CronJob", DELETE),
        ("ml.example.com", "v1", "Trainer", DELETE),
    ],
)
def test_default_policy(group: str, version: str, kind: str, expected: GarbageCollectionPolicy) -> None:
    assert default_policy(group, version, kind) is expected
