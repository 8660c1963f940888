"""``kubectl get componentstatuses`` (``cs``) against a real hub on its embedded etcd: the
deprecated v1 ComponentStatus, as kube-apiserver serves it, probing the hub's own store and its
elected controllers."""

from __future__ import annotations

import pytest

from e2e.harness import wait_for

pytestmark = pytest.mark.e2e


def test_kubectl_get_componentstatuses(processes) -> None:
    _, kubectl = processes.start_hub()

    def all_healthy() -> str | None:
        result = kubectl.run("get", "cs", check=False)
        rows = [line.split() for line in result.stdout.splitlines()[1:]]
        healthy = result.returncode == 0 and len(rows) == 3 and all(row[1] == "Healthy" for row in rows)
        return result.stdout if healthy else None

    # Healthy once the hub leads its controllers (it elects itself, then starts them).
    listed = wait_for(all_healthy, timeout=60, what="every component to be Healthy")
    lines = listed.splitlines()
    assert lines[0].split() == ["NAME", "STATUS", "MESSAGE", "ERROR"]
    assert [line.split() for line in lines[1:]] == [
        ["scheduler", "Healthy", "ok"], ["controller-manager", "Healthy", "ok"], ["etcd-0", "Healthy", "ok"],
    ]
    # kubectl prints the warning kube sends with it.
    result = kubectl.run("get", "componentstatuses")
    assert "Warning: v1 ComponentStatus is deprecated in v1.19+" in result.stderr, result.stderr

    etcd = kubectl.json("get", "cs", "etcd-0")
    assert etcd["kind"] == "ComponentStatus"
    assert etcd["conditions"] == [{"type": "Healthy", "status": "True", "message": "ok"}]
    missing = kubectl.run("get", "cs", "kube-dns", check=False)
    assert missing.returncode != 0
    assert 'componentstatuses "kube-dns" not found' in missing.stderr, missing.stderr
    # Read-only, as kube's: discovery lists get and list; a delete is refused.
    resources = kubectl.run("api-resources", "--api-group=", "-o", "wide").stdout
    row = next(line.split() for line in resources.splitlines() if line.startswith("componentstatuses"))
    assert row[:5] == ["componentstatuses", "cs", "v1", "false", "ComponentStatus"]
    assert row[5] == "get,list" or row[5:7] == ["[get", "list]"], row
    refused = kubectl.run("delete", "cs", "etcd-0", check=False)
    assert refused.returncode != 0
    assert "MethodNotAllowed" in refused.stderr or "does not allow this method" in refused.stderr, refused.stderr
