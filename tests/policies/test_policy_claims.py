"""Karmada's claim marks as values (``pkg/detector/claim.go``): one claimant's marks at a time, and a
policy stored before the hub gave permanent ids stands by its uid."""

from __future__ import annotations

from policies.claims import claim_marks, permanent_id, with_claim_marks
from policies.models import ClusterPropagationPolicy, PropagationPolicy

SPEC = {"resourceSelectors": [{"apiVersion": "apps/v1", "kind": "Deployment"}]}


def pp(**labels: str) -> PropagationPolicy:
    meta = {"name": "spread", "namespace": "ml", "uid": "u-1", "labels": labels}
    return PropagationPolicy.model_validate({"metadata": meta, "spec": SPEC})


def cpp() -> ClusterPropagationPolicy:
    meta = {
        "name": "everywhere",
        "uid": "u-2",
        "labels": {"clusterpropagationpolicy.karmada.io/permanent-id": "c-9"},
    }
    return ClusterPropagationPolicy.model_validate({"metadata": meta, "spec": SPEC})


def test_a_policy_without_a_permanent_id_stands_by_its_uid() -> None:
    assert permanent_id(pp()) == "u-1"
    assert permanent_id(pp(**{"propagationpolicy.karmada.io/permanent-id": "p-7"})) == "p-7"
    assert claim_marks(cpp()) == (
        {"clusterpropagationpolicy.karmada.io/permanent-id": "c-9"},
        {"clusterpropagationpolicy.karmada.io/name": "everywhere"},
    )


def test_a_claim_replaces_the_other_claimants_marks_and_a_release_keeps_the_rest() -> None:
    claimed = with_claim_marks({"name": "web", "labels": {"app": "web"}}, cpp())
    assert claimed is not None
    taken = with_claim_marks(claimed, pp())
    assert taken == {
        "name": "web",
        "labels": {"app": "web", "propagationpolicy.karmada.io/permanent-id": "u-1"},
        "annotations": {
            "propagationpolicy.karmada.io/namespace": "ml",
            "propagationpolicy.karmada.io/name": "spread",
        },
    }
    assert with_claim_marks(taken, pp()) is None  # marked so already: nothing to write
    assert with_claim_marks(taken, None) == {"name": "web", "labels": {"app": "web"}}
    assert with_claim_marks({"name": "web"}, None) is None
