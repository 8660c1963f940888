"""The hub as users drive it: real kubectl and real Kubernetes clients against a hub
on a real etcd, over TLS with bearer tokens."""

from __future__ import annotations

import asyncio
import base64
import json
import ssl
import subprocess
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from e2e.harness import GPUFED, Kubectl, ProcessGroup, wait_for

MANIFESTS = Path(__file__).parent / "manifests"
pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def kubectl(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Kubectl]:
    """One hub for the module's tests that need no hub of their own: each works in a namespace
    of its own (:func:`_namespace`) and names its cluster-scoped objects apart; the admission
    configurations two of them add select only their own namespace."""
    with ProcessGroup.running_hub(tmp_path_factory.mktemp("hub-api")) as running:
        yield running


def _namespace(kubectl: Kubectl, name: str) -> str:
    """Create namespace ``name`` (each test of the shared hub has its own) and return it."""
    kubectl.run("create", "namespace", name)
    return name


def _manifest(name: str, namespace: str) -> dict[str, Any]:
    """The object of ``manifests/<name>`` in ``namespace`` instead of ``default``."""
    obj: dict[str, Any] = yaml.safe_load((MANIFESTS / name).read_text())
    obj["metadata"]["namespace"] = namespace
    return obj


def _in_namespace(name: str, namespace: str, directory: Path) -> Path:
    """:func:`_manifest` written to a file of ``directory``, for ``kubectl apply -f``."""
    path = directory / f"{namespace}-{name}"
    path.write_text(yaml.safe_dump(_manifest(name, namespace)))
    return path


def _containers(deploy: dict) -> dict[str, str]:
    return {c["name"]: c["image"] for c in deploy["spec"]["template"]["spec"]["containers"]}


def _collect_lines(process: subprocess.Popen[str], into: list[str]) -> None:
    """Append each line ``process`` prints to ``into`` until its output closes."""
    assert process.stdout is not None
    for line in process.stdout:
        into.append(line)


def test_kubectl_apply_update_get_watch_delete(kubectl: Kubectl, tmp_path: Path) -> None:
    ns = _namespace(kubectl, "watch")
    deployment = _in_namespace("deployment.yaml", ns, tmp_path)
    kubectl.run("apply", "-f", str(deployment))
    first = kubectl.json("get", "deployment", "infer", "-n", ns)
    assert _containers(first) == {
        "server": "registry.example.com/infer/server:1.0",
        "metrics": "registry.example.com/infer/metrics:1.0",
        "proxy": "registry.example.com/infer/proxy:1.0",
    }
    # Fields the file does not mention, set by someone else, must survive a re-apply.
    kubectl.run("label", "deployment", "infer", "team=ml", "-n", ns)
    kubectl.run("patch", "deployment", "infer", "-n", ns, "--type", "merge", "-p",
                json.dumps({"spec": {"revisionHistoryLimit": 4}}))

    watch_err = tmp_path / "watch.err"
    with watch_err.open("w") as err_file:
        watch = subprocess.Popen(
            ["kubectl", "--kubeconfig", str(kubectl.kubeconfig), "get", "deployment", "infer", "-n", ns, "-w",
             "-o", "custom-columns=NAME:.metadata.name,PROXY:.spec.template.spec.containers[2].image"],
            stdout=subprocess.PIPE, stderr=err_file, text=True,
        )
    seen: list[str] = []
    reader = threading.Thread(target=_collect_lines, args=(watch, seen), name="kubectl-watch", daemon=True)
    reader.start()

    def watched(text: str) -> bool:
        return any(text in line for line in seen)

    try:
        # kubectl prints the object it listed, then watches from that resourceVersion: once
        # the first row is out, no later change can be missed.
        wait_for(lambda: watched("registry.example.com/infer/proxy:1.0"), timeout=30,
                 what="the watch to list the Deployment")
        changed = _manifest("deployment.yaml", ns)
        changed["spec"]["template"]["spec"]["containers"][2]["image"] = "registry.example.com/infer/proxy:2.0"
        edited = tmp_path / "deployment-v2.yaml"
        edited.write_text(yaml.safe_dump(changed))
        kubectl.run("apply", "-f", str(edited))
        wait_for(lambda: watched("registry.example.com/infer/proxy:2.0"), timeout=30,
                 what="the watch to see the update")
    finally:
        watch.terminate()
        watch.wait(timeout=10)
        reader.join(timeout=10)
        if watch.stdout is not None:
            watch.stdout.close()
    out, err = "".join(seen), watch_err.read_text()
    assert "registry.example.com/infer/proxy:2.0" in out, f"watch did not see the update:\n{out}\n{err}"

    second = kubectl.json("get", "deployment", "infer", "-n", ns)
    assert _containers(second) == {
        "server": "registry.example.com/infer/server:1.0",
        "metrics": "registry.example.com/infer/metrics:1.0",
        "proxy": "registry.example.com/infer/proxy:2.0",
    }
    assert second["metadata"]["labels"]["team"] == "ml"
    assert second["spec"]["revisionHistoryLimit"] == 4
    assert second["metadata"]["generation"] > first["metadata"]["generation"]

    table = kubectl.run("get", "deployments", "-n", ns).stdout
    header = table.splitlines()[0].split()
    assert header == ["NAME", "READY", "UP-TO-DATE", "AVAILABLE", "AGE"], table
    assert table.splitlines()[1].split()[0] == "infer"

    kubectl.run("delete", "-f", str(deployment))
    gone = kubectl.run("get", "deployment", "infer", "-n", ns, check=False)
    assert gone.returncode != 0
    assert 'deployments.apps "infer" not found' in gone.stderr


def test_server_side_apply_of_every_kind(kubectl: Kubectl, tmp_path: Path) -> None:
    ns = _namespace(kubectl, "server-side")
    for name in ("deployment.yaml", "job.yaml", "pytorchjob.yaml", "policy.yaml"):
        kubectl.run("apply", "--server-side", "-f", str(_in_namespace(name, ns, tmp_path)))

    pytorchjob = kubectl.json("get", "pytorchjobs.kubeflow.org", "llm-finetune", "-n", ns, "--show-managed-fields")
    assert pytorchjob["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"] == 3
    managers = {entry["manager"] for entry in pytorchjob["metadata"]["managedFields"]}
    assert "kubectl" in managers

    policy = kubectl.json("get", "propagationpolicies.policy.gpufed.io", "infer-onprem-first", "-n", ns)
    assert policy["spec"]["placement"]["replicaScheduling"]["weightPreference"] == {
        "dynamicWeight": "AvailableReplicas"
    }
    job = kubectl.json("get", "jobs", "eval", "-n", ns)
    assert job["spec"]["completions"] == 4

    # Re-applying the same file is a no-op for spec (generation does not move).
    before = kubectl.json("get", "jobs", "eval", "-n", ns)["metadata"]["generation"]
    kubectl.run("apply", "--server-side", "-f", str(tmp_path / f"{ns}-job.yaml"))
    assert kubectl.json("get", "jobs", "eval", "-n", ns)["metadata"]["generation"] == before

    listing = kubectl.run("get", "propagationpolicies", "-n", ns).stdout
    assert "infer-onprem-first" in listing


def test_invalid_policy_is_rejected_with_field_causes_and_not_stored(kubectl: Kubectl, tmp_path: Path) -> None:
    ns = _namespace(kubectl, "invalid-policy")
    result = kubectl.run("apply", "-f", str(_in_namespace("policy-invalid.yaml", ns, tmp_path)), check=False)
    assert result.returncode != 0
    assert "spec.resourceSelectors" in result.stderr, result.stderr
    assert "weight" in result.stderr, result.stderr
    assert "Traceback" not in result.stderr
    missing = kubectl.run("get", "propagationpolicies", "broken", "-n", ns, check=False)
    assert missing.returncode != 0
    assert "not found" in missing.stderr


def test_kubectl_prints_kubes_words_for_a_body_that_is_not_json(kubectl: Kubectl) -> None:
    path = f"/api/v1/namespaces/{_namespace(kubectl, 'not-json')}/configmaps"
    created = kubectl.run("create", "--raw", path, "-f", "-", input_text='{"metadata": {"name": "c"},}', check=False)
    assert created.returncode != 0
    assert created.stderr.strip() == (
        "Error from server (BadRequest): the object provided is unrecognized (must be of type ConfigMap): "
        "couldn't get version/kind; json parse error: invalid character '}' looking for beginning of object key "
        'string ({"metadata": {"name": "c"},})'
    ), created.stderr
    kubectl.run("create", "--raw", path, "-f", "-", input_text='{"metadata": {"name": "c"}}')
    replaced = kubectl.run("replace", "--raw", f"{path}/c", "-f", "-", input_text="data: [", check=False)
    assert replaced.returncode != 0
    assert "couldn't get version/kind; json parse error: invalid character 'd' looking for beginning of value" in (
        replaced.stderr
    ), replaced.stderr


def _kubeconfig_with_token(source: Path, target: Path, token: str) -> Path:
    config = yaml.safe_load(source.read_text())
    config["users"][0]["user"]["token"] = token
    target.write_text(yaml.safe_dump(config))
    return target


def _server_and_ca(kubeconfig: Path) -> tuple[str, bytes]:
    cluster = yaml.safe_load(kubeconfig.read_text())["clusters"][0]["cluster"]
    return cluster["server"], base64.b64decode(cluster["certificate-authority-data"])


def test_unauthenticated_is_401_and_viewer_cannot_write(kubectl: Kubectl, tmp_path: Path) -> None:
    ns = _namespace(kubectl, "viewer")
    # No token at all: a Status with code 401.
    server, ca_pem = _server_and_ca(kubectl.kubeconfig)
    context = ssl.create_default_context(cadata=ca_pem.decode())
    with pytest.raises(urllib.error.HTTPError) as caught:
        urllib.request.urlopen(f"{server}/api/v1/namespaces", context=context, timeout=10)
    assert caught.value.code == 401
    status = json.loads(caught.value.read())
    assert status["kind"] == "Status" and status["reason"] == "Unauthorized"
    assert "bearer token" in status["message"]

    # A wrong token through kubectl: kubectl's own message for a 401.
    stranger = type(kubectl)(_kubeconfig_with_token(kubectl.kubeconfig, tmp_path / "anon", "abcdef.0123456789abcdef"))
    denied = stranger.run("get", "namespaces", check=False)
    assert denied.returncode != 0
    assert "You must be logged in to the server" in denied.stderr, denied.stderr

    created = subprocess.run(
        [GPUFED, "token", "create", "--role", "viewer",
         "--name", "dashboards", "--kubeconfig", str(kubectl.kubeconfig)],
        capture_output=True, text=True, check=True, timeout=60,
    )
    viewer_token = created.stdout.strip()
    assert viewer_token
    viewer = type(kubectl)(_kubeconfig_with_token(kubectl.kubeconfig, tmp_path / "viewer", viewer_token))
    assert "default" in viewer.run("get", "namespaces").stdout
    forbidden = viewer.run("apply", "-f", str(_in_namespace("job.yaml", ns, tmp_path)), check=False)
    assert forbidden.returncode != 0
    assert "forbidden" in forbidden.stderr.lower(), forbidden.stderr
    assert "viewer" in forbidden.stderr, forbidden.stderr
    # Nothing the viewer tried was stored.
    assert kubectl.run("get", "jobs", "eval", "-n", ns, check=False).returncode != 0


def test_sync_dynamic_client_and_kubernetes_asyncio(kubectl: Kubectl) -> None:
    from kubernetes import config as sync_config
    from kubernetes import dynamic

    ns = _namespace(kubectl, "clients")
    api_client = sync_config.new_client_from_config(config_file=str(kubectl.kubeconfig))
    client = dynamic.DynamicClient(api_client)
    jobs = client.resources.get(api_version="batch/v1", kind="Job")
    created = jobs.create(body=_manifest("job.yaml", ns), namespace=ns)
    assert created.metadata.name == "eval"
    patched = jobs.patch(name="eval", namespace=ns, body={"spec": {"parallelism": 3}},
                         content_type="application/merge-patch+json")
    assert patched.spec.parallelism == 3
    names = [item.metadata.name for item in jobs.get(namespace=ns).items]
    assert names == ["eval"]
    # The hub's controllers may also touch the Job (its status says no policy claims it):
    # read events until the patch shows up, as any watcher would.
    events = []
    for event in jobs.watch(namespace=ns, resource_version=created.metadata.resourceVersion, timeout=10):
        events.append((event["type"], event["object"].spec.parallelism))
        if event["object"].spec.parallelism == 3:
            break
    assert events[-1] == ("MODIFIED", 3), events
    assert all(kind == "MODIFIED" for kind, _ in events), events
    api_client.close()

    asyncio.run(_async_client_roundtrip(kubectl.kubeconfig, ns))


async def _async_client_roundtrip(kubeconfig: Path, ns: str) -> None:
    from kubernetes_asyncio import client, config, watch

    api = await config.new_client_from_config(config_file=str(kubeconfig))
    async with api:
        core = client.CoreV1Api(api)
        await core.create_namespaced_config_map(
            ns, {"metadata": {"name": "settings"}, "data": {"a": "1"}}
        )
        await core.patch_namespaced_config_map("settings", ns, {"data": {"b": "2"}})
        listed = await core.list_namespaced_config_map(ns)
        # Ours, and (once published, as on kube) the namespace's root CA ConfigMap.
        ours = [cm for cm in listed.items if cm.metadata.name != "kube-root-ca.crt"]
        assert [cm.metadata.name for cm in ours] == ["settings"]
        assert ours[0].data == {"a": "1", "b": "2"}
        seen = []
        async with watch.Watch().stream(
            core.list_namespaced_config_map, ns,
            resource_version=listed.metadata.resource_version, timeout_seconds=5,
        ) as stream:
            await core.delete_namespaced_config_map("settings", ns)
            async for event in stream:
                if event["object"].metadata.name == "kube-root-ca.crt":
                    continue  # published after the list
                seen.append((event["type"], event["object"].metadata.name))
                break
        assert seen == [("DELETED", "settings")]


def test_objects_and_resource_versions_survive_hub_and_etcd_restarts(processes) -> None:
    etcd, etcd_url = processes.start_etcd()
    etcd_ports = (int(etcd_url.rsplit(":", 1)[1]), processes.etcd_peer_port(etcd))
    hub, kubectl = processes.start_hub("hub", "--etcd-endpoints", etcd_url)
    for name in ("deployment.yaml", "job.yaml", "policy.yaml"):
        kubectl.run("apply", "-f", str(MANIFESTS / name))

    def versions() -> dict[str, str]:
        listing = kubectl.json("get", "deployments,jobs,propagationpolicies", "-A")
        return {item["metadata"]["name"]: item["metadata"]["resourceVersion"] for item in listing["items"]}

    before = versions()
    assert set(before) == {"infer", "eval", "infer-onprem-first"}
    resume_from = before["eval"]
    kubectl.run("patch", "job", "eval", "--type", "merge", "-p", '{"spec":{"parallelism":3}}')
    after_first_patch = versions()

    # Hub restart: same state dir, same etcd. Objects and resourceVersions are unchanged.
    hub.stop()
    hub, kubectl = processes.start_hub("hub", "--etcd-endpoints", etcd_url)
    assert versions() == after_first_patch

    # etcd restart under a running hub: the hub reconnects by itself.
    etcd.stop()
    etcd, _ = processes.start_etcd(ports=etcd_ports)
    wait_for(lambda: kubectl.run("get", "jobs", "eval", check=False).returncode == 0,
             timeout=60, what="the hub to serve again after etcd restarted")
    assert versions() == after_first_patch
    kubectl.run("patch", "job", "eval", "--type", "merge", "-p", '{"spec":{"parallelism":4}}')

    # A watch resumed from a resourceVersion taken before both restarts misses nothing.
    raw = kubectl.run(
        "get", "--raw",
        f"/apis/batch/v1/namespaces/default/jobs?watch=1&resourceVersion={resume_from}&timeoutSeconds=2",
        timeout=30,
    ).stdout
    events = [json.loads(line) for line in raw.splitlines() if line.strip()]
    parallelism = [(e["type"], e["object"]["spec"]["parallelism"]) for e in events if e["type"] != "BOOKMARK"]
    assert parallelism == [("MODIFIED", 3), ("MODIFIED", 4)]
    assert hub.alive()


def test_the_namespaces_every_cluster_has(kubectl: Kubectl) -> None:
    """kube's four namespaces are there; kubectl is refused deleting three of them with kube's
    message, and ``kube-node-lease``, which it may delete, comes back."""
    names = kubectl.run("get", "namespaces", "-o", "name").stdout.split()
    assert {"namespace/default", "namespace/kube-system", "namespace/kube-public", "namespace/kube-node-lease"} <= set(names)
    for name in ("default", "kube-system", "kube-public"):
        refused = kubectl.run("delete", "namespace", name, check=False)
        assert refused.returncode != 0
        assert (
            f'Error from server (Forbidden): namespaces "{name}" is forbidden: this namespace may not be deleted'
            in refused.stderr
        )
    before = kubectl.json("get", "namespace", "kube-node-lease")["metadata"]["uid"]
    kubectl.run("delete", "namespace", "kube-node-lease")

    def recreated() -> bool:
        namespace = kubectl.json_or_none("get", "namespace", "kube-node-lease")
        return namespace is not None and namespace["metadata"]["uid"] != before

    wait_for(recreated, timeout=60, what="kube-node-lease created again")


def test_kubectl_apply_meets_the_admission_webhook_an_admin_configured(kubectl: Kubectl, tmp_path: Path) -> None:
    """A validating webhook (a real HTTPS server, its CA in the caBundle) refuses a Deployment:
    kubectl prints kube's denial and the webhook's warning; an admitted one is created, with its
    warning printed too. The webhook selects its namespace only (the hub is shared)."""
    from tests.webhookserver import webhook_server_thread

    ns = _namespace(kubectl, "webhook")
    with webhook_server_thread(tmp_path / "webhook") as server:
        configuration = {
            "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
            "metadata": {"name": "acme-policy"},
            "webhooks": [{
                "name": "deny.acme.io", "clientConfig": server.client("/deny"), "sideEffects": "None",
                "admissionReviewVersions": ["v1"],
                "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": ns}},
                "rules": [{"operations": ["CREATE", "UPDATE"], "apiGroups": ["apps"], "apiVersions": ["v1"],
                           "resources": ["deployments"]}],
            }],
        }
        applied = kubectl.run("apply", "-f", "-", input_text=yaml.safe_dump(configuration))
        assert "validatingwebhookconfiguration.admissionregistration.k8s.io/acme-policy created" in applied.stdout
        refused = _manifest("deployment.yaml", ns)
        refused["metadata"]["labels"] = {**(refused["metadata"].get("labels") or {}), "deny": "yes"}
        results: list[subprocess.CompletedProcess[str]] = []

        def denied() -> bool:  # the hub's watch of the configuration comes right after the apply
            results.append(kubectl.run("apply", "-f", "-", input_text=yaml.safe_dump(refused), check=False))
            return results[-1].returncode != 0

        wait_for(denied, timeout=30, what="the webhook to refuse the Deployment")
        stderr = results[-1].stderr
        assert "Warning: denied by the acme policy" in stderr, stderr
        # The webhook gave a code and no reason: kubectl names none, as against kube-apiserver.
        assert ('Error from server: error when creating "STDIN": '
                'admission webhook "deny.acme.io" denied the request: no GPUs for you') in stderr, stderr
        assert kubectl.json_or_none("get", "deployment", refused["metadata"]["name"], "-n", ns) is None

        created = kubectl.run("apply", "-f", str(_in_namespace("deployment.yaml", ns, tmp_path)))
        assert "deployment.apps/infer created" in created.stdout
        assert "Warning: checked by the acme policy" in created.stderr, created.stderr
        assert server.received["/deny"][-1]["request"]["object"]["metadata"]["name"] == "infer"


def test_kubectl_apply_meets_a_validating_admission_policy(kubectl: Kubectl, tmp_path: Path) -> None:
    """A ValidatingAdmissionPolicy bound with Deny refuses a Deployment without a team label:
    kubectl prints kube's denial; a second binding with Warn and params from a ConfigMap makes
    kubectl print kube's warning for the Deployment it admits. The policies select their
    namespace only (the hub is shared)."""
    ns = _namespace(kubectl, "admission-policy")
    rule = {"apiGroups": ["apps"], "apiVersions": ["v1"], "operations": ["CREATE", "UPDATE"], "resources": ["deployments"]}
    constraints = {"resourceRules": [rule], "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": ns}}}
    manifests = [
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "gpu-limits", "namespace": ns},
         "data": {"maxReplicas": "2"}},
        {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
         "metadata": {"name": "team-label"},
         "spec": {"matchConstraints": constraints, "validations": [{
             "expression": "has(object.metadata.labels) && 'team' in object.metadata.labels",
             "message": "every Deployment must carry a team label"}]}},
        {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding",
         "metadata": {"name": "team-label"}, "spec": {"policyName": "team-label", "validationActions": ["Deny"]}},
        {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
         "metadata": {"name": "max-replicas"},
         "spec": {"paramKind": {"apiVersion": "v1", "kind": "ConfigMap"},
                  "matchConstraints": constraints, "validations": [{
                      "expression": "object.spec.replicas <= int(params.data.maxReplicas)",
                      "messageExpression": "'at most ' + params.data.maxReplicas + ' replicas'"}]}},
        {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding",
         "metadata": {"name": "max-replicas-warn"},
         "spec": {"policyName": "max-replicas", "validationActions": ["Warn"],
                  "paramRef": {"name": "gpu-limits", "parameterNotFoundAction": "Deny"}}},
    ]
    applied = kubectl.run("apply", "-f", "-", input_text=yaml.safe_dump_all(manifests))
    assert "validatingadmissionpolicybinding.admissionregistration.k8s.io/team-label created" in applied.stdout
    deployment = _in_namespace("deployment.yaml", ns, tmp_path)
    results: list[subprocess.CompletedProcess[str]] = []

    def denied() -> bool:  # the hub's watch of the policies comes right after the apply
        results.append(kubectl.run("apply", "-f", str(deployment), check=False))
        return results[-1].returncode != 0

    wait_for(denied, timeout=30, what="the policy to refuse the Deployment")
    stderr = results[-1].stderr
    # kube's Status (reason Invalid, the message as a cause), which kubectl prints as against kube-apiserver.
    assert ("The deployments \"infer\" is invalid: : ValidatingAdmissionPolicy 'team-label' with binding "
            "'team-label' denied request: every Deployment must carry a team label") in stderr, stderr
    assert kubectl.json_or_none("get", "deployment", "infer", "-n", ns) is None

    labelled = _manifest("deployment.yaml", ns)
    labelled["metadata"]["labels"]["team"] = "ml"
    created = kubectl.run("apply", "-f", "-", input_text=yaml.safe_dump(labelled))
    assert "deployment.apps/infer created" in created.stdout
    assert ("Warning: Validation failed for ValidatingAdmissionPolicy 'max-replicas' with binding "
            "'max-replicas-warn': at most 2 replicas") in created.stderr, created.stderr
    table = kubectl.run("get", "validatingadmissionpolicybindings").stdout.splitlines()
    assert table[0].split() == ["NAME", "POLICYNAME", "PARAMREF", "AGE"]
    assert ["max-replicas-warn", "max-replicas", "*/gpu-limits"] in [row.split()[:3] for row in table[1:]]
