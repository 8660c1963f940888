"""The namespaces every kube cluster has, and which of them kube refuses to delete.

kube-apiserver creates :data:`SYSTEM_NAMESPACES` at start and again whenever one is gone
(``default`` from its bootstrap controller, the others from its ``systemnamespaces``
controller); its NamespaceLifecycle admission plugin refuses to delete
:data:`IMMORTAL_NAMESPACES` with ``this namespace may not be deleted``. The hub and the
simulated members both follow it.
"""

from __future__ import annotations

from typing import Final

SYSTEM_NAMESPACES: Final[tuple[str, ...]] = ("default", "kube-system", "kube-public", "kube-node-lease")
#: ``kube-node-lease`` is not among them: deleting it is allowed, and it is created again.
IMMORTAL_NAMESPACES: Final[frozenset[str]] = frozenset({"default", "kube-system", "kube-public"})
