"""API aggregation, driven with the real kubectl against one hub process: a small real extension
API server (``tests/extensionserver.py``, TLS with its own CA) trusts the hub as it would trust
kube-apiserver, from the hub's ``extension-apiserver-authentication`` ConfigMap; registered with an
APIService (its Service's endpoints written by hand, as the hub has no pods), its resource is
listed with ``kubectl get``, the hub authorizing first and passing the (impersonated) user in
``X-Remote-*`` headers; ``kubectl explain`` prints its kind's fields from the server's OpenAPI; once the server stops, the APIService is ``False (FailedDiscoveryCheck)`` and
its resource kube's 503."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from e2e.harness import wait_for

pytestmark = pytest.mark.e2e

NAME = "v1alpha1.widgets.example.com"


def manifests(port: int, ca_bundle: str) -> str:
    return yaml.safe_dump_all([
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ext"}},
        {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "widgets", "namespace": "ext"},
         "spec": {"ports": [{"name": "https", "port": 443, "targetPort": port}]}},
        {"apiVersion": "v1", "kind": "Endpoints", "metadata": {"name": "widgets", "namespace": "ext"},
         "subsets": [{"addresses": [{"ip": "127.0.0.1"}], "ports": [{"name": "https", "port": port}]}]},
        {"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService", "metadata": {"name": NAME},
         "spec": {"group": "widgets.example.com", "version": "v1alpha1", "groupPriorityMinimum": 1000,
                  "versionPriority": 15, "caBundle": ca_bundle,
                  "service": {"namespace": "ext", "name": "widgets", "port": 443}}},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": {"name": "widget-reader", "namespace": "default"},
         "rules": [{"apiGroups": ["widgets.example.com"], "resources": ["widgets"], "verbs": ["get", "list"]}]},
    ])


def test_an_extension_api_server_is_reached_through_the_hub(processes, tmp_path: Path) -> None:
    from tests.extensionserver import extension_server_thread

    _, kubectl = processes.start_hub()
    wait_for(lambda: kubectl.json_or_none("get", "configmap", "-n", "kube-system", "extension-apiserver-authentication"),
             timeout=30, what="the extension-apiserver-authentication ConfigMap")
    authentication = kubectl.json("get", "configmap", "-n", "kube-system", "extension-apiserver-authentication")["data"]
    with extension_server_thread(tmp_path / "widgets", authentication=authentication,
                                 hosts=("widgets.ext.svc",)) as server:
        kubectl.run("apply", "-f", "-", input_text=manifests(server.port, server.ca_bundle))

        def row() -> list[str]:
            """The APIService's row, its AGE left out."""
            out = kubectl.run("get", "apiservices", NAME, check=False).stdout.splitlines()
            return out[1].split()[:-1] if len(out) > 1 else []

        wait_for(lambda: row() == [NAME, "ext/widgets", "True"], timeout=60, what="the APIService to be Available")
        # The availability and discovery checks came through the front proxy, as kube's aggregator.
        checks = server.seen["/apis/widgets.example.com/v1alpha1"]
        assert checks[0].user == "system:kube-aggregator" and checks[0].groups == ("system:masters",)

        listed = kubectl.run("get", "widgets", "-n", "default")
        assert "sprocket" in listed.stdout, listed.stdout
        resources = kubectl.run("api-resources", "--api-group", "widgets.example.com").stdout
        assert "widgets" in resources and "Widget" in resources, resources

        # kubectl explain and its client-side validation read the server's schema from the hub's OpenAPI.
        def explained() -> str | None:
            out = kubectl.run("explain", "widgets.spec", check=False)
            return out.stdout if out.returncode == 0 else None

        text = wait_for(explained, timeout=60, what="kubectl explain widgets.spec")
        assert "How many teeth the sprocket has." in text and "size" in text, text
        widget = yaml.safe_dump({"apiVersion": "widgets.example.com/v1alpha1", "kind": "Widget",
                                 "metadata": {"name": "cog", "namespace": "default"}, "spec": {"colour": "red"}})
        invalid = kubectl.run("create", "--dry-run=client", "--validate=strict", "-f", "-", input_text=widget, check=False)
        assert invalid.returncode != 0 and 'unknown field "colour" in com.example.widgets.v1alpha1.Widget.spec' in invalid.stderr, invalid.stderr

        # The hub authorizes before proxying: alice may not until a RoleBinding says so.
        denied = kubectl.run("get", "widgets", "-n", "default", "--as", "alice", "--as-group", "devs", check=False)
        assert denied.returncode != 0 and 'User "alice" cannot list resource "widgets"' in denied.stderr, denied.stderr
        assert all(seen.user != "alice" for seen in server.seen.get("/apis/widgets.example.com/v1alpha1/namespaces/default/widgets", []))
        kubectl.run("create", "rolebinding", "alice-widgets", "-n", "default", "--role", "widget-reader", "--user", "alice")
        allowed = kubectl.run("get", "widgets", "-n", "default", "--as", "alice", "--as-group", "devs")
        assert "sprocket" in allowed.stdout
        last = server.seen["/apis/widgets.example.com/v1alpha1/namespaces/default/widgets"][-1]
        assert last.user == "alice" and set(last.groups) == {"devs", "system:authenticated"}, last

    # The server stopped: the availability check fails, and a request gets kube's 503.
    wait_for(lambda: row() == [NAME, "ext/widgets", "False", "(FailedDiscoveryCheck)"], timeout=60,
             what="the APIService to be False (FailedDiscoveryCheck)")
    gone = kubectl.run("get", "widgets", "-n", "default", check=False)
    assert gone.returncode != 0
    assert "the server is currently unable to handle the request" in gone.stderr, gone.stderr
