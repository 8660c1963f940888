"""The hub's default RBAC policy: kube's bootstrap ClusterRoles and bindings, plus gpufed's.

As kube-apiserver's ``bootstrappolicy``: ``cluster-admin`` (bound to ``system:masters``),
the user-facing ``admin``, ``edit`` and ``view``, which are *aggregated* (their rules are
filled by the aggregation controller from every ClusterRole labelled
``rbac.authorization.k8s.io/aggregate-to-<role>: "true"``, so ``edit`` includes ``view``
and ``admin`` includes ``edit``), ``system:discovery``, ``system:basic-user`` (every
authenticated user may ask what it may do), ``system:public-info-viewer``, ``system:monitoring``
(``/metrics`` and the single health checks, for the group ``system:monitoring``) and
``system:service-account-issuer-discovery`` (every service account may read the token issuer's
OpenID documents), and the CertificateSigningRequest roles (``system:node-bootstrapper``,
``system:certificates.k8s.io:*``: bind ``system:certificates.k8s.io:kube-apiserver-client-approver``
to let someone approve client certificates), and the Role ``kube-system/extension-apiserver-authentication-reader``.

gpufed adds labelled ClusterRoles that aggregate its own kinds into the defaults (policies,
workloads, bindings, reports), ``gpufed:viewer`` for the hub's own read-only token role, and
``gpufed:public-info-viewer`` (the hub's CA and the dashboard's static files, for everyone, as
kube's public info).
Every object carries kube's ``kubernetes.io/bootstrapping: rbac-defaults`` label and the
``rbac.authorization.kubernetes.io/autoupdate: "true"`` annotation: the hub re-adds missing
rules on every start unless an admin set the annotation to ``"false"``.

The token roles map to groups (``identity.ROLE_GROUPS``): admin tokens are in
``system:masters``, viewer tokens in ``gpufed:viewers`` (bound to ``view`` and
``gpufed:viewer``, neither of which grants ``clusters/proxy``: only ``cluster-admin`` and
whoever an admin binds to it may proxy), join tokens in ``system:bootstrappers`` (bound to
``gpufed:cluster-joiner``). Pure data.
"""

from __future__ import annotations

from typing import Any, Final

from controlplane.apis.constants import (
    AUTH_GROUP,
    CA_PATH,
    CLUSTER_GROUP,
    COORDINATION_GROUP,
    KARMADA_POLICY_GROUP,
    POLICY_GROUP,
    REPORTS_GROUP,
    UI_PATH,
    WORK_GROUP,
)
from controlplane.apis.kube.roleaggregation import aggregate_all
from controlplane.apis.kubeflow import GROUP as KUBEFLOW_GROUP
from controlplane.apis.kubeflow import TRAINING_KINDS
from controlplane.apis.trainer import GROUP as TRAINER_GROUP
from controlplane.apiserver.auth.rbac.index import CLUSTER_ROLE, CLUSTER_ROLE_BINDING, RbacIndex
from controlplane.apiserver.identity import (
    AUTHENTICATED,
    BOOTSTRAPPERS,
    SYSTEM_MASTERS,
    UNAUTHENTICATED,
    VIEWERS,
)

RBAC_GROUP: Final = "rbac.authorization.k8s.io"
RBAC_VERSION: Final = "v1"
RBAC_API_VERSION: Final = f"{RBAC_GROUP}/{RBAC_VERSION}"


AUTOUPDATE_ANNOTATION: Final = "rbac.authorization.kubernetes.io/autoupdate"
BOOTSTRAPPING_LABEL: Final = "kubernetes.io/bootstrapping"
AGGREGATE_TO: Final = "rbac.authorization.k8s.io/aggregate-to-"

READ: Final = ("get", "list", "watch")
WRITE: Final = ("create", "update", "patch", "delete", "deletecollection")
READ_WRITE: Final = (*READ, *WRITE)

def rule(verbs: tuple[str, ...], groups: tuple[str, ...] = (), resources: tuple[str, ...] = (),
         *, urls: tuple[str, ...] = (), names: tuple[str, ...] = ()) -> dict[str, Any]:
    out: dict[str, Any] = {"verbs": list(verbs)}
    if urls:
        out["nonResourceURLs"] = list(urls)
    else:
        out["apiGroups"] = list(groups)
        out["resources"] = list(resources)
        if names:
            out["resourceNames"] = list(names)
    return out


def _meta(name: str, labels: dict[str, str] | None = None) -> dict[str, Any]:
    return {
        "name": name,
        "labels": {BOOTSTRAPPING_LABEL: "rbac-defaults", **(labels or {})},
        "annotations": {AUTOUPDATE_ANNOTATION: "true"},
    }


def cluster_role(name: str, rules: list[dict[str, Any]], *, labels: dict[str, str] | None = None,
                 aggregate_from: str | None = None) -> dict[str, Any]:
    obj: dict[str, Any] = {"apiVersion": RBAC_API_VERSION, "kind": "ClusterRole", "metadata": _meta(name, labels)}
    if aggregate_from is not None:
        obj["aggregationRule"] = {"clusterRoleSelectors": [{"matchLabels": {AGGREGATE_TO + aggregate_from: "true"}}]}
        obj["rules"] = []
    else:
        obj["rules"] = rules
    return obj


def cluster_role_binding(name: str, role: str, *, groups: tuple[str, ...]) -> dict[str, Any]:
    return {
        "apiVersion": RBAC_API_VERSION,
        "kind": "ClusterRoleBinding",
        "metadata": _meta(name),
        "roleRef": {"apiGroup": RBAC_GROUP, "kind": "ClusterRole", "name": role},
        "subjects": [{"apiGroup": RBAC_GROUP, "kind": "Group", "name": group} for group in groups],
    }


def _to(role: str) -> dict[str, str]:
    return {AGGREGATE_TO + role: "true"}


#: What every authenticated user may read (kube's ``system:discovery``).
DISCOVERY_URLS: Final = (
    "/api", "/api/*", "/apis", "/apis/*", "/healthz", "/livez", "/openapi", "/openapi/*", "/readyz",
    "/version", "/version/",
)
#: What everyone may read, without credentials too (kube's ``system:public-info-viewer``).
PUBLIC_INFO_URLS: Final = ("/healthz", "/livez", "/readyz", "/version", "/version/")
#: gpufed's public paths, for everyone as kube's public info (``gpufed:public-info-viewer``): the CA a
#: joining agent fetches before it trusts the hub (as kubeadm's ``cluster-info``, which kubeadm lets
#: ``system:anonymous`` read) and the dashboard's static files a browser opens.
GPUFED_PUBLIC_URLS: Final = (CA_PATH, UI_PATH, f"{UI_PATH}/*")
#: kube's ``system:monitoring``: metrics and every single health check, for the group of that name.
MONITORING_URLS: Final = ("/healthz", "/healthz/*", "/livez", "/livez/*", "/metrics", "/metrics/slis", "/readyz", "/readyz/*")
MONITORING: Final = "system:monitoring"
#: What gpufed's viewer tokens may read besides (``gpufed:viewer``).
VIEWER_URLS: Final = ("/metrics",)
_ISSUER_DISCOVERY_URLS: Final = (
    "/.well-known/openid-configuration", "/.well-known/openid-configuration/", "/openid/v1/jwks", "/openid/v1/jwks/",
)
_POLICIES: Final = ("propagationpolicies", "overridepolicies")
_CLUSTER_POLICIES: Final = ("clusterpropagationpolicies", "clusteroverridepolicies")
_POLICY_GROUPS: Final = (POLICY_GROUP, KARMADA_POLICY_GROUP)


def cluster_roles() -> list[dict[str, Any]]:
    """Every default ClusterRole, kube's first."""
    return [
        cluster_role("cluster-admin", [rule(("*",), ("*",), ("*",)), rule(("*",), urls=("*",))]),
        cluster_role("admin", [], aggregate_from="admin"),
        cluster_role("edit", [], labels=_to("admin"), aggregate_from="edit"),
        cluster_role("view", [], labels=_to("edit"), aggregate_from="view"),
        cluster_role("system:aggregate-to-admin", [
            rule(("create",), ("authorization.k8s.io",), ("localsubjectaccessreviews",)),
            rule(READ_WRITE, (RBAC_GROUP,), ("roles", "rolebindings")),
        ], labels=_to("admin")),
        cluster_role("system:aggregate-to-edit", [
            rule(READ, ("",), ("pods/attach", "pods/proxy", "pods/exec", "pods/portforward", "secrets", "services/proxy")),
            rule(("impersonate",), ("",), ("serviceaccounts",)),
            rule(WRITE, ("",), ("pods", "pods/attach", "pods/proxy", "pods/exec", "pods/portforward")),
            rule(("create",), ("",), ("pods/eviction",)),
            rule(WRITE, ("",), ("replicationcontrollers", "replicationcontrollers/scale", "serviceaccounts",
                                "services", "services/proxy", "persistentvolumeclaims", "configmaps", "secrets",
                                "events")),
            rule(("create",), ("",), ("serviceaccounts/token",)),
            rule(WRITE, ("apps",), ("statefulsets", "statefulsets/scale", "daemonsets", "deployments",
                                    "deployments/scale", "deployments/rollback", "replicasets", "replicasets/scale")),
            rule(WRITE, ("autoscaling",), ("horizontalpodautoscalers",)),
            rule(WRITE, ("batch",), ("jobs", "cronjobs")),
            rule(WRITE, ("policy",), ("poddisruptionbudgets",)),
            rule(WRITE, ("networking.k8s.io",), ("networkpolicies", "ingresses")),
            rule(WRITE, ("resource.k8s.io",), ("resourceclaims", "resourceclaimtemplates")),
        ], labels=_to("edit")),
        # metrics-server's role, aggregated into view, edit and admin (``kubectl top``).
        cluster_role("system:aggregated-metrics-reader", [
            rule(READ, ("metrics.k8s.io",), ("pods", "nodes")),
        ], labels={**_to("view"), **_to("edit"), **_to("admin")}),
        cluster_role("system:aggregate-to-view", [
            rule(READ, ("",), ("pods", "replicationcontrollers", "replicationcontrollers/scale", "serviceaccounts",
                               "services", "services/status", "endpoints", "persistentvolumeclaims",
                               "persistentvolumeclaims/status", "configmaps")),
            rule(READ, ("",), ("limitranges", "resourcequotas", "bindings", "events", "pods/status",
                               "resourcequotas/status", "namespaces/status", "replicationcontrollers/status",
                               "pods/log")),
            rule(READ, ("",), ("namespaces",)),
            rule(READ, ("discovery.k8s.io",), ("endpointslices",)),
            rule(READ, ("apps",), ("controllerrevisions", "statefulsets", "statefulsets/status", "statefulsets/scale",
                                   "daemonsets", "daemonsets/status", "deployments", "deployments/status",
                                   "deployments/scale", "replicasets", "replicasets/status", "replicasets/scale")),
            rule(READ, ("autoscaling",), ("horizontalpodautoscalers", "horizontalpodautoscalers/status")),
            rule(READ, ("batch",), ("jobs", "cronjobs", "cronjobs/status", "jobs/status")),
            rule(READ, ("policy",), ("poddisruptionbudgets", "poddisruptionbudgets/status")),
            rule(READ, ("networking.k8s.io",), ("networkpolicies", "ingresses", "ingresses/status")),
            rule(READ, ("resource.k8s.io",), ("resourceclaims", "resourceclaims/status", "resourceclaimtemplates")),
        ], labels=_to("view")),
        cluster_role("system:discovery", [rule(("get",), urls=DISCOVERY_URLS)]),
        cluster_role("system:monitoring", [rule(("get",), urls=MONITORING_URLS)]),
        cluster_role("system:public-info-viewer", [rule(("get",), urls=PUBLIC_INFO_URLS)]),
        cluster_role("system:service-account-issuer-discovery", [rule(("get",), urls=_ISSUER_DISCOVERY_URLS)]),
        cluster_role("system:auth-delegator", [
            rule(("create",), ("authentication.k8s.io",), ("tokenreviews",)),
            rule(("create",), ("authorization.k8s.io",), ("subjectaccessreviews",)),
        ]),
        cluster_role("system:basic-user", [
            rule(("create",), ("authorization.k8s.io",), ("selfsubjectaccessreviews", "selfsubjectrulesreviews")),
            rule(("create",), ("authentication.k8s.io",), ("selfsubjectreviews",)),
        ]),
        *certificates_cluster_roles(),
        *gpufed_cluster_roles(),
    ]


_CERTIFICATES: Final = "certificates.k8s.io"
#: The signer each ``system:certificates.k8s.io:<name>-approver`` role may approve for.
_APPROVERS: Final = {
    "kube-apiserver-client": "kubernetes.io/kube-apiserver-client",
    "kube-apiserver-client-kubelet": "kubernetes.io/kube-apiserver-client-kubelet",
    "kubelet-serving": "kubernetes.io/kubelet-serving",
    "legacy-unknown": "kubernetes.io/legacy-unknown",
}


def certificates_cluster_roles() -> list[dict[str, Any]]:
    """kube's bootstrap roles for CertificateSigningRequests: the node bootstrapper's, the node
    client subresources' and one approver role per kube signer (``approve`` on ``signers``)."""
    return [
        cluster_role("system:node-bootstrapper", [
            rule(("create", "get", "list", "watch"), (_CERTIFICATES,), ("certificatesigningrequests",)),
        ]),
        cluster_role("system:certificates.k8s.io:certificatesigningrequests:nodeclient", [
            rule(("create",), (_CERTIFICATES,), ("certificatesigningrequests/nodeclient",)),
        ]),
        cluster_role("system:certificates.k8s.io:certificatesigningrequests:selfnodeclient", [
            rule(("create",), (_CERTIFICATES,), ("certificatesigningrequests/selfnodeclient",)),
        ]),
        *(cluster_role(f"system:certificates.k8s.io:{name}-approver", [
            rule(("approve",), (_CERTIFICATES,), ("signers",), names=(signer,)),
        ]) for name, signer in _APPROVERS.items()),
    ]


KUEUE_GROUP: Final = "kueue.x-k8s.io"
KUEUE_VISIBILITY_GROUP: Final = "visibility.kueue.x-k8s.io"
_KUEUE_KINDS: Final = (
    "resourceflavors", "clusterqueues", "localqueues", "workloadpriorityclasses", "workloads", "cohorts", "admissionchecks",
    "provisioningrequestconfigs", "topologies", "multikueueconfigs", "multikueueclusters",
)
#: Karmada's autoscalers, with their status subresources: a namespace's editors manage them.
_AUTOSCALERS: Final = ("federatedhpas", "federatedhpas/status", "cronfederatedhpas", "cronfederatedhpas/status")
_WORKLOAD_KINDS: Final = (
    (KUBEFLOW_GROUP, tuple(training.plural for training in TRAINING_KINDS.values())), ("ray.io", ("rayjobs", "rayclusters")),
    # The Multi-Cluster Services kinds: a namespace's editors export, import and expose its Services.
    ("multicluster.x-k8s.io", ("serviceexports", "serviceimports")), ("networking.karmada.io", ("multiclusterservices", "multiclusteringresses")),
    (TRAINER_GROUP, ("trainjobs", "trainingruntimes")),
)
#: The workload kinds' scale subresources: edited and read as kube's roles do a Deployment's.
_WORKLOAD_SCALES: Final = (
    (KUBEFLOW_GROUP, tuple(f"{t.plural}/scale" for t in TRAINING_KINDS.values() if t.scalable)),
)


def gpufed_cluster_roles() -> list[dict[str, Any]]:
    """gpufed's kinds aggregated into admin/edit/view, and the viewer token role's extras."""
    edit = [rule(WRITE, _POLICY_GROUPS, _POLICIES), rule(WRITE, ("autoscaling.karmada.io",), _AUTOSCALERS[::2])]
    view = [
        rule(READ, _POLICY_GROUPS, (*_POLICIES, *_CLUSTER_POLICIES)),
        rule(READ, (WORK_GROUP,), ("resourcebindings", "resourcebindings/status", "works", "works/status")),
        # A workload's pods per cluster; the clusters a reader may not proxy to are listed without them.
        rule(("get",), (WORK_GROUP,), ("resourcebindings/pods",)),
        rule(READ, (CLUSTER_GROUP,), ("clusters", "clusters/status")),
        rule(("get", "list"), (REPORTS_GROUP,), ("wastereports",)),
        rule(READ, ("apps.karmada.io",), ("workloadrebalancers", "workloadrebalancers/status")),
        # As kube's ResourceQuotas: everyone may read a namespace's, only cluster-admin writes them.
        rule(READ, (KARMADA_POLICY_GROUP,), ("federatedresourcequotas", "federatedresourcequotas/status")),
        # Karmada's cluster-scoped ClusterTaintPolicies: read by all, written by cluster-admin.
        rule(READ, (KARMADA_POLICY_GROUP,), ("clustertaintpolicies",)),
        rule(READ, ("autoscaling.karmada.io",), _AUTOSCALERS),
        # Kubeflow Trainer's cluster-wide runtimes: read by all, written by cluster-admin.
        rule(READ, (TRAINER_GROUP,), ("clustertrainingruntimes",)),
        # Quotas: everyone may see the queues and why a workload waits (the status subresources too).
        rule(READ, (KUEUE_GROUP,), (*_KUEUE_KINDS, *(f"{p}/status" for p in _KUEUE_KINDS))),
        # ... and their pending workloads in order (Kueue's visibility API, its viewer roles' verbs):
        # a team bound in its namespace reads its LocalQueues', a cluster-wide view every ClusterQueue's.
        rule(READ, (KUEUE_VISIBILITY_GROUP,), ("clusterqueues/pendingworkloads", "localqueues/pendingworkloads")),
    ]
    # A namespace's editors manage its LocalQueues; ClusterQueues and flavors are the cluster admin's.
    edit.append(rule(WRITE, (KUEUE_GROUP,), ("localqueues",)))
    for group, plurals in _WORKLOAD_KINDS:
        edit.append(rule(WRITE, (group,), plurals))
        view.append(rule(READ, (group,), (*plurals, *(f"{p}/status" for p in plurals))))
    for group, scales in _WORKLOAD_SCALES:
        edit.append(rule(WRITE, (group,), scales))
        view.append(rule(READ, (group,), scales))
    return [
        cluster_role("gpufed:aggregate-to-edit", edit, labels=_to("edit")),
        cluster_role("gpufed:aggregate-to-view", view, labels=_to("view")),
        cluster_role("gpufed:viewer", [
            rule(READ, (COORDINATION_GROUP,), ("leases",)),
            rule(READ, ("scheduling.k8s.io",), ("priorityclasses",)),
            rule(("get",), urls=VIEWER_URLS),
            # The hub's health as kubectl get componentstatuses shows it (read-only, as kube serves it).
            rule(("get", "list"), ("",), ("componentstatuses",)),
            # Never ``clusters/proxy``: a GET through it reads whatever the member lets the
            # impersonated viewer (or, with ``--proxy-identity agent``, the agent) read, Secrets
            # included. kube's view role leaves out ``pods/proxy`` and ``services/proxy`` so.
        ]),
        cluster_role("gpufed:cluster-joiner", [rule(("create",), (AUTH_GROUP,), ("clusterjoins",))]),
        cluster_role("gpufed:public-info-viewer", [rule(("get",), urls=GPUFED_PUBLIC_URLS)]),
    ]


#: Rules earlier defaults granted and these no longer do, by ClusterRole: the hub removes them on
#: start from a role still annotated autoupdate (kube's reconciliation only adds; these were
#: security fixes). Only a rule equal to one here is removed, never one an admin wrote otherwise.
WITHDRAWN_RULES: Final = {
    # A viewer's GET through the cluster proxy read the member's Secrets.
    "gpufed:viewer": (rule(("get",), (CLUSTER_GROUP,), ("clusters/proxy",)),),
}


def cluster_role_bindings() -> list[dict[str, Any]]:
    return [
        cluster_role_binding("cluster-admin", "cluster-admin", groups=(SYSTEM_MASTERS,)),
        cluster_role_binding("system:discovery", "system:discovery", groups=(AUTHENTICATED,)),
        cluster_role_binding("system:basic-user", "system:basic-user", groups=(AUTHENTICATED,)),
        cluster_role_binding("system:monitoring", "system:monitoring", groups=(MONITORING,)),
        cluster_role_binding("system:public-info-viewer", "system:public-info-viewer",
                             groups=(AUTHENTICATED, UNAUTHENTICATED)),
        cluster_role_binding("system:service-account-issuer-discovery", "system:service-account-issuer-discovery",
                             groups=("system:serviceaccounts",)),
        cluster_role_binding("gpufed:viewers", "view", groups=(VIEWERS,)),
        cluster_role_binding("gpufed:viewer", "gpufed:viewer", groups=(VIEWERS,)),
        cluster_role_binding("gpufed:cluster-joiners", "gpufed:cluster-joiner", groups=(BOOTSTRAPPERS,)),
        cluster_role_binding("gpufed:public-info-viewer", "gpufed:public-info-viewer",
                             groups=(AUTHENTICATED, UNAUTHENTICATED)),
    ]


def namespace_roles() -> list[dict[str, Any]]:
    """kube's bootstrap Roles in ``kube-system``: ``extension-apiserver-authentication-reader``
    lets an extension API server's account read the ConfigMap that says how the hub's front
    proxy calls it (bind it in ``kube-system``, with ``system:auth-delegator`` cluster-wide)."""
    return [{
        "apiVersion": RBAC_API_VERSION, "kind": "Role",
        "metadata": {**_meta("extension-apiserver-authentication-reader"), "namespace": "kube-system"},
        "rules": [rule(READ, ("",), ("configmaps",), names=("extension-apiserver-authentication",))],
    }]


def default_policy_index() -> RbacIndex:
    """An index of the default policy alone, aggregated as the hub writes it (tests, benchmarks)."""
    index = RbacIndex()
    roles = cluster_roles()
    aggregate_all(roles)
    for role in roles:
        index.put(CLUSTER_ROLE, role)
    for binding in cluster_role_bindings():
        index.put(CLUSTER_ROLE_BINDING, binding)
    return index
