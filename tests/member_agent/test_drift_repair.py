"""Drift in the member is repaired at once, as Karmada's work status controller repairs it: an
object a Work applied and that is deleted in the member is created again, and a field the Work
sets and that is edited there is put back, without waiting for the periodic resync (longer than
these tests); a label added in the member is kept. A member rewriting a field again and again
has the agent back off (:class:`~member_agent.drift.DriftBackoff`).

The agent runs against a real hub and an in-process member API, as in ``test_agent_integration``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from controlplane.apiserver.patches import PatchType
from member_agent import drift
from member_agent.agent import Agent
from member_agent.drift import (
    ANNOTATION_DIGESTS,
    CONTENT_DIGEST,
    AppliedVersions,
    DriftBackoff,
    annotation_digests,
    content_digest,
    drifted,
)
from tests.member_agent import test_agent_integration as integration
from tests.member_agent.test_agent_integration import (
    CONFIGMAP,
    DEPLOYMENT,
    Hub,
    Member,
    eventually,
    joining_agent_config,
    work_object,
)

pytestmark = [pytest.mark.timeout(120), pytest.mark.waiting]
#: The integration tests' real hub and in-process member.
hub = integration.hub
member = integration.member


async def test_an_object_deleted_or_edited_in_the_member_is_put_back(
    hub: Hub, member: Member, tmp_path: Path
) -> None:
    assert hub.objects is not None
    cfg = await joining_agent_config(hub, member, tmp_path / "agent")
    assert cfg.resync_interval > 120  # longer than the test: the repair is not the periodic one
    work_rt = hub.objects.registry.require("work.gpufed.io/v1alpha1", "Work")
    deployments, configmaps = member.rt("apps/v1", "Deployment"), member.rt("v1", "ConfigMap")
    async with Agent(cfg):
        labelled = {**DEPLOYMENT, "metadata": {**DEPLOYMENT["metadata"], "labels": {"app": "infer"}}}
        await hub.objects.create(work_rt, work_object("infer", [labelled, CONFIGMAP]))
        first = await eventually(
            lambda: member.get("apps/v1", "Deployment", "infer", "ml"), what="the Deployment in the member"
        )
        await eventually(
            lambda: member.get("v1", "ConfigMap", "settings", "ml"), what="the ConfigMap in the member"
        )

        # Deleted by hand: created again.
        await member.objects.delete(deployments, namespace="ml", name="infer")

        async def recreated() -> dict[str, Any] | None:
            live = await member.get("apps/v1", "Deployment", "infer", "ml")
            return live if live is not None and live["metadata"]["uid"] != first["metadata"]["uid"] else None

        await eventually(recreated, what="the deleted Deployment created again")

        # Scaled and given another image by hand, and labelled: the Work's fields come back, the
        # label stays (the apply sets only the fields the Work sets).
        live = await member.get("apps/v1", "Deployment", "infer", "ml")
        assert live is not None
        live["spec"]["replicas"] = 7
        live["spec"]["template"]["spec"]["containers"][0]["image"] = "evil:1"
        live["metadata"]["labels"]["team"] = "by-hand"
        edited = await member.objects.update(deployments, live, field_manager="kubectl-edit")

        async def put_back() -> dict[str, Any] | None:
            now = await member.get("apps/v1", "Deployment", "infer", "ml")
            if now is None or now["metadata"]["generation"] == edited["metadata"]["generation"]:
                return None
            return now

        repaired = await eventually(put_back, what="the edited Deployment put back")
        assert repaired["spec"]["replicas"] == 2
        assert repaired["spec"]["template"]["spec"]["containers"][0]["image"] == "infer:1"
        assert repaired["metadata"]["labels"]["team"] == "by-hand"

        # A label the Work sets, changed by hand (no new generation: a metadata edit): put back,
        # as Karmada compares labels and annotations when the generations agree.
        live = await member.get("apps/v1", "Deployment", "infer", "ml")
        assert live is not None
        live["metadata"]["labels"]["app"] = "by-hand"
        relabelled = await member.objects.update(deployments, live, field_manager="kubectl-edit")
        assert relabelled["metadata"]["generation"] == live["metadata"]["generation"]

        async def label_back() -> bool:
            now = await member.get("apps/v1", "Deployment", "infer", "ml")
            return now is not None and now["metadata"]["labels"].get("app") == "infer"

        await eventually(label_back, what="the label the Work sets put back")

        # A kind without a generation: a changed value is put back too.
        await member.objects.patch(
            configmaps,
            namespace="ml",
            name="settings",
            patch_type=PatchType.MERGE,
            patch={"data": {"k": "by-hand"}},
            field_manager="kubectl-edit",
        )

        async def value_back() -> bool:
            now = await member.get("v1", "ConfigMap", "settings", "ml")
            return now is not None and now["data"]["k"] == "v"

        await eventually(value_back, what="the edited ConfigMap put back")


def test_drift_is_a_newer_generation_or_other_content() -> None:
    versions = AppliedVersions()
    ref = ("apps", "Deployment", "ml", "infer")
    versions.applied(ref, {"metadata": {"generation": 3, "resourceVersion": "40"}})
    recorded = versions.get(ref)
    assert recorded is not None
    assert not drifted(recorded, {"metadata": {"generation": 3, "resourceVersion": "41"}})  # a status write
    assert not drifted(recorded, {"metadata": {"generation": 2, "resourceVersion": "39"}})  # an older event
    assert drifted(recorded, {"metadata": {"generation": 4, "resourceVersion": "42"}})
    # A kind without a generation: its content, not its resourceVersion, which another
    # controller's annotation or a status write moves too.
    versions.applied(ref, {"metadata": {"resourceVersion": "50"}, "data": {"k": "v"}})
    recorded = versions.get(ref)
    assert recorded is not None
    assert not drifted(
        recorded,
        {"metadata": {"resourceVersion": "51", "annotations": {"reloader": "1"}}, "data": {"k": "v"}},
    )
    assert not drifted(
        recorded,
        {"metadata": {"resourceVersion": "52"}, CONTENT_DIGEST: content_digest({"data": {"k": "v"}})},
    )
    assert drifted(recorded, {"metadata": {"resourceVersion": "53"}, "data": {"k": "by-hand"}})
    versions.forget(ref)
    assert versions.get(ref) is None


def test_drift_is_a_label_or_annotation_the_work_sets_changed() -> None:
    versions = AppliedVersions()
    ref = ("apps", "Deployment", "ml", "infer")
    manifest = {"metadata": {"labels": {"app": "infer"}, "annotations": {"note": "x"}}}
    answer = {
        "metadata": {
            "generation": 3,
            "resourceVersion": "40",
            "labels": {"app": "infer", "member": "own"},
            "annotations": {"note": "x", "deployment.kubernetes.io/revision": "1"},
        }
    }
    versions.applied(ref, answer, manifest)
    recorded = versions.get(ref)
    assert recorded is not None

    def live(rv: str, labels: dict[str, str], annotations: dict[str, str]) -> dict[str, Any]:
        return {
            "metadata": {"generation": 3, "resourceVersion": rv, "labels": labels, "annotations": annotations}
        }

    # Labels and annotations the Work does not set come and go: no drift.
    assert not drifted(recorded, live("41", {"app": "infer", "team": "t"}, {"note": "x"}))
    assert drifted(recorded, live("42", {"app": "by-hand"}, {"note": "x"}))
    assert drifted(recorded, live("43", {}, {"note": "x"}))  # removed
    assert drifted(recorded, live("44", {"app": "infer"}, {"note": "edited"}))
    # The watch's trimmed copy carries the annotations' digests, not their values.
    trimmed: dict[str, Any] = {
        "metadata": {"generation": 3, "resourceVersion": "45", "labels": {"app": "infer"}}
    }
    trimmed[ANNOTATION_DIGESTS] = annotation_digests(live("45", {}, {"note": "x"}))
    assert not drifted(recorded, trimmed)
    trimmed[ANNOTATION_DIGESTS] = annotation_digests(live("45", {}, {"note": "by-hand"}))
    assert drifted(recorded, trimmed)
    # An event from before the apply's answer is no drift, whatever its labels.
    assert not drifted(recorded, live("39", {"app": "old"}, {"note": "x"}))
    # Without the manifest, the labels are not compared.
    versions.applied(ref, answer)
    recorded = versions.get(ref)
    assert recorded is not None
    assert not drifted(recorded, live("46", {"app": "by-hand"}, {}))


def test_a_work_drifting_again_and_again_is_repaired_later_and_later() -> None:
    backoff = DriftBackoff()
    delays = [backoff.delay("ns/w", now=float(t)) for t in range(12)]
    assert delays[0] == 0.0
    assert delays[1:5] == [1.0, 2.0, 4.0, 8.0]
    assert max(delays) == drift.MAX_DRIFT_DELAY
    assert backoff.delay("ns/other", now=0.0) == 0.0  # per Work
    # Quiet long enough: at once again.
    assert backoff.delay("ns/w", now=10_000.0 + drift.DRIFT_RESET) == 0.0
