"""kube's admission of CertificateSigningRequests: who requests, who approves, who signs.

As kube-apiserver's strategy and in-tree plugins (``plugin/pkg/admission/certificates``):

- a create records the requesting user as the CSR's ``spec.username``, ``uid``, ``groups`` and
  ``extra``, whatever the request said (the strategy's ``PrepareForCreate``, which sees the user);
- ``CertificateSubjectRestriction``: a CSR for ``kubernetes.io/kube-apiserver-client`` may not
  ask for the ``system:masters`` group;
- ``CertificateApproval``: a write of the ``approval`` subresource needs the ``approve`` verb on
  ``signers`` (certificates.k8s.io) named by the CSR's signerName, or by ``<domain>/*``;
- ``CertificateSigning``: a write of the ``status`` subresource that changes
  ``status.certificate`` needs the ``sign`` verb there.

A refusal is kube's 403: ``certificatesigningrequests.certificates.k8s.io "x" is forbidden: user
not permitted to approve requests with signerName "kubernetes.io/kube-apiserver-client"``.
"""

from __future__ import annotations

from typing import Any

from cryptography.x509.oid import NameOID

from controlplane.apis.kube import certificates
from controlplane.apiserver import errors
from controlplane.apiserver.admission import Operation, WriteAttributes
from controlplane.apiserver.identity import Authorizer, RequestAttributes, UserInfo
from controlplane.gojson import go_quote

_PLURAL = "certificatesigningrequests"
SYSTEM_MASTERS = "system:masters"


def _signer_name(obj: dict[str, Any]) -> str:
    return str((obj.get("spec") or {}).get("signerName") or "")


class CertificateAdmission:
    """The admission plugin; see the module docstring."""

    def __init__(self, authorizer: Authorizer) -> None:
        self._authorizer = authorizer

    def validate(self, user: UserInfo, write: WriteAttributes) -> None:
        rt = write.resource
        if rt.group != certificates.GROUP or rt.plural != _PLURAL:
            return
        name = str(write.new["metadata"].get("name") or "")
        if write.operation is Operation.CREATE:
            certificates.set_requestor(
                write.new, username=user.name, uid=user.uid, groups=user.groups, extra=dict(user.extra),
            )
            self._restrict_subject(write.new, name)
        elif write.subresource == "approval":
            signer = _signer_name(write.new)
            if not self._authorized(user, "approve", signer):
                raise _forbidden(name, f"user not permitted to approve requests with signerName {_quoted(signer)}")
        elif write.subresource == "status" and write.old is not None:
            if certificates.certificate_bytes(write.new) == certificates.certificate_bytes(write.old):
                return
            signer = _signer_name(write.old)
            if not self._authorized(user, "sign", signer):
                raise _forbidden(name, f"user not permitted to sign requests with signerName {_quoted(signer)}")

    @staticmethod
    def _restrict_subject(csr: dict[str, Any], name: str) -> None:
        signer = _signer_name(csr)
        if signer != certificates.KUBE_APISERVER_CLIENT:
            return
        try:
            request = certificates.parse_request(certificates.request_bytes(csr))
        except ValueError as exc:
            raise _forbidden(name, f"failed to parse CSR: {exc}") from None
        organizations = request.subject.get_attributes_for_oid(NameOID.ORGANIZATION_NAME)
        if any(str(o.value) == SYSTEM_MASTERS for o in organizations):
            raise _forbidden(name, f"use of {signer} signer with {SYSTEM_MASTERS} group is not allowed")

    def _authorized(self, user: UserInfo, verb: str, signer: str) -> bool:
        """kube's ``IsAuthorizedForSignerName``: the signer by name, else its domain's wildcard."""
        for resource_name in (signer, f"{signer.split('/')[0]}/*"):
            attributes = RequestAttributes(
                user=user, verb=verb, api_group=certificates.GROUP, resource="signers", name=resource_name,
            )
            if self._authorizer.authorize(attributes).allowed:
                return True
        return False


def _quoted(text: str) -> str:
    return go_quote(text)


def _forbidden(name: str, reason: str) -> errors.Forbidden:
    target = errors.Target(name=name, group=certificates.GROUP, kind=_PLURAL)
    return errors.Forbidden(f'{_PLURAL}.{certificates.GROUP} "{name}" is forbidden: {reason}', target=target)
