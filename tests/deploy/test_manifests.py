"""deploy/ is checked, not just kept: every kustomize base renders with the real kubectl
(offline), every rendered object and every object of the Helm chart (rendered by Helm's own
template engine through helm-python-sdk) validates against the Kubernetes schemas of a fixed
version (kubernetes-validate, strict: unknown fields fail), the containers' arguments parse
with the real `gpufed` command line, etcd serves TLS with client-certificate auth and every
certificate flag (etcd's and the hub's) names a key of the Secret mounted there, the agent's
RBAC is the least privilege it needs, and the Dockerfiles pass hadolint. Images are not built here (no container engine)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import helm_python as helm
import kubernetes_validate
import pytest
import yaml

from controlplane.controllers.workloads import is_propagatable
from controlplane.hub import hub_registry
from controlplane.storage.connecting import grpc_target
from gpufed.cli import build_parser
from gpufed.commands.controlplane import conflicting_flags, etcd_endpoints
from member_agent.config import config_from_args
from member_agent.electing import lease_name

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
CHART = DEPLOY / "helm" / "gpufed"
KUBECTL = shutil.which("kubectl") or "/usr/bin/kubectl"
HADOLINT = shutil.which("hadolint") or str(Path(sys.executable).with_name("hadolint"))
#: The schemas every object must satisfy (the kubectl on our machines is v1.32).
KUBERNETES_VERSION = "1.32.0"
BASES = ["hub", "etcd", "agent", "overlays/example"]
AGENT_VALUES = {
    "hub": {"enabled": False},
    "etcd": {"enabled": False},
    "agent": {
        "enabled": True, "hub": "https://hub.example.com:6443", "hubCaHash": "sha256:" + "ab" * 32,
        "clusterName": "cloud-l4", "cluster": {"provider": "gcp", "labels": {"capacity-type": "spot"},
                                               "pricing": {"NVIDIA-L4": 0.35}},
    },
}
HELM_VALUE_SETS = {"hub-and-etcd": {}, "agent": AGENT_VALUES}
WRITE = {"create", "get", "list", "watch", "patch", "delete"}


def _propagated_resources() -> set[tuple[str, str]]:
    """(group, plural) of every kind the hub lets a policy propagate: what an agent applies."""
    registry = hub_registry()
    return {(rt.group, rt.plural) for rt in registry if is_propagatable(rt) and rt.stored_as is None
            and not rt.stored_in_version}


#: What the agent may do in its member: read nodes, create namespaces, and apply, watch and prune
#: every kind the hub propagates (pods included, which it also reads for placement status).
AGENT_RULES = {
    ("", "nodes"): {"get", "list", "watch"},
    ("", "namespaces"): {"get", "create"},
    **{resource: WRITE for resource in _propagated_resources()},
}


def kustomize(base: str) -> list[dict[str, Any]]:
    result = subprocess.run([KUBECTL, "kustomize", str(DEPLOY / "kustomize" / base)],
                            capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 0, result.stderr
    return [doc for doc in yaml.safe_load_all(result.stdout) if doc]


def helm_render(values: dict[str, Any]) -> list[dict[str, Any]]:
    with helm.Chart.load(str(CHART)) as chart:
        rendered = chart.render(values, name="gpufed", namespace="gpufed-system")
    return [doc for path, text in sorted(rendered.items()) if path.endswith(".yaml")
            for doc in yaml.safe_load_all(text) if doc]


def one(objects: list[dict[str, Any]], kind: str, name_part: str = "") -> dict[str, Any]:
    found = [o for o in objects if o["kind"] == kind and name_part in o["metadata"]["name"]]
    assert len(found) == 1, [(o["kind"], o["metadata"]["name"]) for o in objects]
    return found[0]


def all_renderings() -> Iterator[tuple[str, list[dict[str, Any]]]]:
    for base in BASES:
        yield f"kustomize/{base}", kustomize(base)
    for label, values in HELM_VALUE_SETS.items():
        yield f"helm/{label}", helm_render(values)


def _expand(args: list[str], env: dict[str, str]) -> list[str]:
    """Kubernetes' $(VAR) expansion of container args."""
    out = []
    for arg in args:
        for key, value in env.items():
            arg = arg.replace(f"$({key})", value)
        out.append(arg)
    return out


@pytest.mark.parametrize("base", BASES)
def test_every_kustomize_object_validates(base: str) -> None:
    objects = kustomize(base)
    assert objects
    for obj in objects:
        kubernetes_validate.validate(obj, KUBERNETES_VERSION, strict=True)


@pytest.mark.parametrize("values", list(HELM_VALUE_SETS.values()), ids=list(HELM_VALUE_SETS))
def test_every_helm_object_validates(values: dict[str, Any]) -> None:
    objects = helm_render(values)
    assert objects
    for obj in objects:
        kubernetes_validate.validate(obj, KUBERNETES_VERSION, strict=True)


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda d: d["spec"].__setitem__("replicas", "three"), "is not of type 'integer'"),
        (lambda d: d["spec"]["template"]["spec"]["containers"][0].__setitem__("imagePullPolice", "x"),
         "imagePullPolice"),
        (lambda d: d["spec"].pop("selector"), "'selector' is a required property"),
    ],
    ids=["wrong-type", "unknown-field", "missing-required"],
)
def test_the_validator_rejects_broken_objects(mutate: Any, message: str) -> None:
    deployment = one(kustomize("hub"), "Deployment")
    mutate(deployment)
    with pytest.raises(kubernetes_validate.ValidationError, match=message):
        kubernetes_validate.validate(deployment, KUBERNETES_VERSION, strict=True)


def secret_file(pod: dict[str, Any], container: dict[str, Any], path: str) -> tuple[str, str]:
    """(Secret name, key) that the file at ``path`` in ``container`` comes from."""
    volumes = {v["name"]: v for v in pod["volumes"]}
    for mount in container["volumeMounts"]:
        directory = mount["mountPath"].rstrip("/") + "/"
        if path.startswith(directory):
            secret = volumes[mount["name"]]["secret"]
            name = path.removeprefix(directory)
            keys = [item["key"] for item in secret.get("items", [{"key": name, "path": name}]) if item["path"] == name]
            assert keys, f"{path}: no item {name} in Secret {secret['secretName']}"
            return secret["secretName"], keys[0]
    raise AssertionError(f"{path} is on no mounted volume of {container['name']}")


def flag_values(args: list[str]) -> dict[str, str]:
    return dict(arg.removeprefix("--").split("=", 1) for arg in args if arg.startswith("--") and "=" in arg)


@pytest.mark.parametrize("source", ["kustomize", "helm"])
def test_hub_runs_three_leader_elected_replicas_against_the_etcd_members(source: str) -> None:
    objects = kustomize("overlays/example") if source == "kustomize" else helm_render({})
    hub = one(objects, "Deployment", "hub")
    etcd = one(objects, "StatefulSet", "etcd")
    headless = one(objects, "Service", "etcd")
    assert hub["spec"]["replicas"] == 3
    assert etcd["spec"]["replicas"] == 3 and etcd["spec"]["serviceName"] == headless["metadata"]["name"]
    assert headless["spec"]["clusterIP"] == "None"

    pod = hub["spec"]["template"]["spec"]
    container = pod["containers"][0]
    args = _expand(container["args"], {"POD_NAME": "gpufed-hub-abc"})
    parsed = build_parser().parse_args(["controlplane", *args])  # the real flags, or SystemExit
    assert conflicting_flags(parsed) is None
    assert parsed.identity == "gpufed-hub-abc"
    assert parsed.leader_lease_ttl == 10
    assert parsed.listen == ("0.0.0.0", 6443)
    # One https URL, the headless Service's name, that the etcd client accepts as it is.
    namespace = hub["metadata"]["namespace"]
    assert parsed.etcd_endpoints == f"https://{headless['metadata']['name']}.{namespace}.svc:2379"
    grpc_target(etcd_endpoints(parsed))
    assert {
        flag: secret_file(pod, container, str(getattr(parsed, flag)))
        for flag in ("etcd_cafile", "etcd_certfile", "etcd_keyfile", "tls_cert_file", "tls_private_key_file",
                     "tls_ca_file")
    } == {
        "etcd_cafile": ("gpufed-etcd-client", "ca.crt"),
        "etcd_certfile": ("gpufed-etcd-client", "tls.crt"),
        "etcd_keyfile": ("gpufed-etcd-client", "tls.key"),
        "tls_cert_file": ("gpufed-hub-tls", "tls.crt"),
        "tls_private_key_file": ("gpufed-hub-tls", "tls.key"),
        "tls_ca_file": ("gpufed-hub-tls", "ca.crt"),
    }
    assert {v["secret"]["secretName"] for v in pod["volumes"] if "secret" in v} == {
        "gpufed-etcd-client", "gpufed-hub-tls"
    }
    service = one(objects, "Service", "hub")
    assert service["spec"]["ports"][0]["port"] == 6443
    assert service["spec"]["selector"].items() <= hub["spec"]["template"]["metadata"]["labels"].items()


@pytest.mark.parametrize("source", ["kustomize", "helm"])
def test_etcd_serves_tls_with_client_certificate_auth_from_secrets(source: str) -> None:
    objects = kustomize("etcd") if source == "kustomize" else helm_render({})
    etcd = one(objects, "StatefulSet", "etcd")
    pod = etcd["spec"]["template"]["spec"]
    container = pod["containers"][0]
    args = container["args"]
    flags = flag_values(args)
    assert "--client-cert-auth" in args and "--peer-client-cert-auth" in args
    for flag in ("listen-client-urls", "advertise-client-urls", "listen-peer-urls", "initial-advertise-peer-urls"):
        assert flags[flag].startswith("https://"), flag
    assert flags["initial-cluster"].count("=https://") == 3 and "http://" not in flags["initial-cluster"]
    assert {
        flag: secret_file(pod, container, flags[flag])
        for flag in ("cert-file", "key-file", "trusted-ca-file", "peer-cert-file", "peer-key-file",
                     "peer-trusted-ca-file")
    } == {
        "cert-file": ("gpufed-etcd-server", "tls.crt"),
        "key-file": ("gpufed-etcd-server", "tls.key"),
        "trusted-ca-file": ("gpufed-etcd-server", "ca.crt"),
        "peer-cert-file": ("gpufed-etcd-peer", "tls.crt"),
        "peer-key-file": ("gpufed-etcd-peer", "tls.key"),
        "peer-trusted-ca-file": ("gpufed-etcd-peer", "ca.crt"),
    }
    # The kubelet has no client certificate: readiness is probed on the plain metrics listener.
    probe = container["readinessProbe"]["httpGet"]
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert probe["path"] == "/health"
    assert flags["listen-metrics-urls"] == f"http://0.0.0.0:{ports[probe['port']]}"
    assert ports[probe["port"]] not in (2379, 2380)
    for volume in pod["volumes"]:
        if "secret" in volume:
            assert volume["secret"]["defaultMode"] == 0o440


@pytest.mark.parametrize("source", ["kustomize", "helm"])
def test_agent_rbac_is_least_privilege(source: str) -> None:
    objects = kustomize("agent") if source == "kustomize" else helm_render(AGENT_VALUES)
    role = one(objects, "ClusterRole")
    granted: dict[tuple[str, str], set[str]] = {}
    for rule in role["rules"]:
        assert "*" not in rule["verbs"] and "*" not in rule["resources"] and "*" not in rule["apiGroups"]
        for group in rule["apiGroups"]:
            for resource in rule["resources"]:
                granted.setdefault((group, resource), set()).update(rule["verbs"])
    assert granted == AGENT_RULES
    binding = one(objects, "ClusterRoleBinding")
    account = one(objects, "ServiceAccount")
    deployment = one(objects, "Deployment")
    assert binding["roleRef"]["name"] == role["metadata"]["name"]
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": account["metadata"]["name"],
                                    "namespace": account["metadata"]["namespace"]}]
    assert deployment["spec"]["template"]["spec"]["serviceAccountName"] == account["metadata"]["name"]


AGENT_REPLICAS_2 = {**AGENT_VALUES, "agent": {**AGENT_VALUES["agent"], "replicas": 2}}


@pytest.mark.parametrize(("source", "electing"), [("kustomize", False), ("helm", False), ("helm-2", True)])
def test_the_agents_leader_election_may_touch_its_own_lease_only(source: str, electing: bool) -> None:
    """Leader election is on only where two agent replicas run (the chart's agent.replicas > 1)."""
    objects = kustomize("agent") if source == "kustomize" else helm_render(AGENT_REPLICAS_2 if electing else AGENT_VALUES)
    deployment = one(objects, "Deployment")
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    env = {e["name"]: "https://hub.example.com:6443" if e["name"] == "GPUFED_HUB" else "x" for e in container["env"]}
    cluster = "member-1" if source == "kustomize" else "cloud-l4"  # the ConfigMap's, AGENT_VALUES'
    assert deployment["spec"]["replicas"] == (2 if electing else 1)
    # The downward API's metadata.namespace: whatever namespace an overlay puts the agent in.
    env["POD_NAMESPACE"] = "overlay-namespace"
    config = config_from_args(build_parser().parse_args(
        ["agent", *_expand(container["args"], {**env, "GPUFED_CLUSTER_NAME": cluster, "GPUFED_DCGM_URL": "http://d",
                                            "GPUFED_HUB_CA_HASH": "sha256:" + "ab" * 32}),
         "--cluster-file", "/dev/null"]))
    assert config.leader_elect is electing
    role, binding = one(objects, "Role"), one(objects, "RoleBinding")
    namespace = deployment["metadata"]["namespace"]
    assert role["metadata"]["namespace"] == binding["metadata"]["namespace"] == namespace
    # The Lease is in the agent's own namespace, where the Role is: the pod's (kustomize), the release's (Helm).
    assert config.leader_elect_resource_namespace == ("overlay-namespace" if source == "kustomize" else namespace)
    assert role["rules"] == [
        {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["create"]},
        {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "resourceNames": [lease_name(cluster)],
         "verbs": ["get", "update"]},
    ]
    account = one(objects, "ServiceAccount")
    assert binding["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": role["metadata"]["name"]}
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": account["metadata"]["name"],
                                    "namespace": account["metadata"]["namespace"]}]


def test_the_agent_may_grant_roles_beyond_its_own_only_when_asked() -> None:
    def clusterrole_verbs(values: dict[str, Any]) -> set[str]:
        role = one(helm_render(values), "ClusterRole")
        return {verb for rule in role["rules"] if "clusterroles" in rule["resources"] for verb in rule["verbs"]}

    assert not {"escalate", "bind"} & clusterrole_verbs(AGENT_VALUES)
    granting = {**AGENT_VALUES, "agent": {**AGENT_VALUES["agent"], "rbac": {"grantAnyRole": True}}}
    assert {"escalate", "bind"} <= clusterrole_verbs(granting)


def test_the_agent_may_apply_more_kinds_when_the_chart_is_told_which() -> None:
    extra = {"apiGroups": ["example.com"], "resources": ["widgets"], "verbs": sorted(WRITE)}
    role = one(helm_render({**AGENT_VALUES, "agent": {**AGENT_VALUES["agent"], "rbac": {"extraRules": [extra]}}}),
               "ClusterRole")
    assert extra in role["rules"]
    assert extra not in one(helm_render(AGENT_VALUES), "ClusterRole")["rules"]


@pytest.mark.parametrize("source", ["kustomize", "helm"])
def test_agent_arguments_parse_and_the_token_stays_out_of_them(source: str) -> None:
    objects = kustomize("agent") if source == "kustomize" else helm_render(AGENT_VALUES)
    container = one(objects, "Deployment")["spec"]["template"]["spec"]["containers"][0]
    env = {e["name"]: "https://hub.example.com:6443" if e["name"] == "GPUFED_HUB" else "x" for e in container["env"]}
    parsed = build_parser().parse_args(["agent", *_expand(container["args"], env)])
    assert parsed.kubeconfig is None  # in-cluster config
    assert str(parsed.state_dir) == "/var/lib/gpufed-agent"
    assert parsed.bootstrap_token is None
    token = next(e for e in container["env"] if e["name"] == "GPUFED_BOOTSTRAP_TOKEN")
    assert token["valueFrom"]["secretKeyRef"]["optional"] is True
    mounts = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
    volumes = {v["name"]: v for v in one(objects, "Deployment")["spec"]["template"]["spec"]["volumes"]}
    assert "persistentVolumeClaim" in volumes[mounts["/var/lib/gpufed-agent"]]  # the credential survives restarts


@pytest.mark.parametrize("name", ["hub", "agent"])
def test_containers_run_as_non_root_with_a_read_only_root(name: str) -> None:
    objects = kustomize("agent") if name == "agent" else kustomize("hub")
    pod = one(objects, "Deployment")["spec"]["template"]["spec"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    for container in [*pod.get("initContainers", []), *pod["containers"]]:
        assert container["securityContext"]["readOnlyRootFilesystem"] is True
        assert container["securityContext"]["capabilities"]["drop"] == ["ALL"]


def test_helm_chart_refuses_an_agent_without_join_values() -> None:
    with pytest.raises(helm.HelmError, match=r"agent\.hub, agent\.hubCaHash and agent\.clusterName"):
        helm_render({"agent": {"enabled": True}})


def test_helm_chart_lints_without_errors() -> None:
    result = helm.lint(str(CHART))
    assert result["errors"] == [], result
    assert all(m["severity"] <= 1 for m in result["messages"]), result  # informational only


@pytest.mark.parametrize("dockerfile", ["Dockerfile.hub", "Dockerfile.agent"])
def test_dockerfiles_pass_hadolint(dockerfile: str) -> None:
    path = DEPLOY / "docker" / dockerfile
    result = subprocess.run([HADOLINT, "--no-color", str(path)], capture_output=True, text=True, timeout=60,
                            check=False)
    assert result.returncode == 0, result.stdout + result.stderr
    text = path.read_text()
    assert text.count("FROM python:3.11-slim") == 2
    assert "USER 10001:10001" in text
    entrypoint = "controlplane" if "hub" in dockerfile else "agent"
    assert f'ENTRYPOINT ["gpufed", "{entrypoint}"]' in text


def test_hadolint_finds_problems() -> None:
    result = subprocess.run([HADOLINT, "--no-color", "-"], input="FROM python\nRUN pip install requests\n",
                            capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode != 0
    assert "DL3006" in result.stdout and "DL3013" in result.stdout
