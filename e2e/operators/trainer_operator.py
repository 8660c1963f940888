"""A small kopf operator for the Trainer kind (e2e/manifests/crd/trainers.yaml), run against the
hub in e2e/test_crd_kopf.py: on create it records an Event and sets ``status.phase``; its delete
handler holds a finalizer until it has run, and records an Event too."""

from __future__ import annotations

from typing import Any

import kopf


@kopf.on.startup()
def configure(settings: kopf.OperatorSettings, **_: Any) -> None:
    # Progress kept in annotations (not status): works for any kind; no peering objects needed.
    settings.persistence.progress_storage = kopf.AnnotationsProgressStorage(prefix="ml.example.com")
    settings.persistence.diffbase_storage = kopf.AnnotationsDiffBaseStorage(prefix="ml.example.com")
    settings.posting.level = 0


@kopf.on.create("ml.example.com", "v1", "trainers")
def created(spec: dict[str, Any], patch: kopf.Patch, body: kopf.Body, **_: Any) -> None:
    kopf.info(body, reason="Training", message=f"training {spec.get('model')}")
    patch.status["phase"] = "Training"
    patch.status["replicas"] = spec.get("replicas", 0)


@kopf.on.update("ml.example.com", "v1", "trainers", field="spec.replicas")
def rescaled(new: Any, patch: kopf.Patch, **_: Any) -> None:
    patch.status["replicas"] = new


@kopf.on.delete("ml.example.com", "v1", "trainers")
def deleted(body: kopf.Body, **_: Any) -> None:
    kopf.info(body, reason="Released", message="trainer released")
