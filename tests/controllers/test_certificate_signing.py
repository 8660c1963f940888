"""The hub's CSR signer and cleaner over a real in-memory store, with a CA made for the test and a
clock the test moves: an approved ``kubernetes.io/kube-apiserver-client`` CSR gets a certificate
(also one approved while no signer ran: the state is the object); without the CA key nothing is
signed; kube's cleaner deletes what it would, when it would."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import datetime as dt
from collections.abc import AsyncIterator, Coroutine
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from controlplane.apiserver import errors
from controlplane.apiserver.objects import ObjectStore
from controlplane.controllers.certificatesigning import CertificateSigningController
from controlplane.pki import ca_files, load_or_create_ca
from controlplane.storage import MemoryStore

from .fleet import eventually, hub_objects


@contextlib.asynccontextmanager
async def supervised(run: Coroutine[Any, Any, None]) -> AsyncIterator[None]:
    task = asyncio.create_task(run)
    try:
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


START = dt.datetime(2026, 1, 5, 12, 0, tzinfo=dt.UTC)


def request_pem(name: str) -> str:
    key = ec.generate_private_key(ec.SECP256R1())
    csr = (x509.CertificateSigningRequestBuilder()
           .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])).sign(key, hashes.SHA256()))
    return base64.b64encode(csr.public_bytes(serialization.Encoding.PEM)).decode()


@dataclass
class Fleet:
    objects: ObjectStore
    pki: Path
    now: list[dt.datetime]

    @property
    def rt(self) -> Any:
        return self.objects.registry.require("certificates.k8s.io/v1", "CertificateSigningRequest")

    def controller(self, *, with_key: bool = True) -> CertificateSigningController:
        cert, key = ca_files(self.pki)
        return CertificateSigningController(
            self.objects, ca_files=(cert, key if with_key else self.pki / "missing.key"),
            clock=lambda: self.now[0], cleaning_seconds=3600.0,
        )

    async def create(self, name: str, *, usages: tuple[str, ...] = ("client auth",)) -> None:
        await self.objects.create(self.rt, {"metadata": {"name": name}, "spec": {
            "request": request_pem(name), "signerName": "kubernetes.io/kube-apiserver-client", "usages": list(usages)}})

    async def decide(self, name: str, condition: str) -> None:
        csr = await self.objects.get(self.rt, name=name)
        csr["status"] = {"conditions": [{"type": condition, "status": "True", "reason": "Test"}]}
        await self.objects.update(self.rt, csr, subresource="approval")

    async def get(self, name: str) -> dict[str, Any] | None:
        try:
            return await self.objects.get(self.rt, name=name)
        except errors.NotFound:
            return None


@pytest.fixture
async def fleet(tmp_path: Path) -> AsyncIterator[Fleet]:
    load_or_create_ca(*ca_files(tmp_path), common_name="test-ca")
    yield Fleet(await hub_objects(MemoryStore()), tmp_path, [START])


async def test_an_approved_client_csr_is_signed_also_after_a_restart(fleet: Fleet) -> None:
    await fleet.create("early")
    await fleet.decide("early", "Approved")  # approved while no signer runs
    async with supervised(fleet.controller().run()):
        async def signed() -> str | None:
            csr = await fleet.get("early")
            return None if csr is None else csr["status"].get("certificate")

        pem = base64.b64decode(await eventually(signed, what="a certificate"))
        cert = x509.load_pem_x509_certificate(pem)
        assert cert.subject.rfc4514_string() == "CN=early"
        assert cert.not_valid_before_utc == START - dt.timedelta(minutes=5)
        assert cert.not_valid_after_utc == START + dt.timedelta(days=365) - dt.timedelta(minutes=5)
        await fleet.create("client")
        await fleet.decide("client", "Approved")

        async def client_signed() -> str | None:
            csr = await fleet.get("client")
            return None if csr is None else csr["status"].get("certificate")

        await eventually(client_signed, what="the second certificate")


async def test_without_the_ca_key_approved_csrs_stay_unsigned(fleet: Fleet) -> None:
    await fleet.create("unsigned")
    await fleet.decide("unsigned", "Approved")
    controller = fleet.controller(with_key=False)
    async with supervised(controller.run()):
        await eventually(lambda: _synced(controller), what="the informer")
        await controller.reconcile("unsigned")
        csr = await fleet.get("unsigned")
        assert csr is not None and "certificate" not in csr["status"], csr


async def _synced(controller: CertificateSigningController) -> bool:
    return controller.requests.synced.is_set()


async def test_the_cleaner_deletes_what_kubes_cleaner_deletes_when_it_would(fleet: Fleet) -> None:
    for name in ("pending", "denied", "issued"):
        await fleet.create(name)
    await fleet.decide("denied", "Denied")
    controller = fleet.controller()
    async with supervised(controller.run()):
        await fleet.decide("issued", "Approved")

        async def issued() -> bool:
            cached = controller.requests.get(None, "issued")
            return cached is not None and bool(cached["status"].get("certificate"))

        await eventually(issued, what="the certificate")

        async def cleaned_at(moment: dt.datetime) -> set[str]:
            fleet.now[0] = moment
            await controller.clean()
            return {n for n in ("pending", "denied", "issued") if await fleet.get(n) is None}

        # Conditions carry the real time of the write; the creation time too.
        real = dt.datetime.now(dt.UTC)
        assert await cleaned_at(real + dt.timedelta(minutes=50)) == set()
        assert await cleaned_at(real + dt.timedelta(minutes=70)) == {"denied", "issued"}

        async def gone_from_cache() -> bool:
            return controller.requests.get(None, "denied") is None

        await eventually(gone_from_cache, what="the cache to drop the deleted")
        assert await cleaned_at(real + dt.timedelta(hours=23)) == {"denied", "issued"}
        assert await cleaned_at(real + dt.timedelta(hours=25)) == {"denied", "issued", "pending"}
