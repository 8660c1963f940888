"""Where a request without credentials is asked as kube's ``system:anonymous`` (group
``system:unauthenticated``) rather than answered 401, with ``--anonymous-auth`` (the default): the
authorizer then decides, as kube-apiserver's anonymous authenticator hands such a request to RBAC.

In: paths, exact or prefixes ending in ``*``. Out: :class:`AnonymousPaths`, which the API server's
authentication asks per request (:func:`~controlplane.apiserver.app.auth_middleware`).
"""

from __future__ import annotations

from collections.abc import Iterable

#: Paths a request without credentials may ask as ``system:anonymous`` (group
#: ``system:unauthenticated``), as kube's anonymous authenticator restricted by
#: ``AuthenticationConfiguration`` ``anonymous.conditions`` to exactly the paths of RBAC's
#: ``system:public-info-viewer``; the authorizer still decides. Every path with credentials that fail
#: is 401.
ANONYMOUS_PATHS = frozenset({"/healthz", "/livez", "/readyz", "/version", "/version/"})
#: The monitoring and debugging paths (``system:monitoring``'s and ``/debug/*``), also asked as
#: ``system:anonymous`` without credentials: kube-apiserver with anonymous auth answers them 403
#: (``forbidden: User "system:anonymous" cannot get path "/metrics"``), as no default role grants them
#: to ``system:unauthenticated``. A trailing ``*`` is a prefix, as in RBAC's ``nonResourceURLs``. Any
#: other path without credentials (discovery, OpenAPI, resources) is 401.
MONITORING_PATHS = ("/metrics", "/metrics/*", "/healthz/*", "/livez/*", "/readyz/*", "/debug/*")


class AnonymousPaths:
    """The paths a request without credentials is asked on as ``system:anonymous``: exact ones, and
    prefixes ending in ``*`` (as RBAC's ``nonResourceURLs``)."""

    def __init__(self, paths: Iterable[str]) -> None:
        paths = tuple(paths)
        self._exact = frozenset(path for path in paths if not path.endswith("*"))
        self._prefixes = tuple(path[:-1] for path in paths if path.endswith("*"))

    def match(self, path: str) -> bool:
        return path in self._exact or path.startswith(self._prefixes)


__all__ = ["ANONYMOUS_PATHS", "MONITORING_PATHS", "AnonymousPaths"]
