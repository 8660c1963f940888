"""ServiceAccount token Secrets, filled and cleaned up as kube-controller-manager's token controller
(``tokens_controller.go``) does.

kube's documented way to get a long-lived token (for CI, say) is a Secret of type
``kubernetes.io/service-account-token`` annotated ``kubernetes.io/service-account.name: BOT``. For
each such Secret:

* its ServiceAccount exists (looked up in the cache, then read when the cache has none; with the uid
  of the ``kubernetes.io/service-account.uid`` annotation when that is set): the controller fills
  what is missing, as ``generateTokenIfNeeded`` does: ``data["ca.crt"]`` (the hub's CA bundle, when
  it differs), ``data.namespace`` and ``data.token`` (when empty), and sets both annotations. The
  token comes from a :class:`TokenIssuer` (the hub's :class:`~controlplane.apiserver.auth.serviceaccounts.ServiceAccountTokens`):
  one that authenticates as the account, without expiry, while the Secret holds it;
* it does not: the Secret is deleted (with its uid as the precondition, so a new Secret of that
  name is left alone);
* it is deleted while its account still lists it in ``secrets``: the reference is removed.

A deleted ServiceAccount's token Secrets (those naming it, with its uid or none) are deleted.
On the hub the controller reads the ServiceAccount and token Secret caches of the API's token
check (one cache of each in the process, as kube-controller-manager's controllers share
informers); alone, it runs its own.
Writes are made on a copy read fresh and compared with the cached resourceVersion, as kube's: a
Secret changed meanwhile is left for its next event. A token issued for a write that did not
happen is withdrawn. The token is never logged.
"""

from __future__ import annotations

import asyncio
import copy
import logging
from dataclasses import dataclass
from typing import Any, Protocol

from controlplane.apis.kube.serviceaccounttokens import (
    ACCOUNT_NAME_ANNOTATION,
    ACCOUNT_UID_ANNOTATION,
    CA_KEY,
    NAMESPACE_KEY,
    TOKEN_KEY,
    TokenSecret,
    encoded,
    is_token_secret,
    needed_data,
    token_secret,
)
from controlplane.apis.views import ObjectView
from controlplane.controllers.informing import Informer
from controlplane.controllers.reconciling import ReconcileLoop
from controlplane.controllers.workqueuemetrics import WorkqueueMetrics
from controlplane.objectclient import ObjectClient, Preconditions, WatchEventType, errors

log = logging.getLogger(__name__)

_BY_ACCOUNT = "account"


class TokenIssuer(Protocol):
    """Issues the token a Secret holds, and takes back one that was not written."""

    async def issue(self, *, namespace: str, account: str, account_uid: str, secret: str) -> str: ...

    async def withdraw(self, token: str, *, namespace: str, secret: str) -> None: ...


@dataclass(frozen=True, slots=True)
class SecretKey:
    """kube's ``secretQueueKey``: enough to act on a Secret that is gone from the cache."""

    namespace: str
    name: str
    uid: str
    account: str
    account_uid: str

    @classmethod
    def of(cls, held: TokenSecret) -> SecretKey:
        return cls(held.namespace, held.name, held.uid, held.account, held.account_uid)


@dataclass(frozen=True, slots=True)
class AccountKey:
    namespace: str
    name: str
    uid: str


def _uid(obj: dict[str, Any]) -> str:
    return ObjectView(obj).uid or ""


class ServiceAccountTokensController:
    """``accounts`` and ``secrets``, when given, are informers another component of the process runs
    (the hub's token check: the ServiceAccounts, and the Secrets of the token type only): the
    controller reads them while it runs instead of keeping caches of its own."""

    def __init__(
        self, objects: ObjectClient, issuer: TokenIssuer, *, ca_pem: bytes,
        accounts: Informer | None = None, secrets: Informer | None = None,
        workqueue_metrics: WorkqueueMetrics | None = None,
    ) -> None:
        self._objects = objects
        self._issuer = issuer
        self._ca_pem = ca_pem
        self._accounts_rt = objects.registry.require("v1", "ServiceAccount")
        self._secrets_rt = objects.registry.require("v1", "Secret")
        # (``is None``: an informer holding nothing yet is falsy, it has a length.)
        self.accounts = accounts if accounts is not None else Informer(objects, self._accounts_rt)
        self.secrets = secrets if secrets is not None else Informer(objects, self._secrets_rt, keep=is_token_secret)
        #: The informers this controller runs itself (none when both are shared).
        self._own = [informer for informer, given in ((self.accounts, accounts), (self.secrets, secrets)) if given is None]
        self.secrets.add_index(_BY_ACCOUNT, _account_of)
        self._secret_loop: ReconcileLoop[SecretKey] = ReconcileLoop(
            "serviceaccount-tokens-secrets", self.reconcile_secret, workers=2, metrics=workqueue_metrics
        )
        self._account_loop: ReconcileLoop[AccountKey] = ReconcileLoop(
            "serviceaccount-tokens-accounts", self.reconcile_account, workers=1, metrics=workqueue_metrics
        )

    async def run(self) -> None:
        self.accounts.add_handler(self._on_account)
        self.secrets.add_handler(self._on_secret)
        try:
            async with asyncio.TaskGroup() as group:
                for informer in self._own:
                    group.create_task(informer.run())
                await self.accounts.synced.wait()
                await self.secrets.synced.wait()
                if self.secrets not in self._own:
                    await self.secrets.replay(self._on_secret)  # what it held before this controller ran
                group.create_task(self._secret_loop.run())
                group.create_task(self._account_loop.run())
        finally:
            self.accounts.remove_handler(self._on_account)
            self.secrets.remove_handler(self._on_secret)

    async def _on_account(self, event: WatchEventType, obj: dict[str, Any], _old: dict[str, Any] | None) -> None:
        view = ObjectView(obj)
        if event is WatchEventType.DELETED and view.uid:
            await self._account_loop.add(AccountKey(view.namespace, view.name, view.uid))

    async def _on_secret(self, event: WatchEventType, obj: dict[str, Any], _old: dict[str, Any] | None) -> None:
        held = token_secret(obj)
        if held is not None and held.uid:
            await self._secret_loop.add(SecretKey.of(held))

    async def reconcile_account(self, key: AccountKey) -> None:
        """``syncServiceAccount``: a deleted account's token Secrets are deleted."""
        if self._cached_account(key.namespace, key.name, key.uid) is not None:
            return
        for secret in self.secrets.by_index(_BY_ACCOUNT, (key.namespace, key.name)):
            held = token_secret(secret)
            if held is not None and held.belongs_to(key.name, key.uid):
                await self._delete_secret(held.namespace, held.name, held.uid)

    async def reconcile_secret(self, key: SecretKey) -> None:
        """``syncSecret``: fill the Secret, delete it when its account is gone, or drop the account's reference."""
        cached = self.secrets.get(key.namespace, key.name)
        if cached is None or _uid(cached) != key.uid:
            await self._remove_reference(key)
            return
        account = await self._account(key.namespace, key.account, key.account_uid)
        if account is None:
            log.info("service account %s/%s does not exist: deleting its token secret %s",
                     key.namespace, key.account, key.name)
            await self._delete_secret(key.namespace, key.name, key.uid)
            return
        await self._fill(cached, account)

    def _cached_account(self, namespace: str, name: str, uid: str) -> dict[str, Any] | None:
        account = self.accounts.get(namespace, name)
        return account if account is not None and (not uid or _uid(account) == uid) else None

    async def _account(self, namespace: str, name: str, uid: str) -> dict[str, Any] | None:
        """kube's ``getServiceAccount(..., fetchOnCacheMiss=true)``: the cache, else a read."""
        cached = self._cached_account(namespace, name, uid)
        if cached is not None:
            return cached
        try:
            account = await self._objects.get(self._accounts_rt, namespace=namespace, name=name)
        except errors.NotFound:
            return None
        return account if not uid or _uid(account) == uid else None

    async def _delete_secret(self, namespace: str, name: str, uid: str) -> None:
        try:
            await self._objects.delete(
                self._secrets_rt, namespace=namespace, name=name, preconditions=Preconditions(uid=uid or None)
            )
        except (errors.NotFound, errors.Conflict):
            return  # gone already, or another Secret of that name now

    async def _fill(self, cached: dict[str, Any], account: dict[str, Any]) -> None:
        """``generateTokenIfNeeded``."""
        if not needed_data(cached, ca_pem=self._ca_pem):
            return
        meta = cached["metadata"]
        namespace, name = str(meta.get("namespace") or ""), str(meta["name"])
        try:
            live = await self._objects.get(self._secrets_rt, namespace=namespace, name=name)
        except errors.NotFound:
            return
        if live["metadata"].get("resourceVersion") != meta.get("resourceVersion"):
            return  # the cache is behind: the update's own event comes
        needed = needed_data(live, ca_pem=self._ca_pem)
        if not needed:
            return
        updated = copy.deepcopy(live)
        present = updated.get("data")
        data: dict[str, Any] = present if isinstance(present, dict) else {}
        updated["data"] = data
        if needed.ca:
            data[CA_KEY] = encoded(self._ca_pem)
        if needed.namespace:
            data[NAMESPACE_KEY] = encoded(namespace.encode())
        account_name, account_uid = str(account["metadata"]["name"]), _uid(account)
        token = None
        if needed.token:
            token = await self._issuer.issue(
                namespace=namespace, account=account_name, account_uid=account_uid, secret=name
            )
            data[TOKEN_KEY] = encoded(token.encode())
        annotations = updated["metadata"].get("annotations")
        updated["metadata"]["annotations"] = {
            **(annotations if isinstance(annotations, dict) else {}),
            ACCOUNT_NAME_ANNOTATION: account_name, ACCOUNT_UID_ANNOTATION: account_uid,
        }
        try:
            await self._objects.update(self._secrets_rt, updated)
        except (errors.Conflict, errors.NotFound):
            await self._withdraw(token, namespace=namespace, secret=name)
            return  # changed or gone meanwhile: its own event comes
        except BaseException:
            await self._withdraw(token, namespace=namespace, secret=name)
            raise
        log.info("filled token secret %s/%s of service account %s", namespace, name, account_name)

    async def _withdraw(self, token: str | None, *, namespace: str, secret: str) -> None:
        if token is None:
            return
        try:
            await asyncio.shield(self._issuer.withdraw(token, namespace=namespace, secret=secret))
        except Exception as exc:  # it is refused anyway (no Secret holds it); the next hub start drops it
            log.warning("could not withdraw the unused token of secret %s/%s: %s", namespace, secret, exc)

    async def _remove_reference(self, key: SecretKey) -> None:
        """``removeSecretReference``: a deleted Secret leaves its account's ``secrets`` list."""
        if self._cached_account(key.namespace, key.account, key.account_uid) is None:
            return
        try:
            account = await self._objects.get(self._accounts_rt, namespace=key.namespace, name=key.account)
        except errors.NotFound:
            return
        if key.account_uid and _uid(account) != key.account_uid:
            return
        references = account.get("secrets")
        if not isinstance(references, list):
            return
        kept = [ref for ref in references if not (isinstance(ref, dict) and ref.get("name") == key.name)]
        if len(kept) == len(references):
            return
        try:
            await self._objects.update(self._accounts_rt, {**account, "secrets": kept})
        except errors.NotFound:
            return


def _account_of(secret: dict[str, Any]) -> list[tuple[str, str]]:
    held = token_secret(secret)
    return [(held.namespace, held.account)] if held is not None else []
