"""Backing up and restoring the hub's etcd as an operator does (`gpufed backup save|restore`), and
the hub's answer when its etcd is out of space.

What would break unseen: a backup that cannot be restored, a restore that runs under a live
hub, clients (informers) that keep their old resourceVersions and silently resume in the
restored history (keeping objects the restore removed), or writes that never come back after
etcd's NOSPACE alarm.
"""

from __future__ import annotations

import asyncio
import json
import stat
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from e2e.harness import GPUFED, Kubectl, ProcessGroup, free_port, wait_for

pytestmark = pytest.mark.e2e


def _gpufed(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([GPUFED, *args], capture_output=True, text=True, timeout=120, check=False)


def _names(kubectl: Kubectl) -> set[str]:
    return {item["metadata"]["name"] for item in kubectl.json("get", "namespaces")["items"]}


async def _informer_sees_the_restore(
    processes: ProcessGroup, kubectl: Kubectl, state: Path, snapshot: Path, *, listen: str
) -> None:
    """An informer (the member agent's) watching namespaces across the backup, the restore and
    the restart: it ends up with the restored objects exactly, having relisted."""
    from kubernetes_asyncio import config

    from member_agent.informing import Informer
    from member_agent.kubeapi import KubeApi

    client = await config.new_client_from_config(config_file=str(kubectl.kubeconfig))
    api = KubeApi(client)
    changed = asyncio.Event()
    informer = Informer(api, "/api/v1/namespaces", name="namespaces", max_backoff=1.0, on_change=lambda _: changed.set())

    async def until(condition: Callable[[], bool]) -> None:
        while not condition():
            changed.clear()
            await changed.wait()

    task = asyncio.create_task(informer.run())
    try:
        await asyncio.wait_for(informer.synced.wait(), 60)
        saved = await asyncio.to_thread(_gpufed, "backup", "save", str(snapshot), "--state-dir", str(state))
        assert saved.returncode == 0, saved.stderr
        await asyncio.to_thread(kubectl.run, "create", "namespace", "written-after-the-backup")
        await until(lambda: "written-after-the-backup" in informer.objects)
        before = informer.relists

        refused = await asyncio.to_thread(_gpufed, "backup", "restore", str(snapshot), "--state-dir", str(state))
        assert refused.returncode == 1
        assert "stop the hub of this state dir first" in refused.stderr, refused.stderr

        hub = next(proc for proc in processes.processes if proc.name == "hub" and proc.alive())
        await asyncio.to_thread(hub.stop)
        not_running = await asyncio.to_thread(_gpufed, "backup", "save", str(snapshot) + ".2", "--state-dir", str(state))
        assert not_running.returncode == 1 and "is not running: start it" in not_running.stderr, not_running.stderr
        restored = await asyncio.to_thread(_gpufed, "backup", "restore", str(snapshot), "--state-dir", str(state))
        assert restored.returncode == 0, restored.stderr
        assert "REVISION" in restored.stdout
        assert any(p.name.startswith("etcd.before-restore-") for p in (state / "etcd").iterdir())
        await asyncio.to_thread(processes.start_hub, "hub", "--listen", listen)

        # The informer's resourceVersion is from the replaced data: it must relist, not resume.
        await until(lambda: "written-after-the-backup" not in informer.objects and informer.relists > before)
        assert "backed-up" in informer.objects
        # And it watches on: a write after the restore reaches it.
        await asyncio.to_thread(kubectl.run, "create", "namespace", "written-after-the-restore")
        await until(lambda: "written-after-the-restore" in informer.objects)
        assert set(informer.objects) == await asyncio.to_thread(_names, kubectl)
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        await api.close()


def test_backup_of_a_running_hub_restored_into_the_stopped_hub(processes: ProcessGroup, tmp_path: Path) -> None:
    state = processes.root / "hub"
    snapshot = tmp_path / "hub.snapshot"
    stopped = _gpufed("backup", "save", str(snapshot), "--state-dir", str(state))
    assert stopped.returncode == 1 and "holds no embedded etcd data" in stopped.stderr, stopped.stderr
    # The same address after the restart: the informer's client keeps its server URL.
    listen = f"127.0.0.1:{free_port()}"
    _, kubectl = processes.start_hub("hub", "--listen", listen)
    kubectl.run("create", "namespace", "backed-up")

    asyncio.run(asyncio.wait_for(_informer_sees_the_restore(processes, kubectl, state, snapshot, listen=listen), 180))

    assert stat.S_IMODE(snapshot.stat().st_mode) == 0o600
    names = _names(kubectl)
    assert "backed-up" in names and "written-after-the-backup" not in names
    again = _gpufed("backup", "save", str(snapshot), "--state-dir", str(state))
    assert again.returncode == 1 and "pass --force" in again.stderr, again.stderr
    forced = _gpufed("backup", "save", str(snapshot), "--state-dir", str(state), "--force")
    assert forced.returncode == 0, forced.stderr
    assert forced.stdout.splitlines()[0].split() == ["HASH", "REVISION", "TOTAL", "KEYS", "TOTAL", "SIZE"]


def test_a_hub_out_of_etcd_space_answers_as_kube_and_writes_resume_once_space_is_freed(
    processes: ProcessGroup,
) -> None:
    _, kubectl = processes.start_hub(
        "hub", "--etcd-quota-backend-bytes", str(16 * 1024 * 1024), "--etcd-defrag-check-interval", "1",
    )

    def write(number: int) -> subprocess.CompletedProcess[str]:
        manifest = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "churn", "namespace": "default"},
                    "data": {"blob": str(number % 10) * (700 * 1024)}}
        verb = "create" if number == 0 else "replace"
        return kubectl.run(verb, "-f", "-", check=False, input_text=json.dumps(manifest))

    # One ConfigMap rewritten: its old versions fill the quota (etcd compacts them every 5 minutes).
    for number in range(60):
        result = write(number)
        if result.returncode != 0:
            # kube's Status for it has no reason: no "(InternalError)" after "Error from server".
            expected = 'Error from server: error when replacing "STDIN": etcdserver: mvcc: database space exceeded'
            assert result.stderr.strip() == expected, result.stderr
            break
    else:
        raise AssertionError("etcd never ran out of space")
    # The hub compacts its history, defragments and disarms the alarm: writes resume by themselves.
    wait_for(lambda: write(number).returncode == 0, timeout=60, what="writes to resume after the NOSPACE alarm")
    assert "alarm NOSPACE" in processes.processes[-1].log()
    metrics = kubectl.run("get", "--raw", "/metrics").stdout
    assert "apiserver_storage_size_bytes{storage_cluster_id=" in metrics
