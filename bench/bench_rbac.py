"""What one RBAC decision costs: the hub's authorizer on every request.

Builds the in-memory index the hub keeps (:class:`RbacIndex`, fed by watches) with the
default policy, aggregated as the hub aggregates it, plus a busy hub's bindings: 500 team
namespaces, each with a RoleBinding of its group to ``edit``, a RoleBinding of two users to
``view`` and a namespaced Role; 50 ClusterRoleBindings of single users to ``view``. Then
times :meth:`HubAuthorizer.authorize` for the requests a hub sees most, one figure each (median
and p99 microseconds over many decisions): an admin (``system:masters``), a team editor
allowed in its namespace (the RBAC walk), the same editor denied in another namespace (the
longest walk: every binding of the user is tried), a viewer listing cluster-wide, and an
agent reading its Works (the credential authorizer).

Reproduce: ``.venv/bin/python -m bench.bench_rbac [--size quick|full]``
"""

from __future__ import annotations

import time
from typing import Any

from bench.common import BenchmarkResult, Figure, Size, at_most, percentile, script_main
from controlplane.apiserver.auth.rbac.authorizing import HubAuthorizer
from controlplane.apiserver.auth.rbac.index import (
    CLUSTER_ROLE,
    CLUSTER_ROLE_BINDING,
    ROLE,
    ROLE_BINDING,
    RbacIndex,
)
from controlplane.apiserver.auth.rbac.policy import default_policy_index
from controlplane.apiserver.identity import RequestAttributes, Role, UserInfo

TEAMS = 500
#: A decision should cost well under the ~1 ms a hub request costs end to end.
TARGET_MICROSECONDS = 50.0


def build_index() -> RbacIndex:
    index = default_policy_index()

    def binding(kind: str, name: str, namespace: str | None, role: tuple[str, str], subjects: list[dict[str, str]]) -> dict[str, Any]:
        meta = {"name": name, **({"namespace": namespace} if namespace else {})}
        return {"kind": kind, "metadata": meta, "roleRef": {"kind": role[0], "name": role[1]}, "subjects": subjects}

    for team in range(TEAMS):
        ns = f"team-{team}"
        index.put(ROLE_BINDING, binding("RoleBinding", "edit", ns, (CLUSTER_ROLE, "edit"), [{"kind": "Group", "name": ns}]))
        index.put(ROLE_BINDING, binding("RoleBinding", "view", ns, (CLUSTER_ROLE, "view"), [
            {"kind": "User", "name": f"auditor-{team}"}, {"kind": "User", "name": f"intern-{team}"}]))
        index.put(ROLE, {"kind": "Role", "metadata": {"name": "jobs", "namespace": ns},
                         "rules": [{"apiGroups": ["batch"], "resources": ["jobs"], "verbs": ["*"]}]})
        index.put(ROLE_BINDING, binding("RoleBinding", "jobs", ns, (ROLE, "jobs"), [{"kind": "Group", "name": ns}]))
    for user in range(50):
        index.put(CLUSTER_ROLE_BINDING, binding("ClusterRoleBinding", f"viewer-{user}", None, (CLUSTER_ROLE, "view"),
                                                [{"kind": "User", "name": f"viewer-{user}"}]))
    return index


def cases() -> dict[str, RequestAttributes]:
    editor = UserInfo(name="alice", role=Role.USER, user_groups=("team-7", "system:authenticated"))
    return {
        "admin create deployment": RequestAttributes(
            UserInfo(name="admin", role=Role.ADMIN), "create", "apps", "deployments", namespace="team-7"),
        "editor create deployment (allowed)": RequestAttributes(editor, "create", "apps", "deployments", namespace="team-7"),
        "editor create deployment elsewhere (denied)": RequestAttributes(
            editor, "create", "apps", "deployments", namespace="team-8"),
        "viewer list works cluster-wide": RequestAttributes(
            UserInfo(name="v", role=Role.VIEWER), "list", "work.gpufed.io", "works"),
        "agent watch own works": RequestAttributes(
            UserInfo(name="agent:a", role=Role.AGENT, cluster="a"), "watch", "work.gpufed.io", "works",
            namespace="gpufed-es-a"),
    }


def run(size: Size) -> BenchmarkResult:
    started = time.perf_counter()
    authorizer = HubAuthorizer(build_index())
    rounds = {Size.FULL: 20_000, Size.QUICK: 5_000}.get(size, 500)
    figures: list[Figure] = []
    details: dict[str, dict[str, float]] = {}
    for label, attributes in cases().items():
        samples: list[float] = []
        allowed = authorizer.authorize(attributes).allowed
        for _ in range(rounds):
            t0 = time.perf_counter()
            authorizer.authorize(attributes)
            samples.append((time.perf_counter() - t0) * 1e6)
        median, p99 = percentile(samples, 50), percentile(samples, 99)
        details[label] = {"allowed": allowed, "median_us": round(median, 2), "p99_us": round(p99, 2)}
        figures.append(Figure(f"{label} (median)", round(median, 2), "µs", at_most(TARGET_MICROSECONDS)))
    return BenchmarkResult(benchmark="rbac", size=size, figures=figures,
                           details={"teams": TEAMS, "rounds": rounds, "cases": details},
                           seconds=time.perf_counter() - started)


if __name__ == "__main__":
    script_main(run, __doc__, name="rbac")
