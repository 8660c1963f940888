"""kube-controller-manager's ``csrsigning`` (the ``kubernetes.io/kube-apiserver-client`` signer)
and ``csrcleaner`` controllers, over the hub's CertificateSigningRequests.

The signer signs with the hub's own CA (``<state-dir>/pki/ca.crt`` and ``ca.key``), the CA the
hub verifies client certificates against; a hub serving a provided certificate
(``--tls-cert-file``) has no CA key and runs no signer: its CSRs stay approved but unsigned, as
kube's do without ``--cluster-signing-cert-file``. Other signers' CSRs are left alone.

Level-based: every CSR event queues its name; the reconcile signs an approved, unsigned,
not-failed CSR of that signer (:func:`~controlplane.apis.kube.certificatesigning.sign`) and writes
the certificate, or a Failed condition, through the status subresource as a compare-and-swap on
the CSR as cached. The cleaner walks every CSR once an hour (kube's polling interval) and deletes
those kube's cleaner would. Nothing lives only in memory: a restart signs what is still unsigned.

In: an ObjectClient, the CA's certificate and key files, the longest duration it signs for (``--cluster-signing-duration``).
Out: status writes and deletes.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.types import CertificateIssuerPrivateKeyTypes

from controlplane.apis.kube import certificatesigning
from controlplane.apis.kube.certificates import FAILED
from controlplane.apis.kube.certificatesigning import (
    DEFAULT_SIGNING_DURATION,
    SIGNER_VALIDATION_FAILURE,
    Issued,
)
from controlplane.apis.timestamps import format_time
from controlplane.controllers.informing import Informer
from controlplane.controllers.reconciling import ReconcileLoop
from controlplane.controllers.workqueuemetrics import WorkqueueMetrics
from controlplane.objectclient import ObjectClient, Preconditions, WatchEventType, errors

log = logging.getLogger(__name__)

#: kube's cleaner polling interval.
CLEANING_SECONDS: Final = 3600.0


@dataclass(frozen=True, slots=True)
class SigningAuthority:
    """The CA the signer signs with."""

    certificate: x509.Certificate
    key: CertificateIssuerPrivateKeyTypes

    @classmethod
    def from_files(cls, cert_path: Path, key_path: Path) -> SigningAuthority | None:
        """The CA in ``cert_path`` and ``key_path``; None when the key is not there."""
        if not key_path.exists():
            return None
        key = serialization.load_pem_private_key(key_path.read_bytes(), password=None)
        certificate = x509.load_pem_x509_certificate(cert_path.read_bytes())
        return cls(certificate, key)  # type: ignore[arg-type]


def _utc_now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)




class CertificateSigningController:
    """The signer (when given the CA's files and its key is there) and the cleaner; ``run()`` until cancelled."""

    def __init__(
        self, objects: ObjectClient, *, ca_files: tuple[Path, Path] | None,
        duration: dt.timedelta | None = None, cleaning_seconds: float = CLEANING_SECONDS,
        clock: Callable[[], dt.datetime] = _utc_now, workqueue_metrics: WorkqueueMetrics | None = None,
    ) -> None:
        self._objects = objects
        self._rt = objects.registry.require("certificates.k8s.io/v1", "CertificateSigningRequest")
        self._ca_files = ca_files
        self._duration = duration or DEFAULT_SIGNING_DURATION
        self._authority: SigningAuthority | None = None
        self._cleaning_seconds, self._clock = cleaning_seconds, clock
        self.requests = Informer(objects, self._rt)
        self._loop: ReconcileLoop[str] = ReconcileLoop("csrsigning", self.reconcile, workers=1, metrics=workqueue_metrics)
        self.requests.add_handler(self._on_request)

    async def _on_request(self, event: WatchEventType, obj: dict[str, Any], _old: dict[str, Any] | None) -> None:
        if event is not WatchEventType.DELETED:
            await self._loop.add(str(obj["metadata"]["name"]))

    async def run(self) -> None:
        if self._ca_files is not None:
            self._authority = await asyncio.to_thread(SigningAuthority.from_files, *self._ca_files)
        if self._authority is None:
            log.info("no CA key: certificate signing requests are left unsigned")
        async with asyncio.TaskGroup() as group:
            group.create_task(self.requests.run())
            group.create_task(self._loop.run())
            group.create_task(self._clean_periodically())

    async def reconcile(self, name: str) -> None:
        csr = self.requests.get(None, name)
        if csr is None or self._authority is None or not certificatesigning.wants_signing(csr):
            return
        outcome = certificatesigning.sign(
            csr, ca_certificate=self._authority.certificate, ca_key=self._authority.key,
            now=self._clock(), limit=self._duration,
        )
        status = dict(csr.get("status") or {})
        if isinstance(outcome, Issued):
            status["certificate"] = outcome.encoded
        else:
            status["conditions"] = [*(status.get("conditions") or []), {
                "type": FAILED, "status": "True", "reason": SIGNER_VALIDATION_FAILURE,
                "message": outcome.message, "lastUpdateTime": format_time(self._clock()),
            }]
        with contextlib.suppress(errors.NotFound):  # a Conflict is retried by the loop
            await self._objects.update_status(self._rt, {**csr, "status": status})
            log.info("certificate signing request %s: %s", name, "signed" if isinstance(outcome, Issued) else outcome.message)

    async def _clean_periodically(self) -> None:
        await self.requests.synced.wait()
        while True:
            await self.clean()
            await asyncio.sleep(self._cleaning_seconds)

    async def clean(self) -> None:
        """One pass of kube's cleaner."""
        now = self._clock()
        for csr in self.requests.items():
            if not certificatesigning.should_clean(csr, now):
                continue
            meta = csr["metadata"]
            try:
                await self._objects.delete(
                    self._rt, name=meta["name"], preconditions=Preconditions(uid=meta.get("uid")),
                )
            except (errors.NotFound, errors.Conflict):
                continue
            except (errors.ApiError, errors.StorageError) as exc:
                log.warning("certificate signing request cleaner: deleting %s: %s", meta["name"], exc)
                continue
            log.info("cleaned up certificate signing request %s", meta["name"])
