"""A workload's DRA claims read from listed objects (the waste report's pass) as the detector reads
its watched ones: the copy with each pod's own claims as GPU requests, the claims pods share once,
and per role, each shared claim with the first role naming it."""

from __future__ import annotations

from typing import Any

from controlplane.apis.drareading import ListedClaims


def _claim(kind: str, name: str, count: int) -> dict[str, Any]:
    spec = {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com", "count": count}}]}}
    return {"apiVersion": "resource.k8s.io/v1", "kind": kind, "metadata": {"name": name, "namespace": "ml"},
            "spec": {"spec": spec} if kind == "ResourceClaimTemplate" else spec}


def _template(*claims: tuple[str, str]) -> dict[str, Any]:
    entries = [{"name": name, "resourceClaimName" if kind == "claim" else "resourceClaimTemplateName": name} for kind, name in claims]
    return {"spec": {"resourceClaims": entries, "containers": [{"name": "c"}]}}


CLAIMS = ListedClaims([_claim("ResourceClaim", "pool", 4), _claim("ResourceClaim", "extra", 2),
                       _claim("ResourceClaimTemplate", "own", 1), _claim("ResourceClaim", "elsewhere", 8) | {
                           "metadata": {"name": "elsewhere", "namespace": "other"}}])


def test_listed_claims_resolve_a_workloads_own_and_shared_gpus_in_its_namespace() -> None:
    workload = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d", "namespace": "ml"},
                "spec": {"template": _template(("template", "own"), ("claim", "pool"), ("claim", "elsewhere"))}}
    resolved = CLAIMS.resolved(workload)
    assert resolved["spec"]["template"]["spec"]["containers"][0]["resources"]["requests"] == {"nvidia.com/gpu": "1"}
    assert "resources" not in workload["spec"]["template"]["spec"]["containers"][0]  # a copy
    assert CLAIMS.shared(workload) == {"nvidia.com/gpu": 4}  # "elsewhere" is of another namespace


def test_a_claim_several_roles_name_is_carried_by_the_first_of_them() -> None:
    workload = {"metadata": {"namespace": "ml"}, "spec": {"roles": [_template(("claim", "pool")),
                                                                    _template(("claim", "pool"), ("claim", "extra")),
                                                                    _template(("template", "own"))]}}
    roles = [("driver", workload["spec"]["roles"][0]), ("workers", workload["spec"]["roles"][1]),
             ("helpers", workload["spec"]["roles"][2])]
    assert CLAIMS.shared_by_role(workload, roles) == {"driver": {"nvidia.com/gpu": 4}, "workers": {"nvidia.com/gpu": 2}}
    assert CLAIMS.shared(workload) == {"nvidia.com/gpu": 6}
