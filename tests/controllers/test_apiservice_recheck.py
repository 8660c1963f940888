"""An Available aggregated APIService is checked again after the controller's recheck period
(kube's 10 s unless the hub's settings shorten it); a failing one after the retry period."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from controlplane.apis.kube.apiregistration import APIServiceView
from controlplane.apiserver.objects import ObjectStore
from controlplane.controllers.apiserviceavailability import (
    RECHECK_SECONDS,
    RETRY_SECONDS,
    AvailabilityController,
)

NAME = "v1.widgets.example.com"


class Answering:
    """A discovery check that passes, or fails as an unreachable server does."""

    def __init__(self, *, up: bool) -> None:
        self.up = up

    async def check(self, view: APIServiceView) -> dict[str, Any]:
        if not self.up:
            raise ConnectionError("connection refused")
        return {}


async def _registered(objects: ObjectStore) -> None:
    registry = objects.registry
    await objects.create(registry.require("v1", "Namespace"), {
        "apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ext"}})
    await objects.create(registry.require("v1", "Service"), {
        "apiVersion": "v1", "kind": "Service", "metadata": {"name": "widgets", "namespace": "ext"},
        "spec": {"ports": [{"name": "https", "port": 443, "targetPort": 8443}]}}, namespace="ext")
    await objects.create(registry.require("v1", "Endpoints"), {
        "apiVersion": "v1", "kind": "Endpoints", "metadata": {"name": "widgets", "namespace": "ext"},
        "subsets": [{"addresses": [{"ip": "127.0.0.1"}], "ports": [{"name": "https", "port": 8443}]}]}, namespace="ext")
    await objects.create(registry.require("apiregistration.k8s.io/v1", "APIService"), {
        "apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService", "metadata": {"name": NAME},
        "spec": {"group": "widgets.example.com", "version": "v1", "groupPriorityMinimum": 1000,
                 "versionPriority": 15, "insecureSkipTLSVerify": True,
                 "service": {"namespace": "ext", "name": "widgets", "port": 443}}})


@pytest.mark.parametrize(
    ("options", "up", "again"),
    [
        ({}, True, RECHECK_SECONDS),
        ({"recheck_seconds": 0.5}, True, 0.5),
        ({"recheck_seconds": 0.5}, False, RETRY_SECONDS),
    ],
    ids=["kube's period", "a shorter one", "failing: the retry period"],
)
async def test_an_aggregated_apiservice_is_checked_again(
    objects: ObjectStore, options: dict[str, float], up: bool, again: float
) -> None:
    await _registered(objects)
    controller = AvailabilityController(objects, Answering(up=up), **options)
    async with asyncio.TaskGroup() as group:
        running = group.create_task(controller.api_services.run())
        await controller.api_services.synced.wait()
        assert await controller.reconcile(NAME) == again
        running.cancel()
