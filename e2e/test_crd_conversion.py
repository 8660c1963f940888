"""A CRD with a conversion webhook, driven with the real kubectl: a real HTTPS webhook started by
the test converts CronTabs stored as v1 (``spec.cronSpec``) to v2 (``spec.schedule``) for
``kubectl get crontabs.v2.stable.example.com``; a v2 manifest applies, client-side and server-side; a webhook that is down is
kube's error, printed by kubectl."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from e2e.harness import wait_for
from tests.apiserver.test_crd_conversion_webhook import crd, crontab

pytestmark = pytest.mark.e2e


def test_kubectl_reads_and_applies_crontabs_through_the_conversion_webhook(processes, tmp_path: Path) -> None:
    from tests.webhookserver import webhook_server_thread

    _, kubectl = processes.start_hub()
    with webhook_server_thread(tmp_path / "webhook") as server:
        applied = kubectl.run("apply", "-f", "-", input_text=yaml.safe_dump(crd(server.client("/convert"))))
        assert "customresourcedefinition.apiextensions.k8s.io/crontabs.stable.example.com created" in applied.stdout
        kubectl.run("wait", "--for=condition=Established", "crd/crontabs.stable.example.com", "--timeout=30s")
        kubectl.run("apply", "-f", "-", input_text=yaml.safe_dump(crontab("v1", "nightly", cronSpec="0 3 * * *")))

        got = kubectl.json("get", "crontabs.v2.stable.example.com", "nightly")
        assert (got["apiVersion"], got["spec"]) == ("stable.example.com/v2", {"schedule": "0 3 * * *"})
        table = kubectl.run("get", "crontabs.v2.stable.example.com").stdout
        assert table.split("\n")[1].split()[:2] == ["nightly", "0"], table  # the v2 Schedule column

        # A v2 manifest is stored as v1; applied again (a merge patch), the change reaches storage too.
        weekly = crontab("v2", "weekly", schedule="0 4 * * 0")
        kubectl.run("apply", "-f", "-", input_text=yaml.safe_dump(weekly))
        weekly["spec"]["schedule"] = "0 5 * * 0"
        kubectl.run("apply", "-f", "-", input_text=yaml.safe_dump(weekly))
        stored = kubectl.json("get", "crontabs.v1.stable.example.com", "weekly")
        assert (stored["apiVersion"], stored["spec"]) == ("stable.example.com/v1", {"cronSpec": "0 5 * * 0"})

        # Server-side apply of a v2 manifest: made in v2, stored as v1; a second manager's apply of
        # the same field conflicts until forced.
        hourly = crontab("v2", "hourly", schedule="0 * * * *")
        kubectl.run("apply", "--server-side", "--field-manager=ops", "-f", "-", input_text=yaml.safe_dump(hourly))
        stored = kubectl.json("get", "crontabs.v1.stable.example.com", "hourly", "--show-managed-fields")
        assert stored["spec"] == {"cronSpec": "0 * * * *"}
        assert [(e["manager"], e["apiVersion"]) for e in stored["metadata"]["managedFields"]] == [
            ("ops", "stable.example.com/v2")
        ]
        hourly["spec"]["schedule"] = "30 * * * *"
        conflicting = kubectl.run(
            "apply", "--server-side", "--field-manager=other", "-f", "-", input_text=yaml.safe_dump(hourly), check=False
        )
        assert conflicting.returncode != 0 and 'conflict with "ops": .spec.schedule' in conflicting.stderr, conflicting.stderr
        kubectl.run(
            "apply", "--server-side", "--field-manager=other", "--force-conflicts", "-f", "-", input_text=yaml.safe_dump(hourly)
        )
        stored = kubectl.json("get", "crontabs.v1.stable.example.com", "hourly")
        assert stored["spec"] == {"cronSpec": "30 * * * *"}

        down = {"spec": {"conversion": {"webhook": {"clientConfig": {"url": "https://127.0.0.1:1/convert"}}}}}
        kubectl.run("patch", "crd", "crontabs.stable.example.com", "--type", "merge", "-p", json.dumps(down))
        results = []

        def refused() -> bool:
            results.append(kubectl.run("get", "crontabs.v2.stable.example.com", "nightly", check=False))
            return results[-1].returncode != 0

        wait_for(refused, timeout=30, what="the hub to call the webhook that is down")
        assert ('Error from server: conversion webhook for stable.example.com/v1, Kind=CronTab failed: '
                'Post "https://127.0.0.1:1/convert?timeout=30s": dial tcp 127.0.0.1:1: connect: connection refused'
                ) in results[-1].stderr, results[-1].stderr
