"""What a member cannot take from a hub object: the fields of one cluster, dropped per kind.

A user who applies an object exported from a running cluster (``kubectl get -o yaml``) brings
along what that cluster allocated or recorded for it. Sent unchanged, it breaks every member:
a Service's old ``clusterIP`` is out of range or taken there, a PersistentVolumeClaim stays
Pending pinned to a node the member does not have. Before a Work is written, the hub drops
them, per kind, as Karmada's ``RemoveIrrelevantFields`` does:

* Service: ``spec.clusterIP`` and ``spec.clusterIPs`` (the member allocates its own), unless
  the Service is headless (``clusterIP: None``, which is the user's choice, not an address);
* Deployment: the ``deployment.kubernetes.io/revision`` and ``revision-history`` annotations
  (the member's Deployment controller counts its own revisions);
* Secret of type ``kubernetes.io/service-account-token``: its ``data`` and the
  ``kubernetes.io/service-account.uid`` annotation (the member's token controller fills them
  for its own ServiceAccount);
* ServiceAccount: the token Secrets generated for it (``<name>-token-…``);
* PersistentVolumeClaim: the ``volume.kubernetes.io/selected-node`` annotation;
* Job: the selector and labels kube generated from the hub's uid (unless ``manualSelector``),
  and ``spec.ttlSecondsAfterFinished``: the member's ttl-after-finished controller would
  delete the finished Job and the agent's next resync create it again, so it would run again;
  the hub honours the TTL itself and deletes the hub Job, which removes the member's copies;
* ClusterRole with an ``aggregationRule``: its ``rules`` (the hub's aggregation controller
  filled them from the hub's ClusterRoles; the member's fills them from the member's, and
  the two would overwrite each other at every apply). Karmada sends them unchanged.

In: a copy of a hub object (a dict), changed in place. Pure; no I/O.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

from controlplane.apis.kube.defaults_batch import without_generated_selector
from controlplane.apis.kube.objects import child, drop_keys
from controlplane.apis.kube.serviceaccounttokens import ACCOUNT_UID_ANNOTATION, is_token_secret
from controlplane.interpreter.registry import group_of

ANNOTATION_DEPLOYMENT_REVISION: Final = "deployment.kubernetes.io/revision"
ANNOTATION_DEPLOYMENT_REVISION_HISTORY: Final = "deployment.kubernetes.io/revision-history"
ANNOTATION_SELECTED_NODE: Final = "volume.kubernetes.io/selected-node"
CLUSTER_IP_NONE: Final = "None"

Pruner = Callable[[dict[str, Any]], None]


def _drop_annotations(obj: dict[str, Any], *keys: str) -> None:
    drop_keys(child(obj, "metadata"), "annotations", keys)


def _service(obj: dict[str, Any]) -> None:
    spec = child(obj, "spec")
    if spec is None:
        return
    ips = spec.get("clusterIPs")
    first = ips[0] if isinstance(ips, list) and ips else None
    if CLUSTER_IP_NONE in (spec.get("clusterIP"), first):
        return  # headless: the user's choice, valid in every cluster
    spec.pop("clusterIP", None)
    spec.pop("clusterIPs", None)


def _deployment(obj: dict[str, Any]) -> None:
    _drop_annotations(obj, ANNOTATION_DEPLOYMENT_REVISION, ANNOTATION_DEPLOYMENT_REVISION_HISTORY)


def _secret(obj: dict[str, Any]) -> None:
    if not is_token_secret(obj):
        return
    obj.pop("data", None)
    _drop_annotations(obj, ACCOUNT_UID_ANNOTATION)


def _service_account(obj: dict[str, Any]) -> None:
    secrets = obj.get("secrets")
    name = (child(obj, "metadata") or {}).get("name")
    if not isinstance(secrets, list) or not isinstance(name, str):
        return
    generated = f"{name}-token-"
    kept = [
        ref
        for ref in secrets
        if not (isinstance(ref, dict) and isinstance(ref.get("name"), str) and ref["name"].startswith(generated))
    ]
    if kept:
        obj["secrets"] = kept
    else:
        del obj["secrets"]


def _persistent_volume_claim(obj: dict[str, Any]) -> None:
    _drop_annotations(obj, ANNOTATION_SELECTED_NODE)


def _job(obj: dict[str, Any]) -> None:
    without_generated_selector(obj)
    spec = child(obj, "spec")
    if spec is not None:
        spec.pop("ttlSecondsAfterFinished", None)


def _cluster_role(obj: dict[str, Any]) -> None:
    if obj.get("aggregationRule") is not None:
        obj.pop("rules", None)


#: (API group, kind) -> what is dropped from its member copy.
PRUNERS: Final[dict[tuple[str, str], Pruner]] = {
    ("", "Service"): _service,
    ("apps", "Deployment"): _deployment,
    ("", "Secret"): _secret,
    ("", "ServiceAccount"): _service_account,
    ("", "PersistentVolumeClaim"): _persistent_volume_claim,
    ("batch", "Job"): _job,
    ("rbac.authorization.k8s.io", "ClusterRole"): _cluster_role,
}


def prune_for_member(obj: dict[str, Any]) -> None:
    """Drop, in place, what ``obj``'s kind carries of one cluster only (see the module docstring)."""
    pruner = PRUNERS.get((group_of(str(obj.get("apiVersion") or "")), str(obj.get("kind") or "")))
    if pruner is not None:
        pruner(obj)
